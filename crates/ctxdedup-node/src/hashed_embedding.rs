//! Binding of `ctxdedup_core::hashed_embedding`: the built-in offline embedding.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::invalid;
use crate::strings::JsStrings;
use ctxdedup_core::hashed_embedding::embed_hashed;
use ctxdedup_core::Utf16Arena;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// The built-in hashed n-gram embedding of each text, row-major, `dim` components each.
#[napi(catch_unwind)]
pub fn embed_hashed_ngrams(
    #[napi(ts_arg_type = "string[]")] texts: JsStrings,
    dim: u32,
) -> Result<Float32Array> {
    embed_hashed(&texts, dim as usize)
        .map(Float32Array::new)
        .map_err(invalid)
}

/// [`embed_hashed_ngrams`] on a libuv worker thread.
pub struct EmbedTask {
    texts: Utf16Arena,
    dim: usize,
}

#[napi]
impl Task for EmbedTask {
    type Output = Vec<f32>;
    type JsValue = Float32Array;

    fn compute(&mut self) -> Result<Self::Output> {
        crate::guarded("embedding", || {
            embed_hashed(&self.texts, self.dim).map_err(invalid)
        })
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(Float32Array::new(output))
    }
}

/// Like [`embed_hashed_ngrams`], off the JS thread.
#[napi(catch_unwind)]
pub fn embed_hashed_ngrams_async(
    #[napi(ts_arg_type = "string[]")] texts: JsStrings,
    dim: u32,
) -> AsyncTask<EmbedTask> {
    AsyncTask::new(EmbedTask {
        texts: texts.to_arena(),
        dim: dim as usize,
    })
}
