//! The component export: a thin shell over the library. The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here.

devin_bridge_types::guest_bindings!([model_alias] {
    world: "model-alias-component",
    path: "../../wit",
});

use devin_bridge_types::{Failure, ResolvedModel};
use exports::devin_bridge::transforms::model_alias::Guest;

struct Component;

impl Guest for Component {
    fn validate(reference: String, catalog: String) -> Result<String, Failure> {
        crate::validate(&reference, &catalog)
    }

    fn client_environment(
        settings: Vec<(String, String)>,
        catalog: String,
    ) -> Result<Vec<(String, String)>, Failure> {
        crate::client_environment(&settings, &catalog)
    }

    fn resolve(requested: String, catalog: String) -> Result<ResolvedModel, Failure> {
        crate::resolve(&requested, &catalog)
    }

    fn list_models(catalog: String, vision: bool) -> Result<String, Failure> {
        crate::list_models(&catalog, vision)
    }

    fn context_windows(catalog: String) -> Result<Vec<(String, u64)>, Failure> {
        crate::context_windows(&catalog)
    }
}

export!(Component);
