//! Who runs what: the host's own identity and the separate identity of every agent process.
//!
//! The agent is untrusted. When it runs under the host's uid it can do whatever the host can:
//! write the compile cache, connect to the control socket, read the local API key. So a policy
//! names a dedicated user for agents (`[agent] user`), and every agent process the host starts
//! runs under that uid/gid with no supplementary groups (see `process::Spec::identity`).
//!
//! Switching a child to another uid needs three capabilities, and the host keeps exactly these:
//! - `CAP_SETUID`, `CAP_SETGID`: the child calls `setgroups([])`, `setgid`, `setuid` between fork
//!   and exec;
//! - `CAP_KILL`: the host signals the agent's process group (SIGTERM, then SIGKILL), which the
//!   kernel allows across uids only with this capability.
//!
//! An agent never holds a capability: it runs under a non-zero uid, with no ambient or
//! inheritable capabilities, so its `execve` clears them all; and the host sets
//! `no_new_privs`, so no set-uid program or file capability can give them back.
//!
//! A container starts the host as root with only those three capabilities in its bounding set;
//! `[server] user` then makes the host switch, before any thread exists, to its own unprivileged
//! uid, keeping the three capabilities and nothing else.

use caps::{CapSet, Capability, CapsHashSet};
use nix::unistd::{Gid, Uid, User};

/// The capabilities the host keeps to run agents under their own uid.
pub const AGENT_SWITCH_CAPS: [Capability; 3] = [
    Capability::CAP_SETUID,
    Capability::CAP_SETGID,
    Capability::CAP_KILL,
];

/// Why an identity cannot be established.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{field} = {spec:?}: no such user (give a user name, a uid, or uid:gid)")]
    UnknownUser { field: &'static str, spec: String },
    #[error("{field} = {spec:?}: {message}")]
    InvalidUser {
        field: &'static str,
        spec: String,
        message: String,
    },
    #[error("agent.user {spec:?} is uid {uid}, the host's own uid: the agent would share the host's identity; refusing to start")]
    SameIdentity { spec: String, uid: u32 },
    #[error(
        "agent.user {spec:?} asks for a separate agent identity, but this host cannot switch uid \
         (it lacks {missing}); grant CAP_SETUID, CAP_SETGID and CAP_KILL or start it as root with \
         [server] user set; refusing to start (fail closed)"
    )]
    CannotSwitch { spec: String, missing: String },
    #[error("server.user {spec:?}: the host runs as uid {current}, not root, and cannot switch to uid {wanted}")]
    CannotDrop {
        spec: String,
        current: u32,
        wanted: u32,
    },
    #[error("switching the host to {spec:?} failed at {step}: {message}")]
    DropFailed {
        spec: String,
        step: &'static str,
        message: String,
    },
}

/// A resolved user: numeric ids plus the name it was given as, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserIds {
    pub uid: u32,
    pub gid: u32,
    pub spec: String,
}

impl UserIds {
    /// Resolves `name`, `uid` or `uid:gid` (a bare uid takes the passwd entry's group when
    /// there is one, else the same number).
    pub fn resolve(field: &'static str, spec: &str) -> Result<Self, IdentityError> {
        let invalid = |message: &str| IdentityError::InvalidUser {
            field,
            spec: spec.to_owned(),
            message: message.to_owned(),
        };
        let spec_owned = spec.to_owned();
        if let Some((uid, gid)) = spec.split_once(':') {
            let uid = uid.parse().map_err(|_| invalid("uid is not a number"))?;
            let gid = gid.parse().map_err(|_| invalid("gid is not a number"))?;
            return Ok(Self {
                uid,
                gid,
                spec: spec_owned,
            });
        }
        if let Ok(uid) = spec.parse::<u32>() {
            let gid = User::from_uid(Uid::from_raw(uid))
                .ok()
                .flatten()
                .map_or(uid, |user| user.gid.as_raw());
            return Ok(Self {
                uid,
                gid,
                spec: spec_owned,
            });
        }
        if spec.is_empty() {
            return Err(invalid("empty user name"));
        }
        match User::from_name(spec) {
            Ok(Some(user)) => Ok(Self {
                uid: user.uid.as_raw(),
                gid: user.gid.as_raw(),
                spec: spec_owned,
            }),
            _ => Err(IdentityError::UnknownUser {
                field,
                spec: spec_owned,
            }),
        }
    }
}

