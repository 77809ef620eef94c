//! Each call's answer from the plain Rust libraries the components are built from: the
//! reference the components are compared with (the golden fixtures, the differential test, the
//! fuzz targets).
//!
//! The answer comes in the same types as a component's, so the two compare with `==`.

use devin_bridge_types::Failure;

use crate::{Answer, Call, IntoAnswer, StreamedEnd, StreamedParse};

/// The code of the failure a reply stream answers when its end names text outside the output
/// it was fed: a broken library, which the comparison with a component then shows.
pub const SPAN_OUTSIDE_OUTPUT: &str = "span_outside_output";

/// Defines `Call::run_native` from the table (`functions`): each row's `native` expression.
macro_rules! define_native {
    ($(
        $(#[$doc:meta])*
        $variant:ident $({ $($(#[$field_attr:meta])* $field:ident: $type:ty),* $(,)? })?
            => $kind:ident $(wit[$($wit:tt)*])? $(bind[$($bind:tt)*])?
                $(guest($answer:expr))? native($native:expr);
    )*) => {
        impl Call {
            /// The answer of the plain Rust library to this call.
            pub fn run_native(&self) -> Answer {
                match self {
                    $(Call::$variant $({ $($field),* })? => IntoAnswer::into_answer($native),)*
                }
            }
        }
    };
}

devin_bridge_types::transform_functions!(define_native! {});

/// A reply stream fed `chunks` in order: each push's released text, then the end (its reply
/// resolved against the whole output, and the narration verdict when `narration` asks for it).
fn parse_stream(
    chunks: &[String],
    tools: &str,
    id_seed: &str,
    max_calls: u32,
    narration: bool,
) -> StreamedParse {
    let mut stream = devin_bridge_envelope::ReplyStream::new(tools, id_seed, max_calls);
    let pushes = chunks.iter().map(|chunk| stream.push(chunk)).collect();
    let end = stream.finish();
    let narrates = narration && stream.narrates();
    let output = chunks.concat();
    let end = end.and_then(|end| {
        let reply = end.reply.resolve(&output).ok_or_else(|| Failure {
            code: SPAN_OUTSIDE_OUTPUT.to_owned(),
            message: format!(
                "the stream's end names a text span outside its {}-byte output",
                output.len()
            ),
            status: 500,
            repairable: false,
        })?;
        Ok(StreamedEnd {
            tail: end.tail,
            reply,
            narrates,
        })
    });
    StreamedParse { pushes, end }
}
