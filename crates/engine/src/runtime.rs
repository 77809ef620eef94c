//! The wasmtime engine and the per-call store.
//!
//! Every call gets a fresh `Store`: no state survives from one request to the next. The store
//! carries a memory cap (a `ResourceLimiter` that records when the cap was hit, so an
//! out-of-memory abort is reported as such rather than as a generic trap) and an epoch deadline
//! (a ticker thread bumps the epoch every `TICK`; a call that runs past its deadline traps).

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store,
};

use super::{EngineError, TransformKind};
use crate::config::RuntimeLimits;

/// How often the epoch advances; deadlines are rounded up to whole ticks.
const TICK: Duration = Duration::from_millis(10);

/// Bytes of each pooled linear memory kept resident between instances.
///
/// A trade-off, measured with `cargo xtask bench transforms` (serializer, this kernel's
/// `PAGEMAP_SCAN`): a page stays resident once a call has touched it, and the reset reports
/// every resident page as written (nothing write-protects them again), so each later reset of
/// that slot copies them back. A slot that has served only small calls instantiates in about
/// 3 µs; once it has served a Claude-Code-sized request, about 9 µs, after a 1 MB one about
/// 14 µs, for as long as the slot lives. Keeping less resident bounds that copy (128 KiB: 5 µs
/// after any call) but makes every large call fault its pages in again: the 1 MB request went
/// from 1.17 ms to 1.75 ms, the Claude-Code-sized one from 122 to 158 µs. The large calls are
/// the ones users wait on, so 4 MiB stays.
const KEEP_RESIDENT: usize = 4 << 20;

/// Limits applied to every call.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeConfig {
    pub memory_bytes: usize,
    pub call_timeout: Duration,
    pub max_instances: u32,
    /// Deterministic instruction budget per call; `None` in the bridge (and in the fuzz
    /// targets, which check the code the bridge runs), where the epoch deadline bounds a
    /// call's time more cheaply. Metering compiles other code, cached apart.
    pub fuel: Option<u64>,
}

impl From<RuntimeLimits> for RuntimeConfig {
    fn from(limits: RuntimeLimits) -> Self {
        Self {
            memory_bytes: (limits.memory_mib as usize) << 20,
            call_timeout: Duration::from_millis(limits.call_timeout_ms),
            max_instances: limits.max_instances,
            fuel: None,
        }
    }
}

