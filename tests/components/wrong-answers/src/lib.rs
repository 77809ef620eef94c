//! A serializer with the right interface but wrong answers (its token estimate is off by
//! one): the host must refuse it because it fails the golden corpus.

#[cfg(target_arch = "wasm32")]
mod wasm {
    wit_bindgen::generate!({ world: "serializer-component", path: "../../../wit" });

    use devin_bridge::transforms::types::Failure;
    use exports::devin_bridge::transforms::serializer::{Guest, Prompt};

    include!("../../delegate.rs");

    struct Component;

    impl Guest for Component {
        fn serialize(request: String) -> Result<Prompt, Failure> {
            real_serialize(&request).map(|p| Prompt {
                input_tokens: p.input_tokens + 1,
                ..p
            })
        }

        fn repair(prompt: String, _rejection: Failure) -> String {
            prompt
        }
    }

    export!(Component);
}
