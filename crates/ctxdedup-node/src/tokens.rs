//! Bindings of BPE token counting. Conversion only: counting is `ctxdedup_core::tokens`.
//! Strings are read as UTF-16 code units (lossless: a lone surrogate is counted as U+FFFD by the
//! core, as gpt-tokenizer does, never turned into one by Node-API's UTF-8 conversion).

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::JsStrings;
use ctxdedup_core::tokens::{count_utf16, Encoding};
use ctxdedup_core::Utf16Source;
use napi::bindgen_prelude::*;
use napi_derive::napi;

fn encoding(name: &str) -> Result<Encoding> {
    Encoding::from_name(name).ok_or_else(|| {
        Error::new(
            Status::InvalidArg,
            format!("encoding must be o200k_base or cl100k_base, got {name:?}"),
        )
    })
}

/// Number of tokens of `text` in `encoding` (special-token text counted as plain text).
#[napi(catch_unwind, ts_args_type = "text: string, encoding: string")]
pub fn count_tokens(text: Utf16String, encoding: String) -> Result<u32> {
    let encoding = self::encoding(&encoding)?;
    Ok(count_utf16(encoding, &text) as u32)
}

/// [`count_tokens`] of each text, in one call.
#[napi(catch_unwind, ts_args_type = "texts: string[], encoding: string")]
pub fn count_tokens_batch(texts: JsStrings, encoding: String) -> Result<Uint32Array> {
    let encoding = self::encoding(&encoding)?;
    let counts = (0..texts.count())
        .map(|i| texts.with_units(i, |units| count_utf16(encoding, units) as u32))
        .collect();
    Ok(Uint32Array::new(counts))
}
