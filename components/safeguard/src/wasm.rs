//! The component export: a thin shell over the library. The WIT records are the library's own
//! types (see `devin_bridge_types::guest_bindings!`), so nothing is converted here.

devin_bridge_types::guest_bindings!([safeguard] {
    world: "safeguard-component",
    path: "../../wit",
});

use devin_bridge_types::{SafeguardStatus, ToolCall};
use exports::devin_bridge::transforms::safeguard::Guest;

struct Component;

impl Guest for Component {
    fn judge(
        calls: Vec<ToolCall>,
        classifier_context: String,
        earlier_calls: Vec<ToolCall>,
    ) -> SafeguardStatus {
        crate::judge_in_conversation(&calls, &classifier_context, &earlier_calls)
    }
}

export!(Component);
