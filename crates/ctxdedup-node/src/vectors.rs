//! Binding of `ctxdedup_core::vectors`: cosine similarity, nearest neighbours and clusters.
//!
//! Embeddings cross as one `Float32Array` (row-major) plus the dimension; results come back as
//! typed arrays. Clusters are flattened: cluster `c` is `members[offsets[c]..offsets[c + 1]]`.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::invalid;
use ctxdedup_core::to_u32;
use ctxdedup_core::vectors::{self as core, cluster, nearest, Cluster, Embeddings};
use napi::bindgen_prelude::*;
use napi_derive::napi;

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
        offsets.push(to_u32(members.len()));
    }
    NativeClusters {
        members: Uint32Array::new(members),
        offsets: Uint32Array::new(offsets),
        min_similarity: Float64Array::new(clusters.iter().map(|c| c.min_similarity).collect()),
        max_similarity: Float64Array::new(clusters.iter().map(|c| c.max_similarity).collect()),
    }
}

/// How clusters grow (`ctxdedup_core::vectors::Linkage`).
#[napi(string_enum = "lowercase")]
pub enum Linkage {
    /// Connected components of the similarity graph.
    Single,
    /// Every pair within a cluster is similar.
    Complete,
}

impl From<Linkage> for core::Linkage {
    fn from(linkage: Linkage) -> Self {
        match linkage {
            Linkage::Single => core::Linkage::Single,
            Linkage::Complete => core::Linkage::Complete,
        }
    }
}

/// Clusters of embeddings whose exact cosine similarity reaches `threshold`.
#[napi(catch_unwind)]
pub fn cosine_clusters(
    embeddings_data: Float32Array,
    dim: u32,
    threshold: f64,
    linkage: Linkage,
) -> Result<NativeClusters> {
    let e = embeddings(&embeddings_data, dim)?;
    Ok(flatten(cluster(e, threshold, linkage.into())))
}

/// [`cosine_clusters`] on a libuv worker thread (the embeddings are copied first).
pub struct ClusterTask {
    data: Vec<f32>,
    dim: u32,
    threshold: f64,
    linkage: core::Linkage,
}

#[napi]
impl Task for ClusterTask {
    type Output = Vec<Cluster>;
    type JsValue = NativeClusters;

    fn compute(&mut self) -> Result<Self::Output> {
        let e = embeddings(&self.data, self.dim)?;
        crate::guarded("clustering", || {
            Ok(cluster(e, self.threshold, self.linkage))
        })
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(flatten(output))
    }
}

/// Like [`cosine_clusters`], off the JS thread.
#[napi(catch_unwind)]
pub fn cosine_clusters_async(
    embeddings_data: Float32Array,
    dim: u32,
    threshold: f64,
    linkage: Linkage,
) -> AsyncTask<ClusterTask> {
    AsyncTask::new(ClusterTask {
        data: embeddings_data.to_vec(),
        dim,
        threshold,
        linkage: linkage.into(),
    })
}
