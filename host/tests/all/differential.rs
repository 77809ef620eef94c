//! Native vs wasm: every golden fixture, and a few thousand generated inputs, must give the
//! same answer from the plain Rust library and from its component running in wasmtime.

use crate::common;

use devin_bridge_engine::{
    corpus, Call, ImageLimits, MessageHead, PromptOptions, Resume, TransformKind, Transforms,
};
use devin_bridge_types::{
    CallVerdict, Evaluation, Failure, Reply, ReplyBlock, SafeguardOutcome, SafeguardStatus,
    ToolCall, ToolVerdict, Usage,
};
use serde_json::{json, Value};

fn assert_same(transforms: &Transforms, call: &Call, label: &str) {
    let wasm = transforms
        .call(call)
        .unwrap_or_else(|error| panic!("{label}: wasm failed: {error}"));
    assert_eq!(
        call.run_native(),
        wasm,
        "{label}: native and wasm differ for {call:?}"
    );
}

#[test]
fn every_fixture_agrees_natively_and_in_wasm_and_matches_its_expectation() {
    let transforms = common::transforms();
    let mut total = 0;
    for kind in TransformKind::ALL {
        let cases = corpus::cases(kind).expect("fixtures decode");
        assert!(!cases.is_empty(), "no fixtures for {kind}");
        for case in cases {
            let native = corpus::answer_json(&case.call.run_native());
            assert_eq!(
                native, case.expect,
                "{} ({}): native result differs from the fixture",
                case.file, case.name
            );
            assert_same(&transforms, &case.call, &case.file);
            total += 1;
        }
    }
    assert!(total >= 60, "only {total} fixtures");
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "let me run",
    "the tests",
    "I'll edit",
    "next step:",
    "done.",
    "ünïcødé",
    "\u{1F600}",
    "\"quoted\"",
    "<tool>",
    "</tool>",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\\",
    "\n",
    "\t",
    " ",
    "null",
    "true",
    "42",
    "-1e400",
    "tests were not run",
    "I will check",
    "planned actions: fix",
    "We still need to test",
    "\u{2028}",
    "</to",
    "ol>",
    "<TOOL>",
];

fn random_text(rng: &mut Rng, max_words: usize) -> String {
    let n = rng.below(max_words + 1);
    (0..n).map(|_| *rng.pick(WORDS)).collect()
}

