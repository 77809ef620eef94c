//! Prewarmed agents: N processes spawned and initialized ahead of demand, each used for
//! exactly one turn, so a request does not pay the CLI's start-up. No session state is ever
//! shared between requests: a prewarmed agent has only answered `initialize`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::Notify;

use super::{AcpError, Agent, AgentLimits};
use crate::process::Spec;

/// The pool of ready agents plus the recipe for new ones.
pub struct AgentPool {
    spec: Spec,
    limits: AgentLimits,
    target: usize,
    ready: Mutex<VecDeque<Agent>>,
    wanted: Notify,
    closed: AtomicBool,
    served_warm: AtomicUsize,
    served_cold: AtomicUsize,
}

/// Counters for `/healthz`.
#[derive(Debug, Clone, Serialize)]
pub struct PoolStats {
    pub target: usize,
    pub ready: usize,
    pub served_warm: usize,
    pub served_cold: usize,
}

impl AgentPool {
    /// A pool that keeps `target` agents ready (0 disables prewarming). Call `run_refill`
    /// on a task to keep it filled.
    pub fn new(spec: Spec, limits: AgentLimits, target: usize) -> Arc<Self> {
        Arc::new(Self {
            spec,
            limits,
            target,
            ready: Mutex::new(VecDeque::new()),
            wanted: Notify::new(),
            closed: AtomicBool::new(false),
            served_warm: AtomicUsize::new(0),
            served_cold: AtomicUsize::new(0),
        })
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// A ready agent if one is alive, else a freshly started one.
    pub async fn take(&self) -> Result<Agent, AcpError> {
        while let Some(mut agent) = self.pop() {
            self.wanted.notify_one();
            if agent.is_alive() {
                self.served_warm.fetch_add(1, Ordering::Relaxed);
                return Ok(agent);
            }
            tracing::warn!(
                pid = agent.pid(),
                "a prewarmed agent died while waiting; discarding it"
            );
        }
        self.wanted.notify_one();
        self.served_cold.fetch_add(1, Ordering::Relaxed);
        Agent::start(&self.spec, self.limits).await
    }

    fn pop(&self) -> Option<Agent> {
        self.ready
            .lock()
            .ok()
            .and_then(|mut ready| ready.pop_front())
    }

    fn ready_len(&self) -> usize {
        self.ready.lock().map(|ready| ready.len()).unwrap_or(0)
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            target: self.target,
            ready: self.ready_len(),
            served_warm: self.served_warm.load(Ordering::Relaxed),
            served_cold: self.served_cold.load(Ordering::Relaxed),
        }
    }

    /// Keeps `target` agents ready until `drain`. Missing agents are started in parallel (one
    /// CLI start-up at a time would cap the refill rate under load); failures
    /// back off, so a missing or broken agent does not spin.
    pub async fn run_refill(self: Arc<Self>) {
        if self.target == 0 {
            return;
        }
        let mut starting = tokio::task::JoinSet::new();
        let mut backoff = std::time::Duration::from_millis(100);
        while !self.closed.load(Ordering::Acquire) {
            let missing = self
                .target
                .saturating_sub(self.ready_len() + starting.len());
            for _ in 0..missing {
                let (spec, limits) = (self.spec.clone(), self.limits);
                starting.spawn(async move { Agent::start(&spec, limits).await });
            }
            tokio::select! {
                Some(started) = starting.join_next(), if !starting.is_empty() => match started {
                    Ok(Ok(agent)) if self.closed.load(Ordering::Acquire) => agent.close().await,
                    Ok(Ok(agent)) => {
                        backoff = std::time::Duration::from_millis(100);
                        if let Ok(mut ready) = self.ready.lock() {
                            ready.push_back(agent);
                        }
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(code = error.code(), %error, retry_in_ms = backoff.as_millis() as u64, "prewarming an agent failed");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(std::time::Duration::from_secs(30));
                    }
                    Err(join) => tracing::error!(%join, "prewarm task failed"),
                },
                _ = self.wanted.notified() => {}
            }
        }
    }

    /// Stops refilling and ends every ready agent (shutdown).
    pub async fn drain(&self) {
        self.closed.store(true, Ordering::Release);
        self.wanted.notify_one();
        let agents: Vec<Agent> = self
            .ready
            .lock()
            .map(|mut ready| ready.drain(..).collect())
            .unwrap_or_default();
        for agent in agents {
            agent.close().await;
        }
    }
}
