//! The local control socket: `devin-bridge components swap|list` talk to a running host here.
//!
//! A Unix socket, mode 0600 inside a directory only this user can enter, and every peer's
//! credentials are checked (same uid as the host) before a byte is read. The protocol is one
//! JSON header line, then (for a swap) exactly `size` bytes of component, then one JSON answer
//! line. Component bytes travel over the socket rather than as a path, so the host never opens
//! a file chosen by the client.

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use devin_bridge_engine::{TransformKind, Transforms};

/// The largest component accepted over the socket.
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;
/// The largest header line.
const MAX_HEADER_BYTES: u64 = 64 << 10;

/// Problems with the control socket itself.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("control socket {path}: {message}")]
    Setup { path: PathBuf, message: String },
    #[error("cannot reach the control socket {path}: {source} (is `devin-bridge serve` running with this policy?)")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("control socket protocol: {0}")]
    Protocol(String),
    #[error("{0}")]
    Refused(String),
}

/// A request header.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Swap `transform` for the `size` bytes that follow the header.
    Swap {
        transform: String,
        size: u64,
        source: String,
    },
    /// List the loaded components.
    List,
}

/// The answer line.
#[derive(Debug, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
}

/// The default socket path for a bridge listening on `listen`:
/// `$XDG_RUNTIME_DIR/devin-bridge/control-<listen>.sock`, else
/// `/tmp/devin-bridge-<uid>/control-<listen>.sock`, where `<listen>` is the listen address
/// with every character but letters, digits, `.` and `-` replaced by `-`
/// (`control-127.0.0.1-20128.sock`). Two bridges on one machine listen on different addresses,
/// so they never share a default socket; `components swap --policy` finds a bridge's socket from
/// the same address. A bridge on an ephemeral port (`:0`) has no address to name it by until it
/// binds, so it adds its process id.
pub fn default_socket_path(listen: &str) -> PathBuf {
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("devin-bridge"),
        None => {
            std::env::temp_dir().join(format!("devin-bridge-{}", nix::unistd::geteuid().as_raw()))
        }
    };
    dir.join(socket_file_name(listen, std::process::id()))
}

/// Longest listen address kept in a socket's file name: Unix socket paths are limited to about
/// 100 bytes, and the directory takes its share.
const MAX_NAME_ADDRESS: usize = 48;

fn socket_file_name(listen: &str, pid: u32) -> String {
    let mapped: String = listen
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let address = mapped
        .split('-')
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let mut address = if address.is_empty() {
        "default".to_owned()
    } else {
        address
    };
    if address.len() > MAX_NAME_ADDRESS {
        // A long host name: its digest keeps names apart without overrunning the limit.
        let digest = hex::encode(&Sha256::digest(listen.as_bytes())[..8]);
        address = format!("{}-{digest}", &address[..MAX_NAME_ADDRESS - 17]);
    }
    if listen.trim().ends_with(":0") {
        address = format!("{address}-pid{pid}");
    }
    format!("control-{address}.sock")
}

/// Creates the socket's private directory (0700) and binds the socket (0600).
pub fn bind(path: &Path) -> Result<UnixListener, ControlError> {
    let setup = |message: String| ControlError::Setup {
        path: path.to_owned(),
        message,
    };
    let dir = path
        .parent()
        .ok_or_else(|| setup("has no parent directory".into()))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|error| setup(format!("cannot create {}: {error}", dir.display())))?;
    let meta = std::fs::metadata(dir)
        .map_err(|error| setup(format!("cannot stat {}: {error}", dir.display())))?;
    let uid = nix::unistd::geteuid().as_raw();
    if meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(setup(format!(
            "directory {} must belong to this user and be private (mode 0700), it is owner {} mode {:o}",
            dir.display(),
            meta.uid(),
            meta.permissions().mode() & 0o777
        )));
    }
    match std::fs::symlink_metadata(path) {
        Ok(existing) if existing.file_type().is_socket() && existing.uid() == uid => {
            // A stale socket of ours from an earlier run; a live host would still be bound.
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(setup("another host is already listening on it".into()));
            }
            std::fs::remove_file(path)
                .map_err(|error| setup(format!("cannot remove stale socket: {error}")))?;
        }
        Ok(_) => {
            return Err(setup(
                "exists and is not a stale socket of this user; refusing to replace it".into(),
            ))
        }
        Err(_) => {}
    }
    let listener =
        UnixListener::bind(path).map_err(|error| setup(format!("cannot bind: {error}")))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|error| setup(format!("cannot restrict permissions: {error}")))?;
    Ok(listener)
}

/// Serves control requests until the listener is dropped with the task.
pub async fn serve(listener: UnixListener, transforms: Arc<Transforms>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "control socket accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let transforms = transforms.clone();
        tokio::spawn(async move {
            if let Err(error) = handle(stream, transforms).await {
                tracing::warn!(%error, "control request failed");
            }
        });
    }
}

