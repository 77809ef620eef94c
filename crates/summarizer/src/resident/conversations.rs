//! The resident sessions of every conversation.
//!
//! A conversation is found by its key (the client's session header) and then by the identity
//! of the history it has sent: several sessions may share one key (an edited or forked
//! history, or subagents of one Claude Code session), and a request continues the session
//! whose history it extends. Turns on one session are single-flight: a turn holds the
//! session's lock from its first serialization to its answer.
//!
//! A parent outlives its subagents: when room is needed (more than `max_sessions` in all),
//! idle subagent sessions are forgotten first, least recently used first, and only then idle
//! sessions of main conversations; a subagent's new session never forgets a session of its
//! own parent. (A subagent's session is also released as soon as its conversation ends, see
//! [`super::Lease::commit`].)

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OwnedMutexGuard;

use super::processes::Slot;
use agent_client_protocol_schema::v1;
use devin_bridge_agent::acp::{
    apply_model_and_effort, AcpError, Applied, OnSharedAgent, SharedAgent,
};
use devin_bridge_agent::devin::options::normalize_id;
use devin_bridge_engine::MessageMark;

/// Sessions kept per conversation key (the least recently used goes beyond it).
const MAX_PER_KEY: usize = 8;

/// A session on a resident agent; the agent releases it (`session/close`, or
/// `session/delete` for the Devin CLI) when this is dropped.
pub(super) struct Bound {
    pub agent: Arc<SharedAgent>,
    pub session: String,
    /// The session's config options as the agent last reported them (its model among them).
    options: Vec<v1::SessionConfigOption>,
    /// The model and effort the last turn asked for, and what they came to: a turn that asks
    /// for the same runs on the session as it is. (Boxed: a lease holds its session inline.)
    applied: Option<Box<LastApplied>>,
    /// Held for as long as the session lives.
    slot: Slot,
}

/// What a session's last turn asked of its model and effort, and what that came to.
struct LastApplied {
    model: String,
    effort: Option<String>,
    applied: Applied,
}

impl Bound {
    pub(super) fn new(
        agent: Arc<SharedAgent>,
        session: String,
        options: Vec<v1::SessionConfigOption>,
        slot: Slot,
    ) -> Self {
        Self {
            agent,
            session,
            options,
            applied: None,
            slot,
        }
    }

    /// Runs the session on `wanted` at `effort`: nothing when the last turn asked for the
    /// same, otherwise `apply_model_and_effort` (`session/set_config_option` for what the
    /// session does not run yet: the model or its effort variant, the thought level), the
    /// process's `--model` when the session has no model option (`NoModelOption` when that
    /// process was started for another model). A turn without an effort leaves the session's
    /// thought level as the last turn set it.
    pub(super) async fn apply(
        &mut self,
        wanted: &str,
        effort: Option<&str>,
    ) -> Result<Applied, AcpError> {
        if let Some(last) = &self.applied {
            if normalize_id(&last.model) == normalize_id(wanted) && last.effort.as_deref() == effort
            {
                return Ok(last.applied.clone());
            }
        }
        let applied = apply_model_and_effort(
            &mut self.options,
            Some(wanted),
            effort,
            self.slot.model(),
            &mut OnSharedAgent {
                agent: &self.agent,
                session: &self.session,
            },
        )
        .await?;
        self.applied = Some(Box::new(LastApplied {
            model: wanted.to_owned(),
            effort: effort.map(str::to_owned),
            applied: applied.clone(),
        }));
        Ok(applied)
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let (agent, session) = (self.agent.clone(), std::mem::take(&mut self.session));
            handle.spawn(async move { agent.release_session(&session).await });
        }
    }
}

/// The bytes of request bodies that all sessions keep, and how many they may keep.
pub(super) struct ResumeBudget {
    used: AtomicUsize,
    limit: usize,
}

/// A kept body's share of the budget.
pub(super) struct Charge {
    budget: Arc<ResumeBudget>,
    bytes: usize,
}

