//! Binding of `ctxdedup_core::blocks`: converts a conversation in, references out.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::JsStrings;
use ctxdedup_core::blocks::{
    count_runs, dedupe_blocks, eligible_flags, BlockOptions, BlockRef, Blocks, Conversation,
    Template,
};
use ctxdedup_core::messages::Eligibility;
use ctxdedup_core::tokens::Encoding;
use ctxdedup_core::{to_u32, Utf16Arena};
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// Options of the block pass, validated by the TypeScript layer (templates by
/// [`block_template_error`]).
#[napi(object)]
pub struct NativeBlockOptions {
    pub min_lines: u32,
    pub min_chars: u32,
    pub line_numbers: bool,
    pub lookback: Option<u32>,
    /// The message stage's eligibility rule: minimum length and skipped prefixes (UTF-16 units).
    pub message_min_chars: u32,
    pub skip_prefixes: Vec<Uint16Array>,
    /// UTF-16 code units of the reference templates (lossless, unlike `String`).
    pub reference: Uint16Array,
    pub numbered_reference: Uint16Array,
    /// Count every replaced run in full into `tokensBefore` (default `true`); `false` leaves
    /// `tokensBefore` out and counts a run only as far as the net-positive test needs.
    pub full_counts: Option<bool>,
    /// Split a large conversation into lines on a second thread (default `true`; the result is
    /// the same). Off where one pass already runs per core.
    pub split_thread: Option<bool>,
}

/// References as parallel columns (see `ctxdedup_core::blocks::BlockRef`); `numberedFirst` is
/// `0xFFFFFFFF` for references without numbering.
#[napi(object)]
pub struct NativeBlocks {
    pub message: Uint32Array,
    pub line_start: Uint32Array,
    pub line_count: Uint32Array,
    pub unit_start: Uint32Array,
    pub unit_end: Uint32Array,
    pub out_line: Uint32Array,
    pub target: Uint32Array,
    pub target_line: Uint32Array,
    pub numbered_first: Uint32Array,
    pub target_numbered_first: Uint32Array,
    pub width: Uint32Array,
    pub separator: Uint32Array,
    /// Absent unless `fullCounts`.
    pub tokens_before: Option<Uint32Array>,
    pub tokens_after: Uint32Array,
    /// Every reference's text, one after another: reference `k`'s ends at `textEnd[k]` (one
    /// string, not one per reference: creating each costs more than slicing it in JS).
    pub text: Utf16String,
    pub text_end: Uint32Array,
    /// Whole-message duplicates kept as messages because the pass rewrote their keeper.
    pub kept_duplicates: Uint32Array,
}

/// Which reference template a template is (`{numberedFrom}` and `{numberedTo}` are fields of
/// the numbered one only).
#[napi(string_enum = "camelCase")]
pub enum TemplateKind {
    /// `NativeBlockOptions.reference`.
    Reference,
    /// `NativeBlockOptions.numberedReference`.
    NumberedReference,
}

/// Why `template` cannot be a reference template of that kind, or `null`.
#[napi(catch_unwind)]
pub fn block_template_error(template: &[u16], kind: TemplateKind) -> Option<String> {
    Template::parse(template, matches!(kind, TemplateKind::NumberedReference)).err()
}

fn core_options(o: &NativeBlockOptions) -> Result<BlockOptions> {
    let parse = |t: &[u16], numbered| {
        Template::parse(t, numbered).map_err(|e| Error::new(Status::InvalidArg, e))
    };
    Ok(BlockOptions {
        min_lines: o.min_lines as usize,
        min_chars: o.min_chars as usize,
        line_numbers: o.line_numbers,
        lookback: o.lookback.map(|l| l as usize),
        reference: parse(&o.reference, false)?,
        numbered_reference: parse(&o.numbered_reference, true)?,
        full_counts: o.full_counts.unwrap_or(true),
        split_thread: o.split_thread.unwrap_or(true),
    })
}

/// The block pass's token counter (its net-positive rule and its savings).
const O200K: Encoding = Encoding::O200kBase;

/// Everything one block pass needs, owned (so it can run off the JS thread).
pub struct BlockJob {
    contents: Utf16Arena,
    ids: Utf16Arena,
    source: Vec<bool>,
    eligible: Vec<bool>,
    keeper: Vec<u32>,
    options: BlockOptions,
}

impl BlockJob {
    fn new(
        contents: &JsStrings,
        ids: &JsStrings,
        source: &[u8],
        blocked: &[u8],
        keeper: &[u32],
        options: &NativeBlockOptions,
    ) -> Result<Self> {
        let contents = contents.to_arena();
        let rule = Eligibility {
            min_chars: options.message_min_chars as usize,
            skip_prefixes: options.skip_prefixes.iter().map(|p| p.to_vec()).collect(),
        };
        let blocked = crate::flags(blocked);
        Ok(BlockJob {
            eligible: eligible_flags(&contents, &blocked, &rule),
            contents,
            ids: ids.to_arena(),
            source: crate::flags(source),
            keeper: keeper.to_vec(),
            options: core_options(options)?,
        })
    }