fn mutate(rng: &mut Rng, value: &mut Value, depth: usize) {
    match value {
        Value::Object(map) if !map.is_empty() && depth < 6 => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = rng.pick(&keys).clone();
            match rng.below(6) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    map.insert(key, json!(random_text(rng, 3)));
                }
                2 => {
                    map.insert(format!("x_{}", rng.below(100)), json!(rng.below(1000)));
                }
                _ => {
                    if let Some(child) = map.get_mut(&key) {
                        mutate(rng, child, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() && depth < 6 => match rng.below(5) {
            0 => {
                items.remove(rng.below(items.len()));
            }
            1 => {
                let copy = items[rng.below(items.len())].clone();
                items.push(copy);
            }
            _ => {
                let index = rng.below(items.len());
                mutate(rng, &mut items[index], depth + 1);
            }
        },
        Value::String(text) => {
            *text = match rng.below(3) {
                0 => random_text(rng, 8),
                1 => format!("{text}{}", random_text(rng, 4)),
                _ => text
                    .chars()
                    .take(rng.below(text.chars().count() + 1))
                    .collect(),
            }
        }
        other => {
            *other = match rng.below(4) {
                0 => Value::Null,
                1 => json!(rng.below(10)),
                2 => json!(random_text(rng, 2)),
                _ => json!([]),
            }
        }
    }
}

fn fixture_args(kind: TransformKind) -> Vec<Value> {
    corpus::files(kind)
        .iter()
        .filter_map(|(_, text)| serde_json::from_str::<Value>(text).ok())
        .filter_map(|case| case.get("args").cloned())
        .collect()
}

#[test]
fn generated_serializer_requests_agree() {
    let transforms = common::transforms();
    let mut rng = Rng(0x5e71_a112_e700_0001);
    let requests: Vec<Value> = fixture_args(TransformKind::Serializer)
        .into_iter()
        .filter_map(|args| args.get("request").cloned())
        .filter(|request| request.to_string().len() < 20_000)
        .collect();
    assert!(!requests.is_empty());
    for i in 0..1000 {
        let mut request = rng.pick(&requests).clone();
        for _ in 0..=rng.below(3) {
            mutate(&mut rng, &mut request, 0);
        }
        let mut text = request.to_string();
        if i % 10 == 0 {
            let mut cut = rng.below(text.len() + 1);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        if i % 5 == 0 {
            let held = u32::try_from(rng.below(6)).unwrap_or(0);
            let max_images = u32::try_from(rng.below(3)).unwrap_or(0);
            let options = PromptOptions {
                held,
                images: ImageLimits {
                    max_images,
                    max_image_bytes: 64,
                },
            };
            assert_same(
                &transforms,
                &Call::SerializeUnseen {
                    request: text.clone().into(),
                    options,
                },
                &format!("serializer unseen #{i} ({options:?})"),
            );
        }
        assert_same(
            &transforms,
            &Call::Serialize { request: text },
            &format!("serializer #{i}"),
        );
    }
}

/// A later request of a conversation: the earlier one with a message after the first changed,
/// removed or added. The continuation the host would find is serialized natively and in wasm
/// (they must agree), and it must say what serializing the whole later request says: the same
/// prompt when it is accepted, a failure when the whole request fails.
#[test]
fn generated_continuations_agree_and_say_what_the_whole_request_says() {
    let transforms = common::transforms();
    let mut rng = Rng(0x5e71_a112_e700_0002);
    let requests: Vec<Value> = fixture_args(TransformKind::Serializer)
        .into_iter()
        .filter_map(|args| args.get("request").cloned())
        .filter(|request| request["messages"].as_array().is_some_and(|m| m.len() >= 2))
        .filter(|request| request.to_string().len() < 20_000)
        .collect();
    assert!(requests.len() >= 5, "{}", requests.len());
    let (mut accepted, mut refused) = (0, 0);
    for i in 0..400 {
        let earlier = rng.pick(&requests).clone();
        let mut later = earlier.clone();
        if let Some(messages) = later["messages"].as_array_mut() {
            let at = 1 + rng.below(messages.len() - 1);
            match rng.below(4) {
                0 => drop(messages.remove(at)),
                1 => {
                    let copy = messages[rng.below(messages.len())].clone();
                    messages.push(copy);
                }
                _ => mutate(&mut rng, &mut messages[at], 1),
            }
        }
        let (earlier, later) = (earlier.to_string(), later.to_string());
        let images = ImageLimits {
            max_images: u32::try_from(rng.below(3)).unwrap_or(0),
            max_image_bytes: 64,
        };
        let whole_options = PromptOptions { held: 0, images };
        let Ok(before) = devin_bridge_serializer::serialize_unseen(&earlier, whole_options) else {
            continue;
        };
        let ends: Vec<u32> = before.marks.iter().map(|mark| mark.request_end).collect();
        let Some(found) = devin_bridge_types::continuation::find(&earlier, &ends, &later) else {
            continue;
        };
        let k = found.messages;
        let resume = Resume {
            messages: u32::try_from(k).unwrap_or(u32::MAX),
            history: before.history[k - 1].clone(),
            trace_chars: before.marks[k - 1].trace_chars,
            tool_uses: before.marks[..k]
                .iter()
                .flat_map(|mark| mark.tool_uses.clone())
                .collect(),
            tool_names: before.tool_names.clone(),
        };
        let options = PromptOptions {
            held: u32::try_from(k + rng.below(3)).unwrap_or(u32::MAX),
            images,
        };
        let call = Call::SerializeResumed {
            continuation: later[found.range.clone()].to_owned(),
            resume: resume.clone(),
            options,
        };
        let label = format!("continuation #{i}");
        assert_same(&transforms, &call, &label);
        let resumed = devin_bridge_serializer::serialize_resumed(
            &later[found.range.clone()],
            &resume,
            options,
        );
        let whole = devin_bridge_serializer::serialize_unseen(&later, options);
        match (resumed, whole) {
            (Ok(resumed), Ok(whole)) => {
                assert_eq!(resumed.text, whole.prompt.text, "{label}");
                assert_eq!(resumed.input_tokens, whole.prompt.input_tokens, "{label}");
                assert_eq!(resumed.id_seed, whole.prompt.id_seed, "{label}");
                assert_eq!(resumed.history, whole.history[k..], "{label}");
                assert_eq!(resumed.images, whole.images, "{label}");
                accepted += 1;
            }
            (Err(_), Err(_)) => refused += 1,
            (resumed, whole) => panic!("{label}: resumed {resumed:?} but whole {whole:?}"),
        }
    }
    assert!(
        accepted >= 50 && refused >= 10,
        "accepted {accepted}, refused {refused}"
    );
}

#[test]
fn generated_agent_outputs_agree() {
    let transforms = common::transforms();
    let mut rng = Rng(0xe4e1_0be0_0000_0002);
    let tool_sets: Vec<String> = fixture_args(TransformKind::Envelope)
        .into_iter()
        .filter_map(|args| args.get("tools").map(Value::to_string))
        .collect();
    assert!(!tool_sets.is_empty());
    let bodies = [
        r#"{"name":"Bash","arguments":{"command":"npm test"}}"#,
        r#"{"name":"Read","arguments":{"file_path":"/src/math.js"}}"#,
        r#"{"name":"Edit","arguments":{"file_path":"/a","old_string":"x","new_string":"y"}}"#,
        r#"{"name":"Nope","arguments":{}}"#,
        r#"{"name":42}"#,
        r#"{"arguments":{}}"#,
        "not json",
        // What the parser repairs: a fence, trailing commas, prose around the object.
        "\n```json\n{\"name\":\"Bash\",\"arguments\":{\"command\":\"ls\"}}\n```\n",
        r#"{"name":"Bash","arguments":{"command":"ls",},}"#,
        r#"Calling: {"name":"Bash","arguments":{"command":"ls"}} now"#,
        r#"{"name":"Bash"} or {"name":"Read"}"#,
    ];
    for i in 0..1000 {
        let mut output = String::new();
        for _ in 0..rng.below(4) {
            match rng.below(3) {
                0 => output.push_str(&format!("<tool>{}</tool>", rng.pick(&bodies))),
                1 => output.push_str(&random_text(&mut rng, 6)),
                _ => output.push_str("\n  "),
            }
        }
        match rng.below(6) {
            // An envelope left unclosed at the end, or a fenced one quoted as an example.
            0 => output.push_str(&format!("<tool>{}", rng.pick(&bodies))),
            1 => output.push_str(&format!("\n```\n<tool>{}</tool>\n```\n", rng.pick(&bodies))),
            _ => {}
        }
        let tools = rng.pick(&tool_sets).clone();
        let call = Call::Parse {
            output: output.clone(),
            tools,
            id_seed: format!("{:024x}", rng.next()),
            max_calls: 1 + rng.below(4) as u32,
        };
        assert_same(&transforms, &call, &format!("envelope #{i}"));
        if let Call::Parse {
            tools,
            id_seed,
            max_calls,
            ..
        } = &call
        {
            // The same output streamed, cut at random character boundaries.
            let stream = Call::ParseStream {
                chunks: cut_at_random(&mut rng, &output),
                tools: tools.clone(),
                id_seed: id_seed.clone(),
                max_calls: *max_calls,
                skip_narration: false,
            };
            assert_same(&transforms, &stream, &format!("envelope stream #{i}"));
        }
        assert_same(
            &transforms,
            &Call::NarratesUnexecutedAction { output },
            &format!("narration #{i}"),
        );
    }
}

#[test]
fn every_parse_fixture_streamed_in_any_cutting_agrees_and_ends_as_parse_answers() {
    let transforms = common::transforms();
    let mut streamed = 0;
    for case in corpus::cases(TransformKind::Envelope).expect("fixtures decode") {
        let Call::Parse {
            output,
            tools,
            id_seed,
            max_calls,
        } = &case.call
        else {
            continue;
        };
        let whole = transforms.call(&case.call).expect("wasm parse");
        let mut rng = Rng(0x57e4_0000_0000_0001);
        let cuttings = [
            vec![output.clone()],
            output.chars().map(String::from).collect(),
            cut_at_random(&mut rng, output),
        ];
        for chunks in cuttings {
            let call = Call::ParseStream {
                chunks,
                tools: tools.clone(),
                id_seed: id_seed.clone(),
                max_calls: *max_calls,
                skip_narration: false,
            };
            assert_same(&transforms, &call, &case.file);
            let Ok(devin_bridge_engine::Output::Streamed(answer)) =
                transforms.call(&call).expect("wasm stream")
            else {
                panic!("{}: a stream answers a streamed parse", case.file);
            };
            // The contract's own check: the released text and the tail are the shown text.
            let json = corpus::answer_json(&Ok(answer.clone().into()));
            devin_bridge_engine::contract::check(&call, &json, &json)
                .unwrap_or_else(|why| panic!("{}: {why}", case.file));
            let end = answer.end.map(|end| end.reply.into());
            assert_eq!(
                end, whole,
                "{}: the stream ends as parse answers",
                case.file
            );
            streamed += 1;
        }
    }
    assert!(streamed >= 30, "only {streamed} streamed fixtures");
}

/// `text` cut into pieces at random character boundaries (some empty).
fn cut_at_random(rng: &mut Rng, text: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut cut = rng.below(8).min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (chunk, after) = rest.split_at(cut);
        chunks.push(chunk.to_owned());
        rest = after;
    }
    chunks
}

#[test]
fn generated_reviews_agree() {
    let transforms = common::transforms();
    let mut rng = Rng(0x55e0_0000_0000_0004);
    let review = json!({
        "verdict": "request_changes",
        "summary": "Two findings.",
        "findings": [
            {"severity": "high", "file": "src/lib.rs", "line": 12, "title": "Bug", "body": "It breaks."},
            {"severity": "info", "file": "README.md", "line": null, "title": "Nit", "body": "{ braces }"}
        ]
    });
    for i in 0..500 {
        let mut value = review.clone();
        for _ in 0..rng.below(3) {
            mutate(&mut rng, &mut value, 0);
        }
        let output = match rng.below(3) {
            0 => value.to_string(),
            1 => format!("{}\n```json\n{value:#}\n```", random_text(&mut rng, 6)),
            _ => format!(
                "{} {value} {}",
                random_text(&mut rng, 6),
                random_text(&mut rng, 4)
            ),
        };
        assert_same(
            &transforms,
            &Call::ParseReview { output },
            &format!("review #{i}"),
        );
    }
}

#[test]
fn generated_renders_agree() {
    let transforms = common::transforms();
    let mut rng = Rng(0x55e0_0000_0000_0003);
    for i in 0..500 {
        let text = random_text(&mut rng, 12);
        let usage = Usage {
            input_tokens: rng.below(1 << 20) as u32,
            output_tokens: rng.below(1 << 16) as u32,
            cache_read_input_tokens: rng.below(1 << 20) as u32,
            cache_creation_input_tokens: rng.below(1 << 12) as u32,
        };
        let head = MessageHead {
            id: format!("msg_{i:04}"),
            model: random_text(&mut rng, 2),
            usage,
        };
        let reply = if rng.below(2) == 0 {
            Reply::Text(text.clone())
        } else {
            // One to four calls, each input sometimes an object, sometimes not, and prose
            // before some of them.
            Reply::Tools(
                (0..1 + rng.below(4))
                    .flat_map(|n| {
                        let prose = (rng.below(3) == 0).then(|| ReplyBlock::Text(text.clone()));
                        let call = ReplyBlock::Call(ToolCall {
                            id: format!("devin_call_{i:012x}{n:04x}"),
                            name: "Bash".into(),
                            input: if n % 2 == 0 {
                                text.clone()
                            } else {
                                json!({"command": text}).to_string()
                            },
                        });
                        prose.into_iter().chain([call])
                    })
                    .collect(),
            )
        };
        let status = *rng.pick(&[400u16, 401, 403, 404, 413, 429, 500, 502, 504, 529, 0, 999]);
        let failure = Failure {
            code: "generated".into(),
            message: text.clone(),
            status,
            repairable: false,
        };
        // Agent error text: the generated words plus paths, vendor names and control bytes.
        let raw = format!(
            "{text} {} {}",
            rng.pick(&[
                "/home/u/.x",
                "C:\\k",
                "Cognition",
                "\u{1b}[2J",
                "\u{202E}",
                "\0"
            ]),
            random_text(&mut rng, 40)
        );
        let safeguard = random_safeguard(&mut rng, &reply, &text);
        for call in [
            Call::StreamStart { head: head.clone() },
            Call::StreamFinish {
                reply: reply.clone(),
                usage,
                safeguard: safeguard.clone(),
            },
            Call::RenderStream {
                head: head.clone(),
                reply: reply.clone(),
                safeguard: safeguard.clone(),
            },
            Call::RenderJson {
                head,
                reply,
                safeguard,
            },
            Call::ErrorEvent {
                failure: failure.clone(),
            },
            Call::ErrorBody { failure },
            Call::AgentErrorMessage { raw },
        ] {
            assert_same(&transforms, &call, &format!("sse #{i}"));
        }
    }
}

/// No safeguard, or any status the judge can answer: verdicts for the reply's calls (and, now
/// and then, one id twice), with `text` as explanations and reasons.
fn random_safeguard(rng: &mut Rng, reply: &Reply, text: &str) -> Option<SafeguardStatus> {
    let ids: Vec<String> = reply.calls().map(|call| call.id.clone()).collect();
    match rng.below(5) {
        0 => None,
        1 => Some(SafeguardStatus::Unsupported),
        2 => Some(SafeguardStatus::Unavailable(text.to_owned())),
        _ => {
            let mut verdicts: Vec<ToolVerdict> = ids
                .into_iter()
                .map(|id| {
                    let verdict = match rng.below(4) {
                        0 => CallVerdict::Skipped,
                        1 => CallVerdict::Unavailable(text.to_owned()),
                        n => CallVerdict::Evaluated(Evaluation {
                            outcome: if n == 2 {
                                SafeguardOutcome::Flagged
                            } else {
                                SafeguardOutcome::NotFlagged
                            },
                            explanation: text.to_owned(),
                            cited_rule: (rng.below(2) == 0)
                                .then(|| format!("auto_mode.allow.{}", rng.below(9))),
                        }),
                    };
                    ToolVerdict { id, verdict }
                })
                .collect();
            if rng.below(6) == 0 {
                if let Some(first) = verdicts.first().cloned() {
                    verdicts.push(first);
                }
            }
            Some(SafeguardStatus::Available(verdicts))
        }
    }
}

/// Event streams of random lines (every line ending, fields, comments, bytes that are not
/// UTF-8) cut at random points, fed chunk by chunk as the worker reads them.
#[test]
fn generated_event_streams_agree() {
    let transforms = common::transforms();
    let mut rng = Rng(0x55e0_0000_0000_0005);
    let lines: &[&[u8]] = &[
        b"data: {\"type\":\"ADDED\"}",
        b"data",
        b"data:",
        b"data:  two",
        b"event: modified",
        b"event:",
        b"id: 17",
        b"id: a\0b",
        b"retry: 100",
        b": keep-alive",
        b"unknown: x",
        b"",
        b"data: \xc3\xa9t\xc3\xa9",
        b"data: \xff",
        b"data: \xf0\x9f",
    ];
    let endings: &[&[u8]] = &[b"\n", b"\r\n", b"\r"];
    for i in 0..400 {
        let mut stream = Vec::new();
        for _ in 0..rng.below(24) {
            stream.extend_from_slice(lines[rng.below(lines.len())]);
            stream.extend_from_slice(endings[rng.below(endings.len())]);
        }
        let limit = *rng.pick(&[8u32, 32, 64, 1 << 16]);
        let mut tail = Vec::new();
        let mut rest = stream.as_slice();
        while !rest.is_empty() {
            let (chunk, after) = rest.split_at(1 + rng.below(rest.len()));
            rest = after;
            let mut buffer = std::mem::take(&mut tail);
            buffer.extend_from_slice(chunk);
            let call = Call::ParseEvents {
                buffer: buffer.clone(),
                max_event_bytes: limit,
            };
            assert_same(&transforms, &call, &format!("event stream #{i}"));
            match devin_bridge_sse::parse_events(&buffer, limit) {
                Ok(frames) => tail = frames.tail,
                Err(_) => break,
            }
        }
    }
}

/// Catalogs mutated from the shipped one (fields dropped, retyped, duplicated): the listing and
/// the context windows agree natively and in wasm, and a catalog that lists is one whose
/// windows are read.
#[test]
fn generated_catalogs_agree() {
    let transforms = common::transforms();
    let mut rng = Rng(0x0de1_a11a_5000_0006);
    let shipped: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../policies/models.json"
        ))
        .expect("catalog"),
    )
    .expect("the shipped catalog is JSON");
    let mut listed = 0;
    for i in 0..300 {
        let mut catalog = shipped.clone();
        for _ in 0..=rng.below(3) {
            mutate(&mut rng, &mut catalog, 0);
        }
        let catalog = catalog.to_string();
        let windows = Call::ContextWindows {
            catalog: catalog.clone(),
        };
        assert_same(&transforms, &windows, &format!("windows #{i}"));
        let listing = Call::ListModels {
            catalog,
            vision: false,
        };
        assert_same(&transforms, &listing, &format!("listing #{i}"));
        assert_eq!(
            windows.run_native().is_ok(),
            listing.run_native().is_ok(),
            "catalog #{i}"
        );
        listed += usize::from(listing.run_native().is_ok());
    }
    assert!(listed >= 30, "only {listed} mutated catalogs list");
}

