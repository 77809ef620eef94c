//! The Devin Outposts fleet API: typed objects, the authenticated client, URL rules.

pub mod client;
pub mod types;
pub mod url;

pub use client::{http_client, Claim, FleetClient, FleetError, HttpClient, PublicFetcher, Release};
pub use types::{
    AcceptorId, AllowRule, Commit, Cursor, EventType, Kind, NetworkPolicy, Outpost, OutpostId,
    Phase, QueueEntry, Secret, SessionId, SessionStatus, WatchEvent,
};
pub use url::{BaseUrl, BaseUrlError};
