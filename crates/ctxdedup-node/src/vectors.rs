//! Bindings of ctxdedup-core's vector similarity and built-in hashed embedding.
//!
//! Embeddings cross as one `Float32Array` (row-major) plus the dimension; results come back as
//! typed arrays. Clusters are flattened: cluster `c` is `members[offsets[c]..offsets[c + 1]]`.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use ctxdedup_core::hashed_embedding::embed_hashed;
use ctxdedup_core::vectors::{cluster, nearest, Cluster, Embeddings, Linkage, VectorError};
use ctxdedup_core::Utf16Arena;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::strings::JsStrings;

fn invalid(error: VectorError) -> Error {
    Error::new(Status::InvalidArg, error.to_string())
}

fn embeddings(data: &[f32], dim: u32) -> Result<Embeddings<'_>> {
    Embeddings::new(data, dim as usize).map_err(invalid)
}

/// The nearest embeddings of one query.
#[napi(object)]
pub struct NativeNearest {
    pub indices: Uint32Array,
    pub similarities: Float64Array,
}

/// The `k` embeddings most similar to `query` (exact cosine), most similar first.
#[napi(catch_unwind)]
pub fn cosine_nearest(
    embeddings_data: Float32Array,
    dim: u32,
    query: Float32Array,
    k: u32,
) -> Result<NativeNearest> {
    let found = nearest(embeddings(&embeddings_data, dim)?, &query, k as usize).map_err(invalid)?;
    Ok(NativeNearest {
        indices: Uint32Array::new(found.iter().map(|s| s.index).collect()),
        similarities: Float64Array::new(found.iter().map(|s| s.similarity).collect()),
    })
}

/// Clusters of similar embeddings, flattened.
#[napi(object)]
pub struct NativeClusters {
    pub members: Uint32Array,
    pub offsets: Uint32Array,
    pub min_similarity: Float64Array,
    pub max_similarity: Float64Array,
}

fn flatten(clusters: Vec<Cluster>) -> NativeClusters {
    let mut members = Vec::new();
    let mut offsets = Vec::with_capacity(clusters.len() + 1);
    offsets.push(0u32);
    for c in &clusters {
        members.extend_from_slice(&c.members);
        offsets.push(members.len() as u32);
    }
    NativeClusters {
        members: Uint32Array::new(members),
        offsets: Uint32Array::new(offsets),
        min_similarity: Float64Array::new(clusters.iter().map(|c| c.min_similarity).collect()),
        max_similarity: Float64Array::new(clusters.iter().map(|c| c.max_similarity).collect()),
    }
}

fn linkage(complete: bool) -> Linkage {
    if complete {
        Linkage::Complete
    } else {
        Linkage::Single
    }
}

/// Clusters of embeddings whose exact cosine similarity reaches `threshold`.
#[napi(catch_unwind)]
pub fn cosine_clusters(
    embeddings_data: Float32Array,
    dim: u32,
    threshold: f64,
    complete: bool,
) -> Result<NativeClusters> {
    let e = embeddings(&embeddings_data, dim)?;
    Ok(flatten(cluster(e, threshold, linkage(complete))))
}

/// [`cosine_clusters`] on a libuv worker thread (the embeddings are copied first).
pub struct ClusterTask {
    data: Vec<f32>,
    dim: u32,
    threshold: f64,
    complete: bool,
}

impl Task for ClusterTask {
    type Output = Vec<Cluster>;
    type JsValue = NativeClusters;

    fn compute(&mut self) -> Result<Self::Output> {
        let e = embeddings(&self.data, self.dim)?;
        crate::guarded("clustering", || {
            Ok(cluster(e, self.threshold, linkage(self.complete)))
        })
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(flatten(output))
    }
}

/// Like [`cosine_clusters`], off the JS thread.
#[napi(catch_unwind, ts_return_type = "Promise<NativeClusters>")]
pub fn cosine_clusters_async(
    embeddings_data: Float32Array,
    dim: u32,
    threshold: f64,
    complete: bool,
) -> AsyncTask<ClusterTask> {
    AsyncTask::new(ClusterTask {
        data: embeddings_data.to_vec(),
        dim,
        threshold,
        complete,
    })
}

/// The built-in hashed n-gram embedding of each text, row-major, `dim` components each.
#[napi(catch_unwind, ts_args_type = "texts: string[], dim: number")]
pub fn embed_hashed_ngrams(texts: JsStrings, dim: u32) -> Result<Float32Array> {
    if dim == 0 {
        return Err(invalid(VectorError::ZeroDimension));
    }
    Ok(Float32Array::new(embed_hashed(&texts, dim as usize)))
}

/// [`embed_hashed_ngrams`] on a libuv worker thread.
pub struct EmbedTask {
    texts: Utf16Arena,
    dim: usize,
}

impl Task for EmbedTask {
    type Output = Vec<f32>;
    type JsValue = Float32Array;

    fn compute(&mut self) -> Result<Self::Output> {
        crate::guarded("embedding", || Ok(embed_hashed(&self.texts, self.dim)))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(Float32Array::new(output))
    }
}

/// Like [`embed_hashed_ngrams`], off the JS thread.
#[napi(
    catch_unwind,
    ts_args_type = "texts: string[], dim: number",
    ts_return_type = "Promise<Float32Array>"
)]
pub fn embed_hashed_ngrams_async(texts: JsStrings, dim: u32) -> Result<AsyncTask<EmbedTask>> {
    if dim == 0 {
        return Err(invalid(VectorError::ZeroDimension));
    }
    Ok(AsyncTask::new(EmbedTask {
        texts: texts.to_arena(),
        dim: dim as usize,
    }))
}
