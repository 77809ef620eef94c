//! `/metrics`: the request counters and what `/healthz` reports, in the Prometheus
//! (OpenMetrics) text format, encoded by `prometheus-client`.
//!
//! The metrics are kept in three groups (counters, the streaming histograms, the gauges read
//! at render time), each registered by its own step; the order of those steps is the order
//! of the exposition.

use devin_bridge_types::Recovery;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

use super::resident::Resident;

/// Buckets of the streaming latencies, in seconds.
const STREAM_SECONDS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0,
];
/// Buckets of the bytes held back at the end of an attempt.
const HELD_BACK_BYTES: [f64; 8] = [0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 16384.0];

/// The `Content-Type` of the encoding.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of one request count. `path` is one of the bridge's routes (anything else is
/// `other`), so the label set stays bounded whatever clients send.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    pub path: &'static str,
    pub status: u16,
}

/// Labels of a turn's usage count: whether the agent reported its token counts or the bridge
/// estimated them.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct UsageLabels {
    pub source: &'static str,
}

/// Labels of a turn's reported usage by its source: `turn_stats` (the turn's own sums),
/// `last_request` (the prompt result's counts, which cover the turn's last model request only)
/// or `context_size` (a `usage_update`'s context size as the input).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct UsageSourceLabels {
    pub source: &'static str,
}

/// Labels of the agent's own notices kept out of replies: `display_message` (a display-only
/// status line) or `compaction` (the agent compacted its context).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct NoticeLabels {
    pub kind: &'static str,
}

/// Labels of a turn's model check: whether the model that answered (as the agent reported
/// it) is the one the request named (`matched`, `mismatched`, or `unreported`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ModelCheckLabels {
    pub outcome: &'static str,
}

/// Labels of a turn's effort: the effort the request asked for (one of Claude Code's levels,
/// `none`, or `other`, so the label set stays bounded whatever clients send) and how it was
/// applied (`thought_level`, `variant`, `ignored`, or `none` when none was asked for).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EffortLabels {
    pub effort: &'static str,
    pub applied: &'static str,
}

/// The metric label of a requested effort: itself when it is one of Claude Code's levels,
/// `none` when the request asked for none, else `other`.
pub(crate) fn effort_label(effort: Option<&str>) -> &'static str {
    match effort {
        None => "none",
        Some(effort) => devin_bridge_agent::devin::options::EFFORT_LEVELS
            .into_iter()
            .find(|level| *level == effort)
            .unwrap_or("other"),
    }
}

/// Labels of one safeguard verdict: its outcome (`flagged`, `not_flagged`, `skipped`,
/// `unavailable`) and the tool, by one of Claude Code's own tool names or `mcp` / `other`,
/// so the label set stays bounded whatever tools a client declares.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct VerdictLabels {
    pub outcome: &'static str,
    pub tool: &'static str,
}

/// Labels of a `/v1/messages` request by what it asked for: `main_turn` (a conversation's turn
/// with tools), `subagent_turn` (the same from a subagent, which names its agent id),
/// `side_request` (no tools: a title, a summary, a probe) or `resend` (the same request again,
/// answered by its earlier turn).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MessageLabels {
    pub kind: &'static str,
}

/// Labels of a resend that joined a turn: `running` (it waited for the turn in flight) or
/// `finished` (it got the answer of a turn that had just finished).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResendLabels {
    pub joined: &'static str,
}

/// Labels of a side request (a request without tools): what it asked for (`session_title`, or
/// `unknown` when the serializer recognized nothing) and who answered it (`local`: the bridge,
/// without an agent turn; `agent`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SideRequestLabels {
    pub purpose: &'static str,
    pub answered: &'static str,
}

/// Labels of an envelope recovery: the kind of defect the envelope parser repaired in an
/// accepted reply (`unclosed_envelope`, `fenced_json`, `trailing_comma`, `stray_prose`: a
/// closed set, the WIT's).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RecoveryLabels {
    pub kind: &'static str,
}