async fn handle(stream: UnixStream, transforms: Arc<Transforms>) -> Result<(), ControlError> {
    let peer = stream
        .peer_cred()
        .map_err(|error| ControlError::Protocol(format!("peer credentials: {error}")))?;
    let uid = nix::unistd::geteuid().as_raw();
    let (reader, mut writer) = stream.into_split();
    if peer.uid() != uid {
        tracing::warn!(
            peer_uid = peer.uid(),
            "control connection from another user refused"
        );
        return answer(
            &mut writer,
            Err("refused: the control socket serves only its owner".into()),
        )
        .await;
    }
    let mut reader = BufReader::new(reader);
    let mut line = String::new();
    (&mut reader)
        .take(MAX_HEADER_BYTES)
        .read_line(&mut line)
        .await
        .map_err(|error| ControlError::Protocol(error.to_string()))?;
    let request: Request = match serde_json::from_str(line.trim_end()) {
        Ok(request) => request,
        Err(error) => {
            return answer(&mut writer, Err(format!("bad request header: {error}"))).await
        }
    };
    let outcome = match request {
        Request::List => serde_json::to_value(transforms.info()).map_err(|error| error.to_string()),
        Request::Swap {
            transform,
            size,
            source,
        } => {
            if size > MAX_COMPONENT_BYTES {
                return answer(
                    &mut writer,
                    Err(format!(
                        "component of {size} bytes exceeds the {MAX_COMPONENT_BYTES} byte limit"
                    )),
                )
                .await;
            }
            let kind: TransformKind = match transform.parse() {
                Ok(kind) => kind,
                Err(error) => return answer(&mut writer, Err(error.to_string())).await,
            };
            let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            (&mut reader)
                .take(size)
                .read_to_end(&mut bytes)
                .await
                .map_err(|error| ControlError::Protocol(error.to_string()))?;
            if bytes.len() as u64 != size {
                return answer(
                    &mut writer,
                    Err(format!("expected {size} bytes, got {}", bytes.len())),
                )
                .await;
            }
            let label = format!(
                "control socket ({})",
                source.chars().take(256).collect::<String>()
            );
            // Compilation and the self-test are CPU work: keep them off the async workers.
            let swapped =
                tokio::task::spawn_blocking(move || transforms.swap(kind, &bytes, label)).await;
            match swapped {
                Ok(Ok(report)) => serde_json::to_value(report).map_err(|error| error.to_string()),
                Ok(Err(error)) => Err(error.to_string()),
                Err(join) => Err(format!("swap task failed: {join}")),
            }
        }
    };
    answer(&mut writer, outcome).await
}

async fn answer(
    writer: &mut tokio::net::unix::OwnedWriteHalf,
    outcome: Result<serde_json::Value, String>,
) -> Result<(), ControlError> {
    let response = match outcome {
        Ok(result) => Response {
            ok: true,
            error: None,
            result: Some(result),
        },
        Err(error) => Response {
            ok: false,
            error: Some(error),
            result: None,
        },
    };
    let mut line =
        serde_json::to_vec(&response).map_err(|error| ControlError::Protocol(error.to_string()))?;
    line.push(b'\n');
    writer
        .write_all(&line)
        .await
        .map_err(|error| ControlError::Protocol(error.to_string()))?;
    writer
        .shutdown()
        .await
        .map_err(|error| ControlError::Protocol(error.to_string()))
}

/// Client side: sends one request (and the component bytes of a swap) and returns the result.
pub async fn request(
    path: &Path,
    request: &Request,
    payload: &[u8],
) -> Result<serde_json::Value, ControlError> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(|source| ControlError::Connect {
            path: path.to_owned(),
            source,
        })?;
    let (reader, mut writer) = stream.into_split();
    let mut header =
        serde_json::to_vec(request).map_err(|error| ControlError::Protocol(error.to_string()))?;
    header.push(b'\n');
    let io = |error: std::io::Error| ControlError::Protocol(error.to_string());
    writer.write_all(&header).await.map_err(io)?;
    writer.write_all(payload).await.map_err(io)?;
    writer.flush().await.map_err(io)?;
    let mut line = String::new();
    BufReader::new(reader)
        .take(MAX_COMPONENT_BYTES)
        .read_line(&mut line)
        .await
        .map_err(io)?;
    let response: Response = serde_json::from_str(line.trim_end())
        .map_err(|error| ControlError::Protocol(format!("bad answer {line:?}: {error}")))?;
    match (response.ok, response.result, response.error) {
        (true, Some(result), _) => Ok(result),
        (_, _, Some(error)) => Err(ControlError::Refused(error)),
        _ => Err(ControlError::Protocol(
            "answer has neither result nor error".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::socket_file_name;

    #[test]
    fn default_socket_names_differ_per_listen_address() {
        assert_eq!(
            socket_file_name("127.0.0.1:20128", 7),
            "control-127.0.0.1-20128.sock"
        );
        assert_ne!(
            socket_file_name("127.0.0.1:20128", 7),
            socket_file_name("127.0.0.1:20129", 7)
        );
        assert_eq!(socket_file_name("[::1]:8080", 7), "control-1-8080.sock");
        assert_ne!(
            socket_file_name("[::1]:8080", 7),
            socket_file_name("[::2]:8080", 7)
        );
    }

    #[test]
    fn an_ephemeral_port_adds_the_process_id() {
        assert_eq!(
            socket_file_name("127.0.0.1:0", 42),
            "control-127.0.0.1-0-pid42.sock"
        );
        assert_ne!(
            socket_file_name("127.0.0.1:0", 42),
            socket_file_name("127.0.0.1:0", 43)
        );
    }

    #[test]
    fn odd_addresses_stay_short_and_safe() {
        let long = format!("{}:1", "h".repeat(300));
        let name = socket_file_name(&long, 1);
        assert!(name.len() <= 64, "{name}");
        assert!(name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'));
        assert_ne!(name, socket_file_name(&format!("{}:2", "h".repeat(300)), 1));
        assert_eq!(
            socket_file_name("../../etc:1", 1),
            "control-..-..-etc-1.sock"
        );
        assert_eq!(socket_file_name("", 1), "control-default.sock");
    }
}
