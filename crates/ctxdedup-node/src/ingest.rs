//! Batch identity for the ingestion index: SHA-256 per content plus in-batch first occurrences,
//! one native call per batch. Conversion only; the work is `ctxdedup_core::ingest::hash_batch`.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::invalid;
use crate::strings::JsStrings;
use ctxdedup_core::ingest::{hash_batch, BatchIdentity};
use ctxdedup_core::Utf16Arena;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// Digests (concatenated lowercase hex, 64 characters each) and first occurrences of a batch.
#[napi(object)]
pub struct NativeIngestBatch {
    pub sha256: String,
    pub first: Uint32Array,
}

fn to_js(batch: BatchIdentity) -> NativeIngestBatch {
    NativeIngestBatch {
        sha256: batch.hex,
        first: Uint32Array::new(batch.first),
    }
}

/// Hashes and groups a batch on the calling thread.
#[napi(catch_unwind)]
pub fn ingest_hash_batch(
    #[napi(ts_arg_type = "string[]")] contents: JsStrings,
) -> Result<NativeIngestBatch> {
    hash_batch(&contents).map(to_js).map_err(invalid)
}

/// [`ingest_hash_batch`] on a libuv worker thread (the contents are copied first).
pub struct IngestHashTask {
    contents: Utf16Arena,
}

#[napi]
impl Task for IngestHashTask {
    type Output = BatchIdentity;
    type JsValue = NativeIngestBatch;

    fn compute(&mut self) -> Result<Self::Output> {
        let result = crate::guarded("batch hashing", || {
            hash_batch(&self.contents).map_err(invalid)
        });
        crate::strings::buffer_pool::give_back(std::mem::take(&mut self.contents).into_buffer());
        result
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(to_js(output))
    }
}

/// Like [`ingest_hash_batch`], but copies the contents and hashes them off the JS thread.
#[napi(catch_unwind)]
pub fn ingest_hash_batch_async(
    #[napi(ts_arg_type = "string[]")] contents: JsStrings,
) -> AsyncTask<IngestHashTask> {
    AsyncTask::new(IngestHashTask {
        contents: contents.to_arena(),
    })
}
