//! The transforms' calls as data, outside the wasm engine.
//!
//! - `kind`: [`TransformKind`], the one list of the five transforms and their names;
//! - `functions`: the one table of the transforms' calls ([`transform_functions!`]): each
//!   call's arguments, transform, WIT function and native answer, from which this crate makes
//!   [`Call`] and `run_native`, and the engine its typed calls;
//! - `call`: [`Call`], one value per call of a WIT function, and [`Answer`]/[`Output`], what it
//!   answers (the fixtures' `expect`);
//! - [`fixture`]: the golden fixture format, decoded into a call and its expected answer;
//! - `native` (feature `native`): [`Call::run_native`], the answer of the plain Rust libraries.
//!
//! Nothing here runs wasm: the engine binds a [`Call`] to a component's typed function, and
//! this crate is what the golden tests, the differential test and the fuzz targets share with
//! it.

mod call;
pub mod fixture;
mod functions;
mod kind;
#[cfg(feature = "native")]
mod native;

pub use call::{Answer, Call, IntoAnswer, Output, StreamedEnd, StreamedParse};
pub use kind::{TransformKind, UnknownTransform};
#[cfg(feature = "native")]
pub use native::SPAN_OUTSIDE_OUTPUT;
