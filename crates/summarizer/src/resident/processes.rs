//! The resident transport's agent processes, each serving up to `per_process` sessions.
//!
//! A session slot is reserved on a process before that process has even finished starting, so a
//! burst of new conversations fills processes instead of starting one each. Processes are
//! filled one at a time (the fullest one with room is chosen) to keep their number low.
//!
//! A session's model is normally set on the session itself. An agent whose sessions have no
//! model option takes its model from `--model` on its command line; once that is known (from
//! the argv for the CLI's `summarizer` agent type, else
//! [`Processes::learn_no_model_option`]), processes are started per model and a session is
//! reserved only on a process of its model. Warming ahead of demand then starts processes for
//! the model on the policy's own command line, and none when it names no model.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use tokio::sync::OnceCell;

use devin_bridge_agent::acp::{AcpError, AgentLimits, SharedAgent};
use devin_bridge_agent::devin::options::{
    agent_type_offers_model_option, launched_model, normalize_id, with_model_flag,
};
use devin_bridge_agent::devin::ClientIdentity;
use devin_bridge_agent::process::Spec;

/// Every resident process, and the recipe for new ones.
pub(super) struct Processes {
    spec: Spec,
    limits: AgentLimits,
    client: ClientIdentity,
    /// The agent's sessions have no model option: processes are started per model.
    per_model: AtomicBool,
    per_process: usize,
    list: Mutex<Vec<Arc<Process>>>,
    started: Counter,
}

/// One process, started on first use.
pub(super) struct Process {
    agent: OnceCell<Arc<SharedAgent>>,
    /// The model its command line selects (`--model`), when processes are kept per model.
    model: Option<String>,
    /// Reserved session slots.
    sessions: AtomicUsize,
    /// Its start failed: no new session goes there.
    failed: AtomicBool,
    /// When its last session was released.
    idle_since: Mutex<Instant>,
}

/// A reserved session slot; released when dropped.
pub(super) struct Slot {
    process: Arc<Process>,
}

impl Slot {
    /// The model the slot's process was started for (`--model`), if any.
    pub(super) fn model(&self) -> Option<&str> {
        self.process.model.as_deref()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.process.sessions.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Ok(mut idle) = self.process.idle_since.lock() {
                *idle = Instant::now();
            }
        }
    }
}

impl Process {
    fn new(model: Option<String>) -> Self {
        Self {
            agent: OnceCell::new(),
            model,
            sessions: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            idle_since: Mutex::new(Instant::now()),
        }
    }

    /// Started and now dead, or failed to start.
    fn is_dead(&self) -> bool {
        self.failed.load(Ordering::Acquire) || self.agent.get().is_some_and(|a| !a.is_alive())
    }

    fn idle_for(&self) -> Duration {
        self.idle_since
            .lock()
            .map(|since| since.elapsed())
            .unwrap_or_default()
    }
}

