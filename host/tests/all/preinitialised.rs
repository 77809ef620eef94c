//! The shipped transforms are pre-initialised at build time (`cargo xtask components` runs one
//! representative call in each and snapshots the instance): a fresh instance's linear memory
//! already holds the heap a Claude-Code-sized call needs, so such a call grows no memory.
//!
//! A store capped at exactly the memory's initial size proves it: the cap refuses any growth,
//! so a call that needed one would fail as out of memory.

use crate::common;

use std::path::Path;
use std::time::Duration;

use devin_bridge_engine::{
    Answer, Call, ImageLimits, Loaded, MessageHead, Output, PromptOptions, Runtime, RuntimeConfig,
    TransformKind,
};
use devin_bridge_types::{Reply, ToolCall, Usage};

const WASM_PAGE: usize = 64 << 10;

/// The initial size, in bytes, of the one linear memory the component's core module defines.
fn initial_memory_bytes(component: &Path) -> usize {
    let bytes = std::fs::read(component).expect("component file");
    let mut initial = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(&bytes) {
        if let wasmparser::Payload::MemorySection(memories) = payload.expect("valid component") {
            for memory in memories {
                initial.push(memory.expect("memory type").initial);
            }
        }
    }
    assert_eq!(
        initial.len(),
        1,
        "{}: memories {initial:?}",
        component.display()
    );
    usize::try_from(initial[0]).expect("pages fit usize") * WASM_PAGE
}

fn claude_code_request() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/requests/claude-code.json"),
    )
    .expect("the Claude Code fixture")
}

/// The transforms `tools/preinit` has a warm-up call for, each with a Claude-Code-sized call
/// of its own, different from the build's warm-up call where the interface allows it. (A
/// transform without a warm-up is shipped as built, so it is not in this list.)
const PREINITIALISED: [(TransformKind, fn() -> Call); 5] = [
    (TransformKind::Serializer, serializer_call),
    (TransformKind::Envelope, envelope_call),
    (TransformKind::Sse, sse_call),
    (TransformKind::Safeguard, safeguard_call),
    (TransformKind::ModelAlias, model_alias_call),
];

fn claude_code_prompt() -> devin_bridge_types::Prompt {
    devin_bridge_serializer::serialize(&claude_code_request()).expect("the fixture serializes")
}

fn serializer_call() -> Call {
    let request = claude_code_request();
    Call::SerializeUnseen {
        request: request.into(),
        options: PromptOptions {
            held: 0,
            images: ImageLimits {
                max_images: 0,
                max_image_bytes: 0,
            },
        },
    }
}

fn envelope_call() -> Call {
    let prompt = claude_code_prompt();
    Call::Parse {
        output: r#"<tool>{"name":"Grep","arguments":{"pattern":"fn main","path":"src"}}</tool>"#
            .to_owned(),
        tools: prompt.tools,
        id_seed: prompt.id_seed,
        max_calls: 8,
    }
}

fn sse_call() -> Call {
    let prompt = claude_code_prompt();
    Call::RenderStream {
        head: MessageHead {
            id: "msg_0123".to_owned(),
            model: prompt.model,
            usage: Usage::estimated(prompt.input_tokens, 300),
        },
        reply: Reply::of_calls([ToolCall {
            id: "toolu_0123".to_owned(),
            name: "Edit".to_owned(),
            input: serde_json::json!({
                "file_path": "src/main.rs",
                "old_string": "fn main() {}\n".repeat(40),
                "new_string": "fn main() { run(); }\n".repeat(40),
            })
            .to_string(),
        }]),
        safeguard: None,
    }
}

fn safeguard_call() -> Call {
    Call::Judge {
        calls: vec![
            ToolCall {
                id: "toolu_0123".to_owned(),
                name: "Bash".to_owned(),
                input: serde_json::json!({"command": "git status && cargo test --workspace"})
                    .to_string(),
            },
            ToolCall {
                id: "toolu_0124".to_owned(),
                name: "Read".to_owned(),
                input: serde_json::json!({"file_path": "/work/project/src/main.rs"}).to_string(),
            },
        ],
        classifier_context: serde_json::json!({
            "v": 1,
            "permission_mode": "auto",
            "live_cwd": "/work/project",
            "home_dir": "/home/user",
            "trusted_directories": {"primary": {"path": "/work/project"}, "additional": []},
            "rules": {"allow": [], "deny": [], "ask": []},
            "auto_mode": {"allow": [], "soft_deny": [], "hard_deny": [], "environment": []},
        })
        .to_string(),
        earlier_calls: Vec::new(),
    }
}

fn model_alias_call() -> Call {
    Call::Resolve {
        requested: "swe-1.6".to_owned(),
        catalog: std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/models.json"),
        )
        .expect("the shipped catalog"),
    }
}

fn succeeded(answer: &Answer) -> bool {
    match answer {
        Ok(Output::Text(text)) => !text.is_empty(),
        other => other.is_ok(),
    }
}

#[test]
fn a_fresh_instance_of_each_preinitialised_transform_answers_a_claude_code_sized_call_without_growing_memory(
) {
    for (kind, call) in PREINITIALISED {
        let path = common::component(kind.name());
        let initial = initial_memory_bytes(&path);
        let runtime = Runtime::new(RuntimeConfig {
            memory_bytes: initial,
            call_timeout: Duration::from_secs(10),
            max_instances: 4,
            fuel: None,
        })
        .expect("runtime");
        let loaded = Loaded::from_file(&runtime, &common::test_cache(), kind, &path, None)
            .expect("the component loads");
        let call = call();
        // Twice: the second fresh instance reuses the first one's pool slot.
        for attempt in 1..=2 {
            let answer = loaded.call(&runtime, &call).unwrap_or_else(|error| {
                panic!(
                    "{kind}, call {attempt}, memory capped at its initial {} KiB: {error}",
                    initial >> 10
                )
            });
            assert!(succeeded(&answer), "{kind}: {answer:?}");
        }
    }
}
