//! Binding of `ctxdedup_core::checksums`: SHA-256 of content batches (resource blocks as bytes,
//! ingestion batches as UTF-16 with first occurrences). Conversion only: the work is the core's.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::invalid;
use crate::strings::JsStrings;
use ctxdedup_core::checksums::{checksum_batch, hash_batch, BatchIdentity, PackedBytes};
use ctxdedup_core::Utf16Arena;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// SHA-256 of every content longer than `min_bytes`: the contents are packed in `bytes`, content
/// `i` ending at `ends[i]` (one buffer plus offsets, which JavaScript fills with `Buffer.write`:
/// as fast as reading each string through Node-API, and no string reader to maintain).
#[napi(catch_unwind)]
pub fn resource_checksums(bytes: &[u8], ends: &[u32], min_bytes: f64) -> Result<String> {
    let contents = PackedBytes::new(bytes, ends).map_err(invalid)?;
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a validated non-negative whole number; the saturating cast keeps huge values huge"
    )]
    let min_bytes = min_bytes as usize;
    Ok(checksum_batch(&contents, min_bytes).hex)
}

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
