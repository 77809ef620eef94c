//! The nasty edges of the fake fleet, over real loopback HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{call, Sse};
use devin_bridge_fake_fleet::{
    ClaimEventKind, FakeFleet, FleetConfig, SessionSpec, SessionStatus, Sha256File,
};
use serde_json::{json, Value};

const MACHINE: &str = "machine-token";
const ORCHESTRATOR: &str = "orchestrator-token";
const SECOND: Duration = Duration::from_secs(1);

async fn fleet(config: FleetConfig) -> (FakeFleet, String) {
    let fleet = FakeFleet::start(config).await.expect("start");
    let outpost = fleet.create_outpost("rhel", Some("linux"));
    (fleet, outpost)
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["metadata"]["session_id"].as_str().unwrap().to_owned())
        .collect()
}

fn enc(text: &str) -> String {
    text.replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D")
}

async fn claim(fleet: &FakeFleet, id: &str, acceptor: &str) -> (u16, Value) {
    call(
        &fleet.api_url(),
        "POST",
        &format!("/opbeta/outposts/devins/{id}/claim"),
        Some(MACHINE),
        Some(&json!({"acceptor_id": acceptor})),
    )
    .await
}

async fn release(fleet: &FakeFleet, id: &str, acceptor: &str) -> (u16, Value) {
    call(
        &fleet.api_url(),
        "POST",
        &format!("/opbeta/outposts/devins/{id}/release"),
        Some(MACHINE),
        Some(&json!({"acceptor_id": acceptor})),
    )
    .await
}

/// A GET with the machine token.
async fn get(base: &str, path: &str) -> (u16, serde_json::Value) {
    call(base, "GET", path, Some(MACHINE), None).await
}

#[tokio::test]
async fn the_last_row_of_a_page_is_the_first_of_the_next() {
    let (fleet, outpost) = fleet(FleetConfig::default()).await;
    let enqueued: Vec<String> = (0..5)
        .map(|_| fleet.enqueue(&outpost, SessionSpec::default()))
        .collect();
    let mut seen: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = Vec::new();
    loop {
        let mut path = format!("/opbeta/outposts/devins?outpost={outpost}&first=2");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={}", enc(cursor)));
        }
        let (status, page) = get(&fleet.api_url(), &path).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["total"], 5);
        pages.push(ids(&page));
        seen.extend(ids(&page));
        cursor = Some(page["cursor"].as_str().unwrap().to_owned());
        if page["has_next_page"] == false {
            break;
        }
        assert!(pages.len() < 10, "paging makes progress");
    }
    for pair in pages.windows(2) {
        assert_eq!(pair[0].last(), pair[1].first(), "boundary row repeated");
    }
    seen.dedup();
    assert_eq!(seen, enqueued);
    let (status, _) = get(&fleet.api_url(), "/opbeta/outposts/devins?first=201").await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_watch_from_the_final_cursor_replays_what_changed_while_paging() {
    let (fleet, outpost) = fleet(FleetConfig::default()).await;
    let a = fleet.enqueue(&outpost, SessionSpec::default());
    let _b = fleet.enqueue(&outpost, SessionSpec::default());
    let c = fleet.enqueue(&outpost, SessionSpec::default());
    let base = format!("/opbeta/outposts/devins?outpost={outpost}&first=2");
    let (_, first) = get(&fleet.api_url(), &base).await;
    assert_eq!(first["has_next_page"], true);
    // Changes between the pages: a seen row is claimed, an unseen one deleted, one added.
    assert_eq!(claim(&fleet, &a, "w1").await.0, 200);
    fleet.delete_entry(&c);
    let d = fleet.enqueue(&outpost, SessionSpec::default());
    let cursor = first["cursor"].as_str().unwrap();
    let (_, last) = call(
        &fleet.api_url(),
        "GET",
        &format!("{base}&cursor={}", enc(cursor)),
        Some(MACHINE),
        None,
    )
    .await;
    assert_eq!(last["has_next_page"], false);
    let final_cursor = last["cursor"].as_str().unwrap();
    let watch = format!(
        "/opbeta/outposts/devins?watch=true&outpost={outpost}&phase=claimed&cursor={}",
        enc(final_cursor)
    );
    let mut sse = Sse::open(&fleet.api_url(), &watch, MACHINE).await;
    assert_eq!(sse.status, 200);
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(sse.next(SECOND).await.expect("a replayed event"));
    }
    let summary: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["object"]["metadata"]["session_id"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("MODIFIED".into(), a.clone()),
            ("DELETED".into(), c),
            ("MODIFIED".into(), d.clone()),
        ]
    );
    assert_eq!(events[0]["object"]["status"]["phase"], "claimed");
    assert_eq!(events[2]["object"]["status"]["phase"], "pending");
    // Live changes follow.
    assert_eq!(release(&fleet, &a, "w1").await.0, 200);
    let live = sse.next(SECOND).await.expect("a live event");
    assert_eq!(live["object"]["status"]["phase"], "pending");
    // An event's cursor resumes after that event.
    let resume = format!(
        "/opbeta/outposts/devins?watch=true&outpost={outpost}&cursor={}",
        enc(events[1]["cursor"].as_str().unwrap())
    );
    let mut again = Sse::open(&fleet.api_url(), &resume, MACHINE).await;
    let next = again.next(SECOND).await.unwrap();
    assert_eq!(next["object"]["metadata"]["session_id"], d.as_str());
}

