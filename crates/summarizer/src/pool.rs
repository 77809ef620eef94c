//! Prewarmed agents: N processes spawned and initialized ahead of demand, each used for
//! exactly one turn, so a request does not pay the CLI's start-up. No session state is ever
//! shared between requests: a prewarmed agent has only answered `initialize`.
//!
//! The warm set is sized by demand. A request that finds no ready agent starts one of its own
//! and takes whichever agent is ready first, its own or one the refill was already starting;
//! the loser joins the ready set instead of being wasted. The refill counts those requests'
//! own starts as agents on their way, so under a burst (more requests than the prewarm target)
//! it starts nothing extra: the machine then runs one start per request, as without prewarm,
//! rather than one per request plus a refill's worth competing with them.
//!
//! A turn's model is set on its session (the session's model option). An agent whose sessions
//! have no model option can only be given a model on its command line (`--model M`): the
//! CLI's `summarizer` agent type is known to be such an agent from its argv, any other is
//! found out by its first turn ([`AgentPool::learn_no_model_option`]). From then on the warm
//! set is started for one model (`--model` on the warm agents' command line): the pool's
//! default model (the catalog's first, which a client set up by `client-env` asks for), else
//! the first one a turn asks for. A turn for that model takes a warm agent, a turn for another
//! model starts its own agent for it, and a ready agent started for another model is never
//! served (it is ended instead). Without a default, nothing is prewarmed before a turn names
//! the model.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::Notify;

use devin_bridge_agent::acp::{AcpError, Agent, AgentLimits};
use devin_bridge_agent::devin::options::{
    agent_type_offers_model_option, launched_model, normalize_id, with_model_flag,
};
use devin_bridge_agent::devin::ClientIdentity;
use devin_bridge_agent::process::Spec;

/// The pool of ready agents plus the recipe for new ones.
pub struct AgentPool {
    spec: Spec,
    limits: AgentLimits,
    client: ClientIdentity,
    target: usize,
    /// The agent's sessions have no model option: a model goes on the command line.
    model_on_command_line: AtomicBool,
    /// With the model on the command line: the model the warm set is started for (the first
    /// one a turn asked for), none before.
    warm_model: Mutex<Option<String>>,
    ready: Mutex<VecDeque<Agent>>,
    /// Woken when the refill wants to look again (an agent was taken or shutdown began).
    wanted: Notify,
    /// Woken when an agent joins the ready set, for requests waiting on their own start.
    arrived: Notify,
    /// Starts that requests made for themselves and that have not finished yet.
    own_starts: AtomicUsize,
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
    pub fn new(
        spec: Spec,
        limits: AgentLimits,
        client: ClientIdentity,
        target: usize,
    ) -> Arc<Self> {
        Self::with_default_model(spec, limits, client, target, None)
    }