impl ResumeBudget {
    pub(super) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            used: AtomicUsize::new(0),
            limit,
        })
    }

    /// Bytes kept now.
    pub(super) fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// `bytes` more, if they fit.
    pub(super) fn charge(self: &Arc<Self>, bytes: usize) -> Option<Charge> {
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            let next = used.checked_add(bytes).filter(|next| *next <= self.limit)?;
            match self
                .used
                .compare_exchange_weak(used, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    return Some(Charge {
                        budget: self.clone(),
                        bytes,
                    })
                }
                Err(now) => used = now,
            }
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// The session behind one conversation entry, if it has one.
pub(super) type Binding = Option<Bound>;

/// One resident session of a conversation.
pub(super) struct Entry {
    binding: Arc<tokio::sync::Mutex<Binding>>,
    view: Mutex<EntryView>,
    /// The last request the session answered, to serialize the next one from where their
    /// bytes part (none before the first answer and once forgotten).
    earlier: Mutex<Option<Arc<Earlier>>>,
    /// A subagent's session (its key names a parent).
    subagent: bool,
}

/// A request a session answered and what the serializer said of it: enough to serialize a
/// later request that repeats its bytes from where they stop matching (see
/// [`devin_bridge_types::continuation`]). It keeps the whole request body, charged to the
/// [`ResumeBudget`] for as long as it is kept.
pub(super) struct Earlier {
    pub body: Arc<String>,
    /// The body's share of the budget, given back when this is dropped.
    pub _charge: Charge,
    pub history: Vec<String>,
    pub marks: Vec<MessageMark>,
    pub tool_names: Vec<String>,
    /// The request's `tools` as the serializer printed them, its model and stream flag.
    pub tools: String,
    pub model: String,
    pub stream: bool,
    /// Its `tool_choice.disable_parallel_tool_use` (part of what a continuation repeats).
    pub single_tool_call: bool,
    /// Its safeguard's classifier context (also repeated by a continuation).
    pub classifier_context: Option<String>,
    /// Its tool calls for the safeguard judge, in message order (empty without the
    /// safeguard): a continuation keeps those of the messages it repeats.
    pub earlier_calls: Vec<devin_bridge_types::ToolCall>,
    /// Its effort (also outside the messages: repeated by a continuation).
    pub effort: Option<String>,
}

/// What is known of an entry without waiting for its running turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EntryView {
    /// Messages the session holds (0: none yet).
    pub held: u32,
    /// The identity of those messages.
    pub digest: String,
    pub last_used: Instant,
    /// Forgotten (idle, evicted or failed): no turn may use it any more.
    pub forgotten: bool,
}

impl Entry {
    fn new(parent: Option<&str>) -> Self {
        Self {
            subagent: parent.is_some(),
            binding: Arc::new(tokio::sync::Mutex::new(None)),
            view: Mutex::new(EntryView {
                held: 0,
                digest: String::new(),
                last_used: Instant::now(),
                forgotten: false,
            }),
            earlier: Mutex::new(None),
        }
    }

    /// Whether this is a subagent's session.
    pub(super) fn is_subagent(&self) -> bool {
        self.subagent
    }

