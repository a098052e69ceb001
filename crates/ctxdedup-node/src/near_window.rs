//! Near duplicates of a batch against a window of recent contents, for the ingestion index's
//! near-duplicate mode. Conversion only; the work is `ctxdedup_core::near_window`.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::flags;
use crate::strings::{buffer_pool, JsStrings};
use ctxdedup_core::near_window::{near_duplicates, NearMatch};
use ctxdedup_core::{Utf16Arena, Utf16Source};
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// Per batch item: the matched position (window index, or window length + batch index), or -1;
/// and the similarity (NaN without a match).
#[napi(object)]
pub struct NativeNearMatches {
    pub target: Int32Array,
    pub similarity: Float64Array,
}

fn check_sizes(window: usize, batch: usize, exclude: usize) -> Result<()> {
    if exclude != batch {
        return Err(Error::new(
            Status::InvalidArg,
            "one exclude flag per batch content is required",
        ));
    }
    if window + batch > i32::MAX as usize {
        return Err(Error::new(
            Status::InvalidArg,
            "window and batch together exceed 2^31 - 1 contents",
        ));
    }
    Ok(())
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    reason = "`check_sizes` bounds window + batch by i32::MAX"
)]
fn to_js(matches: Vec<Option<NearMatch>>) -> NativeNearMatches {
    let target = matches
        .iter()
        .map(|m| m.map_or(-1, |m| m.target as i32))
        .collect::<Vec<_>>();
    let similarity = matches
        .iter()
        .map(|m| m.map_or(f64::NAN, |m| m.similarity))
        .collect::<Vec<_>>();
    NativeNearMatches {
        target: Int32Array::new(target),
        similarity: Float64Array::new(similarity),
    }
}

/// Near duplicates on the calling thread.
#[napi(catch_unwind)]
pub fn near_duplicates_in_window(
    #[napi(ts_arg_type = "string[]")] window: JsStrings,
    #[napi(ts_arg_type = "string[]")] batch: JsStrings,
    exclude: &[u8],
    threshold: f64,
) -> Result<NativeNearMatches> {
    check_sizes(window.count(), batch.count(), exclude.len())?;
    Ok(to_js(near_duplicates(
        &window,
        &batch,
        &flags(exclude),
        threshold,
    )))
}

/// [`near_duplicates_in_window`] on a libuv worker thread (the contents are copied first).
pub struct NearWindowTask {
    window: Utf16Arena,
    batch: Utf16Arena,
    exclude: Vec<bool>,
    threshold: f64,
}

#[napi]
impl Task for NearWindowTask {
    type Output = Vec<Option<NearMatch>>;
    type JsValue = NativeNearMatches;

    fn compute(&mut self) -> Result<Self::Output> {
        let result = crate::guarded("the near-duplicate search", || {
            Ok(near_duplicates(
                &self.window,
                &self.batch,
                &self.exclude,
                self.threshold,
            ))
        });
        buffer_pool::give_back(std::mem::take(&mut self.window).into_buffer());
        buffer_pool::give_back(std::mem::take(&mut self.batch).into_buffer());
        result
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(to_js(output))
    }
}

/// Like [`near_duplicates_in_window`], but copies the contents and works off the JS thread.
#[napi(catch_unwind)]
pub fn near_duplicates_in_window_async(
    #[napi(ts_arg_type = "string[]")] window: JsStrings,
    #[napi(ts_arg_type = "string[]")] batch: JsStrings,
    exclude: &[u8],
    threshold: f64,
) -> Result<AsyncTask<NearWindowTask>> {
    check_sizes(window.count(), batch.count(), exclude.len())?;
    Ok(AsyncTask::new(NearWindowTask {
        window: window.to_arena(),
        batch: batch.to_arena(),
        exclude: flags(exclude),
        threshold,
    }))
}