/// Claude Code's tools, the only tool names a metric label takes verbatim.
const KNOWN_TOOLS: [&str; 17] = [
    "Bash",
    "BashOutput",
    "Edit",
    "ExitPlanMode",
    "Glob",
    "Grep",
    "KillShell",
    "LS",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Read",
    "Task",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "Write",
];

/// The metric label of a tool name: itself when it is one of Claude Code's tools, `mcp` for
/// an MCP tool, else `other`.
pub(crate) fn tool_label(name: &str) -> &'static str {
    match KNOWN_TOOLS.iter().find(|known| **known == name) {
        Some(known) => known,
        None if name.starts_with("mcp__") => "mcp",
        None => "other",
    }
}

/// Every metric the bridge exports.
pub(crate) struct Metrics {
    registry: Registry,
    counters: Counters,
    stream: StreamHistograms,
    gauges: Gauges,
}

/// The counters, by request and by turn.
struct Counters {
    requests: Family<RequestLabels, Counter>,
    turn_usage: Family<UsageLabels, Counter>,
    turn_usage_sources: Family<UsageSourceLabels, Counter>,
    agent_notices: Family<NoticeLabels, Counter>,
    turn_model: Family<ModelCheckLabels, Counter>,
    turn_effort: Family<EffortLabels, Counter>,
    safeguard_verdicts: Family<VerdictLabels, Counter>,
    resends: Family<ResendLabels, Counter>,
    messages: Family<MessageLabels, Counter>,
    side_requests: Family<SideRequestLabels, Counter>,
    envelope_recoveries: Family<RecoveryLabels, Counter>,
}

/// Streamed turns: seconds from the turn's start to its first text byte sent, and to its
/// last byte sent; bytes of shown text held back until the end of an attempt.
struct StreamHistograms {
    first_text: Histogram,
    last_byte: Histogram,
    held_back: Histogram,
}

/// What runs now, set when the metrics are rendered.
struct Gauges {
    turns_in_flight: Gauge,
    agent_processes: Gauge,
    /// Registered only when the resident transport is in use.
    resident_processes: Gauge,
    resident_sessions: Gauge,
    resident_kept_bytes: Gauge,
}

/// Registers `metric` as `name` with its help text; the handle that updates it.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Counters {
    fn register(registry: &mut Registry) -> Self {
        Self {
            requests: registered(
                registry,
                "requests",
                "HTTP requests answered, by route and status",
                Family::default(),
            ),
            turn_usage: registered(
                registry,
                "turn_usage",
                "Answered turns by where their token counts came from (reported by the agent, or estimated)",
                Family::default(),
            ),
            turn_usage_sources: registered(
                registry,
                "turn_usage_reported",
                "Answered turns whose token counts the agent reported, by source (turn_stats: the turn's sums; last_request: its last model request only; context_size: the context size as the input)",
                Family::default(),
            ),
            agent_notices: registered(
                registry,
                "agent_notices",
                "The agent's own notices kept out of replies, by kind (display_message, compaction)",
                Family::default(),
            ),
            turn_model: registered(
                registry,
                "turn_model",
                "Agent turns by whether the model that answered is the one the request named (matched, mismatched, unreported)",
                Family::default(),
            ),
            turn_effort: registered(
                registry,
                "turn_effort",
                "Agent turns by the effort the request asked for (low, medium, high, xhigh, max, none, other) and how it was applied (thought_level, variant, ignored, none)",
                Family::default(),
            ),
            safeguard_verdicts: registered(
                registry,
                "safeguard_verdicts",
                "Tool calls judged for Claude Code's auto mode, by outcome (flagged, not_flagged, skipped, unavailable) and tool",
                Family::default(),
            ),
            resends: registered(
                registry,
                "resends",
                "Requests identical to a running or just-finished turn (same conversation and body), answered by that turn instead of a new one, by what they joined (running, finished)",
                Family::default(),
            ),
            messages: registered(
                registry,
                "messages",
                "Messages requests by what they asked for (main_turn, subagent_turn, side_request, resend)",
                Family::default(),
            ),
            side_requests: registered(
                registry,
                "side_requests",
                "Requests without tools by what they asked for (session_title, unknown) and who answered them (local, agent)",
                Family::default(),
            ),
            envelope_recoveries: registered(
                registry,
                "envelope_recoveries",
                "Defects of the agent's tool envelopes repaired instead of refused, in accepted replies, by kind (unclosed_envelope, fenced_json, trailing_comma, stray_prose)",
                Family::default(),
            ),
        }
    }
}