/// Under which identity agent processes run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentIdentity {
    /// Agents run under their own uid/gid; the host keeps the capabilities to switch.
    Separate(UserIds),
    /// Agents run under the host's own uid (a plain local user without the rights to switch).
    Shared { uid: u32 },
}

impl AgentIdentity {
    /// Agents share the identity of the calling process (tests, benchmarks, plain local runs).
    pub fn shared_with_host() -> Self {
        Self::Shared {
            uid: Uid::effective().as_raw(),
        }
    }

    /// The (uid, gid) a child must switch to, if any.
    pub fn switch_to(&self) -> Option<(u32, u32)> {
        match self {
            Self::Separate(user) => Some((user.uid, user.gid)),
            Self::Shared { .. } => None,
        }
    }

    /// For `/healthz` and the start-up banner.
    pub fn describe(&self) -> String {
        match self {
            Self::Separate(user) => format!("separate uid {} gid {}", user.uid, user.gid),
            Self::Shared { uid } => format!("shared with the host (uid {uid})"),
        }
    }
}

/// Who the host and its agents should be: `[server] user`, `[agent] user`, and whether the
/// agent is the offline stand-in (which may share the host's identity when it cannot switch).
#[derive(Debug, Clone, Copy)]
pub struct IdentityRequest<'a> {
    pub host_user: Option<&'a str>,
    pub agent_user: Option<&'a str>,
    pub offline: bool,
}

/// Sets the host's identity for `serve` and decides the agents'. Must run before any thread
/// is started: capability sets are per thread, and threads inherit them from this one. When
/// the agent ends up sharing the host's identity, the second value says so and why, for the
/// caller to show (`serve` at start-up, `doctor` as one of its checks).
pub fn establish(
    request: IdentityRequest<'_>,
) -> Result<(AgentIdentity, Option<String>), IdentityError> {
    if let Some(spec) = request.host_user {
        become_host_user(&UserIds::resolve("server.user", spec)?)?;
    } else if Uid::effective().is_root() {
        tracing::warn!(
            "the host runs as root; set [server] user so it keeps only the capabilities it needs"
        );
    }
    // Neither the host nor anything it starts may gain privileges through execve.
    if let Err(error) = nix::sys::prctl::set_no_new_privs() {
        tracing::warn!(%error, "cannot set no_new_privs");
    }
    let host_uid = Uid::effective().as_raw();
    let Some(spec) = request.agent_user else {
        let notice = format!(
            "the agent shares the host's identity (uid {host_uid}); set [agent] user to run it \
             under its own uid"
        );
        return Ok((AgentIdentity::Shared { uid: host_uid }, Some(notice)));
    };
    let agent = UserIds::resolve("agent.user", spec)?;
    if agent.uid == 0 {
        return Err(IdentityError::InvalidUser {
            field: "agent.user",
            spec: spec.to_owned(),
            message: "the agent may not run as root".into(),
        });
    }
    if agent.uid == host_uid {
        return Err(IdentityError::SameIdentity {
            spec: spec.to_owned(),
            uid: host_uid,
        });
    }
    let missing = missing_switch_caps();
    if missing.is_empty() {
        return Ok((AgentIdentity::Separate(agent), None));
    }
    let missing = missing.join(", ");
    if request.offline {
        let notice = format!(
            "the agent shares the host's identity (uid {host_uid}): agent.user {spec:?} needs \
             {missing}, which this offline run lacks"
        );
        return Ok((AgentIdentity::Shared { uid: host_uid }, Some(notice)));
    }
    Err(IdentityError::CannotSwitch {
        spec: spec.to_owned(),
        missing,
    })
}

