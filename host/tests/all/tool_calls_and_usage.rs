//! Several tool calls in one reply, the model's context window and the usage a turn reports,
//! over HTTP against the offline agent, on both transports.

use crate::common;

use common::bridge::{HttpResponse, TestBridge};
use devin_bridge_policy::ModePolicy as _;
use serde_json::{json, Value};

use crate::summarizer::request;

/// `(event name, data)` of a stream, pings removed.
fn events(response: &HttpResponse) -> Vec<(String, Value)> {
    response
        .events()
        .into_iter()
        .filter(|(name, _)| name != "ping")
        .collect()
}

/// Both `[mock:two-tools]` envelopes reach the client as one message: two `tool_use` blocks
/// in order with distinct ids (JSON), and one start/delta/stop per block with indexes 0 and 1
/// (SSE), then `stop_reason: tool_use`.
async fn two_calls_become_one_message(bridge: &TestBridge) {
    let response = bridge.messages(&request("[mock:two-tools]", false)).await;
    assert_eq!(response.status, 200, "{}", response.body);
    let body = response.json();
    assert_eq!(body["stop_reason"], "tool_use", "{body}");
    let content = body["content"].as_array().expect("content");
    assert_eq!(content.len(), 2, "{body}");
    let commands: Vec<&str> = content
        .iter()
        .map(|block| {
            assert_eq!(block["type"], "tool_use", "{body}");
            assert_eq!(block["name"], "Bash", "{body}");
            block["input"]["command"].as_str().expect("command")
        })
        .collect();
    assert_eq!(
        commands,
        ["echo mock", "echo second"],
        "in the agent's order"
    );
    assert_ne!(
        content[0]["id"], content[1]["id"],
        "ids are unique in a message"
    );

    let streamed = bridge.messages(&request("[mock:two-tools]", true)).await;
    assert_eq!(streamed.status, 200, "{}", streamed.body);
    let events = events(&streamed);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ],
        "{}",
        streamed.body
    );
    let indexes: Vec<u64> = events[1..7]
        .iter()
        .map(|(_, data)| data["index"].as_u64().expect("index"))
        .collect();
    assert_eq!(indexes, [0, 0, 0, 1, 1, 1]);
    assert_eq!(events[7].1["delta"]["stop_reason"], "tool_use");
    let partial: Vec<Value> = [2, 5]
        .iter()
        .map(|&at| {
            serde_json::from_str(
                events[at].1["delta"]["partial_json"]
                    .as_str()
                    .expect("json"),
            )
            .expect("the input is JSON")
        })
        .collect();
    assert_eq!(partial[0]["command"], "echo mock");
    assert_eq!(partial[1]["command"], "echo second");
}

#[tokio::test]
async fn two_envelopes_become_two_tool_use_blocks_on_both_transports() {
    for agent in ["prewarm = 0", "transport = \"resident\""] {
        let bridge = TestBridge::start("", agent).await;
        two_calls_become_one_message(&bridge).await;
        bridge.stop().await;
    }
}

#[tokio::test]
async fn the_call_limit_and_disable_parallel_tool_use_refuse_a_second_envelope() {
    // Over `[agent] max_tool_calls`: refused, repaired once, refused again: a gateway error.
    let bridge = TestBridge::start("", "prewarm = 0\nmax_tool_calls = 1").await;
    let response = bridge.messages(&request("[mock:two-tools]", false)).await;
    assert_eq!(response.status, 502, "{}", response.body);
    assert!(
        response.body.contains("one tool call") || response.body.contains("at most"),
        "{}",
        response.body
    );
    bridge.stop().await;

    // The client's `disable_parallel_tool_use` does the same under the default limit.
    let bridge = TestBridge::start("", "prewarm = 0").await;
    let mut single = request("[mock:two-tools]", false);
    single["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": true});
    let response = bridge.messages(&single).await;
    assert_eq!(response.status, 502, "{}", response.body);
    // And without it the same request is answered.
    single["tool_choice"] = json!({"type": "auto"});
    assert_eq!(bridge.messages(&single).await.status, 200);
    bridge.stop().await;
}

