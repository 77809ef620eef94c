//! Claude Code's effort (`output_config.effort`, or an older client's thinking budget) reaches
//! the Devin session on both transports: as the session's thought level when it offers one,
//! as the model's effort variant when the model has one, and not at all (the turn still
//! answers) when neither fits. `[mock:whoami]` reports the session's model and thought level;
//! the offline agent's log shows what the bridge set.

use crate::common;

use common::bridge::{pass_env_line, HttpResponse, TestBridge, AGENT_LOG};
use serde_json::{json, Value};

/// A request for `model` whose last user message is `text`, with `extra` members (effort,
/// thinking) added to it.
fn request(model: &str, text: &str, extra: Value) -> Value {
    let mut body = json!({"model": format!("devin-cli-agentic/{model}"), "max_tokens": 64,
                          "messages": [{"role": "user", "content": text}]});
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    body
}

/// What Claude Code 2.1.332 sends with `/effort <level>`.
fn effort(level: &str) -> Value {
    json!({"thinking": {"type": "adaptive", "display": "omitted"},
           "output_config": {"effort": level}})
}

/// A bridge whose offline agent gets the switches `vars` (set to `1`, seen by this bridge's
/// agent only: others do not pass them).
async fn bridge(transport: &str, vars: &[&str]) -> TestBridge {
    std::env::set_var("MOCK_DEVIN_LOG", AGENT_LOG);
    for var in vars {
        std::env::set_var(var, "1");
    }
    let names: Vec<&str> = std::iter::once("MOCK_DEVIN_LOG")
        .chain(vars.iter().copied())
        .collect();
    TestBridge::start(
        "",
        &format!(
            "transport = {transport:?}\nprewarm = 0\n{}",
            pass_env_line(&names)
        ),
    )
    .await
}

async fn send(bridge: &TestBridge, key: &str, body: &Value) -> HttpResponse {
    bridge.conversation_turn(key, body).await
}

