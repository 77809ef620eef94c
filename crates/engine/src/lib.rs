//! The wasm runtime that every transform of untrusted data runs in.
//!
//! - `runtime`: one wasmtime engine (component model, pooling allocator, epoch deadlines,
//!   a memory cap per store) and the per-call store;
//! - `cache`: precompiled components on disk, keyed by component sha256 and engine hash and
//!   authenticated with an HMAC under a private key;
//! - `loader`: bytes -> checked (pin, imports: type definitions only), compiled,
//!   pre-instantiated component;
//! - `bindings`: typed calls into each transform's WIT interface, generated from one table of
//!   the WIT functions (`bindings::functions`); the records cross as `devin-bridge-types`'
//!   own types;
//! - `builtin`: the components the binary carries, for policies that name none;
//! - `registry`: the live set of transforms with atomic hot swap, honouring the policy's pins;
//! - `corpus`: the golden self-test every candidate passes before it serves (shipped with the
//!   component set, or embedded);
//! - `contract`: what "passes" means: the promises of the WIT contract, not identical bytes.

mod bindings;
pub mod builtin;
mod cache;
mod calls;
pub mod config;
pub mod contract;
pub mod corpus;
mod loader;
mod memo;
mod registry;
mod runtime;
mod status;
mod stream;
mod turn;

pub use cache::{CompileCache, KEY_FILE as CACHE_KEY_FILE};
pub use calls::{Component, Serving, TransformCalls};
pub use config::{
    ComponentLocation, ComponentPlace, ComponentSource, ComponentsTable, EngineConfig,
    EngineSection, RuntimeLimits,
};
pub use corpus::{self_test, Corpus, SelfTestReport};
/// The calls as data, and the transforms' names: defined without wasm in `devin-bridge-calls`.
pub use devin_bridge_calls::{
    Answer, Call, Output, StreamedEnd, StreamedParse, TransformKind, UnknownTransform,
};
/// The WIT records, as the mode crates name them through the engine.
pub use devin_bridge_types::{
    Image, ImageLimits, LocalAnswer, MessageHead, MessageMark, Prompt, PromptOptions,
    ResolvedModel, Resume, ResumedPrompt, SseEvent, SseFrames, UnseenPrompt,
};
pub use loader::{sha256_hex, Loaded, Warm};
pub use registry::{ComponentInfo, SwapReport, Transforms};
pub use runtime::{Runtime, RuntimeConfig};
pub use status::{is_error_status, INVALID_STATUS_CODE};
pub use stream::{ReplyStream, StreamFinish};
pub use turn::Turn;

/// Loads one transform component from `location` on a runtime of its own with `limits` (from
/// the compile cache when it is warm), for commands that call a single transform directly
/// rather than serve the whole set.
pub fn load_one(
    location: &ComponentLocation,
    limits: RuntimeLimits,
    kind: TransformKind,
) -> Result<Component, EngineError> {
    let runtime = Runtime::new(limits.into())?;
    let cache = match CompileCache::default_dir() {
        Some(dir) => CompileCache::open(&dir).unwrap_or_else(|_| CompileCache::disabled()),
        None => CompileCache::disabled(),
    };
    let loaded = Loaded::from_location(&runtime, &cache, kind, location)?;
    Ok(Component {
        runtime,
        loaded: std::sync::Arc::new(loaded),
    })
}

/// Everything that can go wrong loading or calling a component.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    UnknownTransform(#[from] UnknownTransform),
    #[error("this devin-bridge was built without its transform components (no built-in {transforms}) and the policy names no file for them: build the binary with `cargo xtask build` or `cargo xtask dist`, or name each file in the policy's [components.<transform>] path (or set DEVIN_BRIDGE_COMPONENTS to a directory of them)")]
    NotBuiltIn { transforms: String },
    #[error("cannot read component {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("component for {transform} has sha256 {actual}, but the policy pins {expected}")]
    PinMismatch {
        transform: TransformKind,
        expected: String,
        actual: String,
    },
    #[error("{transform} is pinned by the running policy to sha256 {pinned}, but the candidate has sha256 {candidate}; to serve it, change `[components.{transform}] sha256` in the policy and send SIGHUP (or restart)")]
    PinnedSwap {
        transform: TransformKind,
        pinned: String,
        candidate: String,
    },
    #[error("component for {transform} does not compile: {message}")]
    Compile {
        transform: TransformKind,
        message: String,
    },
    #[error("component for {transform} does not export the {transform} interface of devin-bridge:transforms@0.1.0: {message}")]
    Interface {
        transform: TransformKind,
        message: String,
    },
    #[error("component for {transform} imports something the host does not provide: {message}")]
    Imports {
        transform: TransformKind,
        message: String,
    },
    #[error("component for {transform} failed its self-test: {message}")]
    SelfTest {
        transform: TransformKind,
        message: String,
    },
    #[error("golden corpus of {transform}: {message}")]
    Corpus {
        transform: TransformKind,
        message: String,
    },
    #[error("{transform} exceeded its {limit_ms} ms deadline")]
    Timeout {
        transform: TransformKind,
        limit_ms: u64,
    },
    #[error("{transform} exceeded its memory cap of {limit_mib} MiB")]
    OutOfMemory {
        transform: TransformKind,
        limit_mib: u32,
    },
    #[error("{transform} used up its fuel")]
    OutOfFuel { transform: TransformKind },
    #[error("{transform} trapped: {message}")]
    Trap {
        transform: TransformKind,
        message: String,
    },
    #[error("cannot start the wasm engine: {0}")]
    Engine(String),
    #[error("compile cache: {0}")]
    Cache(String),
}

impl EngineError {
    /// Stable machine code, used in failures sent to clients and in logs.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::Timeout { .. } | EngineError::OutOfFuel { .. } => "transform_timeout",
            EngineError::OutOfMemory { .. } => "transform_out_of_memory",
            EngineError::Trap { .. } => "transform_trap",
            _ => "transform_unavailable",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_transform_is_refused_naming_every_transform() {
        let error = "tokenizer"
            .parse::<TransformKind>()
            .expect_err("no such transform");
        let message = error.to_string();
        for kind in TransformKind::ALL {
            assert!(message.contains(kind.name()), "{kind}: {message}");
            assert_eq!(kind.name().parse::<TransformKind>().ok(), Some(kind));
        }
    }
}