impl Processes {
    pub(super) fn new(
        spec: Spec,
        limits: AgentLimits,
        client: ClientIdentity,
        per_process: usize,
    ) -> Self {
        let per_model = !agent_type_offers_model_option(&spec.args);
        Self {
            spec,
            limits,
            client,
            per_model: AtomicBool::new(per_model),
            per_process: per_process.max(1),
            list: Mutex::new(Vec::new()),
            started: Counter::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Process>>> {
        self.list
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records that the agent's sessions have no model option: from now on processes are
    /// started per model.
    pub(super) fn learn_no_model_option(&self) {
        if !self.per_model.swap(true, Ordering::AcqRel) {
            tracing::info!("the agent's sessions have no model option; resident processes are started per model (--model) from now on");
        }
    }

    /// Reserves a session slot for a conversation answered by `model` on the fullest live
    /// process with room (of that model, when processes are kept per model), or on a new one.
    pub(super) fn reserve(&self, model: &str) -> Slot {
        // Warming ahead of demand asks for no model (""): such a process is started plainly.
        let per_model = self.per_model.load(Ordering::Acquire) && !model.is_empty();
        let wanted = per_model.then(|| normalize_id(model));
        let mut list = self.lock();
        let chosen = list
            .iter()
            .filter(|process| !process.is_dead())
            .filter(|process| process.model.as_deref().map(normalize_id) == wanted)
            .filter(|process| process.sessions.load(Ordering::Acquire) < self.per_process)
            .max_by_key(|process| process.sessions.load(Ordering::Acquire))
            .cloned();
        let process = chosen.unwrap_or_else(|| {
            let process = Arc::new(Process::new(per_model.then(|| model.to_owned())));
            list.push(process.clone());
            process
        });
        process.sessions.fetch_add(1, Ordering::AcqRel);
        Slot { process }
    }

    /// The slot's agent, started (and initialized) on first use.
    pub(super) async fn agent(&self, slot: &Slot) -> Result<Arc<SharedAgent>, AcpError> {
        let started = slot
            .process
            .agent
            .get_or_try_init(|| async {
                self.started.inc();
                let spec = match &slot.process.model {
                    Some(model) => Spec {
                        args: with_model_flag(&self.spec.args, model),
                        ..self.spec.clone()
                    },
                    None => self.spec.clone(),
                };
                let agent = SharedAgent::start(&spec, self.limits, &self.client).await?;
                tracing::info!(pid = agent.pid(), "resident agent process started");
                Ok::<_, AcpError>(agent)
            })
            .await;
        match started {
            Ok(agent) => Ok(agent.clone()),
            Err(error) => {
                slot.process.failed.store(true, Ordering::Release);
                Err(error)
            }
        }
    }

    /// Starts `count` processes ahead of demand (they hold no session until one is needed).
    pub(super) async fn warm(&self, count: usize) {
        // Per model, a process warmed without a model would serve no session: warm the
        // command line's own model, or nothing.
        let model = if self.per_model.load(Ordering::Acquire) {
            match launched_model(&self.spec.args) {
                Some(model) => model,
                None => {
                    if count > 0 {
                        tracing::info!("the agent takes its model on its command line and the policy names none: no resident process is started ahead of demand");
                    }
                    return;
                }
            }
        } else {
            String::new()
        };
        for _ in 0..count {
            let slot = self.reserve(&model);
            if let Err(error) = self.agent(&slot).await {
                tracing::warn!(code = error.code(), %error, "starting a resident agent ahead of demand failed");
                return;
            }
        }
    }

    /// Removes processes that died, and those without a session for longer than `idle`, and
    /// ends them.
    pub(super) async fn reap(&self, idle: Duration) {
        let ended: Vec<Arc<Process>> = {
            let mut list = self.lock();
            let (ended, kept): (Vec<_>, Vec<_>) = list.drain(..).partition(|process| {
                let unused = process.sessions.load(Ordering::Acquire) == 0;
                (process.is_dead() && (unused || process.failed.load(Ordering::Acquire)))
                    || (unused && process.agent.initialized() && process.idle_for() >= idle)
            });
            *list = kept;
            ended
        };
        for process in ended {
            if let Some(agent) = process.agent.get() {
                let pid = agent.pid();
                let ended = agent.close().await;
                tracing::info!(
                    pid,
                    killed = ended.map(|e| e.killed),
                    "resident agent process ended"
                );
            }
        }
    }

    /// Ends every process (shutdown).
    pub(super) async fn close_all(&self) {
        let all: Vec<Arc<Process>> = self.lock().drain(..).collect();
        for process in all {
            if let Some(agent) = process.agent.get() {
                agent.close().await;
            }
        }
    }

    /// Processes running now.
    pub(super) fn live(&self) -> usize {
        self.lock()
            .iter()
            .filter(|process| process.agent.get().is_some_and(|agent| agent.is_alive()))
            .count()
    }

    /// Processes started since the bridge started.
    pub(super) fn started(&self) -> u64 {
        self.started.get()
    }

    pub(super) fn started_counter(&self) -> &Counter {
        &self.started
    }
}
