//! The live set of transforms, with atomic hot swap.
//!
//! Each transform sits in an `ArcSwap`. A call takes its own `Arc` of the current version, so
//! a swap never disturbs calls in flight: they finish on the version they started with. A
//! candidate is compiled, type-checked and run through the golden corpus *before* it is
//! stored; a failing candidate leaves the old version serving. Swaps are serialised by a mutex;
//! calls never take it.
//!
//! The policy's sha256 pins stay in force while serving: a swap over the control socket of a
//! pinned transform accepts only the pinned bytes (changing a pin means editing the policy and
//! sending SIGHUP, which re-reads the pins), and a reload refuses a file that does not match
//! the new policy's pin even when it is the version already serving.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use devin_bridge_types::Failure;
use serde::Serialize;

use super::bindings::functions;
use super::cache::CompileCache;
use super::calls::{Serving, TransformCalls};
use super::corpus::{self_test, Corpus};
use super::memo::ValidationMemo;
use super::runtime::Runtime;
use super::{EngineError, Loaded, TransformKind};
use crate::config::EngineConfig;
use devin_bridge_calls::{Answer, Call};

/// What `/healthz` and `components list` show about one loaded transform.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentInfo {
    pub name: &'static str,
    pub sha256: String,
    pub source: String,
    pub size: usize,
}

/// The outcome of a swap.
#[derive(Debug, Clone, Serialize)]
pub struct SwapReport {
    pub transform: &'static str,
    pub old_sha256: String,
    pub new_sha256: String,
    pub self_test_cases: usize,
    /// Where the self-test corpus came from: a component set's `manifest.json`, or `embedded`.
    pub corpus: String,
    pub elapsed_ms: u64,
}

/// The five live transforms.
pub struct Transforms {
    runtime: Runtime,
    cache: CompileCache,
    slots: [ArcSwap<Loaded>; TransformKind::COUNT],
    /// What the running policy pins and the corpus of its component set, per transform;
    /// guarded by the swap lock, since only swaps and reloads read or change them.
    swap_lock: Mutex<Checks>,
    /// The model-alias component's `validate` answers (see [`ValidationMemo`]).
    validations: ValidationMemo,
}

/// What every candidate of a transform is held to.
struct Checks {
    pins: [Option<String>; TransformKind::COUNT],
    corpora: [Arc<Corpus>; TransformKind::COUNT],
}

impl Transforms {
    /// Loads, checks and self-tests the five components `config` names.
    pub fn load(config: &EngineConfig) -> Result<Self, EngineError> {
        let runtime = Runtime::new(config.limits.into())?;
        let cache = match config.cache_dir.clone().or_else(CompileCache::default_dir) {
            Some(dir) => CompileCache::open(&dir)?,
            None => CompileCache::disabled(),
        };
        Self::load_with(runtime, cache, config)
    }