    /// The last request this session answered.
    pub(super) fn earlier(&self) -> Option<Arc<Earlier>> {
        self.earlier
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn set_earlier(&self, earlier: Option<Arc<Earlier>>) {
        *self
            .earlier
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = earlier;
    }

    pub(super) fn view(&self) -> EntryView {
        self.view
            .lock()
            .map(|view| view.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    fn update(&self, change: impl FnOnce(&mut EntryView)) {
        let mut view = self
            .view
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        change(&mut view);
    }

    /// Waits for the running turn, if any, and holds the session for this one.
    pub(super) async fn lock(&self) -> OwnedMutexGuard<Binding> {
        self.binding.clone().lock_owned().await
    }

    /// The session now holds `history` (after a successful turn), the messages of `earlier`.
    pub(super) fn commit(&self, history: &[String], earlier: Option<Arc<Earlier>>) {
        self.set_earlier(earlier);
        let held = u32::try_from(history.len()).unwrap_or(u32::MAX);
        let digest = history.last().cloned().unwrap_or_default();
        self.update(|view| {
            view.held = held;
            view.digest = digest;
            view.last_used = Instant::now();
        });
    }

    /// No turn may use this entry again.
    pub(super) fn forget(&self) {
        self.update(|view| {
            view.forgotten = true;
            view.held = 0;
        });
        self.set_earlier(None);
    }

    /// Whether a request whose history is `history` continues this session: the session holds
    /// some messages, all of them are the request's first ones, and the request adds more.
    fn continued_by(&self, history: &[String]) -> Option<u32> {
        let view = self.view();
        let held = usize::try_from(view.held).ok()?;
        (!view.forgotten && held > 0 && held < history.len())
            .then(|| history.get(held - 1))
            .flatten()
            .filter(|digest| **digest == view.digest)
            .map(|_| view.held)
    }
}

/// Every conversation's entries, by key.
pub(super) struct Conversations {
    by_key: Mutex<HashMap<String, Vec<Arc<Entry>>>>,
    max_total: usize,
}

impl Conversations {
    pub(super) fn new(max_total: usize) -> Self {
        Self {
            by_key: Mutex::new(HashMap::new()),
            max_total: max_total.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Arc<Entry>>>> {
        self.by_key
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many messages the most recently used session of `key` holds (0 when none), and
    /// the last request it answered: the first guess of what a new request's session has
    /// seen.
    pub(super) fn likely(&self, key: &str) -> (u32, Option<Arc<Earlier>>) {
        self.lock()
            .get(key)
            .and_then(|entries| {
                entries
                    .iter()
                    .map(|entry| (entry.view(), entry))
                    .filter(|(view, _)| !view.forgotten && view.held > 0)
                    .max_by_key(|(view, _)| view.last_used)
                    .map(|(view, entry)| (view.held, entry.earlier()))
            })
            .unwrap_or((0, None))
    }

    /// Whether `key` has any session.
    pub(super) fn knows(&self, key: &str) -> bool {
        self.lock()
            .get(key)
            .is_some_and(|entries| !entries.is_empty())
    }

    /// The session of `key` that `history` continues (the one holding the most messages), and
    /// how many it holds.
    pub(super) fn continued(&self, key: &str, history: &[String]) -> Option<(Arc<Entry>, u32)> {
        self.lock().get(key).and_then(|entries| {
            entries
                .iter()
                .filter_map(|entry| {
                    entry
                        .continued_by(history)
                        .map(|held| (entry.clone(), held))
                })
                .max_by_key(|(_, held)| *held)
        })
    }

    /// A new, empty entry for `key` (a subagent's, when `parent` names its parent's key).
    /// Beyond the caps, idle entries are forgotten: of `key` itself, the least recently used;
    /// over `max_total`, idle subagent sessions first and then those of main conversations,
    /// each kind least recently used first, and never a session of `parent`.
    pub(super) fn create(&self, key: &str, parent: Option<&str>) -> Arc<Entry> {
        let entry = Arc::new(Entry::new(parent));
        let mut by_key = self.lock();
        let entries = by_key.entry(key.to_owned()).or_default();
        if entries.len() >= MAX_PER_KEY {
            evict_least_recent(entries, entries.len() + 1 - MAX_PER_KEY);
        }
        let total: usize = by_key.values().map(Vec::len).sum();
        if total >= self.max_total {
            let mut all: Vec<(String, Arc<Entry>)> = by_key
                .iter()
                .filter(|(owner, _)| Some(owner.as_str()) != parent)
                .flat_map(|(key, entries)| entries.iter().map(|e| (key.clone(), e.clone())))
                .collect();
            // Running turns move `last_used` while this sorts: read each key once, or the sort
            // sees an inconsistent order (which the standard sort answers with a panic).
            // Subagents sort before main conversations (`false` before `true`).
            all.sort_by_cached_key(|(_, entry)| (!entry.is_subagent(), entry.view().last_used));
            let mut over = total + 1 - self.max_total;
            for (key, victim) in all {
                if over == 0 {
                    break;
                }
                if !drop_binding_if_idle(&victim) {
                    continue;
                }
                if let Some(entries) = by_key.get_mut(&key) {
                    entries.retain(|e| !Arc::ptr_eq(e, &victim));
                }
                over -= 1;
            }
            by_key.retain(|_, entries| !entries.is_empty());
        }
        by_key
            .entry(key.to_owned())
            .or_default()
            .push(entry.clone());
        entry
    }

    /// Removes `entry` (its turn failed or it was superseded).
    pub(super) fn remove(&self, entry: &Arc<Entry>) {
        entry.forget();
        let mut by_key = self.lock();
        for entries in by_key.values_mut() {
            entries.retain(|e| !Arc::ptr_eq(e, entry));
        }
        by_key.retain(|_, entries| !entries.is_empty());
    }

    /// Forgets sessions without a turn for longer than `idle` (a running turn keeps its
    /// session). Returns how many were forgotten.
    pub(super) fn forget_idle(&self, idle: Duration) -> usize {
        let mut forgotten = 0;
        let mut by_key = self.lock();
        for entries in by_key.values_mut() {
            entries.retain(|entry| {
                let stale = entry.view().last_used.elapsed() >= idle;
                if stale && drop_binding_if_idle(entry) {
                    forgotten += 1;
                    false
                } else {
                    true
                }
            });
        }
        by_key.retain(|_, entries| !entries.is_empty());
        forgotten
    }

    /// Sessions kept now.
    pub(super) fn len(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }
}

/// Forgets `entry` and ends its session unless a turn holds it; whether it did.
fn drop_binding_if_idle(entry: &Entry) -> bool {
    match entry.binding.try_lock() {
        Ok(mut binding) => {
            entry.forget();
            binding.take();
            true
        }
        Err(_busy) => false,
    }
}

/// Forgets the `count` least recently used idle entries of one key.
fn evict_least_recent(entries: &mut Vec<Arc<Entry>>, count: usize) {
    let mut order: Vec<Arc<Entry>> = entries.clone();
    // One read of each `last_used` (running turns move it; see `create`).
    order.sort_by_cached_key(|entry| entry.view().last_used);
    let mut left = count;
    for victim in order {
        if left == 0 {
            break;
        }
        if drop_binding_if_idle(&victim) {
            entries.retain(|e| !Arc::ptr_eq(e, &victim));
            left -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resume_budget_refuses_what_does_not_fit_and_takes_back_what_is_dropped() {
        let budget = ResumeBudget::new(100);
        let first = budget.charge(60).expect("fits");
        assert_eq!(budget.used(), 60);
        assert!(budget.charge(41).is_none(), "over the limit");
        let second = budget.charge(40).expect("exactly fits");
        assert_eq!(budget.used(), 100);
        drop(first);
        assert_eq!(budget.used(), 40);
        assert!(budget.charge(usize::MAX).is_none(), "no overflow");
        drop(second);
        assert_eq!(budget.used(), 0);
        assert!(
            ResumeBudget::new(0).charge(1).is_none(),
            "a zero budget keeps nothing"
        );
    }

    fn history(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("id{i}")).collect()
    }

    #[test]
    fn a_request_continues_the_session_whose_messages_it_starts_with() {
        let conversations = Conversations::new(16);
        let entry = conversations.create("k", None);
        assert!(
            conversations.continued("k", &history(3)).is_none(),
            "an empty session continues nothing"
        );
        entry.commit(&history(3), None);
        assert_eq!(conversations.likely("k").0, 3);
        let (found, held) = conversations
            .continued("k", &history(5))
            .expect("continues");
        assert!(Arc::ptr_eq(&found, &entry));
        assert_eq!(held, 3);
        // The same history again adds nothing: no continuation.
        assert!(conversations.continued("k", &history(3)).is_none());
        // An edited history (another identity at the session's last message) does not continue.
        let mut edited = history(5);
        edited[2] = "other".into();
        assert!(conversations.continued("k", &edited).is_none());
        // Another key never sees this session.
        assert!(conversations.continued("other-key", &history(5)).is_none());
    }

    #[test]
    fn the_session_holding_the_most_messages_wins_and_forgotten_ones_never_do() {
        let conversations = Conversations::new(16);
        let short = conversations.create("k", None);
        short.commit(&history(2), None);
        let long = conversations.create("k", None);
        long.commit(&history(4), None);
        let (found, held) = conversations.continued("k", &history(6)).expect("found");
        assert!(Arc::ptr_eq(&found, &long));
        assert_eq!(held, 4);
        conversations.remove(&long);
        let (found, _) = conversations.continued("k", &history(6)).expect("found");
        assert!(Arc::ptr_eq(&found, &short));
        assert!(long.view().forgotten);
        assert_eq!(conversations.len(), 1);
    }

    #[tokio::test]
    async fn caps_forget_the_least_recently_used_idle_entries_but_never_a_busy_one() {
        let conversations = Conversations::new(2);
        let first = conversations.create("a", None);
        first.commit(&history(1), None);
        let busy = first.lock().await;
        let second = conversations.create("b", None);
        second.commit(&history(1), None);
        // A third entry goes over the cap of 2: the idle `second` goes, not the busy `first`.
        let _third = conversations.create("c", None);
        assert_eq!(conversations.len(), 2);
        assert!(second.view().forgotten);
        assert!(!first.view().forgotten);
        drop(busy);
        // Per key, at most MAX_PER_KEY entries.
        let per_key = Conversations::new(100);
        for _ in 0..(MAX_PER_KEY + 3) {
            per_key.create("same", None);
        }
        assert_eq!(per_key.len(), MAX_PER_KEY);
    }

    #[tokio::test]
    async fn idle_entries_are_forgotten_and_busy_ones_kept() {
        let conversations = Conversations::new(16);
        let idle = conversations.create("idle", None);
        idle.commit(&history(1), None);
        let busy = conversations.create("busy", None);
        busy.commit(&history(1), None);
        let guard = busy.lock().await;
        assert_eq!(conversations.forget_idle(Duration::ZERO), 1);
        assert!(idle.view().forgotten);
        assert!(!busy.view().forgotten);
        assert_eq!(conversations.len(), 1);
        drop(guard);
        assert_eq!(conversations.forget_idle(Duration::from_secs(3600)), 0);
    }

    #[test]
    fn twenty_subagents_never_forget_their_parents_session() {
        let conversations = Conversations::new(4);
        let parent = conversations.create("s", None);
        parent.commit(&history(2), None);
        let mut children = Vec::new();
        for agent in 0..20 {
            let child = conversations.create(&format!("s /agent a{agent}"), Some("s"));
            child.commit(&history(1), None);
            children.push(child);
            assert!(!parent.view().forgotten, "after subagent {agent}");
            assert!(conversations.len() <= 4);
        }
        let (found, held) = conversations.continued("s", &history(3)).expect("kept");
        assert!(Arc::ptr_eq(&found, &parent));
        assert_eq!(held, 2);
        // The least recently used subagents made the room; the latest ones are kept.
        assert!(children[0].view().forgotten);
        assert!(!children[19].view().forgotten);
    }

    #[test]
    fn room_is_made_from_idle_subagents_before_any_main_conversation() {
        let conversations = Conversations::new(3);
        // The oldest entry is a main conversation's; a subagent of another came after it.
        let old_main = conversations.create("old", None);
        old_main.commit(&history(1), None);
        let other_child = conversations.create("other /agent x", Some("other"));
        other_child.commit(&history(1), None);
        let newer_main = conversations.create("new", None);
        newer_main.commit(&history(1), None);
        // A new main conversation needs room: the subagent goes, though it is not the oldest.
        conversations.create("third", None);
        assert!(other_child.view().forgotten);
        assert!(!old_main.view().forgotten);
        // No subagent left: then the least recently used main conversation goes.
        conversations.create("fourth", None);
        assert!(old_main.view().forgotten);
        assert!(!newer_main.view().forgotten);
    }
}
