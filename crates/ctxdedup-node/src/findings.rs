//! Binding of `ctxdedup_core::findings`: paragraphs of research findings and their keys.
//! Conversion only: every decision is made in the core.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::JsStrings;
use ctxdedup_core::findings::{self, FINDINGS_NORMALIZATION_VERSION};
use ctxdedup_core::to_u32;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// Paragraphs of a findings batch as parallel columns, in order.
#[napi(object)]
pub struct NativeFindings {
    /// Index of the text each paragraph comes from.
    pub text: Uint32Array,
    /// Trimmed span of the paragraph in its text (UTF-16 code units).
    pub start: Uint32Array,
    pub end: Uint32Array,
    /// Index of the first paragraph with the same key (itself when the paragraph is kept).
    pub first: Uint32Array,
}

/// Splits findings texts into paragraphs and marks repeated paragraph keys.
#[napi(catch_unwind)]
pub fn dedupe_findings(
    #[napi(ts_arg_type = "string[]")] texts: JsStrings,
    min_key_units: u32,
) -> NativeFindings {
    let result = findings::dedupe_findings(&texts, min_key_units as usize);
    let column = |f: fn(&findings::Paragraph) -> usize| -> Uint32Array {
        Uint32Array::new(result.paragraphs.iter().map(|p| to_u32(f(p))).collect())
    };
    NativeFindings {
        text: column(|p| p.text),
        start: column(|p| p.start),
        end: column(|p| p.end),
        first: Uint32Array::new(result.first.clone()),
    }
}

/// The dedup key of each paragraph (lossless: lone surrogates survive).
#[napi(catch_unwind)]
pub fn paragraph_keys(#[napi(ts_arg_type = "string[]")] paragraphs: JsStrings) -> Vec<Utf16String> {
    use ctxdedup_core::Utf16Source;
    (0..paragraphs.count())
        .map(|i| {
            let mut key = Vec::new();
            paragraphs.with_units(i, |units| findings::paragraph_key_into(units, &mut key));
            Utf16String::from(key)
        })
        .collect()
}

/// Version of the findings paragraph splitting and key normalization.
#[napi(catch_unwind)]
pub fn findings_normalization_version() -> u32 {
    FINDINGS_NORMALIZATION_VERSION
}
