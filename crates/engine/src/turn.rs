//! A turn's store: the transform calls of one turn (one request's answer) on one wasmtime
//! store, each component instantiated at most once, on its first call, and kept until the
//! turn ends. A fresh instance per call costs 2-5 µs of instantiation, several times the work
//! of a small call; a turn makes a dozen calls (the serializer's, the reply stream's pushes,
//! the SSE events of its text), so the turn, not the call, is the unit of isolation and cost.
//!
//! Invariants:
//! - The versions that answer are those serving when the turn opened (an `Arc` of each loaded
//!   component, taken then): a component swap never affects a turn in flight.
//! - Every call has the limits a call in a fresh store has: the deadline (and the fuel, when
//!   configured) is re-armed before each call, and each instance's memory has the memory cap.
//! - Once a call traps (deadline, memory cap, a guest panic), the store is never entered again:
//!   every later call of the turn answers a trap that names the first error.
//! - Nothing outlives the turn: dropping the last handle (the [`Turn`] and the reply streams
//!   opened in it) drops the store and its instances. What one call leaves in an instance's
//!   memory is seen only by later calls of the same turn, which answer the same request.
//! - A turn holds one slot of the engine's instance pool per component it instantiated until
//!   it is dropped, so the pool (`[limits] max_instances`) must cover the turns open at once.
//! - Calls of a turn run one at a time (a lock): the reply stream's pushes and the event
//!   stream's renders of one turn may come from two tasks.

use std::sync::{Arc, Mutex, MutexGuard};

use wasmtime::Store;

use crate::bindings::Instance;
use crate::runtime::{arm_deadline, CallState, Runtime};
use crate::{EngineError, Loaded, TransformKind};

/// One turn's store and the instances made in it. See the module documentation.
pub struct Turn {
    runtime: Runtime,
    /// The version of each transform that answers this turn, by [`TransformKind::index`].
    versions: [Arc<Loaded>; TransformKind::COUNT],
    state: Mutex<TurnState>,
}

struct TurnState {
    store: Store<CallState>,
    instances: [Option<Instance>; TransformKind::COUNT],
    /// The first engine error, as text: the store is not entered again after it.
    broken: Option<String>,
}

impl Turn {
    /// A turn served by `versions` (by [`TransformKind::index`]) on a store of its own from
    /// `runtime` (see [`Turn::open`], which takes the versions serving now).
    pub(crate) fn new(runtime: Runtime, versions: [Arc<Loaded>; TransformKind::COUNT]) -> Self {
        let store = runtime.store();
        Self {
            runtime,
            versions,
            state: Mutex::new(TurnState {
                store,
                instances: Default::default(),
                broken: None,
            }),
        }
    }

    /// Runs `call` on the turn's instance of `kind` (made now if this is its first call), with
    /// the call's limits re-armed; an error breaks the turn.
    pub(crate) fn run<T>(
        &self,
        kind: TransformKind,
        call: impl FnOnce(&Instance, &mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T, EngineError> {
        let loaded = &self.versions[kind.index()];
        if loaded.kind != kind {
            return Err(EngineError::Interface {
                transform: loaded.kind,
                message: format!("{} cannot answer a {kind} call", loaded.kind),
            });
        }
        let mut state = self.lock();
        if let Some(error) = &state.broken {
            return Err(EngineError::Trap {
                transform: kind,
                message: format!("an earlier call of this turn failed: {error}"),
            });
        }
        let TurnState {
            store, instances, ..
        } = &mut *state;
        // Armed now, not when the turn opened: a turn may wait long before its first call.
        // Instantiating runs guest code too, under the same deadline as the call.
        rearm(store);
        let answer = match &mut instances[kind.index()] {
            Some(instance) => call(instance, store),
            empty => match loaded.instantiate(store) {
                Ok(instance) => call(empty.insert(instance), store),
                Err(error) => Err(error),
            },
        };
        answer.map_err(|error| {
            let error = self.runtime.classify(kind, &state.store, error);
            state.broken = Some(error.to_string());
            error
        })
    }

    /// Runs `call` on the turn's store without breaking the turn on failure (a destructor:
    /// what it answers changes nothing for the caller). Skipped once the turn is broken.
    pub(crate) fn quietly(&self, call: impl FnOnce(&mut Store<CallState>) -> wasmtime::Result<()>) {
        let mut state = self.lock();
        if state.broken.is_some() {
            return;
        }
        rearm(&mut state.store);
        if let Err(error) = call(&mut state.store) {
            tracing::debug!(error = %error, "a turn's cleanup call failed");
        }
    }

    /// How many component instances the turn has made so far (at most one per transform).
    pub fn instantiated(&self) -> usize {
        self.lock().instances.iter().flatten().count()
    }

    fn lock(&self) -> MutexGuard<'_, TurnState> {
        // A panic while the lock was held left no half-made state worth refusing: the store is
        // only entered through `run`, which marks a failed call broken before unlocking.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The version of `kind` that answers this turn.
    pub(crate) fn version(&self, kind: TransformKind) -> &Arc<Loaded> {
        &self.versions[kind.index()]
    }

    pub(crate) fn runtime(&self) -> &Runtime {
        &self.runtime
    }
}

/// Before each call: the deadline, and the fuel when the runtime meters it, as a fresh
/// store's call gets them.
fn rearm(store: &mut Store<CallState>) {
    arm_deadline(store);
    if let Some(fuel) = store.data().fuel() {
        // Cannot fail: fuel consumption is enabled whenever the store was given fuel.
        let _ = store.set_fuel(fuel);
    }
}
