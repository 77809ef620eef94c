//! The component export: a thin shell that converts WIT bindings to the library's types.

wit_bindgen::generate!({
    world: "model-alias-component",
    path: "../../wit",
});

use devin_bridge::transforms::types::Failure;
use exports::devin_bridge::transforms::model_alias::{Guest, ResolvedModel};

struct Component;

fn failure(failure: crate::Failure) -> Failure {
    Failure {
        code: failure.code,
        message: failure.message,
        status: failure.status,
        repairable: failure.repairable,
    }
}

impl Guest for Component {
    fn validate(reference: String, catalog: String) -> Result<String, Failure> {
        crate::validate(&reference, &catalog).map_err(failure)
    }

    fn client_environment(
        settings: Vec<(String, String)>,
        catalog: String,
    ) -> Result<Vec<(String, String)>, Failure> {
        crate::client_environment(&settings, &catalog).map_err(failure)
    }

    fn resolve(requested: String, catalog: String) -> Result<ResolvedModel, Failure> {
        crate::resolve(&requested, &catalog)
            .map(|model| ResolvedModel {
                family: model.family,
                model_uid: model.model_uid,
                label: model.label,
                acp_id: model.acp_id,
            })
            .map_err(failure)
    }

    fn list_models(catalog: String, vision: bool) -> Result<String, Failure> {
        crate::list_models(&catalog, vision).map_err(failure)
    }
}

export!(Component);