#[tokio::test]
async fn expired_and_unknown_cursors_answer_410() {
    let (fleet, outpost) = fleet(FleetConfig::default()).await;
    fleet.enqueue(&outpost, SessionSpec::default());
    let (_, page) = get(&fleet.api_url(), "/opbeta/outposts/devins").await;
    let cursor = enc(page["cursor"].as_str().unwrap());
    fleet.expire_cursors_before_now();
    let (status, body) = get(
        &fleet.api_url(),
        &format!("/opbeta/outposts/devins?cursor={cursor}"),
    )
    .await;
    assert_eq!(status, 410);
    assert_eq!(body["error"]["code"], "cursor_expired");
    let sse = Sse::open(
        &fleet.api_url(),
        &format!("/opbeta/outposts/devins?watch=true&cursor={cursor}"),
        MACHINE,
    )
    .await;
    assert_eq!(sse.status, 410);
    let (status, _) = get(
        &fleet.api_url(),
        "/opbeta/outposts/devins?cursor=bm9wZQ%3D%3D",
    )
    .await;
    assert_eq!(status, 410);
    // A fresh list gives a cursor that works again.
    let (_, page) = get(&fleet.api_url(), "/opbeta/outposts/devins").await;
    let cursor = enc(page["cursor"].as_str().unwrap());
    let sse = Sse::open(
        &fleet.api_url(),
        &format!("/opbeta/outposts/devins?watch=true&cursor={cursor}"),
        MACHINE,
    )
    .await;
    assert_eq!(sse.status, 200);
}

