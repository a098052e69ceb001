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
use napi::sys;
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
        let result = guarded("analysis", || {
            Ok(run_analysis(
                &self.contents,
                &self.blocked,
                &self.excluded,
                &self.options,
            ))
        });
        strings::buffer_pool::give_back(std::mem::take(&mut self.contents).into_buffer());
        result
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

/// A `Float64Array` the engine owns (created with `napi_create_arraybuffer`, then filled): for
/// the small results of a small call, cheaper than an external buffer with a finalizer.
pub struct OwnedF64(Vec<f64>);

impl ToNapiValue for OwnedF64 {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        // SAFETY: `env` belongs to the current call (napi's contract for to_napi_value); V8 allocates `bytes` bytes at `data`, aligned for f64, and the copy writes exactly those bytes.
        unsafe {
            let bytes = std::mem::size_of_val(val.0.as_slice());
            let mut data = std::ptr::null_mut();
            let mut buffer = std::ptr::null_mut();
            check_status!(sys::napi_create_arraybuffer(
                env,
                bytes,
                &mut data,
                &mut buffer
            ))?;
            if bytes > 0 {
                // SAFETY: V8 allocated `bytes` bytes at `data`, suitably aligned for f64.
                std::ptr::copy_nonoverlapping(
                    val.0.as_ptr().cast::<u8>(),
                    data.cast::<u8>(),
                    bytes,
                );
            }
            let mut array = std::ptr::null_mut();
            check_status!(sys::napi_create_typedarray(
                env,
                sys::TypedarrayType::float64_array,
                val.0.len(),
                buffer,
                0,
                &mut array
            ))?;
            Ok(array)
        }
    }
}

/// Options of [`analyze_messages_packed`] from its `params` array (see there).
fn packed_options(params: &[f64]) -> Result<AnalyzeOptions> {
    let bad = || Error::new(Status::InvalidArg, "malformed analysis parameters");
    let flag = |k: usize| params.get(k).map(|&v| v != 0.0).ok_or_else(bad);
    let unsigned = |k: usize| -> Result<usize> {
        match params.get(k) {
            Some(&v) if v >= 0.0 && v <= f64::from(u32::MAX) && v.fract() == 0.0 => Ok(v as usize),
            _ => Err(bad()),
        }
    };
    let min_chars = unsigned(0)?;
    let keep_earliest = flag(1)?;
    let recency_start = unsigned(2)?;
    let exact = flag(3)?;
    let fuzzy = flag(4)?;
    let threshold = *params.get(5).ok_or_else(bad)?;
    let visible_targets = flag(6)?;
    let count = unsigned(7)?;
    let mut at = 8;
    let mut skip_prefixes = Vec::with_capacity(count);
    for _ in 0..count {
        let len = unsigned(at)?;
        let units = params.get(at + 1..at + 1 + len).ok_or_else(bad)?;
        if units
            .iter()
            .any(|&u| !(0.0..=65535.0).contains(&u) || u.fract() != 0.0)
        {
            return Err(bad());
        }
        skip_prefixes.push(units.iter().map(|&u| u as u16).collect());
        at += 1 + len;
    }
    if at != params.len() {
        return Err(bad());
    }
    Ok(AnalyzeOptions {
        eligibility: Eligibility {
            min_chars,
            skip_prefixes,
        },
        keep: if keep_earliest {
            KeepRule::Earliest
        } else {
            KeepRule::Latest { recency_start }
        },
        exact,
        fuzzy_threshold: fuzzy.then_some(threshold),
        visible_targets: visible_targets.then_some(recency_start),
    })
}

/// [`analyze_messages`] with a call cost that suits a conversation of ten messages: the options
/// come as one `Float64Array` and the annotations go back as one, so crossing the boundary costs
/// a few Node-API calls, not one per option and per column.
///
/// `flags[i]`: bit 0 = blocked (shape-excluded), bit 1 = kept out of the fuzzy pass.
/// `params`: `[minChars, keepEarliest, recencyStart, exact, fuzzy, fuzzyThreshold,
/// visibleTargets, prefixCount, (prefixLength, ...prefixUnits) * prefixCount]`.
/// Result: `[exactCount, fuzzyCount, (index, duplicateOf, length) * exactCount,
/// (index, duplicateOf, length, similarity) * fuzzyCount]`.
#[napi(
    catch_unwind,
    ts_args_type = "contents: string[], lengths: Uint32Array, flags: Uint8Array, params: Float64Array",
    ts_return_type = "Float64Array"
)]
pub fn analyze_messages_packed(
    contents: StringHandles,
    lengths: &[u32],
    flags: &[u8],
    params: &[f64],
) -> Result<OwnedF64> {
    if flags.len() != lengths.len() {
        return Err(Error::new(
            Status::InvalidArg,
            "one flag byte per content is required",
        ));
    }
    let options = packed_options(params)?;
    let contents = contents.with_lengths(lengths)?;
    let blocked: Vec<bool> = flags.iter().map(|&f| f & 1 != 0).collect();
    let excluded: Vec<bool> = flags.iter().map(|&f| f & 2 != 0).collect();
    let (exact, fuzzy) = analyze(&contents, &blocked, &excluded, &options);
    let mut out = Vec::with_capacity(2 + 3 * exact.len() + 4 * fuzzy.len());
    out.push(exact.len() as f64);
    out.push(fuzzy.len() as f64);
    for a in &exact {
        out.extend([
            a.index as f64,
            a.duplicate_of as f64,
            a.content_length as f64,
        ]);
    }
    for a in &fuzzy {
        out.extend([
            a.index as f64,
            a.duplicate_of as f64,
            a.content_length as f64,
            a.similarity.unwrap_or(f64::NAN),
        ]);
    }
    Ok(OwnedF64(out))
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
