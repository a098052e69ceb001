//! Node-API binding for ctxdedup-core. Conversion only: every decision is made in the core.
//!
//! Contents cross the boundary once per batch as a JS array of strings and are read as UTF-16
//! code units (`napi_get_value_string_utf16`), which is lossless for lone surrogates, unlike
//! Node-API's UTF-8 conversion. Exact grouping may also compare two strings in place
//! (`napi_strict_equals`) or hash a string's Latin-1 copy, a lossy fingerprint whose every match
//! is confirmed by that comparison.

mod blocks;
mod ingest;
mod near_window;
mod research;
mod strings;
mod tokens;
mod vectors;

use ctxdedup_core::messages::{analyze, AnalyzeOptions, Annotation, Eligibility, KeepRule};
use ctxdedup_core::{exact, scored, sha, Utf16Arena, Utf16Source};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use strings::{JsStrings, StringHandles};

/// Lowercase hex SHA-256 of raw bytes.
#[napi(catch_unwind)]
pub fn sha256_bytes(data: &[u8]) -> String {
    sha::sha256_hex(data)
}

/// Lowercase hex SHA-256 of a well-formed string's UTF-8 bytes (the caller rejects lone
/// surrogates first: Node-API would turn them into U+FFFD).
#[napi(catch_unwind)]
pub fn sha256_string(text: String) -> String {
    sha::sha256_hex(text.as_bytes())
}

/// For each content, the index of the first content equal to it.
#[napi(catch_unwind, ts_args_type = "contents: string[]")]
pub fn group_exact(contents: JsStrings) -> Uint32Array {
    Uint32Array::new(exact::group_exact(&contents))
}

/// For each scored item, the index of its group's survivor.
#[napi(
    catch_unwind,
    ts_args_type = "contents: string[], scores: Float64Array"
)]
pub fn scored_survivors(contents: JsStrings, scores: &[f64]) -> Result<Uint32Array> {
    if scores.len() != contents.count() {
        return Err(Error::new(
            Status::InvalidArg,
            "one score per content is required",
        ));
    }
    Ok(Uint32Array::new(scored::survivors(&contents, scores)))
}

/// Options of the message analysis, already validated by the TypeScript layer.
#[napi(object)]
pub struct NativeAnalyzeOptions {
    pub min_chars: u32,
    /// UTF-16 code units of each prefix (lossless, unlike `String`).
    pub skip_prefixes: Vec<Uint16Array>,
    pub keep_earliest: bool,
    pub recency_start: u32,
    pub exact: bool,
    pub fuzzy_threshold: Option<f64>,
    /// Whether a reference may only point at a message kept in full (default `true`, ctxdedup's
    /// rule; `false` is context-compression-engine's behaviour, chains included).
    pub visible_targets: Option<bool>,
}

/// Annotations as parallel typed arrays (exact first, then fuzzy).
#[napi(object)]
pub struct NativeAnalysis {
    pub exact_index: Uint32Array,
    pub exact_of: Uint32Array,
    pub exact_length: Uint32Array,
    pub fuzzy_index: Uint32Array,
    pub fuzzy_of: Uint32Array,
    pub fuzzy_length: Uint32Array,
    pub fuzzy_similarity: Float64Array,
}

fn core_options(options: &NativeAnalyzeOptions) -> AnalyzeOptions {
    AnalyzeOptions {
        eligibility: Eligibility {
            min_chars: options.min_chars as usize,
            skip_prefixes: options.skip_prefixes.iter().map(|p| p.to_vec()).collect(),
        },
        keep: if options.keep_earliest {
            KeepRule::Earliest
        } else {
            KeepRule::Latest {
                recency_start: options.recency_start as usize,
            }
        },
        exact: options.exact,
        fuzzy_threshold: options.fuzzy_threshold,
        visible_targets: options
            .visible_targets
            .unwrap_or(true)
            .then_some(options.recency_start as usize),
    }
}

fn flags(bytes: &[u8]) -> Vec<bool> {
    bytes.iter().map(|&b| b != 0).collect()
}

/// Annotations in plain vectors, so they can be produced off the JS thread.
pub struct AnalysisVecs {
    exact: Vec<Annotation>,
    fuzzy: Vec<Annotation>,
}

fn run_analysis<S: Utf16Source>(
    src: &S,
    blocked: &[bool],
    excluded: &[bool],
    options: &AnalyzeOptions,
) -> AnalysisVecs {
    let (exact, fuzzy) = analyze(src, blocked, excluded, options);
    AnalysisVecs { exact, fuzzy }
}

