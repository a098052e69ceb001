//! Binding of `ctxdedup_core::exact`: byte-exact grouping of strings.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::JsStrings;
use ctxdedup_core::exact;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// For each content, the index of the first content equal to it.
#[napi(catch_unwind)]
pub fn group_exact(#[napi(ts_arg_type = "string[]")] contents: JsStrings) -> Uint32Array {
    Uint32Array::new(exact::group_exact(&contents))
}