/// The names of the switch capabilities this thread does not hold in its effective set.
pub fn missing_switch_caps() -> Vec<String> {
    AGENT_SWITCH_CAPS
        .iter()
        .filter(|cap| !caps::has_cap(None, CapSet::Effective, **cap).unwrap_or(false))
        .map(|cap| cap.to_string())
        .collect()
}

/// Switches a root-started host to `user`, keeping only the agent switch capabilities.
fn become_host_user(user: &UserIds) -> Result<(), IdentityError> {
    let current = Uid::effective().as_raw();
    if current == user.uid {
        return Ok(());
    }
    if current != 0 {
        return Err(IdentityError::CannotDrop {
            spec: user.spec.clone(),
            current,
            wanted: user.uid,
        });
    }
    let failed = |step: &'static str| {
        let spec = user.spec.clone();
        move |error: &dyn std::fmt::Display| IdentityError::DropFailed {
            spec,
            step,
            message: error.to_string(),
        }
    };
    let keep: CapsHashSet = AGENT_SWITCH_CAPS.into_iter().collect();
    caps::securebits::set_keepcaps(true).map_err(|e| failed("keepcaps")(&e))?;
    let gid = Gid::from_raw(user.gid);
    nix::unistd::setgroups(&[]).map_err(|e| failed("setgroups")(&e))?;
    nix::unistd::setresgid(gid, gid, gid).map_err(|e| failed("setresgid")(&e))?;
    let uid = Uid::from_raw(user.uid);
    nix::unistd::setresuid(uid, uid, uid).map_err(|e| failed("setresuid")(&e))?;
    caps::securebits::set_keepcaps(false).map_err(|e| failed("keepcaps")(&e))?;
    // Permitted first (it bounds effective), then effective; nothing inheritable or ambient.
    caps::set(None, CapSet::Permitted, &keep).map_err(|e| failed("permitted")(&e))?;
    caps::set(None, CapSet::Effective, &keep).map_err(|e| failed("effective")(&e))?;
    caps::clear(None, CapSet::Inheritable).map_err(|e| failed("inheritable")(&e))?;
    caps::clear(None, CapSet::Ambient).map_err(|e| failed("ambient")(&e))?;
    tracing::info!(uid = user.uid, gid = user.gid, kept = ?AGENT_SWITCH_CAPS, "host switched to its own user");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_specs_resolve_without_a_passwd_entry() {
        let user = UserIds::resolve("agent.user", "10002:10003").expect("uid:gid");
        assert_eq!((user.uid, user.gid), (10002, 10003));
        let user = UserIds::resolve("agent.user", "4242424").expect("bare uid");
        assert_eq!((user.uid, user.gid), (4242424, 4242424));
    }

    #[test]
    fn names_resolve_through_passwd_and_unknown_names_are_refused() {
        let root = UserIds::resolve("agent.user", "root").expect("root exists everywhere");
        assert_eq!((root.uid, root.gid), (0, 0));
        let error = UserIds::resolve("agent.user", "no-such-user-devin-bridge").unwrap_err();
        assert!(
            matches!(error, IdentityError::UnknownUser { .. }),
            "{error}"
        );
        let error = UserIds::resolve("agent.user", "10002:x").unwrap_err();
        assert!(error.to_string().contains("gid is not a number"), "{error}");
    }

    #[test]
    fn only_a_separate_identity_switches_children() {
        let separate = AgentIdentity::Separate(UserIds {
            uid: 10002,
            gid: 10002,
            spec: "bridge-agent".into(),
        });
        assert_eq!(separate.switch_to(), Some((10002, 10002)));
        assert_eq!(AgentIdentity::Shared { uid: 1000 }.switch_to(), None);
    }
}