impl StreamHistograms {
    fn register(registry: &mut Registry) -> Self {
        Self {
            first_text: registered(
                registry,
                "stream_first_text_seconds",
                "Streamed turns: seconds from the turn's start to the first text byte sent to the client",
                Histogram::new(STREAM_SECONDS),
            ),
            last_byte: registered(
                registry,
                "stream_last_byte_seconds",
                "Streamed turns: seconds from the turn's start to the last byte sent to the client",
                Histogram::new(STREAM_SECONDS),
            ),
            held_back: registered(
                registry,
                "stream_held_back_bytes",
                "Streamed turns: bytes of shown text the envelope stream held back until the attempt ended",
                Histogram::new(HELD_BACK_BYTES),
            ),
        }
    }
}

impl Gauges {
    /// The gauges of every mode of transport; the resident ones are registered by
    /// [`Gauges::register_resident`].
    fn register(registry: &mut Registry) -> Self {
        Self {
            turns_in_flight: registered(
                registry,
                "turns_in_flight",
                "Agent turns running now",
                Gauge::default(),
            ),
            agent_processes: registered(
                registry,
                "agent_processes",
                "Agent processes running now",
                Gauge::default(),
            ),
            resident_processes: Gauge::default(),
            resident_sessions: Gauge::default(),
            resident_kept_bytes: Gauge::default(),
        }
    }

    /// The resident transport's gauges and counters, under `resident_`.
    fn register_resident(&self, registry: &mut Registry, resident: &Resident) {
        let sub = registry.sub_registry_with_prefix("resident");
        sub.register(
            "processes",
            "Resident agent processes running now",
            self.resident_processes.clone(),
        );
        sub.register(
            "sessions",
            "Conversation sessions kept now",
            self.resident_sessions.clone(),
        );
        sub.register(
            "kept_bytes",
            "Bytes of request bodies the sessions keep to parse the next request only where it differs",
            self.resident_kept_bytes.clone(),
        );
        sub.register(
            "processes_started",
            "Resident agent processes started",
            resident.processes_started().clone(),
        );
        let stats = &resident.stats;
        for (name, help, counter) in [
            (
                "hits",
                "Turns that continued their conversation's session",
                &stats.hits,
            ),
            (
                "misses",
                "Turns that started a conversation's first session",
                &stats.misses,
            ),
            (
                "forks",
                "Turns whose history no session of their conversation held",
                &stats.forks,
            ),
            (
                "rebuilds",
                "Turns whose session's process had died",
                &stats.rebuilds,
            ),
            (
                "replays",
                "Whole prompts sent again to rebuild a session",
                &stats.replays,
            ),
            (
                "ephemeral",
                "Turns in an ephemeral session",
                &stats.ephemeral,
            ),
            (
                "resumed",
                "Requests serialized from where they stop repeating the session's last request",
                &stats.resumed,
            ),
            (
                "subagents_ended",
                "Subagent sessions released because their conversation ended",
                &stats.subagents_ended,
            ),
            ("prompts", "Prompts sent to resident agents", &stats.prompts),
            (
                "prompt_bytes",
                "Bytes of the prompts sent to resident agents",
                &stats.prompt_bytes,
            ),
        ] {
            sub.register(name, help, counter.clone());
        }
    }
}

impl Metrics {
    /// The registry, with the resident transport's counters when it is in use.
    pub(crate) fn new(resident: Option<&Resident>) -> Self {
        let mut registry = Registry::with_prefix("devin_bridge");
        // Registered in this order, the order of the exposition.
        let counters = Counters::register(&mut registry);
        let stream = StreamHistograms::register(&mut registry);
        let gauges = Gauges::register(&mut registry);
        if let Some(resident) = resident {
            gauges.register_resident(&mut registry, resident);
        }
        Self {
            registry,
            counters,
            stream,
            gauges,
        }
    }

