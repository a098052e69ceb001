//! Bindings of BPE token counting. Conversion only: counting is `ctxdedup_core::tokens`.
//! Strings are read as UTF-16 code units (lossless: a lone surrogate is counted as U+FFFD by the
//! core, as gpt-tokenizer does, never turned into one by Node-API's UTF-8 conversion).

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::{JsStrings, Units};
use ctxdedup_core::tokens::{count_utf16, count_utf16_up_to, load, Encoding};
use ctxdedup_core::{to_u32, Utf16Arena, Utf16Source};
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// A built-in BPE encoding (`ctxdedup_core::tokens::Encoding`). A number, not a name: a call
/// per short text (the stages count contents one by one) then converts no string, which
/// `bench/tokens.bench.ts` measures.
#[napi]
pub enum TokenEncoding {
    /// `o200k_base` (GPT-4o and later).
    O200kBase,
    /// `cl100k_base` (GPT-4, GPT-3.5).
    Cl100kBase,
}

impl From<TokenEncoding> for Encoding {
    fn from(encoding: TokenEncoding) -> Self {
        match encoding {
            TokenEncoding::O200kBase => Encoding::O200kBase,
            TokenEncoding::Cl100kBase => Encoding::Cl100kBase,
        }
    }
}

/// Number of tokens of `text`, special-token text counted as plain text.
#[napi(catch_unwind)]
pub fn count_tokens(
    #[napi(ts_arg_type = "string")] text: Units,
    encoding: TokenEncoding,
) -> Result<u32> {
    Ok(to_u32(count_utf16(encoding.into(), &text)))
}

/// [`count_tokens`] of each text, in one call.
#[napi(catch_unwind)]
pub fn count_tokens_batch(
    #[napi(ts_arg_type = "string[]")] texts: JsStrings,
    encoding: TokenEncoding,
) -> Uint32Array {
    Uint32Array::new(counts(&texts, &[], encoding.into()))
}

/// Each text's count: in full, or only until it exceeds its entry of `stops` when there is one
/// (`ctxdedup_core::tokens::count_utf16_up_to`). What every batch counter here returns.
fn counts<S: Utf16Source>(texts: &S, stops: &[u32], encoding: Encoding) -> Vec<u32> {
    (0..texts.count())
        .map(|i| {
            texts.with_units(i, |units| match stops.get(i) {
                Some(&stop) => count_utf16_up_to(encoding, units, stop as usize),
                None => count_utf16(encoding, units),
            })
        })
        .map(to_u32)
        .collect()
}

/// [`count_tokens_batch`] or [`count_tokens_batch_up_to`] on a libuv worker thread (the texts
/// are copied first).
pub struct CountTask {
    texts: Utf16Arena,
    /// One stop per text, or empty: count in full.
    stops: Vec<u32>,
    encoding: Encoding,
}

#[napi]
impl Task for CountTask {
    type Output = Vec<u32>;
    type JsValue = Uint32Array;

    fn compute(&mut self) -> Result<Self::Output> {
        crate::guarded("counting tokens", || {
            Ok(counts(&self.texts, &self.stops, self.encoding))
        })
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(Uint32Array::new(output))
    }
}

impl Drop for CountTask {
    /// The copied texts' buffer goes back to the pool.
    fn drop(&mut self) {
        crate::strings::buffer_pool::give_back(std::mem::take(&mut self.texts).into_buffer());
    }
}

/// [`count_tokens_batch`] off the JS thread.
#[napi(catch_unwind)]
pub fn count_tokens_batch_async(
    #[napi(ts_arg_type = "string[]")] texts: JsStrings,
    encoding: TokenEncoding,
) -> AsyncTask<CountTask> {
    AsyncTask::new(CountTask {
        texts: texts.to_arena(),
        stops: Vec::new(),
        encoding: encoding.into(),
    })
}

/// The one entry of `stops` per text [`count_tokens_batch_up_to`] requires.
fn check_stops(texts: &JsStrings, stops: &[u32]) -> Result<()> {
    if stops.len() == texts.count() {
        Ok(())
    } else {
        Err(Error::new(
            Status::InvalidArg,
            "stops must have one entry per text",
        ))
    }
}

/// [`count_tokens_batch_up_to`] off the JS thread.
#[napi(catch_unwind)]
pub fn count_tokens_batch_up_to_async(
    #[napi(ts_arg_type = "string[]")] texts: JsStrings,
    stops: &[u32],
    encoding: TokenEncoding,
) -> Result<AsyncTask<CountTask>> {
    check_stops(&texts, stops)?;
    Ok(AsyncTask::new(CountTask {
        texts: texts.to_arena(),
        stops: stops.to_vec(),
        encoding: encoding.into(),
    }))
}

/// Each text's count, counted only until it exceeds its `stops` entry
/// (`ctxdedup_core::tokens::count_utf16_up_to`: exact up to the stop, some number above it past
/// it). `stops` has one entry per text.
#[napi(catch_unwind)]
pub fn count_tokens_batch_up_to(
    #[napi(ts_arg_type = "string[]")] texts: JsStrings,
    stops: &[u32],
    encoding: TokenEncoding,
) -> Result<Uint32Array> {
    check_stops(&texts, stops)?;
    Ok(Uint32Array::new(counts(&texts, stops, encoding.into())))
}

/// Loads an encoding's vocabulary on a libuv thread ([`load_tokenizer`]).
pub struct LoadTask(Encoding);

#[napi]
impl Task for LoadTask {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> Result<Self::Output> {
        let encoding = self.0;
        crate::guarded("loading a tokenizer", || {
            load(encoding);
            Ok(())
        })
    }

    fn resolve(&mut self, _env: Env, _output: Self::Output) -> Result<Self::JsValue> {
        Ok(())
    }
}

/// Loads `encoding`'s vocabulary off the JS thread (once per process; later calls resolve at
/// once), so the first count on any thread does not wait for it.
#[napi(catch_unwind)]
pub fn load_tokenizer(encoding: TokenEncoding) -> AsyncTask<LoadTask> {
    AsyncTask::new(LoadTask(encoding.into()))
}
