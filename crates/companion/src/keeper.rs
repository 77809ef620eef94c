//! `devin-bridge companion group-keeper --grace-ms G` (internal): the name the keeper of a print
//! run had before the one keeper of `devin_bridge_agent::process::keeper` replaced it. Print
//! runs now start `devin-bridge keeper`; this name runs the same keeper, with the same
//! arguments and protocol. It stays because a companion of an earlier release started its
//! keeper by the binary's path: after an upgrade in place, that path is this binary, and a
//! print run already under way must still find its keeper.

pub(crate) use devin_bridge_agent::process::keeper::{run, KeeperArgs};

/// The companion's name for the keeper subcommand.
pub(crate) const SUBCOMMAND: &str = "group-keeper";

/// `--grace-ms MS`, the keeper's only argument.
pub(crate) fn parse_args(args: &[String]) -> Option<KeeperArgs> {
    KeeperArgs::parse(args)
}
