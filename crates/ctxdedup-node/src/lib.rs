//! Node-API binding for ctxdedup-core. Conversion only: every decision is made in the core.
//!
//! One module per core module it exposes, named alike; [`strings`] reads JS strings (the raw,
//! performance-critical part, and the only place that reads V8 strings). This file holds the
//! module list and the helpers the modules share.

mod blocks;
mod checksums;
mod exact;
mod findings;
mod hashed_embedding;
mod js_text;
mod messages;
mod near_window;
mod scored;
mod sha;
mod strings;
#[cfg(feature = "test-panic")]
mod test_panic;
mod tokens;
mod vectors;

use napi::bindgen_prelude::*;

/// Runs `work` off the JS thread with a panic guard: a panic becomes a JS error naming `what`.
pub(crate) fn guarded<T>(what: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
        Err(Error::new(
            Status::GenericFailure,
            format!("ctxdedup: internal error (panic) during {what}"),
        ))
    })
}

/// A caller error the core reported, as a JS `Error` with the core's message.
#[cfg_attr(test, allow(dead_code))]
pub(crate) fn invalid(error: impl std::fmt::Display) -> Error {
    Error::new(Status::InvalidArg, error.to_string())
}

/// One flag per byte of a `Uint8Array` (non-zero: set).
#[cfg_attr(test, allow(dead_code))]
pub(crate) fn flags(bytes: &[u8]) -> Vec<bool> {
    bytes.iter().map(|&b| b != 0).collect()
}
