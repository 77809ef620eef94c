//! The envelope component: a thin export shell over the `devin-bridge-envelope` library, in a crate of
//! its own so that the library is an rlib and nothing else (a component that embeds it, a
//! native build, builds no second component of it). The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here, and each
//! export answers as the library does (`devin_bridge_types::guest_exports!`, made from the
//! table of the transforms' functions); the reply stream's resource
//! is written here.
#![cfg(target_arch = "wasm32")]

devin_bridge_types::guest_bindings!([envelope] {
    world: "envelope-component",
    path: "../../../wit",
});

use std::cell::RefCell;

use devin_bridge_types::{Failure, ParsedReply, ShownPiece, StreamEnd};
use exports::devin_bridge::transforms::envelope::GuestReplyStream;

struct Component;

/// The `reply-stream` resource: the library's stream, behind the `&self` the bindings give
/// (a component instance runs one call at a time, so the cell is never contended).
struct ReplyStream(RefCell<devin_bridge_envelope::ReplyStream>);

impl GuestReplyStream for ReplyStream {
    fn new(tools: String, id_seed: String, max_calls: u32) -> Self {
        Self(RefCell::new(devin_bridge_envelope::ReplyStream::new(
            &tools, &id_seed, max_calls,
        )))
    }

    fn push(&self, chunk: String) -> Result<Vec<ShownPiece>, Failure> {
        self.0.borrow_mut().push_pieces(&chunk)
    }

    fn finish(&self) -> Result<StreamEnd, Failure> {
        self.0.borrow_mut().finish()
    }

    fn narrates(&self) -> bool {
        self.0.borrow().narrates()
    }
}

devin_bridge_types::guest_exports!(
    Envelope EnvelopeExports, Component: exports::devin_bridge::transforms::envelope::Guest {
        type ReplyStream = ReplyStream;
    }
);

impl EnvelopeExports for Component {}

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
