//! The component export: a thin shell over the library. The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here, and each
//! export answers as the library does (`devin_bridge_types::guest_exports!`, made from the
//! table of the transforms' functions).

devin_bridge_types::guest_bindings!([safeguard] {
    world: "safeguard-component",
    path: "../../wit",
});

use devin_bridge_types::{SafeguardStatus, ToolCall};

struct Component;

devin_bridge_types::guest_exports!(
    Safeguard SafeguardExports, Component: exports::devin_bridge::transforms::safeguard::Guest {}
);

impl SafeguardExports for Component {}

export!(Component);
