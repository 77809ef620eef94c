//! Transform calls from async code: small inputs on the awaiting worker, large ones on the
//! blocking pool, and a transform's own failure turned into the client's `Failure` (details to
//! the log only). Every module that runs a transform goes through [`run_transform`].

use std::sync::Arc;

use devin_bridge_engine::{EngineError, TransformCalls};
use devin_bridge_types::Failure;

use super::failures::HostFailure;

/// A transform that trapped, timed out or ran out of memory: an internal error for this one
/// request. Details go to the log, not to the client.
pub(crate) fn engine_failure(error: &EngineError) -> Failure {
    tracing::error!(code = error.code(), %error, "transform failed");
    HostFailure::Transform.with_code(
        error.code(),
        "an internal transform failed while handling this request",
    )
}

/// Inputs up to this size are transformed on the async worker that awaits the answer; larger
/// ones on the blocking pool. Handing a call to the pool and waking the task again costs more
/// than a small call itself (measured side by side in the bridge benchmark: 15% less CPU per
/// turn with small calls inline), while the costliest call on 64 KiB, serializing it, takes
/// about a tenth of a millisecond (the transforms benchmark's 79 KB request: ~150 µs in a
/// fresh instance), short enough not to hold up the worker's other tasks for long; a megabyte
/// request takes over a millisecond and goes to the pool. Either way `call_timeout_ms` bounds a
/// call.
pub const INLINE_INPUT_BYTES: usize = 64 << 10;

/// Runs a synchronous transform call whose input is `input_bytes` long: on this worker when
/// it is small (see [`INLINE_INPUT_BYTES`]), else off the async workers. `transforms` is the
/// bridge's live set (a fresh instance per call) or a [`devin_bridge_engine::Turn`] (the
/// turn's instances, in its store).
pub(super) async fn run_transform<S, T>(
    transforms: &Arc<S>,
    input_bytes: usize,
    call: impl FnOnce(&S) -> Result<T, EngineError> + Send + 'static,
) -> Result<T, Failure>
where
    S: TransformCalls + Send + Sync + 'static,
    T: Send + 'static,
{
    let outcome = if input_bytes <= INLINE_INPUT_BYTES {
        // A panic in the call must not take the connection's task down with it.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(transforms)))
            .map_err(|_| "the transform call panicked".to_owned())
    } else {
        let transforms = transforms.clone();
        tokio::task::spawn_blocking(move || call(&transforms))
            .await
            .map_err(|join| join.to_string())
    };
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(engine_failure(&error)),
        Err(why) => {
            tracing::error!(%why, "transform task failed");
            Err(HostFailure::Transform.with("an internal transform failed"))
        }
    }
}