    fn run(&self) -> Result<Blocks> {
        let (contents, ids) = (slices(&self.contents), slices(&self.ids));
        let conv = Conversation {
            contents: &contents,
            ids: &ids,
            source: &self.source,
            eligible: &self.eligible,
            keeper: &self.keeper,
        };
        dedupe_blocks(&conv, &self.options, &O200K).map_err(|e| Error::new(Status::InvalidArg, e))
    }
}

impl Drop for BlockJob {
    /// The copied contents' buffers go back to the pool: the next call reuses their pages.
    fn drop(&mut self) {
        for arena in [&mut self.contents, &mut self.ids] {
            crate::strings::buffer_pool::give_back(std::mem::take(arena).into_buffer());
        }
    }
}

fn slices(arena: &Utf16Arena) -> Vec<&[u16]> {
    (0..ctxdedup_core::Utf16Source::count(arena))
        .map(|i| arena.get(i))
        .collect()
}

fn to_js(blocks: Blocks) -> NativeBlocks {
    let Blocks {
        refs,
        kept_duplicates,
    } = blocks;
    let column = |f: &dyn Fn(&BlockRef) -> usize| {
        Uint32Array::new(refs.iter().map(|r| to_u32(f(r))).collect())
    };
    let numbering = |f: &dyn Fn(&ctxdedup_core::blocks::Numbering) -> u32| {
        Uint32Array::new(
            refs.iter()
                .map(|r| r.numbering.as_ref().map_or(u32::MAX, f))
                .collect(),
        )
    };
    NativeBlocks {
        message: column(&|r| r.message),
        line_start: column(&|r| r.line_start),
        line_count: column(&|r| r.line_count),
        unit_start: column(&|r| r.unit_start),
        unit_end: column(&|r| r.unit_end),
        out_line: column(&|r| r.out_line),
        target: column(&|r| r.target),
        target_line: column(&|r| r.target_line),
        numbered_first: numbering(&|n| n.first),
        target_numbered_first: numbering(&|n| n.target_first.unwrap_or(u32::MAX)),
        width: numbering(&|n| n.width),
        separator: numbering(&|n| u32::from(n.separator)),
        tokens_before: refs
            .iter()
            .map(|r| r.tokens_before.map(to_u32))
            .collect::<Option<Vec<u32>>>()
            .map(Uint32Array::new),
        tokens_after: column(&|r| r.tokens_after),
        text_end: Uint32Array::new(
            refs.iter()
                .scan(0, |end, r| {
                    *end += r.text.len();
                    Some(to_u32(*end))
                })
                .collect(),
        ),
        text: Utf16String::from(refs.into_iter().flat_map(|r| r.text).collect::<Vec<u16>>()),
        kept_duplicates: Uint32Array::new(kept_duplicates),
    }
}

/// The block pass over one conversation, on the calling thread. `source[i]`: the model sees
/// message `i`'s text (it may be a target); `blocked[i]`: its shape (role, tool calls, content
/// type) keeps it from being rewritten; `keeper[i]`: the keeper of a whole-message exact
/// duplicate, or `0xFFFFFFFF` (`ctxdedup_core::blocks::Conversation::keeper`; empty: none).
#[napi(catch_unwind)]
pub fn dedupe_blocks_sync(
    #[napi(ts_arg_type = "string[]")] contents: JsStrings,
    #[napi(ts_arg_type = "string[]")] ids: JsStrings,
    source: &[u8],
    blocked: &[u8],
    keeper: &[u32],
    options: NativeBlockOptions,
) -> Result<NativeBlocks> {
    Ok(to_js(
        BlockJob::new(&contents, &ids, source, blocked, keeper, &options)?.run()?,
    ))
}

#[napi]
impl Task for BlockJob {
    type Output = Blocks;
    type JsValue = NativeBlocks;

    fn compute(&mut self) -> Result<Self::Output> {
        crate::guarded("block dedup", || self.run())
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(to_js(output))
    }
}

/// [`dedupe_blocks_sync`] on a libuv worker thread (the contents are copied first).
#[napi(catch_unwind)]
pub fn dedupe_blocks_async(
    #[napi(ts_arg_type = "string[]")] contents: JsStrings,
    #[napi(ts_arg_type = "string[]")] ids: JsStrings,
    source: &[u8],
    blocked: &[u8],
    keeper: &[u32],
    options: NativeBlockOptions,
) -> Result<AsyncTask<BlockJob>> {
    Ok(AsyncTask::new(BlockJob::new(
        &contents, &ids, source, blocked, keeper, &options,
    )?))
}

/// o200k_base token count of each replaced run's text (`ctxdedup_core::blocks::count_runs`: the
/// counts of `countTokensBatch`, each distinct segment counted once per call).
#[napi(catch_unwind)]
pub fn count_block_runs(#[napi(ts_arg_type = "string[]")] texts: JsStrings) -> Uint32Array {
    let arena = texts.to_arena();
    let counts = count_runs(&slices(&arena), &O200K);
    crate::strings::buffer_pool::give_back(arena.into_buffer());
    Uint32Array::new(counts.into_iter().map(to_u32).collect())
}
