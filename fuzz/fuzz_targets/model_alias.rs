#![no_main]
//! Model alias: `name` or `name\ncatalog`; without a catalog the embedded default is used.

use devin_bridge_engine::Call;
use devin_bridge_fuzz::differential;
use libfuzzer_sys::fuzz_target;

const DEFAULT_CATALOG: &str = include_str!("../../policies/models.json");

fuzz_target!(init: devin_bridge_fuzz::prepare(devin_bridge_engine::TransformKind::ModelAlias), |data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (name, catalog) = match text.split_once('\n') {
        Some((name, catalog)) => (name, catalog),
        None => (text, DEFAULT_CATALOG),
    };
    differential(Call::Resolve { requested: name.to_owned(), catalog: catalog.to_owned() });
    differential(Call::Validate { reference: name.to_owned(), catalog: catalog.to_owned() });
    differential(Call::ListModels { catalog: catalog.to_owned(), vision: false });
});
