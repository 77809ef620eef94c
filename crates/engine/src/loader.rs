//! Turning component bytes into something that can serve: digest and pin check, compilation
//! (through the disk cache), import policy (nothing but the shared type definitions), and the
//! exported interface's type check.

use std::path::Path;
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::component::{types::ComponentItem, Linker};

use super::bindings::{bind, Instance, Rejected, TypedPre};
use super::cache::CompileCache;
use super::runtime::{CallState, Runtime};
use super::{ComponentLocation, EngineError, TransformKind};
use devin_bridge_calls::{Answer, Call};

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The one import a transform may have: the shared WIT records, which arrive as an imported
/// instance that exports only (non-resource) types. It grants no capability.
const TYPES_INTERFACE: &str = "devin-bridge:transforms/types";

/// Whether `name` is the shared types interface (any version) and `item` exports types only.
fn is_types_import(engine: &wasmtime::Engine, name: &str, item: &ComponentItem) -> bool {
    let unversioned = name.split_once('@').map_or(name, |(base, _)| base);
    if unversioned != TYPES_INTERFACE {
        return false;
    }
    match item {
        ComponentItem::ComponentInstance(instance) => instance
            .exports(engine)
            .all(|(_, export)| matches!(export.ty, ComponentItem::Type(_))),
        _ => false,
    }
}

/// A component ready to serve one transform.
#[derive(Clone)]
pub struct Loaded {
    pub kind: TransformKind,
    pub sha256: String,
    /// Where the bytes came from (a path, or "control socket").
    pub source: String,
    pub size: usize,
    pre: TypedPre,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("kind", &self.kind)
            .field("sha256", &self.sha256)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Loaded {
    /// Reads, checks and compiles a component file.
    pub fn from_file(
        runtime: &Runtime,
        cache: &CompileCache,
        kind: TransformKind,
        path: &Path,
        pin: Option<&str>,
    ) -> Result<Self, EngineError> {
        let location = ComponentLocation::file(path, pin.map(str::to_owned));
        Self::from_location(runtime, cache, kind, &location)
    }

    /// Reads (or takes the built-in bytes), checks and compiles a component.
    pub fn from_location(
        runtime: &Runtime,
        cache: &CompileCache,
        kind: TransformKind,
        location: &ComponentLocation,
    ) -> Result<Self, EngineError> {
        let bytes = location.read(kind)?;
        Self::from_bytes(
            runtime,
            cache,
            kind,
            &bytes,
            location.pin.as_deref(),
            location.describe(),
        )
    }

    /// Checks and compiles component bytes. A pin, when given, must equal the bytes' sha256.
    pub fn from_bytes(
        runtime: &Runtime,
        cache: &CompileCache,
        kind: TransformKind,
        bytes: &[u8],
        pin: Option<&str>,
        source: String,
    ) -> Result<Self, EngineError> {
        let started = Instant::now();
        let sha256 = sha256_hex(bytes);
        if let Some(expected) = pin {
            if !expected.eq_ignore_ascii_case(&sha256) {
                return Err(EngineError::PinMismatch {
                    transform: kind,
                    expected: expected.to_ascii_lowercase(),
                    actual: sha256,
                });
            }
        }
        let engine = runtime.engine();
        let component = cache.load_or_compile(engine, kind, &sha256, bytes)?;

        // A transform is pure computation: it may import the type-only records interface and
        // nothing else. WASI or any other import is refused, naming it, before instantiation.
        let mut linker: Linker<CallState> = Linker::new(engine);
        for (name, import) in component.component_type().imports(engine) {
            if !is_types_import(engine, name, &import.ty) {
                return Err(EngineError::Imports {
                    transform: kind,
                    message: format!(
                        "{name} (a transform may import only the type definitions of {TYPES_INTERFACE})"
                    ),
                });
            }
            // No capability: satisfied by an empty instance.
            linker
                .instance(name)
                .map_err(|error| EngineError::Imports {
                    transform: kind,
                    message: format!("{name}: {error:#}"),
                })?;
        }
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|error| EngineError::Imports {
                transform: kind,
                message: format!("{error:#}"),
            })?;
        let mut store = runtime.store();
        let pre = TypedPre::new(kind, pre, &mut store).map_err(|rejected| match rejected {
            Rejected::Instance(error) => runtime.classify(kind, &store, error),
            Rejected::Interface(error) => EngineError::Interface {
                transform: kind,
                message: format!("{error:#}"),
            },
        })?;
        tracing::debug!(%kind, %sha256, elapsed_ms = started.elapsed().as_millis() as u64, "component loaded");
        Ok(Self {
            kind,
            sha256,
            source,
            size: bytes.len(),
            pre,
        })
    }

    /// One instance kept alive across calls. Production never does this (a fresh store per
    /// call isolates requests); benchmarks use it to separate instantiation from the call.
    pub fn warm(&self, runtime: &Runtime) -> Result<Warm, EngineError> {
        let mut store = runtime.store();
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|error| runtime.classify(self.kind, &store, error))?;
        Ok(Warm {
            kind: self.kind,
            store,
            instance,
            runtime: runtime.clone(),
        })
    }

    /// Runs one call, given in its data form, in a fresh store (the corpus, the differential
    /// tests and the fuzz targets call this way; the request pipeline uses the typed methods of
    /// [`crate::Transforms`]).
    pub fn call(&self, runtime: &Runtime, call: &Call) -> Result<Answer, EngineError> {
        let bound = bind(call);
        if bound.kind != self.kind {
            return Err(self.cannot_answer(bound.kind));
        }
        let mut store = runtime.store();
        let answer = self
            .pre
            .instantiate(&mut store)
            .and_then(|instance| bound.run(&instance, &mut store));
        answer.map_err(|error| runtime.classify(self.kind, &store, error))
    }

    /// A new instance of this component in `store` (a turn's store: see [`crate::Turn`]).
    pub(crate) fn instantiate(
        &self,
        store: &mut wasmtime::Store<CallState>,
    ) -> wasmtime::Result<Instance> {
        self.pre.instantiate(store)
    }

    /// Runs `call`, typed functions of transform `kind`, on a fresh instance in a fresh store.
    pub(crate) fn run<T>(
        &self,
        kind: TransformKind,
        runtime: &Runtime,
        call: impl FnOnce(&Instance, &mut wasmtime::Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, EngineError> {
        if kind != self.kind {
            return Err(self.cannot_answer(kind));
        }
        let mut store = runtime.store();
        let answer = self
            .pre
            .instantiate(&mut store)
            .and_then(|instance| call(&instance, &mut store));
        answer.map_err(|error| runtime.classify(self.kind, &store, error))
    }

    fn cannot_answer(&self, wanted: TransformKind) -> EngineError {
        EngineError::Interface {
            transform: self.kind,
            message: format!("{} cannot answer a {wanted} call", self.kind),
        }
    }
}

/// A live instance for repeated calls (benchmarks only; see `Loaded::warm`).
pub struct Warm {
    kind: TransformKind,
    store: wasmtime::Store<CallState>,
    instance: Instance,
    runtime: Runtime,
}

impl Warm {
    pub fn call(&mut self, call: &Call) -> Result<Answer, EngineError> {
        let bound = bind(call);
        if bound.kind != self.kind {
            return Err(EngineError::Interface {
                transform: self.kind,
                message: format!("{} cannot answer a {} call", self.kind, bound.kind),
            });
        }
        // Each call gets its own deadline, as a fresh store would.
        self.runtime.arm_deadline(&mut self.store);
        bound
            .run(&self.instance, &mut self.store)
            .map_err(|error| self.runtime.classify(self.kind, &self.store, error))
    }
}