    /// Counts one answered request.
    pub(crate) fn count_request(&self, path: &str, status: u16) {
        let path = match path {
            "/v1/messages" => "/v1/messages",
            "/v1/messages/count_tokens" => "/v1/messages/count_tokens",
            "/v1/models" => "/v1/models",
            "/healthz" => "/healthz",
            "/metrics" => "/metrics",
            _ => "other",
        };
        self.counters
            .requests
            .get_or_create(&RequestLabels { path, status })
            .inc();
    }

    /// Counts one answered turn by the source of its usage: `reported` or `estimated`.
    pub(crate) fn count_usage(&self, reported: bool) {
        let source = if reported { "reported" } else { "estimated" };
        self.counters
            .turn_usage
            .get_or_create(&UsageLabels { source })
            .inc();
    }

    /// Counts one answered turn whose usage the agent reported, by its source.
    pub(crate) fn count_usage_source(&self, source: &'static str) {
        self.counters
            .turn_usage_sources
            .get_or_create(&UsageSourceLabels { source })
            .inc();
    }

    /// Counts `count` notices of `kind` (`display_message`, `compaction`) an agent turn kept
    /// out of its reply.
    pub(crate) fn count_notices(&self, kind: &'static str, count: u32) {
        if count > 0 {
            self.counters
                .agent_notices
                .get_or_create(&NoticeLabels { kind })
                .inc_by(u64::from(count));
        }
    }

    /// Counts one agent turn by its model check: `matched`, `mismatched` or `unreported`.
    pub(crate) fn count_model_check(&self, outcome: &'static str) {
        self.counters
            .turn_model
            .get_or_create(&ModelCheckLabels { outcome })
            .inc();
    }

    /// Counts one agent turn by the effort its request asked for and how it was applied
    /// (`thought_level`, `variant`, `ignored` or `none`).
    pub(crate) fn count_effort(&self, effort: Option<&str>, applied: &'static str) {
        let effort = effort_label(effort);
        self.counters
            .turn_effort
            .get_or_create(&EffortLabels { effort, applied })
            .inc();
    }

    /// Counts one messages request by its kind (see [`MessageLabels`]).
    pub(crate) fn count_message(&self, kind: &'static str) {
        self.counters
            .messages
            .get_or_create(&MessageLabels { kind })
            .inc();
    }

    /// Counts one side request by its purpose and who answered it (see
    /// [`SideRequestLabels`]).
    pub(crate) fn count_side_request(&self, purpose: &'static str, answered: &'static str) {
        self.counters
            .side_requests
            .get_or_create(&SideRequestLabels { purpose, answered })
            .inc();
    }

    /// Counts one resend by what it joined: `running` or `finished`.
    pub(crate) fn count_resend(&self, joined: &'static str) {
        self.counters
            .resends
            .get_or_create(&ResendLabels { joined })
            .inc();
    }

    /// A streamed response sent its first text byte `seconds` after its turn started.
    pub(crate) fn observe_first_text(&self, seconds: f64) {
        self.stream.first_text.observe(seconds);
    }

    /// A streamed response sent its last byte `seconds` after its turn started.
    pub(crate) fn observe_last_byte(&self, seconds: f64) {
        self.stream.last_byte.observe(seconds);
    }

    /// A streamed attempt ended with `bytes` of shown text still held back.
    pub(crate) fn observe_held_back(&self, bytes: usize) {
        self.stream.held_back.observe(bytes as f64);
    }

    /// Counts one defect the envelope parser repaired in an accepted reply.
    pub(crate) fn count_recovery(&self, recovery: Recovery) {
        self.counters
            .envelope_recoveries
            .get_or_create(&RecoveryLabels {
                kind: recovery.as_str(),
            })
            .inc();
    }

    /// Counts one safeguard verdict.
    pub(crate) fn count_verdict(&self, outcome: &'static str, tool: &str) {
        let tool = tool_label(tool);
        self.counters
            .safeguard_verdicts
            .get_or_create(&VerdictLabels { outcome, tool })
            .inc();
    }