#[tokio::test]
async fn stream_faults_duplicate_cut_and_stall() {
    let (fleet, outpost) = fleet(FleetConfig {
        keepalive: Some(Duration::from_millis(50)),
        ..FleetConfig::default()
    })
    .await;
    let a = fleet.enqueue(&outpost, SessionSpec::default());
    let b = fleet.enqueue(&outpost, SessionSpec::default());
    let watch = format!("/opbeta/outposts/devins?watch=true&outpost={outpost}");

    fleet.faults().duplicate_events(true);
    fleet.faults().end_streams_after(Some(2));
    let mut sse = Sse::open(&fleet.api_url(), &watch, MACHINE).await;
    let mut got = Vec::new();
    while let Some(event) = sse.next(SECOND).await {
        got.push(
            event["object"]["metadata"]["session_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(got, vec![a.clone(), a.clone(), b.clone(), b.clone()]);
    assert!(sse.ended, "the stream closed after two events");

    fleet.faults().duplicate_events(false);
    fleet.faults().end_streams_after(None);
    fleet.faults().stall_next_stream_mid_event();
    let mut stalled = Sse::open(&fleet.api_url(), &watch, MACHINE).await;
    assert!(stalled.next(Duration::from_millis(300)).await.is_none());
    assert!(!stalled.text.is_empty(), "half an event arrived");
    assert!(stalled.silent_for(Duration::from_millis(200)).await);

    // The next stream is healthy again, with keepalives when idle.
    let mut healthy = Sse::open(&fleet.api_url(), &watch, MACHINE).await;
    assert!(healthy.next(SECOND).await.is_some());
    assert!(healthy.next(SECOND).await.is_some());
    assert!(healthy.next(Duration::from_millis(200)).await.is_none());
    assert!(!healthy.ended);
}

#[tokio::test]
async fn claims_are_compare_and_swap_and_the_holder_renews() {
    let (fleet, outpost) = fleet(FleetConfig::default()).await;
    let id = fleet.enqueue(&outpost, SessionSpec::default());
    let (status, first) = claim(&fleet, &id, "w1").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["status"]["phase"], "claimed");
    assert_eq!(first["status"]["acceptor_id"], "w1");
    assert_eq!(first["status"]["gateway_url"], fleet.gateway_url().as_str());
    let token = first["status"]["connect_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        first["status"]["claim_deadline"].as_u64().unwrap()
            >= first["metadata"]["updated_at"].as_u64().unwrap() + 30
    );
    assert_eq!(claim(&fleet, &id, "w2").await.0, 409);
    let (status, renewed) = claim(&fleet, &id, "w1").await;
    assert_eq!(status, 200);
    assert_ne!(renewed["status"]["connect_token"], token.as_str());
    // The token is only in the claim answer, never in the entry.
    assert!(fleet.entry(&id).unwrap()["status"]
        .get("connect_token")
        .is_none());
    let kinds: Vec<ClaimEventKind> = fleet.history(&id).into_iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            ClaimEventKind::Claimed,
            ClaimEventKind::ClaimConflict,
            ClaimEventKind::Renewed
        ]
    );

    let other = fleet.enqueue(&outpost, SessionSpec::default());
    fleet.faults().claim_conflict_next(1);
    fleet.faults().drop_gateway_url(true);
    assert_eq!(claim(&fleet, &other, "w1").await.0, 409);
    let (status, won) = claim(&fleet, &other, "w1").await;
    assert_eq!(status, 200);
    assert!(won["status"].get("gateway_url").is_none());

    let ended = fleet.enqueue(&outpost, SessionSpec::default());
    fleet.terminate_silently(&ended);
    assert_eq!(claim(&fleet, &ended, "w1").await.0, 409);
    assert_eq!(claim(&fleet, "devin-nope", "w1").await.0, 404);
    let (status, _) = call(
        &fleet.api_url(),
        "POST",
        &format!("/opbeta/outposts/devins/{other}/claim"),
        Some(MACHINE),
        Some(&json!({"acceptor": "w1"})),
    )
    .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn an_unconnected_claim_expires_but_a_connected_one_does_not() {
    let (fleet, outpost) = fleet(FleetConfig {
        claim_ttl: Duration::from_millis(300),
        ..FleetConfig::default()
    })
    .await;
    let lost = fleet.enqueue(&outpost, SessionSpec::default());
    let kept = fleet.enqueue(&outpost, SessionSpec::default());
    assert_eq!(claim(&fleet, &lost, "w1").await.0, 200);
    let (_, claimed) = claim(&fleet, &kept, "w1").await;
    let token = claimed["status"]["connect_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let gateway = fleet.gateway_url();
    let path = format!("/gateway/connect?session={kept}");
    let wrong = call(&gateway, "GET", &path, Some("ct_wrong"), None).await;
    assert_eq!(wrong.0, 401);
    let poll = {
        let gateway = gateway.clone();
        tokio::spawn(async move { call(&gateway, "GET", &path, Some(&token), None).await })
    };
    assert!(
        fleet
            .wait_until(SECOND, |f| f.connected_at(&kept).is_some())
            .await
    );
    assert!(
        fleet
            .wait_until(2 * SECOND, |f| f.entry(&lost).unwrap()["status"]["phase"]
                == "pending")
            .await
    );
    let expired = fleet.entry(&lost).unwrap();
    assert_eq!(expired["status"]["acceptor_id"], Value::Null);
    assert_eq!(expired["status"]["claim_deadline"], Value::Null);
    assert_eq!(
        fleet.history(&lost).last().unwrap().kind,
        ClaimEventKind::Expired
    );

    tokio::time::sleep(Duration::from_millis(400)).await;
    let entry = fleet.entry(&kept).unwrap();
    assert_eq!(entry["status"]["phase"], "claimed");
    assert_eq!(entry["status"]["session_status"], "running");
    fleet.end_session(&kept, SessionStatus::Suspended);
    let (status, answer) = poll.await.unwrap();
    assert_eq!((status, answer), (200, json!({"action": "exit"})));
    assert_eq!(
        fleet.entry(&kept).unwrap()["status"]["session_status"],
        "suspended"
    );
    assert!(fleet.enqueued_at(&kept).unwrap() <= fleet.connected_at(&kept).unwrap());
}

#[tokio::test]
async fn release_requeues_a_live_session_and_deletes_an_ended_one() {
    let (fleet, outpost) = fleet(FleetConfig::default()).await;
    let id = fleet.enqueue(&outpost, SessionSpec::default());
    assert_eq!(release(&fleet, &id, "w1").await.0, 409, "not claimed");
    assert_eq!(claim(&fleet, &id, "w1").await.0, 200);
    assert_eq!(release(&fleet, &id, "w2").await.0, 409, "someone else's");
    let (status, entry) = release(&fleet, &id, "w1").await;
    assert_eq!(status, 200);
    assert_eq!(entry["status"]["phase"], "pending");
    assert_eq!(entry["status"]["acceptor_id"], Value::Null);
    assert_eq!(release(&fleet, "devin-nope", "w1").await.0, 404);

    assert_eq!(claim(&fleet, &id, "w2").await.0, 200);
    fleet.end_session(&id, SessionStatus::Terminated);
    let (_, page) = get(&fleet.api_url(), "/opbeta/outposts/devins").await;
    let watch = format!(
        "/opbeta/outposts/devins?watch=true&cursor={}",
        enc(page["cursor"].as_str().unwrap())
    );
    assert_eq!(release(&fleet, &id, "w2").await.0, 200);
    assert!(fleet.entry(&id).is_none());
    let mut sse = Sse::open(&fleet.api_url(), &watch, MACHINE).await;
    let event = sse.next(SECOND).await.unwrap();
    assert_eq!(event["type"], "DELETED");
    assert_eq!(event["object"]["status"]["session_status"], "terminated");
    let (status, _) = get(&fleet.api_url(), &format!("/opbeta/outposts/devins/{id}")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn tokens_scopes_and_injected_failures() {
    let (fleet, outpost) = fleet(FleetConfig::default()).await;
    let api = fleet.api_url();
    let (status, body) = call(&api, "GET", "/opbeta/outposts/devins", None, None).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "unauthorized");
    assert_eq!(
        call(&api, "GET", "/opbeta/outposts/devins", Some("nope"), None)
            .await
            .0,
        401
    );
    let create = json!({"name": "mac", "platform": "macos", "description": "d"});
    let outposts = "/opbeta/outposts/outposts";
    assert_eq!(
        call(&api, "POST", outposts, Some(MACHINE), Some(&create))
            .await
            .0,
        403
    );
    let (status, created) = call(&api, "POST", outposts, Some(ORCHESTRATOR), Some(&create)).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        call(&api, "POST", outposts, Some(ORCHESTRATOR), Some(&create))
            .await
            .0,
        409
    );
    let bad = json!({"name": "bsd", "platform": "freebsd"});
    assert_eq!(
        call(&api, "POST", outposts, Some(ORCHESTRATOR), Some(&bad))
            .await
            .0,
        400
    );
    fleet.enqueue(&outpost, SessionSpec::default());
    let (status, list) = get(&api, outposts).await;
    assert_eq!(status, 200);
    let rhel = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["metadata"]["outpost_id"] == outpost.as_str())
        .unwrap();
    assert_eq!(rhel["status"]["queue_depth"], 1);
    let one = format!("{outposts}/{outpost}");
    assert_eq!(get(&api, &one).await.0, 403);
    assert_eq!(
        call(&api, "GET", &one, Some(ORCHESTRATOR), None).await.0,
        200
    );
    assert_eq!(
        call(&api, "DELETE", &one, Some(ORCHESTRATOR), None).await.0,
        200
    );
    assert_eq!(
        call(&api, "DELETE", &one, Some(ORCHESTRATOR), None).await.0,
        404
    );

    fleet.faults().unauthorized(true);
    assert_eq!(
        call(&api, "GET", outposts, Some(ORCHESTRATOR), None)
            .await
            .0,
        401
    );
    fleet.faults().unauthorized(false);
    fleet.faults().fail_next(2, 503);
    let devins = "/opbeta/outposts/devins";
    assert_eq!(get(&api, devins).await.0, 503);
    assert_eq!(get(&api, devins).await.0, 503);
    assert_eq!(get(&api, devins).await.0, 200);
    let statuses: Vec<u16> = fleet
        .requests()
        .iter()
        .rev()
        .take(3)
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, vec![200, 503, 503]);
}

