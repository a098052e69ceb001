//! Binding of `ctxdedup_core::resources`: resource checksums in bulk.
//! Conversion only: every decision is made in the core.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::JsContents;
use ctxdedup_core::resources;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// SHA-256 of every content longer than `min_bytes`, in one call. `byte_lengths` holds the UTF-8
/// length of each content (the caller measures strings with `Buffer.byteLength`).
#[napi(catch_unwind)]
pub fn resource_checksums(
    #[napi(ts_arg_type = "Array<string | Uint8Array>")] mut contents: JsContents,
    byte_lengths: &[f64],
    min_bytes: f64,
) -> Result<String> {
    contents.set_byte_lengths(byte_lengths)?;
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a validated non-negative whole number; the saturating cast keeps huge values huge"
    )]
    let min_bytes = min_bytes as usize;
    Ok(resources::checksum_batch(&contents, min_bytes).hex)
}