#[tokio::test]
async fn a_policy_refuses_a_call_limit_out_of_range() {
    for limit in ["0", "65"] {
        let text = common::policy_text(&format!(
            "[agent]\ncommand = \"devin\"\nmax_tool_calls = {limit}\n"
        ));
        let error = devin_bridge_summarizer::policy::SummarizerPolicy::parse(
            &text,
            std::path::Path::new("p.toml"),
            std::path::Path::new("/"),
        )
        .expect_err("refused");
        assert!(
            error.to_string().contains("max_tool_calls"),
            "{limit}: {error}"
        );
    }
}

/// The usage of a JSON body and of a stream's `message_delta`.
async fn usages(bridge: &TestBridge, marker: &str) -> (Value, Value) {
    let json = bridge.messages(&request(marker, false)).await;
    assert_eq!(json.status, 200, "{}", json.body);
    let streamed = bridge.messages(&request(marker, true)).await;
    let delta = events(&streamed)
        .into_iter()
        .find(|(name, _)| name == "message_delta")
        .unwrap_or_else(|| panic!("no message_delta: {}", streamed.body));
    (json.json()["usage"].clone(), delta.1["usage"].clone())
}

fn counts(usage: &Value) -> [u64; 4] {
    [
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ]
    .map(|field| {
        usage[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field} missing or not a count: {usage}"))
    })
}