#[test]
fn generated_model_names_agree() {
    let transforms = common::transforms();
    let mut rng = Rng(0x0de1_a11a_5000_0004);
    let catalog = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../policies/models.json"
    ))
    .expect("catalog");
    let pieces = [
        "swe",
        "1",
        "6",
        "7",
        "fast",
        "lightning",
        "kimi",
        "k3",
        "glm",
        "5",
        "2",
        "muse",
        "wonder",
        "adaptive",
        "fusion",
        "x",
    ];
    let separators = ["-", ".", "_", "", " ", "/"];
    for i in 0..800 {
        let mut name = String::new();
        for j in 0..=rng.below(4) {
            if j > 0 {
                let separator: &&str = rng.pick(&separators[..]);
                name.push_str(separator);
            }
            let piece = *rng.pick(&pieces);
            name.push_str(&if rng.below(4) == 0 {
                piece.to_uppercase()
            } else {
                piece.to_owned()
            });
        }
        let reference = if rng.below(2) == 0 {
            format!("devin-cli-agentic/{name}")
        } else {
            name.clone()
        };
        assert_same(
            &transforms,
            &Call::Resolve {
                requested: name,
                catalog: catalog.clone(),
            },
            &format!("resolve #{i}"),
        );
        assert_same(
            &transforms,
            &Call::Validate {
                reference: reference.clone(),
                catalog: catalog.clone(),
            },
            &format!("validate #{i}"),
        );
        let settings = vec![("BRIDGE_PRIMARY_MODEL".to_owned(), reference)];
        assert_same(
            &transforms,
            &Call::ClientEnvironment {
                settings,
                catalog: catalog.clone(),
            },
            &format!("env #{i}"),
        );
    }
}