    /// [`AgentPool::new`], whose warm set, when the model goes on the agent's command line, is
    /// started for `default_model` from the start (instead of the first model a turn names).
    pub fn with_default_model(
        spec: Spec,
        limits: AgentLimits,
        client: ClientIdentity,
        target: usize,
        default_model: Option<String>,
    ) -> Arc<Self> {
        let model_on_command_line = !agent_type_offers_model_option(&spec.args);
        Arc::new(Self {
            spec,
            limits,
            client,
            target,
            model_on_command_line: AtomicBool::new(model_on_command_line),
            warm_model: Mutex::new(default_model),
            ready: Mutex::new(VecDeque::new()),
            wanted: Notify::new(),
            arrived: Notify::new(),
            own_starts: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            served_warm: AtomicUsize::new(0),
            served_cold: AtomicUsize::new(0),
        })
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The `clientInfo` its agents send.
    pub fn client(&self) -> &ClientIdentity {
        &self.client
    }

    /// An agent for a turn that asks for `model`: a pooled one ([`AgentPool::take`]), or,
    /// when the agent's sessions have no model option, a warm one when the warm set is started
    /// for `model` (the first model asked for becomes the warm set's), else one started with
    /// `--model`.
    pub async fn take_for(self: &Arc<Self>, model: Option<&str>) -> Result<Agent, AcpError> {
        match model {
            Some(model) if self.model_on_command_line.load(Ordering::Acquire) => {
                if self.warms_for(model) {
                    return self.take().await;
                }
                self.served_cold.fetch_add(1, Ordering::Relaxed);
                let mut spec = self.spec.clone();
                spec.args = with_model_flag(&spec.args, model);
                Agent::start(&spec, self.limits, &self.client).await
            }
            _ => self.take().await,
        }
    }

    /// Whether the warm set is (now) started for `model`: the first model asked for becomes
    /// the warm set's, and the refill is told.
    fn warms_for(&self, model: &str) -> bool {
        let Ok(mut warm) = self.warm_model.lock() else {
            return false;
        };
        match warm.as_deref() {
            Some(warm) => normalize_id(warm) == normalize_id(model),
            None => {
                tracing::info!(
                    model,
                    "prewarmed agents are started for this model (--model)"
                );
                *warm = Some(model.to_owned());
                self.wanted.notify_one();
                true
            }
        }
    }

    /// The recipe of the warm set: the plain spec, or with the model on the command line, the
    /// spec for the warm model (none before a turn named one).
    fn warm_spec(&self) -> Option<Spec> {
        if !self.model_on_command_line.load(Ordering::Acquire) {
            return Some(self.spec.clone());
        }
        let warm = self.warm_model.lock().ok()?.clone()?;
        Some(Spec {
            args: with_model_flag(&self.spec.args, &warm),
            ..self.spec.clone()
        })
    }

    /// Records that the agent's sessions have no model option (a turn failed with
    /// [`AcpError::NoModelOption`]): later turns that ask for a model start their agent with
    /// `--model`, and agents warmed without it are ended instead of served.
    pub fn learn_no_model_option(&self) {
        if !self.model_on_command_line.swap(true, Ordering::AcqRel) {
            tracing::info!("the agent's sessions have no model option; models are chosen with --model on its command line from now on");
        }
    }

    /// A ready agent if one is alive; else the first agent to be ready of one started for this
    /// request and those the refill is starting (the other one joins the ready set).
    pub async fn take(self: &Arc<Self>) -> Result<Agent, AcpError> {
        if let Some(agent) = self.pop_alive() {
            self.served_warm.fetch_add(1, Ordering::Relaxed);
            return Ok(agent);
        }
        self.served_cold.fetch_add(1, Ordering::Relaxed);
        let spec = self.warm_spec().unwrap_or_else(|| self.spec.clone());
        if self.target == 0 {
            return Agent::start(&spec, self.limits, &self.client).await;
        }
        // The start runs in this request's task, so its end wakes the request directly (a start
        // in a task of its own would cost one more wake-up, which on a saturated machine is one
        // more trip through the run queue). If another agent is ready first, the start moves to
        // a task of its own and its agent joins the ready set.
        let counted = OwnStart::enter(self);
        let (limits, client) = (self.limits, self.client.clone());
        let mut own = Box::pin(async move { Agent::start(&spec, limits, &client).await });
        loop {
            tokio::select! {
                started = &mut own => return started,
                () = self.arrived.notified() => {
                    if let Some(agent) = self.pop_alive() {
                        let pool = Arc::clone(self);
                        tokio::spawn(async move {
                            let started = own.await;
                            // No longer on its way: the refill sees it in the ready set instead.
                            drop(counted);
                            if let Ok(agent) = started {
                                pool.put(agent).await;
                            }
                        });
                        return Ok(agent);
                    }
                }
            }
        }
    }

    /// The first ready agent that is still alive and started for the warm set's model (dead
    /// ones are discarded, ones of another model ended); the refill is told either way.
    fn pop_alive(&self) -> Option<Agent> {
        while let Some(mut agent) = self.pop() {
            self.wanted.notify_one();
            if !self.is_warm_recipe(&agent) {
                tracing::info!(
                    pid = agent.pid(),
                    "a prewarmed agent was started for another model; ending it"
                );
                tokio::spawn(agent.close());
                continue;
            }
            if agent.is_alive() {
                return Some(agent);
            }
            tracing::warn!(
                pid = agent.pid(),
                "a prewarmed agent died while waiting; discarding it"
            );
        }
        self.wanted.notify_one();
        None
    }

    /// Adds a started agent to the ready set and wakes a request waiting for one; after
    /// shutdown began, ends it instead.
    async fn put(&self, agent: Agent) {
        // Checked under the lock `drain` takes after setting `closed`: an agent is either in
        // the ready set before `drain` empties it, or ended here.
        let refused = match self.ready.lock() {
            Ok(mut ready) if !self.closed.load(Ordering::Acquire) => {
                ready.push_back(agent);
                None
            }
            _ => Some(agent),
        };
        match refused {
            Some(agent) => agent.close().await,
            None => self.arrived.notify_one(),
        }
    }

    /// Whether `agent` was started from the warm set's current recipe (its `--model`).
    fn is_warm_recipe(&self, agent: &Agent) -> bool {
        let Some(spec) = self.warm_spec() else {
            return true;
        };
        launched_model(&spec.args).map(|model| normalize_id(&model))
            == agent.launched_model().map(normalize_id)
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
            // With the model on the command line, nothing is warmed before a turn names it.
            let recipe = self.warm_spec();
            let missing = match recipe {
                Some(_) => self.target.saturating_sub(
                    self.ready_len() + starting.len() + self.own_starts.load(Ordering::Acquire),
                ),
                None => 0,
            };
            for _ in 0..missing {
                let Some(spec) = recipe.clone() else { break };
                let (limits, client) = (self.limits, self.client.clone());
                starting.spawn(async move { Agent::start(&spec, limits, &client).await });
            }
            tokio::select! {
                Some(started) = starting.join_next(), if !starting.is_empty() => match started {
                    Ok(Ok(agent)) => {
                        backoff = std::time::Duration::from_millis(100);
                        self.put(agent).await;
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

/// A start made for a request, counted in `own_starts` until it ends (or the request goes away
/// while it runs, which ends it).
struct OwnStart(Arc<AgentPool>);

impl OwnStart {
    fn enter(pool: &Arc<AgentPool>) -> Self {
        pool.own_starts.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(pool))
    }
}

impl Drop for OwnStart {
    fn drop(&mut self) {
        self.0.own_starts.fetch_sub(1, Ordering::AcqRel);
        self.0.wanted.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use super::*;
    use devin_bridge_agent::testkit::scripted_agent as agent;

    fn limits() -> AgentLimits {
        AgentLimits {
            init_timeout: Duration::from_secs(20),
            turn_timeout: Duration::from_secs(20),
            output_cap: 1 << 20,
            stopped_wait: Duration::ZERO,
        }
    }

    /// An agent that records its start as a line of `log`, takes `delays[n]` seconds (n: starts
    /// recorded before it; the last delay for later ones) to answer `initialize`, then idles.
    fn slow_agent(log: &Path, delays: &[&str]) -> Spec {
        let mut choose = String::new();
        for (n, delay) in delays.iter().enumerate() {
            choose.push_str(&format!("[ \"$n\" -ge {n} ] && d={delay}; "));
        }
        agent(&format!(
            r#"n=$(wc -l < {log:?} 2>/dev/null || echo 0); echo start >> {log:?}; {choose}
read -r l; sleep "$d"
echo '{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":1,"agentCapabilities":{{}},"authMethods":[]}}}}'
cat >/dev/null"#
        ))
    }

    /// A spec whose argv is `args` (the program is never run here).
    fn spec_with_args(args: &[&str]) -> Spec {
        Spec {
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            ..agent("true")
        }
    }

    #[test]
    fn a_summarizer_warm_set_has_its_model_on_the_command_line_from_the_first_start() {
        // The summarizer agent type's sessions have no model option: its warm set is started
        // with `--model` before any turn could find that out.
        let summarizer = spec_with_args(&["acp", "--agent-type", "summarizer"]);
        let pool = AgentPool::with_default_model(
            summarizer,
            limits(),
            ClientIdentity::default(),
            0,
            Some("swe-1-6".to_owned()),
        );
        let warm = pool.warm_spec().expect("a warm recipe");
        assert_eq!(
            warm.args,
            ["--model", "swe-1-6", "acp", "--agent-type", "summarizer"],
            "{:?}",
            warm.args
        );
        // The full agent chooses its model through the session's option: no `--model`.
        let full = spec_with_args(&["acp"]);
        let pool = AgentPool::with_default_model(
            full,
            limits(),
            ClientIdentity::default(),
            0,
            Some("swe-1-6".to_owned()),
        );
        assert_eq!(pool.warm_spec().expect("a warm recipe").args, ["acp"]);
    }

    fn starts(log: &Path) -> usize {
        std::fs::read_to_string(log)
            .map(|text| text.lines().count())
            .unwrap_or(0)
    }

    async fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_request_takes_the_refills_agent_when_it_is_ready_first_and_its_own_start_stays_warm()
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("starts");
        // The refill's agent (the first start) is ready after 0.5 s, the request's own after 4 s.
        let pool = AgentPool::new(
            slow_agent(&log, &["0.5", "4"]),
            limits(),
            ClientIdentity::default(),
            1,
        );
        tokio::spawn(pool.clone().run_refill());
        wait_for(|| starts(&log) == 1, "the refill's start").await;

        let asked = Instant::now();
        let agent = pool.take().await.expect("an agent");
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "took {:?}: waited for its own start instead of the refill's agent",
            asked.elapsed()
        );
        assert_eq!(starts(&log), 2, "the request started one of its own");
        // Its own start lands in the ready set; with the target met, nothing else starts.
        wait_for(
            || pool.stats().ready == 1,
            "the request's own agent to be kept warm",
        )
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(starts(&log), 2);
        assert_eq!(pool.stats().served_cold, 1);
        agent.close().await;
        pool.drain().await;
    }

    #[tokio::test]
    async fn a_request_that_goes_away_during_its_own_start_stops_counting_toward_the_warm_set() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("starts");
        // The warm agent comes at once; every later start takes 3 s.
        let pool = AgentPool::new(
            slow_agent(&log, &["0", "3"]),
            limits(),
            ClientIdentity::default(),
            1,
        );
        tokio::spawn(pool.clone().run_refill());
        wait_for(|| pool.stats().ready == 1, "the warm set").await;

        // The first request takes the warm agent; the second finds none and starts its own,
        // which counts toward the warm set.
        let first = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.take().await })
        };
        let second = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.take().await })
        };
        wait_for(|| starts(&log) == 2, "the second request's own start").await;
        assert_eq!(pool.own_starts.load(Ordering::Acquire), 1);
        // The second request goes away: its start no longer counts, and the refill replaces it
        // at once instead of waiting for a start nobody will take.
        second.abort();
        wait_for(|| starts(&log) == 3, "the refill's replacement").await;
        assert_eq!(pool.own_starts.load(Ordering::Acquire), 0);
        first
            .await
            .expect("join")
            .expect("the warm agent")
            .close()
            .await;
        pool.drain().await;
    }

    #[tokio::test]
    async fn during_a_burst_the_refill_starts_nothing_beyond_the_requests_own_starts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("starts");
        // Two warm agents come quickly; every later start takes 3 s.
        let pool = AgentPool::new(
            slow_agent(&log, &["0", "0", "3"]),
            limits(),
            ClientIdentity::default(),
            2,
        );
        tokio::spawn(pool.clone().run_refill());
        wait_for(|| pool.stats().ready == 2, "the warm set").await;

        let takers: Vec<_> = (0..6)
            .map(|_| {
                let pool = pool.clone();
                tokio::spawn(async move { pool.take().await })
            })
            .collect();
        // Two requests take the warm agents and four start their own. Those four starts count
        // toward the warm set, so the refill does not add two more while they run.
        wait_for(|| starts(&log) >= 6, "the requests' own starts").await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(
            starts(&log),
            6,
            "the refill started agents during the burst"
        );
        for taker in takers {
            let agent = taker.await.expect("join").expect("an agent");
            agent.close().await;
        }
        // After the burst the warm set is refilled.
        wait_for(|| pool.stats().ready == 2, "the refill after the burst").await;
        assert_eq!(starts(&log), 8);
        pool.drain().await;
    }
}