fn text_of(response: &HttpResponse) -> String {
    assert_eq!(response.status, 200, "{}", response.body);
    response.json()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The `(configId, value)` of every option the bridge set on the agent's sessions.
fn options_set(bridge: &TestBridge) -> Vec<(String, String)> {
    bridge
        .agent_events("set_config_option")
        .iter()
        .map(|event| {
            (
                event["configId"].as_str().unwrap_or_default().to_owned(),
                event["value"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn set(config_id: &str, value: &str) -> (String, String) {
    (config_id.to_owned(), value.to_owned())
}

async fn metrics(bridge: &TestBridge) -> String {
    bridge.request("GET", "/metrics", &[], "").await.body
}

fn effort_count(effort: &str, applied: &str, count: u32) -> String {
    format!("devin_bridge_turn_effort_total{{effort=\"{effort}\",applied=\"{applied}\"}} {count}")
}

#[tokio::test]
async fn a_high_effort_is_the_sessions_thought_level_on_both_transports() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport, &["MOCK_DEVIN_THOUGHT_LEVEL"]).await;
        let reply = send(
            &bridge,
            "level-high",
            &request("swe-1-7", "which level? [mock:whoami]", effort("high")),
        )
        .await;
        assert_eq!(
            text_of(&reply),
            "model: swe-1-7, thought_level: high",
            "{transport}"
        );
        // swe-1-7 is the session's model already: only the thought level is set.
        assert_eq!(
            options_set(&bridge),
            [set("thought_level", "high")],
            "{transport}"
        );
        // Medium is where a session starts: nothing to set.
        let reply = send(
            &bridge,
            "level-medium",
            &request("swe-1-7", "which level? [mock:whoami]", effort("medium")),
        )
        .await;
        assert_eq!(
            text_of(&reply),
            "model: swe-1-7, thought_level: medium",
            "{transport}"
        );
        assert_eq!(options_set(&bridge).len(), 1, "{transport}");
        // A new model goes on the agent's command line (the summarizer has no model option):
        // only its thought level is set on the session.
        let reply = send(
            &bridge,
            "level-low",
            &request("swe-1-6", "which level? [mock:whoami]", effort("low")),
        )
        .await;
        assert_eq!(
            text_of(&reply),
            "model: swe-1-6, thought_level: low",
            "{transport}"
        );
        assert_eq!(
            options_set(&bridge)[1..],
            [set("thought_level", "low")],
            "{transport}"
        );
        let metrics = metrics(&bridge).await;
        for (level, count) in [("high", 1), ("medium", 1), ("low", 1)] {
            assert!(
                metrics.contains(&effort_count(level, "thought_level", count)),
                "{transport}: {metrics}"
            );
        }
        bridge.stop().await;
    }
}

/// The summarizer's sessions have no model option, so a model variant (`swe-2-high`) cannot be
/// chosen from the session's options: without a thought level, an effort is ignored and the
/// requested model itself answers (the variant is known to the agent, not to the bridge's
/// catalog, and the bridge does not guess model ids).
#[tokio::test]
async fn without_a_thought_level_the_summarizers_effort_is_ignored_and_its_model_answers() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(transport, &["MOCK_DEVIN_EFFORT_VARIANTS"]).await;
        for (key, level) in [("variant-high", "high"), ("variant-low", "low")] {
            let reply = send(
                &bridge,
                key,
                &request("swe-2", "which model? [mock:whoami]", effort(level)),
            )
            .await;
            assert_eq!(text_of(&reply), "model: swe-2", "{transport}");
        }
        assert!(options_set(&bridge).is_empty(), "{transport}");
        let metrics = metrics(&bridge).await;
        for expected in [
            effort_count("high", "ignored", 1),
            effort_count("low", "ignored", 1),
            "devin_bridge_turn_model_total{outcome=\"matched\"} 2".to_owned(),
        ] {
            assert!(metrics.contains(&expected), "{transport}: {metrics}");
        }
        bridge.stop().await;
    }
}

#[tokio::test]
async fn an_unknown_or_absent_effort_leaves_the_session_as_it_is_and_the_turn_answers() {
    for transport in ["per-turn", "resident"] {
        let bridge = bridge(
            transport,
            &["MOCK_DEVIN_THOUGHT_LEVEL", "MOCK_DEVIN_EFFORT_VARIANTS"],
        )
        .await;
        for (key, extra) in [
            ("unknown", effort("turbo")),
            ("absent", json!({})),
            (
                "adaptive",
                json!({"thinking": {"type": "adaptive", "display": "updates"}}),
            ),
            ("not-a-string", json!({"output_config": {"effort": 3}})),
        ] {
            for stream in [false, true] {
                let mut body = request("swe-2", "which level? [mock:whoami]", extra.clone());
                body["stream"] = json!(stream);
                let reply = send(&bridge, &format!("{key}-{stream}"), &body).await;
                assert_eq!(reply.status, 200, "{transport} {key}: {}", reply.body);
                if stream {
                    assert!(
                        !reply.body.contains("event: error"),
                        "{transport} {key}: {}",
                        reply.body
                    );
                } else {
                    assert_eq!(
                        text_of(&reply),
                        "model: swe-2, thought_level: medium",
                        "{transport} {key}"
                    );
                }
            }
        }
        // Only the model (swe-1-7 is where sessions start), never a thought level.
        assert!(
            options_set(&bridge)
                .iter()
                .all(|option| *option == set("model", "swe-2")),
            "{transport}: {:?}",
            options_set(&bridge)
        );
        let metrics = metrics(&bridge).await;
        for expected in [
            effort_count("other", "ignored", 2),
            effort_count("none", "none", 6),
        ] {
            assert!(metrics.contains(&expected), "{transport}: {metrics}");
        }
        bridge.stop().await;
    }
}

#[tokio::test]
async fn an_older_clients_thinking_budget_stands_for_an_effort() {
    let bridge = bridge("per-turn", &["MOCK_DEVIN_THOUGHT_LEVEL"]).await;
    for (budget, level) in [(2048, "low"), (31999, "high")] {
        let reply = send(
            &bridge,
            &format!("budget-{budget}"),
            &request(
                "swe-1-7",
                "which level? [mock:whoami]",
                json!({"thinking": {"type": "enabled", "budget_tokens": budget}}),
            ),
        )
        .await;
        assert_eq!(
            text_of(&reply),
            format!("model: swe-1-7, thought_level: {level}")
        );
    }
    let metrics = metrics(&bridge).await;
    for level in ["low", "high"] {
        assert!(
            metrics.contains(&effort_count(level, "thought_level", 1)),
            "{metrics}"
        );
    }
    bridge.stop().await;
}

#[tokio::test]
async fn a_resident_conversation_sets_its_thought_level_only_when_its_effort_changes() {
    let bridge = bridge("resident", &["MOCK_DEVIN_THOUGHT_LEVEL"]).await;
    // A request with tools is a conversation turn (one without is a side request, in a
    // session of its own); each carries the history with the agent's real replies.
    let tools = json!([{"name": "Bash", "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]);
    let mut messages: Vec<Value> = Vec::new();
    for (level, text) in [
        ("high", "one [mock:whoami]"),
        ("high", "two [mock:whoami]"),
        ("low", "three [mock:whoami]"),
        ("low", "four [mock:whoami]"),
    ] {
        messages.push(json!({"role": "user", "content": text}));
        let mut body = effort(level);
        body["model"] = json!("devin-cli-agentic/swe-1-7");
        body["max_tokens"] = json!(64);
        body["tools"] = tools.clone();
        body["messages"] = json!(messages);
        let reply = text_of(&send(&bridge, "levels", &body).await);
        assert_eq!(reply, format!("model: swe-1-7, thought_level: {level}"));
        messages.push(json!({"role": "assistant", "content": reply}));
    }
    assert_eq!(bridge.agent_events("session_new").len(), 1, "one session");
    assert_eq!(
        options_set(&bridge),
        [set("thought_level", "high"), set("thought_level", "low")]
    );
    let metrics = metrics(&bridge).await;
    for level in ["high", "low"] {
        assert!(
            metrics.contains(&effort_count(level, "thought_level", 2)),
            "{metrics}"
        );
    }
    bridge.stop().await;
}
