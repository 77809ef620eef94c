//! Shared helpers of the host's integration tests: the support crate they share with the
//! benchmarks (`tests/support`, seen here as `common::*`), and what only these tests use.

pub(crate) use devin_bridge_test_support::*;

pub(crate) mod companion;
pub(crate) mod yaml;
