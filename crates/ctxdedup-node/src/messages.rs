//! Binding of `ctxdedup_core::messages`: exact and near-duplicate analysis of a conversation.
//! Conversion only: every decision is made in the core.
//!
//! Contents cross the boundary once per batch as a JS array of strings and are read as UTF-16
//! code units (`napi_get_value_string_utf16`), which is lossless for lone surrogates, unlike
//! Node-API's UTF-8 conversion. Exact grouping may also compare two strings in place
//! (`napi_strict_equals`) or hash a string's Latin-1 copy, a lossy fingerprint whose every match
//! is confirmed by that comparison.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::flags;
use crate::strings::{self, StringHandles};
use ctxdedup_core::messages::{self as core, analyze, AnalyzeOptions, AnalyzeSettings, Annotation};
use ctxdedup_core::{to_u32, Utf16Arena, Utf16Source};
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

/// The fuzzy pass's length rule (`ctxdedup_core::fuzzy::LENGTH_RATIO`): two messages whose raw
/// lengths have `min / max` below it are never near duplicates (the TS layer's pre-check reads it).
#[napi]
pub const FUZZY_LENGTH_RATIO: f64 = ctxdedup_core::fuzzy::LENGTH_RATIO;

/// Which copy of a duplicate group stays in full (`ctxdedup_core::messages::Keep`).
#[napi(string_enum = "lowercase")]
pub enum Keep {
    /// The first copy: later copies become references (a prompt-cache prefix stays stable).
    Earliest,
    /// The first copy in the recency window, else the last one (context-compression-engine).
    Latest,
}

impl From<Keep> for core::Keep {
    fn from(keep: Keep) -> Self {
        match keep {
            Keep::Earliest => core::Keep::Earliest,
            Keep::Latest => core::Keep::Latest,
        }
    }
}

/// Options of the message analysis, already validated by the TypeScript layer.
#[napi(object)]
pub struct NativeAnalyzeOptions {
    pub min_chars: u32,
    /// UTF-16 code units of each prefix (lossless, unlike `String`).
    pub skip_prefixes: Vec<Uint16Array>,
    pub keep: Keep,
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

fn core_options(options: NativeAnalyzeOptions) -> AnalyzeOptions {
    AnalyzeSettings {
        min_chars: options.min_chars as usize,
        skip_prefixes: options.skip_prefixes.iter().map(|p| p.to_vec()).collect(),
        keep: options.keep.into(),
        recency_start: options.recency_start as usize,
        exact: options.exact,
        fuzzy_threshold: options.fuzzy_threshold,
        visible_targets: options.visible_targets,
    }
    .into()
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
        Uint32Array::new(list.iter().map(|a| to_u32(f(a))).collect())
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
#[napi(catch_unwind)]
pub fn analyze_messages(
    #[napi(ts_arg_type = "string[]")] contents: StringHandles,
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
        &core_options(options),
    )))
}

/// The analysis of [`analyze_messages`] on a libuv worker thread.
pub struct AnalyzeTask {
    contents: Utf16Arena,
    blocked: Vec<bool>,
    excluded: Vec<bool>,
    options: AnalyzeOptions,
}

#[napi]
impl Task for AnalyzeTask {
    type Output = AnalysisVecs;
    type JsValue = NativeAnalysis;

    fn compute(&mut self) -> Result<Self::Output> {
        let result = crate::guarded("analysis", || {
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
#[napi(catch_unwind)]
pub fn analyze_messages_async(
    #[napi(ts_arg_type = "string[]")] contents: StringHandles,
    lengths: &[u32],
    blocked: &[u8],
    fuzzy_excluded: &[u8],
    options: NativeAnalyzeOptions,
) -> Result<AsyncTask<AnalyzeTask>> {
    Ok(AsyncTask::new(AnalyzeTask {
        contents: contents.with_lengths(lengths)?.to_arena(),
        blocked: flags(blocked),
        excluded: flags(fuzzy_excluded),
        options: core_options(options),
    }))
}

/// A `Float64Array` the engine owns (created with `napi_create_arraybuffer`, then filled): for
/// the small results of a small call, cheaper than an external buffer with a finalizer.
pub struct OwnedF64(Vec<f64>);

impl ToNapiValue for OwnedF64 {
    /// # Safety
    /// Node-API's contract for `to_napi_value`: `env` is the current call's environment.
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
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a whole number in 0..=u32::MAX, checked first"
    )]
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
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "whole numbers in 0..=65535, checked above"
        )]
        skip_prefixes.push(units.iter().map(|&u| u as u16).collect());
        at += 1 + len;
    }
    if at != params.len() {
        return Err(bad());
    }
    Ok(AnalyzeSettings {
        min_chars,
        skip_prefixes,
        keep: if keep_earliest {
            core::Keep::Earliest
        } else {
            core::Keep::Latest
        },
        recency_start,
        exact,
        fuzzy_threshold: fuzzy.then_some(threshold),
        visible_targets: Some(visible_targets),
    }
    .into())
}

/// [`analyze_messages`] with a call cost that suits a conversation of ten messages: the options
/// come as one `Float64Array` and the annotations go back as one, so crossing the boundary costs
/// a few Node-API calls, not one per option and per column.
///
/// `flags[i]`: bit 0 = blocked (shape-excluded), bit 1 = kept out of the fuzzy pass.
/// `params`: `[minChars, keepEarliest, recencyStart, exact, fuzzy, fuzzyThreshold,
/// visibleTargets, prefixCount, (prefixLength, ...prefixUnits) * prefixCount]` (flags 0 or 1;
/// `keepEarliest` 1 is [`Keep::Earliest`], 0 [`Keep::Latest`]).
/// Result: `[exactCount, fuzzyCount, (index, duplicateOf, length) * exactCount,
/// (index, duplicateOf, length, similarity) * fuzzyCount]`.
///
/// A measured fast path, which is why its options are numbers rather than the
/// [`NativeAnalyzeOptions`] object of [`analyze_messages`]: a 10-message `dedupeMessages` call
/// spends most of its native time crossing the boundary, and reading an options object costs a
/// Node-API call per field (`bench/messages.bench.ts`, per-call latency rows).
#[napi(catch_unwind, ts_return_type = "Float64Array")]
pub fn analyze_messages_packed(
    #[napi(ts_arg_type = "string[]")] contents: StringHandles,
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
