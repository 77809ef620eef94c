#![no_main]
//! Serializer: arbitrary request text, native vs wasm.

use devin_bridge_engine::Call;
use devin_bridge_fuzz::differential;
use libfuzzer_sys::fuzz_target;

fuzz_target!(init: devin_bridge_fuzz::prepare(devin_bridge_engine::TransformKind::Serializer), |data: &[u8]| {
    let Ok(request) = std::str::from_utf8(data) else { return };
    differential(Call::Serialize { request: request.to_owned() });
});
