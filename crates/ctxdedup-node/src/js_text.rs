//! Bindings of the JavaScript string semantics in `ctxdedup_core::js_text`. Conversion only.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::Units;
use ctxdedup_core::js_text::json_quote_utf8_into;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// The UTF-8 bytes of `JSON.stringify(text)` (what `Buffer.from(JSON.stringify(text))` gives),
/// in one pass over the string's UTF-16 code units.
#[napi(catch_unwind)]
pub fn json_string_utf8(#[napi(ts_arg_type = "string")] text: Units) -> Uint8Array {
    let mut out = Vec::new();
    json_quote_utf8_into(&text, &mut out);
    Uint8Array::new(out)
}
