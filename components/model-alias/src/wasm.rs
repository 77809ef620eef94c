//! The component export: a thin shell over the library. The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here, and each
//! export answers as the library does (`devin_bridge_types::guest_exports!`, made from the
//! table of the transforms' functions).

devin_bridge_types::guest_bindings!([model_alias] {
    world: "model-alias-component",
    path: "../../wit",
});

use devin_bridge_types::{Failure, ResolvedModel};

struct Component;

devin_bridge_types::guest_exports!(
    ModelAlias ModelAliasExports, Component: exports::devin_bridge::transforms::model_alias::Guest {}
);

impl ModelAliasExports for Component {}

export!(Component);