#[tokio::test]
async fn static_files_and_their_checksums() {
    let (fleet, _) = fleet(FleetConfig::default()).await;
    let base = fleet.static_base_url();
    let path = base.trim_start_matches(&fleet.api_url()).to_owned();
    fleet.publish_binary(
        "abc1234",
        "linux_x64",
        b"binary".to_vec(),
        Sha256File::Correct,
    );
    fleet.publish_binary("bad0000", "linux_x64", b"other".to_vec(), Sha256File::Wrong);
    fleet.publish_binary(
        "none000",
        "linux_x64",
        b"third".to_vec(),
        Sha256File::Missing,
    );
    fleet.set_latest("linux_x64", "abc1234");
    let get = |file: &str| {
        let (api, path) = (fleet.api_url(), format!("{path}/{file}"));
        async move { common::call_raw(&api, "GET", &path, None, None).await }
    };
    assert_eq!(get("latest_linux_x64").await, (200, b"abc1234\n".to_vec()));
    assert_eq!(
        get("devin-remote_abc1234_linux_x64").await,
        (200, b"binary".to_vec())
    );
    let (status, sum) = get("devin-remote_abc1234_linux_x64.sha256").await;
    assert_eq!(status, 200);
    assert_eq!(
        String::from_utf8(sum).unwrap(),
        format!("{}\n", sha256_hex(b"binary"))
    );
    let (_, wrong) = get("devin-remote_bad0000_linux_x64.sha256").await;
    assert_ne!(
        String::from_utf8(wrong).unwrap().trim(),
        sha256_hex(b"other")
    );
    assert_eq!(get("devin-remote_none000_linux_x64.sha256").await.0, 404);
    assert_eq!(get("latest_darwin_arm64").await.0, 404);
    assert_eq!(fleet.downloads("devin-remote_abc1234_linux_x64"), 1);
    assert_eq!(fleet.downloads(&format!("{path}/latest_linux_x64")), 1);
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test]
async fn streams_end_after_their_maximum_duration() {
    let (fleet, outpost) = fleet(FleetConfig {
        stream_max: Duration::from_millis(200),
        ..FleetConfig::default()
    })
    .await;
    fleet.enqueue(&outpost, SessionSpec::default());
    let watch = format!("/opbeta/outposts/devins?watch=true&outpost={outpost}");
    let mut sse = Sse::open(&fleet.api_url(), &watch, MACHINE).await;
    assert!(sse.next(SECOND).await.is_some());
    assert!(sse.next(SECOND).await.is_none());
    assert!(sse.ended, "closed by the server");
}

