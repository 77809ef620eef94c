//! The safeguard component: a thin export shell over the `devin-bridge-safeguard` library, in a crate of
//! its own so that the library is an rlib and nothing else (a component that embeds it, a
//! native build, builds no second component of it). The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here, and each
//! export answers as the library does (`devin_bridge_types::guest_exports!`, made from the
//! table of the transforms' functions).
#![cfg(target_arch = "wasm32")]

devin_bridge_types::guest_bindings!([safeguard] {
    world: "safeguard-component",
    path: "../../../wit",
});

use devin_bridge_types::{SafeguardStatus, ToolCall};

struct Component;

devin_bridge_types::guest_exports!(
    Safeguard SafeguardExports, Component: exports::devin_bridge::transforms::safeguard::Guest {}
);

impl SafeguardExports for Component {}

export!(Component);
