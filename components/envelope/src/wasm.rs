//! The component export: a thin shell that converts WIT bindings to the library's types.

wit_bindgen::generate!({
    world: "envelope-component",
    path: "../../wit",
});

use devin_bridge::transforms::types::{Failure, Reply, ToolCall};
use exports::devin_bridge::transforms::envelope::Guest;

struct Component;

impl Guest for Component {
    fn parse(
        output: String,
        tools: String,
        id_seed: String,
        max_calls: u32,
    ) -> Result<Reply, Failure> {
        // The output is owned here: a text reply reuses its buffer rather than copying it.
        match crate::parse_owned(output, &tools, &id_seed, max_calls) {
            Ok(crate::Reply::Text(text)) => Ok(Reply::Text(text)),
            Ok(crate::Reply::Tools(calls)) => Ok(Reply::Tools(
                calls
                    .into_iter()
                    .map(|call| ToolCall {
                        id: call.id,
                        name: call.name,
                        input: call.input,
                    })
                    .collect(),
            )),
            Err(failure) => Err(wit_failure(failure)),
        }
    }

    fn narrates_unexecuted_action(output: String) -> bool {
        crate::narrates_unexecuted_action(&output)
    }

    fn parse_review(output: String) -> Result<String, Failure> {
        crate::parse_review(&output).map_err(wit_failure)
    }
}

fn wit_failure(failure: crate::Failure) -> Failure {
    Failure {
        code: failure.code,
        message: failure.message,
        status: failure.status,
        repairable: failure.repairable,
    }
}

export!(Component);

/// `jsonschema` reaches `getrandom` (hash seeding). The guest is built with
/// `--cfg getrandom_backend="custom"`, and this is the custom backend: the transform needs
/// no secret randomness, and a component with no imports has no entropy source anyway.
/// Hash-flooding is not a concern for validating one tool call's arguments.
#[no_mangle]
unsafe extern "Rust" fn __getrandom_v03_custom(
    dest: *mut u8,
    len: usize,
) -> Result<(), getrandom::Error> {
    // SAFETY: getrandom guarantees `dest` is valid for writes of `len` bytes.
    unsafe { core::ptr::write_bytes(dest, 0x5a, len) };
    Ok(())
}
