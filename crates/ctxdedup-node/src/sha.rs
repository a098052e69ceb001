//! Binding of `ctxdedup_core::sha`: SHA-256 of one value.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use ctxdedup_core::sha;
use napi_derive::napi;

/// Lowercase hex SHA-256 of raw bytes.
#[napi(catch_unwind)]
pub fn sha256_bytes(data: &[u8]) -> String {
    sha::sha256_hex(data)
}

/// Lowercase hex SHA-256 of a well-formed string's UTF-8 bytes (the caller rejects lone
/// surrogates first: Node-API would turn them into U+FFFD).
#[napi(catch_unwind)]
pub fn sha256_string(text: String) -> String {
    sha::sha256_hex(text.as_bytes())
}