#[tokio::test]
async fn the_session_status_follows_the_end_of_a_session_after_the_lag() {
    let (fleet, outpost) = fleet(FleetConfig {
        session_status_lag: Duration::from_millis(300),
        ..FleetConfig::default()
    })
    .await;
    let id = fleet.enqueue(&outpost, SessionSpec::default());
    let (_, claimed) = claim(&fleet, &id, "w1").await;
    let token = claimed["status"]["connect_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/gateway/connect?session={id}");
    let gateway = fleet.gateway_url();
    let poll = tokio::spawn(async move { call(&gateway, "GET", &path, Some(&token), None).await });
    assert!(
        fleet
            .wait_until(SECOND, |f| f.connected_at(&id).is_some())
            .await
    );
    fleet.end_session(&id, SessionStatus::Terminated);
    assert_eq!(poll.await.unwrap(), (200, json!({"action": "exit"})));
    assert_eq!(
        fleet.entry(&id).unwrap()["status"]["session_status"],
        "running"
    );
    assert!(
        fleet
            .wait_until(2 * SECOND, |f| f.entry(&id).unwrap()["status"]
                ["session_status"]
                == "terminated")
            .await
    );
    // Released once ended: the entry is gone.
    assert_eq!(release(&fleet, &id, "w1").await.0, 200);
    assert!(fleet.entry(&id).is_none());
}