    /// Like `load`, with an explicit runtime and cache (tests, benchmarks).
    pub fn load_with(
        runtime: Runtime,
        cache: CompileCache,
        config: &EngineConfig,
    ) -> Result<Self, EngineError> {
        config.check_complete()?;
        let load = |kind: TransformKind| -> Result<(ArcSwap<Loaded>, Arc<Corpus>), EngineError> {
            let location = config.location(kind);
            let loaded = Loaded::from_location(&runtime, &cache, kind, location)?;
            let corpus = Corpus::for_location(kind, location)?;
            let report = self_test(&runtime, &loaded, &corpus)?;
            tracing::info!(transform = %kind, sha256 = %loaded.sha256, source = %loaded.source, cases = report.cases, corpus = %report.corpus, "component loaded and self-tested");
            Ok((ArcSwap::from_pointee(loaded), Arc::new(corpus)))
        };
        let mut slots = Vec::with_capacity(TransformKind::COUNT);
        let mut corpora = Vec::with_capacity(TransformKind::COUNT);
        for kind in TransformKind::ALL {
            let (slot, corpus) = load(kind)?;
            slots.push(slot);
            corpora.push(corpus);
        }
        Ok(Self {
            runtime,
            cache,
            slots: per_transform(slots),
            swap_lock: Mutex::new(Checks {
                pins: config.pins(),
                corpora: per_transform(corpora),
            }),
            validations: ValidationMemo::default(),
        })
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The version of `kind` that serves right now.
    pub fn current(&self, kind: TransformKind) -> Arc<Loaded> {
        self.slots[kind.index()].load_full()
    }

    /// Name, digest and origin of every loaded transform.
    pub fn info(&self) -> Vec<ComponentInfo> {
        TransformKind::ALL
            .into_iter()
            .map(|kind| {
                let loaded = self.current(kind);
                ComponentInfo {
                    name: kind.name(),
                    sha256: loaded.sha256.clone(),
                    source: loaded.source.clone(),
                    size: loaded.size,
                }
            })
            .collect()
    }

    /// Performs one call on the current version of its transform.
    pub fn call(&self, call: &Call) -> Result<Answer, EngineError> {
        self.current(call.transform()).call(&self.runtime, call)
    }

    /// The sha256 the running policy pins for `kind`, if any.
    pub fn pin(&self, kind: TransformKind) -> Option<String> {
        self.checks().pins[kind.index()].clone()
    }

    fn checks(&self) -> std::sync::MutexGuard<'_, Checks> {
        self.swap_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Compiles, checks and self-tests a candidate, then swaps it in atomically (the control
    /// socket). A transform the running policy pins accepts only the pinned bytes.
    pub fn swap(
        &self,
        kind: TransformKind,
        bytes: &[u8],
        source: String,
    ) -> Result<SwapReport, EngineError> {
        let checks = self.checks();
        if let Some(pinned) = &checks.pins[kind.index()] {
            let candidate = super::sha256_hex(bytes);
            if !pinned.eq_ignore_ascii_case(&candidate) {
                let error = EngineError::PinnedSwap {
                    transform: kind,
                    pinned: pinned.to_ascii_lowercase(),
                    candidate,
                };
                tracing::warn!(transform = %kind, %error, "swap refused; the old version keeps serving");
                return Err(error);
            }
        }
        self.swap_checked(&checks, kind, bytes, None, source)
    }

    /// Compiles and self-tests a candidate (refusing bytes whose sha256 differs from `pin`),
    /// then swaps it in. The caller holds the swap lock, passed in as `checks`.
    fn swap_checked(
        &self,
        checks: &Checks,
        kind: TransformKind,
        bytes: &[u8],
        pin: Option<&str>,
        source: String,
    ) -> Result<SwapReport, EngineError> {
        let started = std::time::Instant::now();
        let corpus = &checks.corpora[kind.index()];
        let candidate = Loaded::from_bytes(&self.runtime, &self.cache, kind, bytes, pin, source)
            .and_then(|candidate| {
                self_test(&self.runtime, &candidate, corpus).map(|report| (candidate, report))
            });
        let (candidate, report) = match candidate {
            Ok(ok) => ok,
            Err(error) => {
                tracing::warn!(transform = %kind, old_sha256 = %self.current(kind).sha256, %error, "swap refused; the old version keeps serving");
                return Err(error);
            }
        };
        let new_sha256 = candidate.sha256.clone();
        let old = self.slots[kind.index()].swap(Arc::new(candidate));
        let report = SwapReport {
            transform: kind.name(),
            old_sha256: old.sha256.clone(),
            new_sha256,
            self_test_cases: report.cases,
            corpus: report.corpus,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        tracing::info!(transform = %kind, old_sha256 = %report.old_sha256, new_sha256 = %report.new_sha256, cases = report.self_test_cases, corpus = %report.corpus, "component swapped");
        Ok(report)
    }

    /// Re-reads the components `config` names and swaps in those whose bytes changed (SIGHUP),
    /// all or nothing: every changed component is compiled, checked against the new policy's
    /// pin and self-tested, against the corpus of the component set the policy names, under
    /// `trial` (a runtime with the limits the new policy will put in force) before any is
    /// swapped in. A file that does not match its new pin is refused even when it is the
    /// version already serving. With `retest_unchanged`, the versions that stay are
    /// self-tested under `trial` too (the limits are changing). The first failure refuses the
    /// lot and nothing changes; on success the new pins and corpora hold for later swaps.
    pub fn reload(
        &self,
        config: &EngineConfig,
        trial: &Runtime,
        retest_unchanged: bool,
    ) -> Result<Vec<SwapReport>, EngineError> {
        let started = std::time::Instant::now();
        config.check_complete()?;
        // Held from the first read to the last swap, so no control-socket swap interleaves.
        let mut checks = self.checks();
        let pins = config.pins();
        let mut corpora = checks.corpora.clone();
        let mut staged = Vec::new();
        for kind in TransformKind::ALL {
            let location = config.location(kind);
            let pin = location.pin.clone();
            let bytes = location.read(kind)?;
            let sha256 = super::sha256_hex(&bytes);
            if let Some(expected) = pin.as_deref() {
                if !expected.eq_ignore_ascii_case(&sha256) {
                    return Err(EngineError::PinMismatch {
                        transform: kind,
                        expected: expected.to_ascii_lowercase(),
                        actual: sha256,
                    });
                }
            }
            // The corpus of the (possibly new) component set the policy names.
            let corpus = Arc::new(Corpus::for_location(kind, location)?);
            let current = self.current(kind);
            if sha256 == current.sha256 {
                if retest_unchanged {
                    self_test(trial, &current, &corpus)?;
                }
                corpora[kind.index()] = corpus;
                continue;
            }
            let candidate = Loaded::from_bytes(
                trial,
                &self.cache,
                kind,
                &bytes,
                pin.as_deref(),
                location.describe(),
            )?;
            let report = self_test(trial, &candidate, &corpus)?;
            corpora[kind.index()] = corpus;
            staged.push((candidate, report));
        }
        checks.pins = pins;
        checks.corpora = corpora;
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Ok(staged
            .into_iter()
            .map(|(candidate, report)| {
                let kind = candidate.kind;
                let new_sha256 = candidate.sha256.clone();
                let old = self.slots[kind.index()].swap(Arc::new(candidate));
                tracing::info!(transform = %kind, old_sha256 = %old.sha256, new_sha256 = %new_sha256, cases = report.cases, corpus = %report.corpus, "component swapped");
                SwapReport {
                    transform: kind.name(),
                    old_sha256: old.sha256.clone(),
                    new_sha256,
                    self_test_cases: report.cases,
                    corpus: report.corpus,
                    elapsed_ms,
                }
            })
            .collect())
    }
}

impl TransformCalls for Transforms {
    fn serving(&self, kind: TransformKind) -> Serving<'_> {
        Serving {
            loaded: self.current(kind),
            runtime: &self.runtime,
        }
    }

    /// The model-alias component's `validate`; an answer it gave for the same reference and
    /// catalog is not asked again.
    fn validate_model(
        &self,
        reference: String,
        catalog: String,
    ) -> Result<Result<String, Failure>, EngineError> {
        let component = self.current(TransformKind::ModelAlias);
        if let Some(answer) = self
            .validations
            .get(&component.sha256, &catalog, &reference)
        {
            return Ok(answer);
        }
        let answer = component.run(TransformKind::ModelAlias, &self.runtime, |i, store| {
            functions::validate(i, store, &reference, &catalog)
        })?;
        self.validations
            .put(&component.sha256, &catalog, reference, answer.clone());
        Ok(answer)
    }
}

/// One value per transform, in [`TransformKind::ALL`] order, from a list made by iterating it.
fn per_transform<T>(values: Vec<T>) -> [T; TransformKind::COUNT] {
    match values.try_into() {
        Ok(array) => array,
        Err(values) => unreachable!(
            "{} values for {} transforms: the list is made by iterating TransformKind::ALL",
            values.len(),
            TransformKind::COUNT
        ),
    }
}
