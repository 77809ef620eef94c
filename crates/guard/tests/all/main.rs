//! Integration tests of the egress guard: real sockets, real TLS, real clients.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e;
mod resources;
mod support;
