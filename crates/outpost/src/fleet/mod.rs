//! The Devin Outposts fleet API: typed objects, the authenticated client, URL rules.

pub(crate) mod client;
pub(crate) mod types;
pub(crate) mod url;

pub(crate) use client::{http_client, Claim, FleetClient, FleetError, PublicFetcher, Release};
pub(crate) use types::{
    AcceptorId, AllowRule, Commit, Cursor, EventType, NetworkPolicy, Outpost, OutpostId, Phase,
    QueueEntry, Secret, SessionId, SessionStatus, WatchEvent,
};
pub(crate) use url::{BaseUrl, BaseUrlError};