/// The process-wide engine plus the limits every store gets.
///
/// The memory cap and the call deadline are live: `set_limits` changes them for every store
/// made afterwards (SIGHUP), while calls in flight keep the limits they started with. The
/// instance count and fuel are fixed when the engine is built.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    config: Arc<ArcSwap<RuntimeConfig>>,
    _ticker: Arc<Ticker>,
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Result<Self, EngineError> {
        let mut pooling = PoolingAllocationConfig::new();
        // Each transform component holds one core instance and one memory; a few spares
        // cover adapters a component author's toolchain might add.
        pooling
            .total_component_instances(config.max_instances)
            .total_core_instances(config.max_instances.saturating_mul(4))
            .total_memories(config.max_instances.saturating_mul(2))
            .total_tables(config.max_instances.saturating_mul(2))
            // The pool admits the largest memory a policy may allow, so the live cap (the
            // store's limiter, checked on every growth including the initial one) can be raised
            // without rebuilding the engine.
            .max_memory_size((RuntimeLimits::MAX_MEMORY_MIB as usize) << 20)
            // Reset the first pages of a reused slot with memset instead of giving them back to
            // the kernel: a fresh instance then does not page-fault its way through the memory
            // every call touches (measured in `cargo xtask bench transforms`).
            .linear_memory_keep_resident(KEEP_RESIDENT)
            // Where the kernel can tell (Linux 6.7+), reset only the pages a call dirtied
            // instead of the whole resident prefix: otherwise every fresh instance pays a memset
            // and an image copy proportional to the memory's size and its data segments, which
            // for a component embedding large tables (the envelope's) is most of its cost.
            .pagemap_scan(Enabled::Auto)
            .table_keep_resident(64 << 10)
            // ...but bound what idle slots keep: at most 16 x KEEP_RESIDENT stays resident.
            .max_unused_warm_slots(16);

        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(true)
            .consume_fuel(config.fuel.is_some())
            .memory_init_cow(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
        let engine =
            Engine::new(&wasm).map_err(|error| EngineError::Engine(format!("{error:#}")))?;
        let ticker = Arc::new(Ticker::start(&engine)?);
        Ok(Self {
            engine,
            config: Arc::new(ArcSwap::from_pointee(config)),
            _ticker: ticker,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The limits new stores get right now.
    pub fn config(&self) -> RuntimeConfig {
        **self.config.load()
    }

    /// Changes the memory cap and the call deadline of every store made from now on, in this
    /// runtime and every clone of it.
    pub fn set_limits(&self, memory_bytes: usize, call_timeout: Duration) {
        let current = self.config();
        self.config.store(Arc::new(RuntimeConfig {
            memory_bytes,
            call_timeout,
            ..current
        }));
    }

    /// The same engine with its own, separate limits (to try components under limits that are
    /// not in force yet).
    pub fn with_limits(&self, memory_bytes: usize, call_timeout: Duration) -> Runtime {
        Runtime {
            engine: self.engine.clone(),
            config: Arc::new(ArcSwap::from_pointee(RuntimeConfig {
                memory_bytes,
                call_timeout,
                ..self.config()
            })),
            _ticker: self._ticker.clone(),
        }
    }

    /// A fresh store with the memory cap and the call deadline armed.
    pub(crate) fn store(&self) -> Store<CallState> {
        let config = self.config();
        let mut store = Store::new(
            &self.engine,
            CallState::new(config.memory_bytes, config.call_timeout, config.fuel),
        );
        store.limiter(|state| &mut state.limiter);
        self.arm_deadline(&mut store);
        if let Some(fuel) = config.fuel {
            // Cannot fail: fuel consumption is enabled whenever `fuel` is set.
            let _ = store.set_fuel(fuel);
        }
        store
    }

    /// Sets the store's deadline to `call_timeout` from now.
    pub(crate) fn arm_deadline(&self, store: &mut Store<CallState>) {
        arm_deadline(store);
    }

    /// Turns a wasmtime error of a call into a typed error, looking at what the store saw.
    pub(crate) fn classify(
        &self,
        transform: TransformKind,
        store: &Store<CallState>,
        error: wasmtime::Error,
    ) -> EngineError {
        // The limits this store was made with, not the ones in force now.
        let state = store.data();
        if state.limiter.exceeded {
            return EngineError::OutOfMemory {
                transform,
                limit_mib: u32::try_from(state.limiter.limit >> 20).unwrap_or(u32::MAX),
            };
        }
        match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => {
                return EngineError::Timeout {
                    transform,
                    limit_ms: u64::try_from(state.call_timeout.as_millis()).unwrap_or(u64::MAX),
                }
            }
            Some(wasmtime::Trap::OutOfFuel) => return EngineError::OutOfFuel { transform },
            _ => {}
        }
        EngineError::Trap {
            transform,
            message: format!("{error:#}"),
        }
    }
}

/// Sets the store's deadline to its `call_timeout` from now (a store that serves several
/// calls, such as a turn's reply stream, re-arms it before each).
pub(crate) fn arm_deadline(store: &mut Store<CallState>) {
    let ticks = store
        .data()
        .call_timeout
        .as_millis()
        .div_ceil(TICK.as_millis())
        .max(1);
    store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
}

/// What a store holds: the memory limiter. Components import nothing that needs state.
pub struct CallState {
    limiter: MemoryCap,
    /// The deadline of every call in this store (re-armed per call).
    call_timeout: Duration,
    /// The fuel of every call in this store, when the runtime meters fuel (re-armed per call
    /// in a store that serves several).
    fuel: Option<u64>,
}

impl CallState {
    fn new(memory_bytes: usize, call_timeout: Duration, fuel: Option<u64>) -> Self {
        Self {
            limiter: MemoryCap {
                limit: memory_bytes,
                exceeded: false,
            },
            call_timeout,
            fuel,
        }
    }

    /// The fuel each call of this store gets, when fuel is metered.
    pub(crate) fn fuel(&self) -> Option<u64> {
        self.fuel
    }
}

/// A memory cap that remembers being hit, so the resulting abort can be named.
struct MemoryCap {
    limit: usize,
    exceeded: bool,
}

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.exceeded = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// Advances the engine's epoch every `TICK` until dropped. Holds only a weak engine handle so
/// it never keeps the engine alive.
struct Ticker {
    stop: std::sync::mpsc::Sender<()>,
}

impl Ticker {
    fn start(engine: &Engine) -> Result<Self, EngineError> {
        let weak = engine.weak();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || loop {
                match stopped.recv_timeout(TICK) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => return,
                    },
                    _ => return,
                }
            })
            .map_err(|error| {
                EngineError::Engine(format!("cannot start the epoch ticker: {error}"))
            })?;
        Ok(Self { stop })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        let _ = self.stop.send(());
    }
}