/// Tool calls built from ordinary and hostile pieces (shell words, operators, quotes, paths
/// inside and outside the project, look-alike characters, files that decide what runs),
/// classifier contexts with and without the user's rules, plus contexts that are not JSON, and
/// for every other case a conversation of earlier calls: the judge's verdicts agree natively
/// and in wasm.
#[test]
fn generated_tool_calls_are_judged_the_same_natively_and_in_wasm() {
    let transforms = common::transforms();
    let mut rng = Rng(0x5afe_6a4d_0000_0007);
    let words = [
        "git",
        "status",
        "diff",
        "ls",
        "-la",
        "cat",
        "rm",
        "-rf",
        "curl",
        "npm",
        "test",
        "cargo",
        "/proj/src",
        "/etc/passwd",
        "~/.ssh/id_rsa",
        "../..",
        "'a b'",
        "\"$HOME\"",
        "$(id)",
        "`id`",
        "|",
        "&&",
        ";",
        "||",
        ">",
        "/dev/null",
        "2>&1",
        "\n",
        "sudo",
        "ｒｍ",
        "#",
        "find",
        "-delete",
        "node",
        "-e",
        "x.js",
        "grep",
        "-rn",
        "TODO",
        "package.json",
        "Makefile",
        "make",
        "build.rs",
    ];
    let tools = [
        "Bash",
        "Read",
        "Edit",
        "Write",
        "Glob",
        "Grep",
        "WebFetch",
        "mcp__x__y",
    ];
    let contexts = [
        json!({"live_cwd": "/proj", "home_dir": "/home/u",
               "trusted_directories": {"primary": {"path": "/proj"}}})
        .to_string(),
        json!({"live_cwd": "/proj", "home_dir": "/home/u",
               "trusted_directories": {"primary": {"path": "/proj"}, "additional": ["/lib"]},
               "auto_mode": {"allow": ["Bash(npm test:*)"], "soft_deny": ["Bash(git push:*)"]},
               "classify_all_shell": false, "restricted": false})
        .to_string(),
        json!({"live_cwd": "/proj", "restricted": true}).to_string(),
        "not json".to_owned(),
        json!({"live_cwd": 7}).to_string(),
    ];
    for i in 0..600 {
        // Every other case has a conversation before the reply: what it wrote decides runs.
        let earlier_count = if i % 2 == 0 { 0 } else { rng.below(6) };
        let calls: Vec<ToolCall> = (0..rng.below(4) + earlier_count)
            .map(|n| {
                let text: Vec<&str> = (0..1 + rng.below(8)).map(|_| *rng.pick(&words)).collect();
                let text = text.join(" ");
                let name = *rng.pick(&tools);
                let input = match name {
                    "Bash" => json!({ "command": text }),
                    "Grep" | "Glob" => json!({ "pattern": text, "path": rng.pick(&words) }),
                    _ => json!({ "file_path": text, "url": text }),
                };
                ToolCall {
                    id: format!("toolu_{i:06}_{n}"),
                    name: name.to_owned(),
                    input: input.to_string(),
                }
            })
            .collect();
        let (earlier_calls, calls) = calls.split_at(earlier_count.min(calls.len()));
        let call = Call::Judge {
            calls: calls.to_vec(),
            classifier_context: rng.pick(&contexts).clone(),
            earlier_calls: earlier_calls.to_vec(),
        };
        assert_same(&transforms, &call, &format!("judge #{i}"));
    }
}
