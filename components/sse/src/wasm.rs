//! The component export: a thin shell over the library. The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here, and each
//! export answers as the library does (`devin_bridge_types::guest_exports!`, made from the
//! table of the transforms' functions).

devin_bridge_types::guest_bindings!([sse] {
    world: "sse-component",
    path: "../../wit",
});

use devin_bridge_types::{
    Failure, MessageHead, Reply, SafeguardStatus, SseFrames, ToolCall, Usage,
};

struct Component;

devin_bridge_types::guest_exports!(Sse SseExports, Component: exports::devin_bridge::transforms::sse::Guest {});

impl SseExports for Component {}

export!(Component);