#[tokio::test]
async fn reported_usage_reaches_the_client_and_estimates_fill_in_otherwise() {
    for agent in ["prewarm = 0", "transport = \"resident\""] {
        let bridge = TestBridge::start("", agent).await;
        // The agent's own counts, cache reads included (the CLI reports no cache writes). The
        // CLI's `totalTokens` is input + output, so its cached reads sit inside its
        // `inputTokens` (4321): Anthropic's `input_tokens` is what is left, 4321 - 4000.
        let (json_usage, delta_usage) = usages(&bridge, "[mock:usage]").await;
        assert_eq!(counts(&json_usage), [321, 42, 4000, 0], "{agent}");
        assert_eq!(counts(&delta_usage), [321, 42, 4000, 0], "{agent}");

        // No usage reported: the serializer's estimate, the same number count_tokens gives.
        let counted = bridge
            .request(
                "POST",
                "/v1/messages/count_tokens",
                &[],
                &request("[mock:no-usage]", false).to_string(),
            )
            .await;
        assert_eq!(counted.status, 200, "{}", counted.body);
        let estimate = counted.json()["input_tokens"].as_u64().expect("count");
        let (json_usage, delta_usage) = usages(&bridge, "[mock:no-usage]").await;
        for usage in [&json_usage, &delta_usage] {
            let [input, output, read, write] = counts(usage);
            assert_eq!(input, estimate, "{agent}: {usage}");
            // "Mock answer: the bridge works." is 30 characters: 8 estimated tokens.
            assert_eq!((output, read, write), (8, 0, 0), "{agent}: {usage}");
        }

        // Only the context size reported: it is the input; the output is estimated.
        let (json_usage, _) = usages(&bridge, "[mock:usage-update]").await;
        assert_eq!(counts(&json_usage), [5555, 8, 0, 0], "{agent}");

        let metrics = bridge.request("GET", "/metrics", &[], "").await.body;
        let line = |source: &str| {
            metrics
                .lines()
                .find(|line| {
                    line.starts_with("devin_bridge_turn_usage_total")
                        && line.contains(&format!("source=\"{source}\""))
                })
                .and_then(|line| line.rsplit(' ').next())
                .and_then(|count| count.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {source} count in\n{metrics}"))
        };
        assert_eq!(line("reported"), 4, "{agent}\n{metrics}");
        assert_eq!(line("estimated"), 2, "{agent}\n{metrics}");
        // Which report the counts came from: the turn's own sums (`turn_stats`) for both
        // `[mock:usage]` turns, the context size for both `[mock:usage-update]` turns.
        let reported = |source: &str| {
            metrics
                .lines()
                .find(|line| {
                    line.starts_with("devin_bridge_turn_usage_reported_total")
                        && line.contains(&format!("source=\"{source}\""))
                })
                .and_then(|line| line.rsplit(' ').next())
                .and_then(|count| count.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {source} count in\n{metrics}"))
        };
        assert_eq!(reported("turn_stats"), 2, "{agent}\n{metrics}");
        assert_eq!(reported("context_size"), 2, "{agent}\n{metrics}");
        bridge.stop().await;
    }
}

/// A catalog whose one model has a small window.
fn small_window_catalog(dir: &std::path::Path, window: u64) -> std::path::PathBuf {
    let path = dir.join("small.json");
    let catalog = json!({"families": [{"slug": "swe-1-7", "variants": [
        {"model_uid": "swe-1-7", "label": "SWE-1.7", "max_context_tokens": window, "max_output_tokens": 4096}
    ]}]});
    std::fs::write(&path, catalog.to_string()).expect("catalog");
    path
}

#[tokio::test]
async fn the_models_list_says_each_models_window() {
    let bridge = TestBridge::start("", "prewarm = 0").await;
    let cards = bridge.model_cards().await;
    assert!(!cards.is_empty());
    for card in &cards {
        assert!(
            card["context_window"]
                .as_u64()
                .is_some_and(|tokens| tokens > 0),
            "every built-in model states its window: {card}"
        );
    }
    bridge.stop().await;

    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = small_window_catalog(dir.path(), 1000);
    let bridge = TestBridge::start_with_catalog("", "prewarm = 0", "", &catalog).await;
    let cards = bridge.model_cards().await;
    assert_eq!(cards.len(), 1);
    assert_eq!(cards[0]["context_window"], 1000);
    assert_eq!(cards[0]["max_output_tokens"], 4096);
    bridge.stop().await;
}

#[tokio::test]
async fn a_prompt_over_the_window_is_refused_before_any_agent_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = small_window_catalog(dir.path(), 1000);
    for agent in ["prewarm = 0", "transport = \"resident\""] {
        let bridge = TestBridge::start_with_catalog("", agent, "", &catalog).await;
        // Fits: answered.
        assert_eq!(
            bridge.messages(&request("[mock:text]", false)).await.status,
            200
        );
        let mut long = request("[mock:text]", false);
        long["messages"][0]["content"] = json!(format!("{} [mock:text]", "word ".repeat(1000)));
        let counted = bridge
            .request("POST", "/v1/messages/count_tokens", &[], &long.to_string())
            .await;
        assert_eq!(
            counted.status, 200,
            "count_tokens counts, it does not refuse"
        );
        let estimate = counted.json()["input_tokens"].as_u64().expect("count");
        assert!(estimate > 1000, "{estimate}");
        // The per-turn agent of the turn above ends in the background (its session is deleted
        // first): count once it has gone. The resident process stays.
        if agent == "prewarm = 0" {
            common::bridge::wait_no_agents(&bridge.home, std::time::Duration::from_secs(10)).await;
        }
        let agents_before = bridge.bridge.agent_processes();
        for stream in [false, true] {
            long["stream"] = json!(stream);
            let refused = bridge.messages(&long).await;
            assert_eq!(refused.status, 400, "{agent}: {}", refused.body);
            let body = refused.json();
            assert_eq!(body["error"]["type"], "invalid_request_error");
            assert_eq!(
                body["error"]["message"],
                format!("prompt is too long: {estimate} tokens > 1000 maximum"),
                "the estimate count_tokens gives drives the refusal"
            );
        }
        assert_eq!(
            bridge.bridge.agent_processes(),
            agents_before,
            "no agent started for a refused prompt"
        );
        bridge.stop().await;
    }
}
