//! The fleet API client: bearer token, per-request deadline, capped answers, typed failures.
//!
//! One pooled HTTP/1.1 client (rustls with the Mozilla roots; plain http only to loopback, see
//! [`super::url`]). The token is sent to the API base URL and nowhere else: binaries are fetched
//! with [`PublicFetcher`], which carries no credential.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;

use super::types::{
    AcceptorId, Cursor, ListPage, Outpost, OutpostId, OutpostList, QueueEntry, Secret, SessionId,
};
use super::url::{query_value, BaseUrl};

/// The HTTP client every outpost request goes through.
pub(crate) type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Builds the shared client: TLS 1.2+ with the Mozilla root store (no dependency on the
/// machine's CA files, which a minimal container lacks), http/1.1, pooled.
pub(crate) fn http_client() -> Result<HttpClient, rustls::Error> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        })
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .build(connector))
}

/// Why a fleet API call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FleetError {
    /// 401/403: the token is missing, wrong, revoked or lacks the scope.
    #[error("the fleet API refused the token ({status}): {message}")]
    Unauthorized { status: u16, message: String },
    /// The list/watch cursor is unknown or too old: relist.
    #[error("the fleet API no longer knows this cursor: {message}")]
    CursorExpired { message: String },
    #[error("not found")]
    NotFound,
    /// 409: another worker holds the claim (or the entry is not claimable).
    #[error("conflict: {message}")]
    Conflict { message: String },
    /// 5xx and 429: back off and retry.
    #[error("the fleet API answered {status}: {message}")]
    Unavailable { status: u16, message: String },
    /// Any other refusal.
    #[error("the fleet API answered {status}: {message}")]
    Refused { status: u16, message: String },
    #[error("cannot reach the fleet API: {0}")]
    Network(String),
    #[error("the fleet API did not answer within {0:?}")]
    Timeout(Duration),
    #[error("a fleet API answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error("unreadable fleet API answer to {what}: {message}")]
    Invalid { what: &'static str, message: String },
}

impl FleetError {
    /// Transient: retry with backoff.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(
            self,
            FleetError::Unavailable { .. }
                | FleetError::Network(_)
                | FleetError::Timeout(_)
                | FleetError::TooLarge(_)
                | FleetError::Invalid { .. }
        )
    }

    /// The token does not work: the worker must stop.
    pub(crate) fn is_auth(&self) -> bool {
        matches!(self, FleetError::Unauthorized { .. })
    }
}

/// The client-safe message of an error answer: the `error.message` (or `error.code`) of a
/// JSON body, else the status text; printable, at most 200 characters.
fn error_message(status: StatusCode, body: &[u8]) -> String {
    let from_json = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|value| {
            let error = value.get("error")?;
            error
                .get("message")
                .or_else(|| error.get("code"))
                .or(Some(error))
                .and_then(|m| m.as_str().map(str::to_owned))
        });
    let text = from_json.unwrap_or_else(|| {
        status
            .canonical_reason()
            .unwrap_or("unexpected status")
            .to_owned()
    });
    text.chars().filter(|c| !c.is_control()).take(200).collect()
}

fn is_cursor_error(status: StatusCode, body: &[u8]) -> bool {
    if status == StatusCode::GONE {
        return true;
    }
    status == StatusCode::BAD_REQUEST
        && String::from_utf8_lossy(body)
            .to_ascii_lowercase()
            .contains("cursor")
}

/// Maps a non-success answer to its failure.
fn failure(status: StatusCode, body: &[u8]) -> FleetError {
    let message = error_message(status, body);
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => FleetError::Unauthorized {
            status: status.as_u16(),
            message,
        },
        StatusCode::NOT_FOUND => FleetError::NotFound,
        StatusCode::CONFLICT => FleetError::Conflict { message },
        _ if is_cursor_error(status, body) => FleetError::CursorExpired { message },
        _ if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS => {
            FleetError::Unavailable {
                status: status.as_u16(),
                message,
            }
        }
        _ => FleetError::Refused {
            status: status.as_u16(),
            message,
        },
    }
}

