//! The serializer component: a thin export shell over the `devin-bridge-serializer` library, in a crate of
//! its own so that the library is an rlib and nothing else (a component that embeds it, a
//! native build, builds no second component of it). The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here, and each
//! export answers as the library does (`devin_bridge_types::guest_exports!`, made from the
//! table of the transforms' functions), but for the heap a
//! serialization reserves first.
#![cfg(target_arch = "wasm32")]

devin_bridge_types::guest_bindings!([serializer] {
    world: "serializer-component",
    path: "../../../wit",
});

use devin_bridge_types::{Failure, Prompt, PromptOptions, Resume, ResumedPrompt, UnseenPrompt};

struct Component;

/// How much heap a call needs, as a multiple of the request's size (measured as linear-memory
/// growth, in 64 KiB pages: the 79 KB and 1 MB benchmark requests grew it by about 4.0 and 3.5
/// times their size).
const HEAP_PER_REQUEST_BYTE: usize = 4;

/// Makes the allocator's free space as large as this call will need, in one step. Linear memory
/// grows only when the free space runs out, and each growth is a host call that changes page
/// protections; a large request would otherwise grow it a couple of dozen times, a few pages at
/// a time. The reservation is freed at once and its pages are not touched, so when the free
/// space is already there (a pre-initialised instance, a small request) it costs nothing.
fn reserve_heap_for(request: &str) {
    let reservation: Vec<u8> =
        Vec::with_capacity(request.len().saturating_mul(HEAP_PER_REQUEST_BYTE));
    // Keeps the compiler from removing the allocation as unused.
    core::hint::black_box(&reservation);
}

devin_bridge_types::guest_exports!(
    Serializer SerializerExports, Component: exports::devin_bridge::transforms::serializer::Guest {}
);

/// The library's answers, each serialization after reserving the heap it needs.
impl SerializerExports for Component {
    fn serialize(request: String) -> Result<Prompt, Failure> {
        reserve_heap_for(&request);
        devin_bridge_serializer::serialize(&request)
    }

    fn serialize_unseen(request: String, options: PromptOptions) -> Result<UnseenPrompt, Failure> {
        reserve_heap_for(&request);
        devin_bridge_serializer::serialize_unseen(&request, options)
    }

    fn serialize_resumed(
        continuation: String,
        resume: Resume,
        options: PromptOptions,
    ) -> Result<ResumedPrompt, Failure> {
        reserve_heap_for(&continuation);
        devin_bridge_serializer::serialize_resumed(&continuation, &resume, options)
    }
}

export!(Component);
