//! A seam for the test suite only (cargo feature `test-panic`, off in the product build).

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use napi_derive::napi;

/// Deliberately panics; lets the test suite prove a Rust panic reaches JS as an Error.
#[napi(catch_unwind)]
pub fn panic_for_test() {
    panic!("ctxdedup: deliberate panic for tests");
}
