//! Binding of `ctxdedup_core::scored`: survivors of scored items.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::JsStrings;
use ctxdedup_core::scored;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// For each scored item, the index of its group's survivor.
#[napi(catch_unwind)]
pub fn scored_survivors(
    #[napi(ts_arg_type = "string[]")] contents: JsStrings,
    scores: &[f64],
) -> Result<Uint32Array> {
    scored::survivors(&contents, scores)
        .map(Uint32Array::new)
        .map_err(crate::invalid)
}
