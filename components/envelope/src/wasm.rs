//! The component export: a thin shell over the library. The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here.

devin_bridge_types::guest_bindings!([envelope] {
    world: "envelope-component",
    path: "../../wit",
});

use devin_bridge_types::{Failure, ParsedReply};
use exports::devin_bridge::transforms::envelope::Guest;

struct Component;

impl Guest for Component {
    fn parse(
        output: String,
        tools: String,
        id_seed: String,
        max_calls: u32,
    ) -> Result<ParsedReply, Failure> {
        // A text reply is answered as its span of the output: the host holds the output
        // already, so the text is not copied back across the boundary.
        crate::parse_span(&output, &tools, &id_seed, max_calls)
    }

    fn narrates_unexecuted_action(output: String) -> bool {
        crate::narrates_unexecuted_action(&output)
    }

    fn parse_review(output: String) -> Result<String, Failure> {
        crate::parse_review(&output)
    }
}

export!(Component);

/// `jsonschema` reaches `getrandom` (hash seeding). The guest is built with
/// `--cfg getrandom_backend="custom"`, and this is the custom backend: the transform needs
/// no secret randomness, and a component with no imports has no entropy source anyway.
/// Hash-flooding is not a concern for validating one tool call's arguments.
// The one `unsafe` of the components: getrandom's custom-backend hook has this signature.
#[allow(unsafe_code)]
#[no_mangle]
unsafe extern "Rust" fn __getrandom_v03_custom(
    dest: *mut u8,
    len: usize,
) -> Result<(), getrandom::Error> {
    // SAFETY: getrandom guarantees `dest` is valid for writes of `len` bytes.
    unsafe { core::ptr::write_bytes(dest, 0x5a, len) };
    Ok(())
}