/// The outcome of a claim.
#[derive(Debug)]
pub(crate) enum Claim {
    /// Ours: the entry carries `connect_token` (and usually `gateway_url`).
    Won(Box<QueueEntry>),
    /// Another worker has it, or it is no longer claimable: not an error.
    Lost,
}

/// The outcome of a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    Released,
    /// Not held by us any more (expired, or already released).
    NotHeld,
    /// The entry is gone.
    Gone,
}

/// The fleet API (`/opbeta/outposts/`), authenticated.
pub(crate) struct FleetClient {
    http: HttpClient,
    api: BaseUrl,
    token: Secret,
    timeout: Duration,
    max_body: usize,
    sent: AtomicU64,
}

impl FleetClient {
    pub(crate) fn new(
        http: HttpClient,
        api: BaseUrl,
        token: Secret,
        timeout: Duration,
        max_body: usize,
    ) -> Self {
        Self {
            http,
            api,
            token,
            timeout,
            max_body,
            sent: AtomicU64::new(0),
        }
    }

    /// Requests sent so far (the benchmark reads it; logs report it at exit).
    pub(crate) fn requests_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    fn request(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<serde_json::Value>,
    ) -> Result<Request<Full<Bytes>>, FleetError> {
        let url = self.api.join(path_and_query);
        let mut builder = Request::builder()
            .method(method)
            .uri(&url)
            .header("authorization", format!("Bearer {}", self.token.expose()))
            .header("accept", "application/json")
            .header(
                "user-agent",
                concat!("devin-bridge-outpost/", env!("CARGO_PKG_VERSION")),
            );
        let body = match body {
            Some(value) => {
                builder = builder.header("content-type", "application/json");
                Bytes::from(value.to_string())
            }
            None => Bytes::new(),
        };
        builder
            .body(Full::new(body))
            .map_err(|error| FleetError::Network(format!("cannot build the request: {error}")))
    }

