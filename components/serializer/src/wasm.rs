//! The component export: a thin shell that converts WIT bindings to the library's types.

wit_bindgen::generate!({
    world: "serializer-component",
    path: "../../wit",
});

use devin_bridge::transforms::types::Failure;
use exports::devin_bridge::transforms::serializer::{Guest, Prompt};

struct Component;

fn failure_to_wit(failure: crate::Failure) -> Failure {
    Failure {
        code: failure.code,
        message: failure.message,
        status: failure.status,
        repairable: failure.repairable,
    }
}

fn failure_from_wit(failure: Failure) -> crate::Failure {
    crate::Failure {
        code: failure.code,
        message: failure.message,
        status: failure.status,
        repairable: failure.repairable,
    }
}

impl Guest for Component {
    fn serialize(request: String) -> Result<Prompt, Failure> {
        crate::serialize(&request)
            .map(|prompt| Prompt {
                text: prompt.text,
                tools: prompt.tools,
                input_tokens: prompt.input_tokens,
                id_seed: prompt.id_seed,
                model: prompt.model,
                stream: prompt.stream,
            })
            .map_err(failure_to_wit)
    }

    fn repair(prompt: String, rejection: Failure) -> String {
        crate::repair(&prompt, &failure_from_wit(rejection))
    }
}

export!(Component);