fn to_js(result: AnalysisVecs) -> NativeAnalysis {
    let column = |list: &[Annotation], f: fn(&Annotation) -> usize| -> Uint32Array {
        Uint32Array::new(list.iter().map(|a| f(a) as u32).collect())
    };
    NativeAnalysis {
        exact_index: column(&result.exact, |a| a.index),
        exact_of: column(&result.exact, |a| a.duplicate_of),
        exact_length: column(&result.exact, |a| a.content_length),
        fuzzy_index: column(&result.fuzzy, |a| a.index),
        fuzzy_of: column(&result.fuzzy, |a| a.duplicate_of),
        fuzzy_length: column(&result.fuzzy, |a| a.content_length),
        fuzzy_similarity: Float64Array::new(
            result
                .fuzzy
                .iter()
                .map(|a| a.similarity.unwrap_or(f64::NAN))
                .collect(),
        ),
    }
}

/// Exact and/or fuzzy message analysis, synchronously on the calling thread. `lengths` holds
/// each content's `length` (UTF-16 units), measured in JavaScript.
#[napi(
    catch_unwind,
    ts_args_type = "contents: string[], lengths: Uint32Array, blocked: Uint8Array, fuzzyExcluded: Uint8Array, options: NativeAnalyzeOptions"
)]
pub fn analyze_messages(
    contents: StringHandles,
    lengths: &[u32],
    blocked: &[u8],
    fuzzy_excluded: &[u8],
    options: NativeAnalyzeOptions,
) -> Result<NativeAnalysis> {
    let contents = contents.with_lengths(lengths)?;
    Ok(to_js(run_analysis(
        &contents,
        &flags(blocked),
        &flags(fuzzy_excluded),
        &core_options(&options),
    )))
}

/// The analysis of [`analyze_messages`] on a libuv worker thread.
pub struct AnalyzeTask {
    contents: Utf16Arena,
    blocked: Vec<bool>,
    excluded: Vec<bool>,
    options: AnalyzeOptions,
}

impl Task for AnalyzeTask {
    type Output = AnalysisVecs;
    type JsValue = NativeAnalysis;

    fn compute(&mut self) -> Result<Self::Output> {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_analysis(&self.contents, &self.blocked, &self.excluded, &self.options)
        }));
        strings::buffer_pool::give_back(std::mem::take(&mut self.contents).into_buffer());
        result.map_err(|_| {
            Error::new(
                Status::GenericFailure,
                "ctxdedup: internal error (panic) during analysis",
            )
        })
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(to_js(output))
    }
}

/// Like [`analyze_messages`], but copies the contents and runs the analysis off the JS thread.
#[napi(
    catch_unwind,
    ts_args_type = "contents: string[], lengths: Uint32Array, blocked: Uint8Array, fuzzyExcluded: Uint8Array, options: NativeAnalyzeOptions",
    ts_return_type = "Promise<NativeAnalysis>"
)]
pub fn analyze_messages_async(
    contents: StringHandles,
    lengths: &[u32],
    blocked: &[u8],
    fuzzy_excluded: &[u8],
    options: NativeAnalyzeOptions,
) -> Result<AsyncTask<AnalyzeTask>> {
    Ok(AsyncTask::new(AnalyzeTask {
        contents: contents.with_lengths(lengths)?.to_arena(),
        blocked: flags(blocked),
        excluded: flags(fuzzy_excluded),
        options: core_options(&options),
    }))
}

/// Runs `work` off the JS thread with a panic guard: a panic becomes a JS error naming `what`.
pub(crate) fn guarded<T>(what: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
        Err(Error::new(
            Status::GenericFailure,
            format!("ctxdedup: internal error (panic) during {what}"),
        ))
    })
}

/// o200k_base token count of UTF-16 text (the block pass's net-positive rule and its savings).
#[cfg_attr(test, allow(dead_code))]
pub(crate) fn tokens_o200k(units: &[u16]) -> usize {
    ctxdedup_core::tokens::count_utf16(ctxdedup_core::tokens::Encoding::O200kBase, units)
}

/// Deliberately panics; lets the test suite prove a Rust panic reaches JS as an Error.
#[napi(catch_unwind)]
pub fn panic_for_test() {
    panic!("ctxdedup: deliberate panic for tests");
}