    /// Sends a request and reads the whole (capped) answer.
    async fn call(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<serde_json::Value>,
    ) -> Result<(StatusCode, Bytes), FleetError> {
        let request = self.request(method, path_and_query, body)?;
        self.sent.fetch_add(1, Ordering::Relaxed);
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|error| FleetError::Network(network_reason(&error)))?;
            let status = response.status();
            let bytes = Limited::new(response.into_body(), self.max_body)
                .collect()
                .await
                .map_err(|error| {
                    if error
                        .downcast_ref::<http_body_util::LengthLimitError>()
                        .is_some()
                    {
                        FleetError::TooLarge(self.max_body)
                    } else {
                        FleetError::Network(format!("the answer broke off: {error}"))
                    }
                })?
                .to_bytes();
            Ok((status, bytes))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| FleetError::Timeout(self.timeout))?
    }

    async fn call_json<T: DeserializeOwned>(
        &self,
        what: &'static str,
        method: Method,
        path_and_query: &str,
        body: Option<serde_json::Value>,
    ) -> Result<T, FleetError> {
        let (status, bytes) = self.call(method, path_and_query, body).await?;
        if !status.is_success() {
            return Err(failure(status, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|error| FleetError::Invalid {
            what,
            message: error.to_string(),
        })
    }

    /// One page of the queue.
    pub(crate) async fn list_page(
        &self,
        outpost: Option<&OutpostId>,
        cursor: Option<&Cursor>,
        first: u32,
    ) -> Result<ListPage, FleetError> {
        let mut query = format!("/opbeta/outposts/devins?first={first}");
        if let Some(outpost) = outpost {
            query.push_str(&format!("&outpost={}", query_value(outpost.as_str())));
        }
        if let Some(cursor) = cursor {
            query.push_str(&format!("&cursor={}", query_value(cursor.as_str())));
        }
        self.call_json("a queue listing", Method::GET, &query, None)
            .await
    }

    /// Opens a watch stream from `cursor`; the caller reads the body with its own idle timeout.
    pub(crate) async fn watch(
        &self,
        outpost: Option<&OutpostId>,
        cursor: Option<&Cursor>,
    ) -> Result<Incoming, FleetError> {
        let mut query = String::from("/opbeta/outposts/devins?watch=true");
        if let Some(outpost) = outpost {
            query.push_str(&format!("&outpost={}", query_value(outpost.as_str())));
        }
        if let Some(cursor) = cursor {
            query.push_str(&format!("&cursor={}", query_value(cursor.as_str())));
        }
        let mut request = self.request(Method::GET, &query, None)?;
        request.headers_mut().insert(
            "accept",
            hyper::header::HeaderValue::from_static("text/event-stream"),
        );
        self.sent.fetch_add(1, Ordering::Relaxed);
        let response = tokio::time::timeout(self.timeout, self.http.request(request))
            .await
            .map_err(|_| FleetError::Timeout(self.timeout))?
            .map_err(|error| FleetError::Network(network_reason(&error)))?;
        let status = response.status();
        if !status.is_success() {
            let bytes = Limited::new(response.into_body(), 64 << 10)
                .collect()
                .await
                .map(|collected| collected.to_bytes())
                .unwrap_or_default();
            return Err(failure(status, &bytes));
        }
        Ok(response.into_body())
    }

    /// The entry of one session; `None` when it is gone.
    pub(crate) async fn get(&self, session: &SessionId) -> Result<Option<QueueEntry>, FleetError> {
        let path = format!("/opbeta/outposts/devins/{session}");
        match self
            .call_json("a queue entry", Method::GET, &path, None)
            .await
        {
            Ok(entry) => Ok(Some(entry)),
            Err(FleetError::NotFound) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Compare-and-swap claim for `acceptor`.
    pub(crate) async fn claim(
        &self,
        session: &SessionId,
        acceptor: &AcceptorId,
    ) -> Result<Claim, FleetError> {
        let path = format!("/opbeta/outposts/devins/{session}/claim");
        let body = serde_json::json!({ "acceptor_id": acceptor.as_str() });
        match self
            .call_json::<QueueEntry>("a claim", Method::POST, &path, Some(body))
            .await
        {
            Ok(entry) => Ok(Claim::Won(Box::new(entry))),
            Err(FleetError::Conflict { .. }) | Err(FleetError::NotFound) => Ok(Claim::Lost),
            Err(error) => Err(error),
        }
    }

    /// Gives a claim back so the session requeues at once.
    pub(crate) async fn release(
        &self,
        session: &SessionId,
        acceptor: &AcceptorId,
    ) -> Result<Release, FleetError> {
        let path = format!("/opbeta/outposts/devins/{session}/release");
        let body = serde_json::json!({ "acceptor_id": acceptor.as_str() });
        let (status, bytes) = self.call(Method::POST, &path, Some(body)).await?;
        match status {
            s if s.is_success() => Ok(Release::Released),
            StatusCode::CONFLICT => Ok(Release::NotHeld),
            StatusCode::NOT_FOUND => Ok(Release::Gone),
            _ => Err(failure(status, &bytes)),
        }
    }

    /// Every outpost of the account.
    pub(crate) async fn outposts(&self) -> Result<Vec<Outpost>, FleetError> {
        let list: OutpostList = self
            .call_json(
                "the outpost list",
                Method::GET,
                "/opbeta/outposts/outposts",
                None,
            )
            .await?;
        Ok(list.items)
    }

    /// One outpost by id; `None` when the account has no such outpost (404).
    pub(crate) async fn outpost(&self, outpost: &OutpostId) -> Result<Option<Outpost>, FleetError> {
        let path = format!("/opbeta/outposts/outposts/{outpost}");
        match self.call_json("an outpost", Method::GET, &path, None).await {
            Ok(found) => Ok(Some(found)),
            Err(FleetError::NotFound) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Creates an outpost (orchestrator scope).
    pub(crate) async fn create_outpost(
        &self,
        name: &str,
        platform: &str,
        description: &str,
    ) -> Result<Outpost, FleetError> {
        let body =
            serde_json::json!({ "name": name, "platform": platform, "description": description });
        self.call_json(
            "an outpost creation",
            Method::POST,
            "/opbeta/outposts/outposts",
            Some(body),
        )
        .await
    }

    /// Deletes an outpost (orchestrator scope).
    pub(crate) async fn delete_outpost(&self, outpost: &OutpostId) -> Result<(), FleetError> {
        let path = format!("/opbeta/outposts/outposts/{outpost}");
        let (status, bytes) = self.call(Method::DELETE, &path, None).await?;
        if status.is_success() {
            Ok(())
        } else {
            Err(failure(status, &bytes))
        }
    }
}

/// The reason of a transport failure, without the URL's query (which may hold a cursor).
fn network_reason(error: &hyper_util::client::legacy::Error) -> String {
    use std::error::Error as _;
    let mut reason = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        reason = format!("{reason}: {inner}");
        source = inner.source();
    }
    reason
}

/// Unauthenticated downloads (the published `devin-remote` binaries).
#[derive(Clone)]
pub(crate) struct PublicFetcher {
    http: HttpClient,
    timeout: Duration,
}

impl PublicFetcher {
    pub(crate) fn new(http: HttpClient, timeout: Duration) -> Self {
        Self { http, timeout }
    }

    /// `GET url`: the status and the body stream (headers within the deadline).
    pub(crate) async fn get(&self, url: &str) -> Result<(StatusCode, Incoming), FleetError> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(url)
            .header(
                "user-agent",
                concat!("devin-bridge-outpost/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(Bytes::new()))
            .map_err(|error| FleetError::Network(format!("cannot build the request: {error}")))?;
        let response = tokio::time::timeout(self.timeout, self.http.request(request))
            .await
            .map_err(|_| FleetError::Timeout(self.timeout))?
            .map_err(|error| FleetError::Network(network_reason(&error)))?;
        let status = response.status();
        Ok((status, response.into_body()))
    }

    /// `GET url` for a small text (at most `cap` bytes); non-2xx answers are failures.
    pub(crate) async fn get_text(&self, url: &str, cap: usize) -> Result<String, FleetError> {
        let (status, body) = self.get(url).await?;
        let bytes = tokio::time::timeout(self.timeout, Limited::new(body, cap).collect())
            .await
            .map_err(|_| FleetError::Timeout(self.timeout))?
            .map_err(|_| FleetError::TooLarge(cap))?
            .to_bytes();
        if !status.is_success() {
            return Err(failure(status, &bytes));
        }
        String::from_utf8(bytes.to_vec()).map_err(|_| FleetError::Invalid {
            what: "a published text file",
            message: "not UTF-8".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_the_failures_the_worker_acts_on() {
        assert!(failure(StatusCode::UNAUTHORIZED, b"").is_auth());
        assert!(failure(StatusCode::FORBIDDEN, b"").is_auth());
        assert!(matches!(
            failure(StatusCode::GONE, b""),
            FleetError::CursorExpired { .. }
        ));
        assert!(matches!(
            failure(
                StatusCode::BAD_REQUEST,
                br#"{"error":{"code":"invalid_cursor"}}"#
            ),
            FleetError::CursorExpired { .. }
        ));
        assert!(failure(StatusCode::SERVICE_UNAVAILABLE, b"").is_transient());
        assert!(failure(StatusCode::TOO_MANY_REQUESTS, b"").is_transient());
        assert!(!failure(StatusCode::BAD_REQUEST, b"{}").is_transient());
        assert!(matches!(
            failure(StatusCode::CONFLICT, b""),
            FleetError::Conflict { .. }
        ));
    }

    #[test]
    fn error_messages_are_short_and_printable() {
        let body = format!(
            r#"{{"error":{{"code":"x","message":"bad\u0007{}"}}}}"#,
            "y".repeat(500)
        );
        let message = error_message(StatusCode::BAD_REQUEST, body.as_bytes());
        assert_eq!(message.chars().count(), 200);
        assert!(message.starts_with("bad"));
        assert!(!message.contains('\u{7}'));
    }
}
