//! The transforms' calls as data, outside the wasm engine.
//!
//! - [`TransformKind`], the one list of the five transforms (defined with their records in
//!   `devin-bridge-types`, re-exported here);
//! - `call`: [`Call`], one value per call of a WIT function (made from the table of the
//!   transforms' functions, `devin_bridge_types::transform_functions!`, with `Call::transform`
//!   and `Call::run_native`), and [`Answer`]/[`Output`], what it answers (the fixtures'
//!   `expect`);
//! - [`fixture`]: the golden fixture format, decoded into a call and its expected answer;
//! - `native` (feature `native`): [`Call::run_native`], the answer of the plain Rust libraries.
//!
//! Nothing here runs wasm: the engine binds a [`Call`] to a component's typed function, and
//! this crate is what the golden tests, the differential test and the fuzz targets share with
//! it.

mod call;
pub mod fixture;
#[cfg(feature = "native")]
mod native;

pub use call::{Answer, Call, IntoAnswer, Output, StreamedEnd, StreamedParse};
pub use devin_bridge_types::{TransformKind, UnknownTransform};
#[cfg(feature = "native")]
pub use native::SPAN_OUTSIDE_OUTPUT;