    /// The text exposition, with the gauges read now.
    pub(crate) fn render(
        &self,
        turns_in_flight: usize,
        agent_processes: usize,
        resident: Option<&Resident>,
    ) -> String {
        let set = |gauge: &Gauge, value: usize| {
            gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
        };
        set(&self.gauges.turns_in_flight, turns_in_flight);
        set(&self.gauges.agent_processes, agent_processes);
        if let Some(resident) = resident {
            set(&self.gauges.resident_processes, resident.live_processes());
            set(&self.gauges.resident_sessions, resident.sessions());
            set(&self.gauges.resident_kept_bytes, resident.kept_bytes());
        }
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

#[cfg(test)]
mod effort_tests {
    use super::*;

    #[test]
    fn effort_labels_are_bounded() {
        for level in ["low", "medium", "high", "xhigh", "max"] {
            assert_eq!(effort_label(Some(level)), level);
        }
        assert_eq!(effort_label(None), "none");
        for other in ["turbo", "HIGH", "", "none"] {
            assert_eq!(effort_label(Some(other)), "other", "{other}");
        }
    }
}

#[cfg(test)]
mod recovery_tests {
    use super::*;

    #[test]
    fn recoveries_are_counted_by_kind() {
        let metrics = Metrics::new(None);
        metrics.count_recovery(Recovery::UnclosedEnvelope);
        metrics.count_recovery(Recovery::UnclosedEnvelope);
        metrics.count_recovery(Recovery::TrailingComma);
        let text = metrics.render(0, 0, None);
        assert!(
            text.contains("devin_bridge_envelope_recoveries_total{kind=\"unclosed_envelope\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("devin_bridge_envelope_recoveries_total{kind=\"trailing_comma\"} 1"),
            "{text}"
        );
        assert!(!text.contains("kind=\"fenced_json\""), "{text}");
    }

    #[test]
    fn streaming_latencies_and_held_back_bytes_are_histograms() {
        let metrics = Metrics::new(None);
        metrics.observe_first_text(0.02);
        metrics.observe_last_byte(3.0);
        metrics.observe_held_back(2);
        let text = metrics.render(0, 0, None);
        assert!(
            text.contains("devin_bridge_stream_first_text_seconds_bucket{le=\"0.025\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("devin_bridge_stream_last_byte_seconds_bucket{le=\"2.5\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("devin_bridge_stream_held_back_bytes_sum 2.0"),
            "{text}"
        );
    }
}

#[cfg(test)]
mod exposition_tests {
    use super::*;

    #[test]
    fn every_family_is_exposed_once_in_registration_order() {
        let metrics = Metrics::new(None);
        // A family is exposed once it has a labelled member.
        metrics.count_request("/v1/messages", 200);
        metrics.count_usage(true);
        metrics.count_usage_source("turn_stats");
        metrics.count_notices("compaction", 1);
        metrics.count_model_check("matched");
        metrics.count_effort(None, "none");
        metrics.count_verdict("flagged", "Bash");
        metrics.count_resend("running");
        metrics.count_message("main_turn");
        metrics.count_side_request("session_title", "local");
        metrics.count_recovery(Recovery::FencedJson);
        let text = metrics.render(0, 0, None);
        let names = [
            "requests",
            "turn_usage",
            "turn_usage_reported",
            "agent_notices",
            "turn_model",
            "turn_effort",
            "safeguard_verdicts",
            "resends",
            "messages",
            "side_requests",
            "envelope_recoveries",
            "stream_first_text_seconds",
            "stream_last_byte_seconds",
            "stream_held_back_bytes",
            "turns_in_flight",
            "agent_processes",
        ];
        let mut last = 0;
        for name in names {
            let help = format!("# HELP devin_bridge_{name} ");
            assert_eq!(text.matches(&help).count(), 1, "{name}: {text}");
            let at = text.find(&help).expect("counted above");
            assert!(at >= last, "{name} is out of order: {text}");
            last = at;
        }
        assert!(!text.contains("devin_bridge_resident_"), "{text}");
    }
}
