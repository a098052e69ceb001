//! Near duplicates of a batch against a window of recent contents kept in native memory, for the
//! ingestion index's near-duplicate mode. Conversion only; the work is
//! `ctxdedup_core::near_window`.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::flags;
use crate::strings::{buffer_pool, JsStrings};
use ctxdedup_core::near_window::{NearMatch, NearWindow, WindowSearch};
use ctxdedup_core::{Utf16Arena, Utf16Source};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::sync::Arc;

/// Per batch item: the matched position (a window position, oldest = 0, or the window's length
/// + a batch index), or -1; and the similarity (NaN without a match).
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

/// A window of recent contents, oldest first, held in native memory between calls: a content is
/// copied in once ([`NativeNearWindow::push`]), and a call copies only its batch. The memory it
/// holds is reported to V8 (`napi_adjust_external_memory`), so that the garbage collector knows
/// what collecting a dropped window frees.
#[napi(custom_finalize)]
pub struct NativeNearWindow {
    window: NearWindow,
    /// Bytes reported to V8 so far.
    reported: usize,
}

impl NativeNearWindow {
    /// Reports the change of the window's memory since the last report.
    fn report(&mut self, env: &Env) -> Result<()> {
        let now = self.window.bytes();
        let change = i64::try_from(now).unwrap_or(i64::MAX)
            - i64::try_from(self.reported).unwrap_or(i64::MAX);
        if change != 0 {
            env.adjust_external_memory(change)?;
            self.reported = now;
        }
        Ok(())
    }
}

impl ObjectFinalize for NativeNearWindow {
    fn finalize(self, env: Env) -> Result<()> {
        env.adjust_external_memory(-i64::try_from(self.reported).unwrap_or(i64::MAX))?;
        Ok(())
    }
}

#[napi]
impl NativeNearWindow {
    /// An empty window.
    #[napi(constructor)]
    pub fn new() -> Self {
        NativeNearWindow {
            window: NearWindow::new(),
            reported: 0,
        }
    }

    /// Contents held.
    #[napi(getter)]
    pub fn length(&self) -> u32 {
        ctxdedup_core::to_u32(self.window.len())
    }

    /// Bytes of native memory the window holds (an estimate; also reported to V8).
    #[napi(getter)]
    pub fn bytes(&self) -> f64 {
        self.window.bytes() as f64
    }

    /// Appends `contents` (copied), oldest first, as the newest contents, arrived at `added_ms`.
    #[napi(catch_unwind)]
    pub fn push(
        &mut self,
        env: Env,
        #[napi(ts_arg_type = "string[]")] contents: JsStrings,
        added_ms: f64,
    ) -> Result<()> {
        for i in 0..contents.count() {
            contents.with_units(i, |units| self.window.push(units, added_ms));
        }
        self.report(&env)
    }

    /// Drops the `count` oldest contents.
    #[napi]
    pub fn drop_oldest(&mut self, env: Env, count: u32) -> Result<()> {
        self.window.drop_oldest(count as usize);
        self.report(&env)
    }

    /// A search of `batch` against the window as it is now: it takes along the contents that
    /// could match (shared, not copied), so the window may change before it runs. With
    /// `ttl_ms`, a content is offered only while its arrival time + `ttl_ms` > `now_ms`. Reads
    /// only the first lines of `batch`.
    #[napi(catch_unwind)]
    pub fn search(
        &self,
        #[napi(ts_arg_type = "string[]")] batch: JsStrings,
        exclude: &[u8],
        threshold: f64,
        now_ms: f64,
        ttl_ms: Option<f64>,
    ) -> Result<NativeNearSearch> {
        check_sizes(self.window.len(), batch.count(), exclude.len())?;
        Ok(NativeNearSearch {
            search: Arc::new(self.window.search(
                &batch,
                &flags(exclude),
                threshold,
                now_ms,
                ttl_ms,
            )),
        })
    }
}

/// One search of a batch against a [`NativeNearWindow`] ([`NativeNearWindow::search`]), run
/// with the same batch. Its own object, so that a run in flight borrows it and not the window
/// (napi keeps an async call's borrows until its promise settles, and the window must stay free
/// to change meanwhile).
#[napi]
pub struct NativeNearSearch {
    search: Arc<WindowSearch>,
}

#[napi]
impl NativeNearSearch {
    /// Window positions (oldest = 0, when the search was made) of the contents it took along,
    /// ascending: the only window positions a match can name.
    #[napi(getter)]
    pub fn positions(&self) -> Uint32Array {
        Uint32Array::new(
            self.search
                .positions()
                .iter()
                .map(|&p| ctxdedup_core::to_u32(p))
                .collect(),
        )
    }

    /// UTF-16 code units of the window contents the search took along (what it may read in
    /// full, besides the batch).
    #[napi(getter)]
    pub fn units(&self) -> f64 {
        self.search.units() as f64
    }

    /// Near duplicates of `batch`, on the calling thread: per item, the window position of its
    /// match, or the window's length (when the search was made) + the index of the batch item
    /// it matches.
    #[napi(catch_unwind)]
    pub fn run(
        &self,
        #[napi(ts_arg_type = "string[]")] batch: JsStrings,
        exclude: &[u8],
        threshold: f64,
    ) -> Result<NativeNearMatches> {
        check_sizes(self.search.window_len(), batch.count(), exclude.len())?;
        Ok(to_js(self.search.run(&batch, &flags(exclude), threshold)))
    }

    /// Like [`NativeNearSearch::run`], but copies the batch and works off the JS thread.
    #[napi(catch_unwind, ts_return_type = "Promise<NativeNearMatches>")]
    pub fn run_async(
        &self,
        #[napi(ts_arg_type = "string[]")] batch: JsStrings,
        exclude: &[u8],
        threshold: f64,
    ) -> Result<AsyncTask<NearWindowTask>> {
        check_sizes(self.search.window_len(), batch.count(), exclude.len())?;
        Ok(AsyncTask::new(NearWindowTask {
            search: Arc::clone(&self.search),
            batch: batch.to_arena(),
            exclude: flags(exclude),
            threshold,
        }))
    }
}

/// [`NativeNearSearch::run`] on a libuv worker thread.
pub struct NearWindowTask {
    search: Arc<WindowSearch>,
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
            Ok(self.search.run(&self.batch, &self.exclude, self.threshold))
        });
        buffer_pool::give_back(std::mem::take(&mut self.batch).into_buffer());
        result
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(to_js(output))
    }
}
