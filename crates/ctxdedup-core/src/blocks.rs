//! Block dedup: runs of lines already seen earlier in a conversation become one-line references.
//!
//! Messages are walked in order. Lines split on `\n` (a `\r` stays part of its line) and are
//! compared as UTF-16 code units. In each message that may be rewritten (`eligible`), a greedy
//! left-to-right scan looks for the longest run of at least `min_lines` lines (and `min_chars`
//! units) that equals lines the model still sees verbatim: lines of an earlier source message
//! that were not themselves replaced, or lines of the same message already emitted verbatim
//! above. Such a run becomes one reference line; every other line stays in place, in order.
//!
//! The guarantees, each tested against a brute-force oracle below:
//! - *lossless*: the output plus the references rebuild the input exactly ([`expand`]);
//! - *visible targets*: a reference's target lines are verbatim, contiguous lines of the output;
//! - *prefix-monotonic*: the output of message `m` depends only on messages `0..=m`;
//! - *no false positives*: every run is confirmed line by line (hashes only pick candidates);
//! - *net positive*: a reference is shorter than its run, in code units and in tokens.
//!
//! **Line-numbered content.** With `line_numbers` on, a line that starts with an optional run of
//! spaces, a decimal number (no leading zero, at most 9 digits) and one of `\t`, `→`, `|`, `:`
//! (`cat -n`, `nl`, editor reads, `grep -n`) is also compared on the text after that prefix. A
//! run matched that way is accepted only when both sides are numbered consecutively in the same
//! format (width and separator), so the replaced lines' numbers are regenerated exactly from the
//! target's lines: `format(width, separator, first + t)` followed by the target line's text.
//!
//! **Candidates and time bounds.** Every line gets a keyed in-memory hash (ahash; never exposed)
//! of its comparison text; every window of `min_lines` consecutive verbatim lines is indexed by
//! a rolling hash of its line hashes, keeping its earliest occurrence (within `lookback`) and the
//! most recent one (an open-addressing table whose slots the scan prefetches a few lines
//! ahead). A scan position extends each candidate line by line and takes the
//! longest run. A run too short to replace (fewer than `min_lines` lines or `min_chars` units)
//! is retried from the next line, until a per-message budget of line comparisons (64 per line)
//! is spent; after that such a run is emitted verbatim as a whole. A run that is long enough but
//! not net positive is always emitted verbatim as a whole, so no long run is extended twice.
//! A run that reaches the net-positive test is counted by its *segments* (lines where the count
//! splits, [`starts_segment`]), each distinct segment counted once per pass: in full with
//! [`BlockOptions::full_counts`], otherwise only until a lower bound of its count exceeds the
//! reference's (`Pass::more_tokens_than`), which decides the same. The whole pass is linear in
//! the input, whatever the options.
//!
//! **Split thread.** On a large conversation ([`SPLIT_THREAD_FROM_UNITS`]), a second thread
//! splits and hashes the lines of the messages ahead of the scan, in batches; the scan takes a
//! message's records once its batch is in. The records are the same as a single thread's, so
//! the result is too (checked by the proptest `the_split_thread_changes_nothing`).

// Per-site `#[expect]`s wait for the block-speed rework of this module (issue 13 item 7).
use crate::tokens::CountTokens;
use crate::{huge_pages, to_u32};
use ahash::{AHashMap, RandomState};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::mpsc;

/// Hashes a `u64` key to itself. The keys of the segment memo are already outputs of the
/// pass's keyed hash (a fresh key per call), uniformly spread, so hashing them again would buy
/// nothing but time.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by the `u64` keys; any other key is still hashed deterministically.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(ROLL);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A map from keyed-hash values ([`KeyHasher`]).
type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// Occurrences remembered per window: the earliest and the most recent ones. Each scan position
/// extends all of them (the longest run wins), so work stays linear with this factor.
const CANDIDATES: usize = 2;
/// How many lines ahead the pass prefetches the index slots of the windows it will look up.
const PREFETCH_LINES: usize = 8;
/// Line comparisons a message may spend on runs that end up too short before short runs stop
/// being retried line by line: `RETRY_BUDGET_PER_LINE` per line plus `RETRY_BUDGET_BASE`.
const RETRY_BUDGET_PER_LINE: usize = 64;
const RETRY_BUDGET_BASE: usize = 1 << 16;
/// Marks a line with no output position (replaced, or not emitted yet).
const NONE: u32 = u32::MAX;
/// Odd multiplier of the rolling window hash.
const ROLL: u64 = 0x9E37_79B9_7F4A_7C15;
/// Odd multiplier that mixes a numbered line's format into its key, and its inverse mod 2^64.
const MIX: u64 = 0xD6E8_FEB8_6659_FD93;
const MIX_INVERSE: u64 = {
    // Newton's iteration doubles the correct low bits each step: 3 -> 6 -> ... -> 96 >= 64.
    let mut inverse = MIX;
    let mut step = 0;
    while step < 5 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(MIX.wrapping_mul(inverse)));
        step += 1;
    }
    inverse
};
/// The longest number a line-number prefix may carry (9 digits).
const MAX_LINE_NUMBER_DIGITS: usize = 9;
/// Leading spaces a line-number prefix may carry.
const MAX_LINE_NUMBER_PAD: usize = 16;
/// Separators that end a line-number prefix: tab, `→`, `|`, `:`.
pub const LINE_NUMBER_SEPARATORS: [u16; 4] = [b'\t' as u16, 0x2192, b'|' as u16, b':' as u16];

/// A field of a reference template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `{lines}`: how many lines the reference stands for.
    Lines,
    /// `{target}`: the id of the message whose lines are meant.
    Target,
    /// `{from}`: first target line, 1-based, counted in the target message's output.
    From,
    /// `{to}`: last target line, 1-based, counted in the target message's output.
    To,
    /// `{numberedFrom}`: the line number the first replaced line carried.
    NumberedFrom,
    /// `{numberedTo}`: the line number the last replaced line carried.
    NumberedTo,
}

impl Field {
    const ALL: [(&'static str, Field); 6] = [
        ("lines", Field::Lines),
        ("target", Field::Target),
        ("from", Field::From),
        ("to", Field::To),
        ("numberedFrom", Field::NumberedFrom),
        ("numberedTo", Field::NumberedTo),
    ];
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(Vec<u16>),
    Field(Field),
}

/// A parsed reference template: literal text with `{field}` placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

/// Default template of a reference to unnumbered (or identically numbered) lines.
pub const DEFAULT_REFERENCE: &str =
    "[ctxdedup: {lines} lines unchanged, = {target} lines {from}–{to}]";
/// Default template of a reference to lines renumbered here.
pub const DEFAULT_NUMBERED_REFERENCE: &str =
    "[ctxdedup: {lines} lines unchanged, = {target} lines {from}–{to}, numbered {numberedFrom}–{numberedTo} here]";

impl Template {
    /// Parses `units`. A `{name}` with a known name is a field; any other brace is literal text.
    ///
    /// # Errors
    /// A message when the template has a line break, an unknown `{field}`, or lacks one of the
    /// fields a reader needs to follow it: `{target}`, `{from}` and `{to}`, plus
    /// `{numberedFrom}` when `numbered`; or, when not `numbered`, has `{numberedFrom}` or
    /// `{numberedTo}` (a plain reference has no numbering to show).
    pub fn parse(units: &[u16], numbered: bool) -> Result<Template, String> {
        if units
            .iter()
            .any(|&u| u == b'\n' as u16 || u == b'\r' as u16)
        {
            return Err("must be one line (no \\n or \\r)".into());
        }
        let mut parts = Vec::new();
        let mut text = Vec::new();
        let mut i = 0;
        while i < units.len() {
            if units[i] == b'{' as u16 {
                let close = units[i + 1..].iter().position(|&u| u == b'}' as u16);
                let name = close.map(|c| &units[i + 1..i + 1 + c]);
                let is_name = |n: &[u16]| {
                    !n.is_empty()
                        && n.iter()
                            .all(|&u| u8::try_from(u).is_ok_and(|b| b.is_ascii_alphanumeric()))
                };
                if let Some(name) = name.filter(|n| is_name(n)) {
                    let field = Field::ALL
                        .iter()
                        .find(|(label, _)| label.encode_utf16().eq(name.iter().copied()))
                        .map(|&(_, f)| f)
                        .ok_or_else(|| {
                            format!(
                                "has an unknown field {{{}}}",
                                String::from_utf16_lossy(name)
                            )
                        })?;
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(Part::Field(field));
                    i += name.len() + 2;
                    continue;
                }
            }
            text.push(units[i]);
            i += 1;
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        let has = |f: Field| parts.contains(&Part::Field(f));
        let mut required = vec![
            ("target", Field::Target),
            ("from", Field::From),
            ("to", Field::To),
        ];
        if numbered {
            required.push(("numberedFrom", Field::NumberedFrom));
        } else if has(Field::NumberedFrom) || has(Field::NumberedTo) {
            // A plain reference has no numbering of its own to show.
            return Err(
                "cannot contain {numberedFrom} or {numberedTo}: only the numbered reference template fills them".into(),
            );
        }
        for (label, field) in required {
            if !has(field) {
                return Err(format!(
                    "must contain {{{label}}} so a reader can find the lines"
                ));
            }
        }
        Ok(Template { parts })
    }

    fn render(&self, values: &RefValues<'_>, out: &mut Vec<u16>) {
        out.clear();
        let number = |out: &mut Vec<u16>, n: usize| push_decimal(n, out);
        for part in &self.parts {
            match part {
                Part::Text(t) => out.extend_from_slice(t),
                Part::Field(Field::Lines) => number(out, values.lines),
                Part::Field(Field::Target) => out.extend_from_slice(values.target),
                Part::Field(Field::From) => number(out, values.from),
                Part::Field(Field::To) => number(out, values.from + values.lines - 1),
                Part::Field(Field::NumberedFrom) => number(out, values.numbered_from as usize),
                Part::Field(Field::NumberedTo) => {
                    number(out, values.numbered_from as usize + values.lines - 1)
                }
            }
        }
    }
}

/// Appends the decimal digits of `n` to `out`.
fn push_decimal(n: usize, out: &mut Vec<u16>) {
    let mut digits = [0u16; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        #[expect(
            clippy::cast_possible_truncation,
            reason = "n % 10 is one decimal digit"
        )]
        let digit = (n % 10) as u16;
        digits[at] = u16::from(b'0') + digit;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

struct RefValues<'a> {
    lines: usize,
    target: &'a [u16],
    from: usize,
    numbered_from: u32,
}

/// Options of the block pass.
#[derive(Debug, Clone)]
pub struct BlockOptions {
    /// Minimum lines in a run (at least 1).
    pub min_lines: usize,
    /// Minimum UTF-16 units a run spans (its lines and the line breaks between them).
    pub min_chars: usize,
    /// Match line-numbered lines on the text after the number.
    pub line_numbers: bool,
    /// How many messages back a reference may point (`None`: any earlier message).
    pub lookback: Option<usize>,
    /// Template of references to lines copied as they are.
    pub reference: Template,
    /// Template of references to lines whose numbers are regenerated.
    pub numbered_reference: Template,
    /// Count every replaced run in full into [`BlockRef::tokens_before`]. Off, a run is counted
    /// only as far as the net-positive test needs (see `Pass::net_positive`) and
    /// `tokens_before` is `None`: the decisions are the same either way.
    pub full_counts: bool,
    /// Split a large conversation into lines on a second thread while this one matches (from
    /// [`SPLIT_THREAD_FROM_UNITS`] units): the same result, sooner when a core is free. Off where
    /// the caller already runs one pass per core.
    pub split_thread: bool,
}

/// From this many UTF-16 units in the messages a pass reads, [`BlockOptions::split_thread`]
/// applies (below it, starting a thread costs more than it saves).
pub const SPLIT_THREAD_FROM_UNITS: usize = 1 << 22;

impl BlockOptions {
    /// The defaults: 4 lines, 200 units, line numbers on, no lookback limit, default templates,
    /// full counts, a split thread.
    pub fn new() -> Self {
        let parse = |t: &str, n| {
            Template::parse(&t.encode_utf16().collect::<Vec<_>>(), n).expect("default template")
        };
        BlockOptions {
            min_lines: 4,
            min_chars: 200,
            line_numbers: true,
            lookback: None,
            reference: parse(DEFAULT_REFERENCE, false),
            numbered_reference: parse(DEFAULT_NUMBERED_REFERENCE, true),
            full_counts: true,
            split_thread: true,
        }
    }
}

impl Default for BlockOptions {
    fn default() -> Self {
        Self::new()
    }
}

/// Numbering of the lines a reference replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Numbering {
    /// Number carried by the first replaced line; the others follow consecutively.
    pub first: u32,
    /// Number carried by the first target line, or `None` when the target lines are
    /// unnumbered (then each replaced line is its prefix followed by the whole target line).
    pub target_first: Option<u32>,
    /// Width the number is right-aligned to with spaces (0: no padding).
    pub width: u32,
    /// The separator after the number (one of [`LINE_NUMBER_SEPARATORS`]).
    pub separator: u16,
}

/// One run of lines replaced by a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRef {
    /// The rewritten message.
    pub message: usize,
    /// First replaced line (0-based, in the input message).
    pub line_start: usize,
    /// Number of replaced lines.
    pub line_count: usize,
    /// The replaced span in the input content (UTF-16 units; the last line's `\n` excluded).
    pub unit_start: usize,
    pub unit_end: usize,
    /// The reference's line index (0-based) in the output content.
    pub out_line: usize,
    /// The message whose lines are meant (earlier, or the same message above).
    pub target: usize,
    /// First target line, 0-based, in the target message's *output* content.
    pub target_line: usize,
    /// Set when the replaced lines carry numbers regenerated from the target's.
    pub numbering: Option<Numbering>,
    /// Tokens of the replaced span (`None` unless [`BlockOptions::full_counts`]) and of the
    /// reference.
    pub tokens_before: Option<usize>,
    pub tokens_after: usize,
    /// The reference line.
    pub text: Vec<u16>,
}

/// A conversation as the block pass sees it.
pub struct Conversation<'a> {
    /// Content of each message (empty for messages without text).
    pub contents: &'a [&'a [u16]],
    /// Id of each message (what references name).
    pub ids: &'a [&'a [u16]],
    /// Whether the model sees this message's text (it may be a target).
    pub source: &'a [bool],
    /// Whether the message may be rewritten (implies `source`).
    pub eligible: &'a [bool],
    /// The message a whole-message exact duplicate duplicates (its keeper, an earlier message),
    /// or [`NO_KEEPER`]. Such a message is tagged as a duplicate of its keeper, so the pass skips
    /// it (the model sees the tag, not its text) — unless the pass rewrites the keeper: the tag
    /// would then point at text the model no longer sees in full, so the duplicate stays a
    /// message (reported in [`Blocks::kept_duplicates`]) and goes through the pass like any other,
    /// with its own `source` and `eligible` flags. Empty: no duplicates.
    pub keeper: &'a [u32],
}

/// [`Conversation::keeper`] of a message that is not a whole-message duplicate.
pub const NO_KEEPER: u32 = u32::MAX;

/// What a block pass decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Blocks {
    /// The replaced runs, by message, then by position.
    pub refs: Vec<BlockRef>,
    /// The whole-message duplicates kept as messages because the pass rewrote their keeper
    /// (ascending).
    pub kept_duplicates: Vec<u32>,
}

/// A line of a processed message.
#[derive(Debug, Clone, Copy)]
struct Line {
    start: u32,
    end: u32,
    /// Start of the comparison text: after the line-number prefix, or `start`.
    rest: u32,
    /// Line number (or [`NONE`]).
    number: u32,
    /// `width << 16 | separator` of a numbered line, 0 otherwise.
    format: u32,
    /// The message the line is in (what an index entry, a record number, points into).
    message: u32,
    /// Hash of `format` and the comparison text (see [`Line::plain_key`]).
    key: u64,
}

// The message number fills what was padding: records stay 32 bytes.
const _: () = assert!(std::mem::size_of::<Line>() == 32);

impl Line {
    /// Hash of the comparison text as an unnumbered line's (`key` for unnumbered lines): finds
    /// unnumbered targets of a numbered run. `key` mixes the format into it invertibly.
    fn plain_key(&self) -> u64 {
        if self.format == 0 {
            self.key
        } else {
            self.key.wrapping_mul(MIX_INVERSE) ^ u64::from(self.format).wrapping_mul(ROLL)
        }
    }
}

/// Calls `f(start, end)` for each line of `text` (split on `\n`), in order.
fn for_each_line(text: &[u16], mut f: impl FnMut(usize, usize)) {
    const CHUNK: usize = 16;
    let newline = b'\n' as u16;
    let (mut start, mut i) = (0, 0);
    // A mask of the line breaks of each chunk of 16 units (the compiler vectorizes it).
    while let Some(chunk) = text.get(i..i + CHUNK) {
        let chunk: &[u16; CHUNK] = chunk.try_into().expect("a chunk of CHUNK units");
        let mut mask = chunk
            .iter()
            .enumerate()
            .fold(0u32, |m, (k, &u)| m | (u32::from(u == newline) << k));
        while mask != 0 {
            let at = i + mask.trailing_zeros() as usize;
            f(start, at);
            start = at + 1;
            mask &= mask - 1;
        }
        i += CHUNK;
    }
    for (k, &u) in text.iter().enumerate().skip(i) {
        if u == newline {
            f(start, k);
            start = k + 1;
        }
    }
    f(start, text.len());
}

/// Parses a line-number prefix: `(number, width, separator, prefix length)`.
#[inline]
pub fn parse_line_number(line: &[u16]) -> Option<(u32, u32, u16, usize)> {
    // Most lines start with neither a space nor a digit: one comparison for them.
    let &first = line.first()?;
    if first != b' ' as u16 && !(b'0' as u16..=b'9' as u16).contains(&first) {
        return None;
    }
    let pad = line
        .iter()
        .take(MAX_LINE_NUMBER_PAD + 1)
        .take_while(|&&u| u == b' ' as u16)
        .count();
    if pad > MAX_LINE_NUMBER_PAD {
        return None;
    }
    let digits = line[pad..]
        .iter()
        .take(MAX_LINE_NUMBER_DIGITS + 1)
        .take_while(|&&u| (b'0' as u16..=b'9' as u16).contains(&u))
        .count();
    if digits == 0 || digits > MAX_LINE_NUMBER_DIGITS || (digits > 1 && line[pad] == b'0' as u16) {
        return None;
    }
    let sep = *line.get(pad + digits)?;
    if !LINE_NUMBER_SEPARATORS.contains(&sep) {
        return None;
    }
    let number = line[pad..pad + digits]
        .iter()
        .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0' as u16));
    let width = if pad == 0 { 0 } else { to_u32(pad + digits) };
    Some((number, width, sep, pad + digits + 1))
}

/// The prefix `format(width, separator, number)` of a numbered line, appended to `out`.
pub fn format_line_number(width: u32, separator: u16, number: u32, out: &mut Vec<u16>) {
    let digits = number.checked_ilog10().map_or(1, |d| d as usize + 1);
    for _ in digits..width as usize {
        out.push(b' ' as u16);
    }
    push_decimal(number as usize, out);
    out.push(separator);
}

/// Appends the line records of `text`, message `m`, to `lines`.
fn split_lines(
    text: &[u16],
    m: usize,
    options: &BlockOptions,
    hasher: &RandomState,
    lines: &mut Vec<Line>,
) {
    let message = to_u32(m);
    for_each_line(text, |start, end| {
        let line = &text[start..end];
        let parsed = if options.line_numbers {
            parse_line_number(line)
        } else {
            None
        };
        let (number, format, rest) = match parsed {
            Some((n, w, s, len)) => (n, (w << 16) | u32::from(s), start + len),
            None => (NONE, 0, start),
        };
        // One hash of the text; a numbered line's key mixes its format in.
        let plain_key: u64 = hasher.hash_one(&text[rest..end]);
        let key = if format == 0 {
            plain_key
        } else {
            (plain_key ^ u64::from(format).wrapping_mul(ROLL)).wrapping_mul(MIX)
        };
        lines.push(Line {
            start: to_u32(start),
            end: to_u32(end),
            rest: to_u32(rest),
            number,
            format,
            message,
            key,
        });
    });
}

/// The line records of consecutive messages from `first`, split on the split thread:
/// `counts[k]` records for message `first + k` (0 for a message the pass does not read).
struct SplitBatch {
    first: usize,
    counts: Vec<u32>,
    lines: Vec<Line>,
}

/// Line records per [`SplitBatch`] (about 1 MiB: a batch is still in cache when it is copied).
const SPLIT_BATCH_LINES: usize = 1 << 15;

/// Batches the split thread may be ahead by.
const SPLIT_QUEUE: usize = 8;

struct Pass<'a, 'c> {
    conv: &'a Conversation<'c>,
    options: &'a BlockOptions,
    hasher: RandomState,
    /// Window hash -> earliest verbatim occurrence `(message, line)` within the lookback.
    index: WindowIndex,
    /// The line records of every message processed so far, one message after another (one
    /// arena per call, no allocation per message).
    lines: Vec<Line>,
    /// Output line of each record of `lines`, or [`NONE`] when replaced (or not emitted yet).
    out_lines: Vec<u32>,
    /// Where each message's records start in `lines` and how many there are.
    spans: Vec<(u32, u32)>,
    /// `ROLL^(min_lines - 1)`.
    top: u64,
    scratch: Vec<u16>,
    /// Token counts of replaced runs, by what determines their text:
    /// `(target, target line, lines, mode, first number, format)`.
    run_tokens: AHashMap<SpanKey, usize>,
    /// Token counts of run segments (see [`starts_segment`]) by a hash of their lines, with
    /// their text: a line replaced again in another run is not counted again.
    segment_tokens: KeyMap<(&'c [u16], u32)>,
    /// The segments of the run being counted (reused): `(start, end, key)`.
    segments: Vec<(u32, u32, u64)>,
    /// The window hashes of the message being processed (reused).
    window_buffers: (Vec<u64>, Vec<u64>),
}

/// A confirmed run: `len` lines from line `i` equal `len` lines from line `j` of `target`.
#[derive(Debug, Clone, Copy)]
struct Run {
    i: usize,
    len: usize,
    target: usize,
    j: usize,
    mode: Mode,
    /// The output line the reference would take.
    out: u32,
}

/// Verbatim occurrences of one window, as the record numbers (in `Pass::lines`) of their first
/// lines: the earliest (within the lookback), then the most recent. Free slots hold [`NONE`]
/// (16 bytes an entry with the key: a denser index, and fewer cache misses per lookup).
#[derive(Debug, Clone, Copy)]
struct Candidates {
    at: [u32; CANDIDATES],
}

impl Candidates {
    fn one(at: u32) -> Self {
        let mut c = Candidates {
            at: [NONE; CANDIDATES],
        };
        c.at[0] = at;
        c
    }

    fn len(&self) -> usize {
        self.at
            .iter()
            .position(|&r| r == NONE)
            .unwrap_or(CANDIDATES)
    }

    fn list(&self) -> &[u32] {
        &self.at[..self.len()]
    }

    /// Adds an occurrence: it fills a free slot, or replaces the oldest but the earliest.
    fn add(&mut self, at: u32) {
        let len = self.len();
        if len < CANDIDATES {
            self.at[len] = at;
        } else {
            self.at.copy_within(2.., 1);
            self.at[CANDIDATES - 1] = at;
        }
    }

    /// Drops occurrences in messages before `oldest` (`lines`: the records they number).
    fn retain_from(&mut self, oldest: usize, lines: &[Line]) {
        let mut kept = 0;
        for k in 0..self.len() {
            if lines[self.at[k] as usize].message as usize >= oldest {
                self.at[kept] = self.at[k];
                kept += 1;
            }
        }
        for slot in &mut self.at[kept..] {
            *slot = NONE;
        }
    }
}

/// The window index: window hash -> [`Candidates`], open addressing with linear probing in a
/// table at most half full (at most one window per line is ever inserted; the table is sized for
/// all of a call's lines up front, or for an estimate of them when another thread is still
/// splitting the messages, and doubles if the estimate falls short). Its own table rather than a
/// `HashMap` so the pass can [`prefetch`](WindowIndex::prefetch) the slot of a window it will
/// look up a few lines later: at 100k messages the table is far larger than the caches, and
/// waiting for each slot in turn was most of the pass's time.
#[derive(Default)]
struct WindowIndex {
    /// `(window hash, occurrences)`; a slot whose first occurrence is [`NONE`] is empty.
    slots: Vec<(u64, Candidates)>,
    /// The slots filled since the last [`reset`](WindowIndex::reset): emptying them is all a
    /// reset of a table of the right size costs (most calls are small, and a whole table is
    /// many times more memory than the windows one call inserts).
    used: Vec<u32>,
    /// `64 - log2(slots.len())`: the slot of a hash is its top bits after mixing.
    shift: u32,
    /// Whether the table is too large for the caches, so prefetching pays.
    large: bool,
}

/// From this size the window index prefetches (below it the table stays in the L2 cache).
const PREFETCH_FROM_BYTES: usize = 512 << 10;

/// An empty slot.
const EMPTY_SLOT: (u64, Candidates) = (
    0,
    Candidates {
        at: [NONE; CANDIDATES],
    },
);

impl WindowIndex {
    /// Empties the index and sizes it for `windows` insertions: at most half full, in a table
    /// of 2 to 8 times `windows` slots (the one kept from earlier calls if it is in that range).
    fn reset(&mut self, windows: usize) {
        let needed = (2 * windows).next_power_of_two().max(16);
        if (needed..=4 * needed).contains(&self.slots.len()) {
            for &at in &self.used {
                self.slots[at as usize] = EMPTY_SLOT;
            }
        } else {
            self.slots.clear();
            if self.slots.capacity() < needed {
                self.slots = Vec::with_capacity(needed);
                huge_pages::advise(&self.slots);
            }
            self.slots.resize(needed, EMPTY_SLOT);
            self.shift = 64 - needed.trailing_zeros();
        }
        self.used.clear();
        self.large =
            self.slots.len() * std::mem::size_of::<(u64, Candidates)>() >= PREFETCH_FROM_BYTES;
    }

    /// Doubles the table (when the windows outgrow the estimate it was sized for).
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let used = std::mem::take(&mut self.used);
        let size = 2 * old.len();
        self.slots = Vec::with_capacity(size);
        huge_pages::advise(&self.slots);
        self.slots.resize(size, EMPTY_SLOT);
        self.shift = 64 - size.trailing_zeros();
        self.used = Vec::with_capacity(size / 2);
        for at in used {
            let slot = old[at as usize];
            let to = self.find(slot.0);
            self.slots[to] = slot;
            self.used.push(to_u32(to));
        }
        self.large = size * std::mem::size_of::<(u64, Candidates)>() >= PREFETCH_FROM_BYTES;
    }

    /// Bytes the index holds.
    fn bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<(u64, Candidates)>()
            + self.used.capacity() * std::mem::size_of::<u32>()
    }

    fn home(&self, hash: u64) -> usize {
        usize::try_from(hash.wrapping_mul(MIX) >> self.shift).unwrap_or(0)
    }

    /// Asks the memory system for the slot of `hash` (a hint: it changes no result).
    fn prefetch(&self, hash: u64) {
        let slot = &self.slots[self.home(hash)];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults, and the address is inside `slots`.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch(std::ptr::from_ref(slot).cast(), _MM_HINT_T0);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    /// The slot holding `hash`, or the empty slot where it would go.
    fn find(&self, hash: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = self.home(hash);
        loop {
            let (key, c) = &self.slots[at];
            if c.at[0] == NONE || *key == hash {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    fn get(&self, hash: u64) -> Option<&Candidates> {
        let (_, c) = &self.slots[self.find(hash)];
        (c.at[0] != NONE).then_some(c)
    }

    /// The occurrences of `hash`, empty (all [`NONE`]) if there are none yet, to fill in.
    fn entry(&mut self, hash: u64) -> &mut Candidates {
        let mut at = self.find(hash);
        if self.slots[at].1.at[0] == NONE && 2 * (self.used.len() + 1) > self.slots.len() {
            self.grow();
            at = self.find(hash);
        }
        let slot = &mut self.slots[at];
        if slot.1.at[0] == NONE {
            self.used.push(to_u32(at));
        }
        slot.0 = hash;
        &mut slot.1
    }
}

/// Why a confirmed run got no reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reject {
    /// Fewer than `min_chars` units.
    Short,
    /// The reference would not be shorter (characters or tokens), or not one line.
    NotShorter,
}

/// How a candidate run matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Lines equal as they are.
    Plain,
    /// Both sides numbered consecutively in one format; the text after the numbers equal.
    Numbered,
    /// This side numbered consecutively; its text after the numbers equals unnumbered target lines.
    Renumbered,
}

impl<'a, 'c> Pass<'a, 'c> {
    /// Appends the line records of message `m` to `self.lines` and records where they are.
    fn split(&mut self, m: usize) {
        let capacity = self.lines.capacity();
        let base = self.lines.len();
        split_lines(
            self.conv.contents[m],
            m,
            self.options,
            &self.hasher,
            &mut self.lines,
        );
        // A grown buffer's new pages are not touched yet: huge pages for them.
        if self.lines.capacity() != capacity {
            huge_pages::advise(&self.lines);
        }
        self.spans[m] = (to_u32(base), to_u32(self.lines.len() - base));
        self.grow_out_lines();
    }

    /// Appends a batch of line records split on the split thread (its messages come next).
    fn take_batch(&mut self, batch: &SplitBatch) {
        let capacity = self.lines.capacity();
        let mut base = self.lines.len();
        for (k, &count) in batch.counts.iter().enumerate() {
            self.spans[batch.first + k] = (to_u32(base), count);
            base += count as usize;
        }
        self.lines.extend_from_slice(&batch.lines);
        if self.lines.capacity() != capacity {
            huge_pages::advise(&self.lines);
        }
        self.grow_out_lines();
    }

    /// One output line slot (not emitted yet) per line record.
    fn grow_out_lines(&mut self) {
        let capacity = self.out_lines.capacity();
        self.out_lines.resize(self.lines.len(), NONE);
        if self.out_lines.capacity() != capacity {
            huge_pages::advise(&self.out_lines);
        }
    }

    /// Reserves the line records of a large call up front, on huge pages (see [`huge_pages`]):
    /// grown by doubling instead, the buffer would keep the small pages of its first half. The
    /// estimate (one line per 32 units, and one per message) is a hint: more lines still fit.
    fn reserve_lines(&mut self, units: usize) {
        let lines = units / 32 + self.conv.contents.len();
        if lines * std::mem::size_of::<Line>() >= huge_pages::ADVISE_FROM_BYTES
            && self.lines.capacity() < lines
        {
            self.lines.reserve(lines);
            huge_pages::advise(&self.lines);
            self.out_lines.reserve(lines);
            huge_pages::advise(&self.out_lines);
        }
    }

    /// Processes every message in order into `refs` and `kept_duplicates` ([`Blocks`]).
    /// `ready(self, m)` runs before each message the pass reads is processed (the pipelined
    /// pass waits there for that message's records).
    fn process_all(
        &mut self,
        count_tokens: &dyn CountTokens,
        refs: &mut Vec<BlockRef>,
        kept_duplicates: &mut Vec<u32>,
        mut ready: impl FnMut(&mut Self, usize),
    ) {
        let conv = self.conv;
        let n = conv.contents.len();
        // Whether the pass rewrote each message (only a keeper's flag is read).
        let mut rewritten = vec![false; if conv.keeper.is_empty() { 0 } else { n }];
        for m in 0..n {
            if let Some(&k) = conv.keeper.get(m).filter(|&&k| k != NO_KEEPER) {
                if !rewritten[k as usize] {
                    continue;
                }
                kept_duplicates.push(to_u32(m));
            }
            if conv.source[m] || conv.eligible[m] {
                ready(self, m);
                let before = refs.len();
                self.process(m, count_tokens, refs);
                if let Some(flag) = rewritten.get_mut(m) {
                    *flag = refs.len() > before;
                }
            }
        }
    }

    /// [`Pass::process_all`] while a second thread splits the messages into lines, in batches
    /// of about `batch_lines` records, at most [`SPLIT_QUEUE`] batches ahead. The window index is
    /// sized for `lines` (and grows past them), while the first batches are split.
    fn run_pipelined(
        &mut self,
        count_tokens: &dyn CountTokens,
        refs: &mut Vec<BlockRef>,
        kept_duplicates: &mut Vec<u32>,
        batch_lines: usize,
        lines: usize,
    ) {
        let (conv, options, hasher) = (self.conv, self.options, self.hasher.clone());
        let n = conv.contents.len();
        std::thread::scope(|scope| {
            let (send, batches) = mpsc::sync_channel::<SplitBatch>(SPLIT_QUEUE);
            let (recycle, spent) = mpsc::channel::<SplitBatch>();
            scope.spawn(move || {
                let empty = |first| {
                    let reused = spent.try_recv().ok();
                    let mut batch = reused.unwrap_or_else(|| SplitBatch {
                        first,
                        counts: Vec::new(),
                        lines: Vec::with_capacity(batch_lines),
                    });
                    batch.first = first;
                    batch.counts.clear();
                    batch.lines.clear();
                    batch
                };
                let mut batch = empty(0);
                for m in 0..n {
                    let before = batch.lines.len();
                    if conv.source[m] || conv.eligible[m] {
                        split_lines(conv.contents[m], m, options, &hasher, &mut batch.lines);
                    }
                    batch.counts.push(to_u32(batch.lines.len() - before));
                    if batch.lines.len() >= batch_lines || m + 1 == n {
                        let full = std::mem::replace(&mut batch, empty(m + 1));
                        // The matching side is gone (it panicked): nothing left to split for.
                        if send.send(full).is_err() {
                            return;
                        }
                    }
                }
            });
            self.index.reset(lines);
            let mut split = 0;
            self.process_all(count_tokens, refs, kept_duplicates, |pass, m| {
                while split <= m {
                    let batch = batches
                        .recv()
                        .expect("the split thread sends the lines of every message");
                    pass.take_batch(&batch);
                    split = batch.first + batch.counts.len();
                    // The split thread may have finished: then the batch is simply dropped.
                    let _ = recycle.send(batch);
                }
            });
        });
    }

    /// Where message `m`'s records are in `self.lines` (and `self.out_lines`).
    fn span(&self, m: usize) -> std::ops::Range<usize> {
        let (start, n) = self.spans[m];
        start as usize..(start + n) as usize
    }

    /// Rolling hashes of every window of `min_lines` lines, into `out` (cleared first).
    fn windows(&self, lines: &[Line], key: fn(&Line) -> u64, out: &mut Vec<u64>) {
        out.clear();
        let k = self.options.min_lines;
        if lines.len() < k {
            return;
        }
        let mut h = 0u64;
        for (i, line) in lines.iter().enumerate() {
            if i >= k {
                h = h.wrapping_sub(key(&lines[i - k]).wrapping_mul(self.top));
            }
            h = h.wrapping_mul(ROLL).wrapping_add(key(line));
            if i + 1 >= k {
                out.push(h);
            }
        }
    }

    fn in_lookback(&self, m: usize, target: usize) -> bool {
        self.options.lookback.map_or(true, |l| m - target <= l)
    }

    /// Length of the run from line `i` of message `m` against line `j` of `target`, in `mode`.
    fn extend(&self, (m, i): (usize, usize), (target, j): (usize, usize), mode: Mode) -> usize {
        let lines = &self.lines[self.span(m)];
        let (tlines, tout) = (
            &self.lines[self.span(target)],
            &self.out_lines[self.span(target)],
        );
        let text = self.conv.contents[m];
        let ttext = self.conv.contents[target];
        let (first, tfirst) = (lines[i], tlines[j]);
        if mode == Mode::Numbered && (first.number == NONE || first.format != tfirst.format) {
            return 0;
        }
        if mode == Mode::Renumbered && first.number == NONE {
            return 0;
        }
        let mut t = 0;
        while i + t < lines.len() && j + t < tlines.len() && tout[j + t] != NONE {
            let (a, b) = (lines[i + t], tlines[j + t]);
            let same = match mode {
                Mode::Plain => {
                    text[a.start as usize..a.end as usize]
                        == ttext[b.start as usize..b.end as usize]
                }
                Mode::Numbered => {
                    a.format == first.format
                        && b.format == first.format
                        && a.number == first.number.wrapping_add(to_u32(t))
                        && b.number == tfirst.number.wrapping_add(to_u32(t))
                        && text[a.rest as usize..a.end as usize]
                            == ttext[b.rest as usize..b.end as usize]
                }
                Mode::Renumbered => {
                    a.format == first.format
                        && a.number == first.number.wrapping_add(to_u32(t))
                        && text[a.rest as usize..a.end as usize]
                            == ttext[b.start as usize..b.end as usize]
                }
            };
            if !same {
                break;
            }
            t += 1;
        }
        t
    }

    fn insert_window(&mut self, m: usize, line: usize, hash: u64) {
        let at = to_u32(self.span(m).start + line);
        let oldest = self.options.lookback.map(|l| m.saturating_sub(l));
        let lines = &self.lines;
        let c = self.index.entry(hash);
        if c.at[0] == NONE {
            *c = Candidates::one(at);
        } else {
            if let Some(oldest) = oldest {
                c.retain_from(oldest, lines);
            }
            c.add(at);
        }
    }

    /// The longest run from line `i` of message `m` among the window's candidates (ties: the
    /// earliest candidate, plain before numbered): `(len, target, j, mode)`, and the lines
    /// compared to find it.
    fn best_run(
        &self,
        m: usize,
        i: usize,
        windows: [Option<u64>; 2],
    ) -> (Option<(usize, usize, usize, Mode)>, usize) {
        let mut best: Option<(usize, usize, usize, Mode)> = None;
        let mut work = 0;
        let lookups = [
            (windows[0], &[Mode::Plain, Mode::Numbered][..]),
            (windows[1], &[Mode::Renumbered][..]),
        ];
        for (window, modes) in lookups {
            let Some(candidates) = window.and_then(|w| self.index.get(w)) else {
                continue;
            };
            for &at in candidates.list() {
                let target = self.lines[at as usize].message as usize;
                let j = at as usize - self.span(target).start;
                if !self.in_lookback(m, target) {
                    continue;
                }
                for &mode in modes {
                    let len = self.extend((m, i), (target, j), mode);
                    work += len + 1;
                    if best.map_or(true, |b| len > b.0) {
                        best = Some((len, target, j, mode));
                    }
                }
            }
        }
        (best, work)
    }

    fn process(&mut self, m: usize, count_tokens: &dyn CountTokens, refs: &mut Vec<BlockRef>) {
        let base = self.span(m).start;
        let lines = &self.lines[self.span(m)];
        let (mut windows, mut renumber) = std::mem::take(&mut self.window_buffers);
        self.windows(lines, |l| l.key, &mut windows);
        // Numbered lines may also repeat unnumbered ones: their text as a plain line's.
        if self.conv.eligible[m] && lines.iter().any(|l| l.format != 0) {
            self.windows(lines, Line::plain_key, &mut renumber);
        } else {
            renumber.clear();
        }
        let k = self.options.min_lines;
        let n = lines.len();
        let eligible = self.conv.eligible[m];
        let (mut i, mut out, mut segment) = (0usize, 0u32, 0usize);
        let (mut spent, budget) = (0usize, RETRY_BUDGET_PER_LINE * n + RETRY_BUDGET_BASE);
        // Windows whose slots were prefetched: those before `fetched`.
        let mut fetched = 0;
        while i < n {
            // Window `w` is looked up at line `w` and inserted at line `w + k`: its slot is asked
            // for `PREFETCH_LINES` lines ahead (lines a run skipped are not).
            if self.index.large {
                fetched = fetched.max(i);
                while fetched < windows.len() && fetched < i + PREFETCH_LINES {
                    self.index.prefetch(windows[fetched]);
                    if let Some(&w) = renumber.get(fetched) {
                        self.index.prefetch(w);
                    }
                    fetched += 1;
                }
            }
            let mut verbatim = 1;
            if eligible && i + k <= n {
                let (best, work) = self.best_run(
                    m,
                    i,
                    [
                        Some(windows[i]),
                        renumber.get(i).copied().filter(|&w| w != windows[i]),
                    ],
                );
                spent += work;
                if let Some((len, target, j, mode)) = best {
                    // A run too short to replace is normally retried from the next line (another
                    // candidate may give a longer one); past the budget it stays verbatim whole,
                    // so huge `min_lines` / `min_chars` cannot make the scan quadratic.
                    if spent > budget {
                        verbatim = len.max(1);
                    }
                    if len >= k {
                        let at = Run {
                            i,
                            len,
                            target,
                            j,
                            mode,
                            out,
                        };
                        match self.reference(m, at, count_tokens) {
                            Ok(r) => {
                                refs.push(r);
                                i += len;
                                out += 1;
                                segment = i;
                                continue;
                            }
                            // Fewer than `min_chars` units: retried from the next line (above).
                            Err(Reject::Short) => {}
                            // Long enough but not worth a reference: every shorter run from here
                            // would be worse, so the whole run stays verbatim (and is never
                            // extended again).
                            Err(Reject::NotShorter) => verbatim = len,
                        }
                    }
                }
            }
            for _ in 0..verbatim {
                self.out_lines[base + i] = out;
                out += 1;
                i += 1;
                if i - segment >= k {
                    self.insert_window(m, i - k, windows[i - k]);
                }
            }
        }
        self.window_buffers = (windows, renumber);
    }

    /// The segments of the run `lines` of `text` (consecutive lines), into `self.segments`: the
    /// text between the lines that start a segment ([`starts_segment`]), as `(start, end, key)`,
    /// where `key` hashes the segment's lines' hashes and numbers (which determine a line's
    /// text). A segment that is not the run's last ends with its line break. Every segment is
    /// non-empty: the first holds a line break or is the whole run (which has at least one
    /// unit: only a run longer than its reference is counted), and a later one starts with a
    /// visible character.
    fn split_segments(&mut self, text: &[u16], run: std::ops::Range<usize>) {
        let lines = &self.lines[run];
        let segments = &mut self.segments;
        segments.clear();
        let (mut start, mut key) = (lines[0].start, 0u64);
        for (t, line) in lines.iter().enumerate() {
            if t > 0 && starts_segment(text, line.start as usize) {
                segments.push((start, line.start, key));
                (start, key) = (line.start, 0);
            }
            key = (key.rotate_left(29) ^ line.key ^ u64::from(line.number).wrapping_mul(ROLL))
                .wrapping_mul(ROLL);
        }
        segments.push((start, lines[lines.len() - 1].end, key ^ 1));
    }

    /// Tokens of the run `lines` of `text` (consecutive lines): the sum of the counts of its
    /// segments, each distinct segment counted once per pass (looked up by its key, confirmed
    /// by comparing the text).
    fn count_run(
        &mut self,
        text: &'c [u16],
        run: std::ops::Range<usize>,
        count_tokens: &dyn CountTokens,
    ) -> usize {
        self.split_segments(text, run);
        let mut total = 0;
        for k in 0..self.segments.len() {
            let (start, end, key) = self.segments[k];
            total += self.segment(&text[start as usize..end as usize], key, count_tokens);
        }
        total
    }

    /// Whether the run `lines` of `text` has more tokens than `bound`, counting as few of its
    /// segments as that takes: exactly `count_run(..) > bound`.
    ///
    /// Proof. Let the run's segments be `s_1..s_n` with counts `c_i`. They are split points of
    /// the count ([`starts_segment`]), so `tokens(run) = c_1 + .. + c_n`, and each is non-empty
    /// ([`Pass::split_segments`]), so `c_i >= 1` (the counter gives a non-empty text at least
    /// one token, as any BPE does). After counting the first `k` segments (`0 <= k <= n`),
    /// `L_k = c_1 + .. + c_k + (n - k)` is therefore a lower bound of `tokens(run)`, and
    /// `L_n = tokens(run)`. The loop returns `true` at the first `k` with `L_k > bound`, which
    /// implies `tokens(run) >= L_k > bound`; if there is none, it has counted every segment and
    /// returns `L_n > bound`, that is `tokens(run) > bound`. Either way the answer is
    /// `tokens(run) > bound`. A long run is usually decided by `L_0` (its number of segments)
    /// or after its first one or two segments.
    ///
    /// Before counting, the same walk runs on the counter's own lower bounds
    /// ([`CountTokens::lower_bound`]; for a BPE encoding, a segment's pre-tokenization pieces,
    /// found without encoding and only until they exceed `bound`): with `b_i = max(lower
    /// bound of s_i, 1) <= c_i`, `B_k = b_1 + .. + b_k + (n - k) <= tokens(run)` as well, so
    /// `B_k > bound` answers `true` just as `L_k > bound` does. It decides most runs after
    /// their first few lines, without encoding anything. Checked against the full count by the
    /// proptest `lazy_counts_decide_as_full_counts`.
    fn more_tokens_than(
        &mut self,
        text: &'c [u16],
        run: std::ops::Range<usize>,
        bound: usize,
        count_tokens: &dyn CountTokens,
    ) -> bool {
        self.split_segments(text, run);
        let n = self.segments.len();
        // `lower` is `b_1 + .. + b_k`: B_k = lower + (n - k).
        let mut lower = 0;
        for k in 0..n {
            if lower + (n - k) > bound {
                return true;
            }
            let (start, end, _) = self.segments[k];
            lower += count_tokens
                .lower_bound(&text[start as usize..end as usize], bound)
                .max(1);
        }
        if lower > bound {
            return true;
        }
        let mut counted = 0;
        for k in 0..n {
            // `counted` is `c_1 + .. + c_k`: L_k = counted + (n - k).
            if counted + (n - k) > bound {
                return true;
            }
            let (start, end, key) = self.segments[k];
            counted += self.segment(&text[start as usize..end as usize], key, count_tokens);
        }
        counted > bound
    }

    /// Tokens of `piece`, a segment whose lines hash to `key`.
    fn segment(&mut self, piece: &'c [u16], key: u64, count_tokens: &dyn CountTokens) -> usize {
        match self.segment_tokens.entry(key) {
            Entry::Occupied(known) => {
                let &(text, tokens) = known.get();
                if text == piece {
                    tokens as usize
                } else {
                    count_tokens.count(piece) // another segment with the same hash: rare
                }
            }
            Entry::Vacant(slot) => {
                let tokens = count_tokens.count(piece);
                slot.insert((piece, to_u32(tokens)));
                tokens
            }
        }
    }

    /// The reference for `run`, if it is long enough and net positive.
    fn reference(
        &mut self,
        m: usize,
        run: Run,
        count_tokens: &dyn CountTokens,
    ) -> Result<BlockRef, Reject> {
        let Run {
            i,
            len,
            target,
            j,
            mode,
            out,
        } = run;
        // The run's records in `self.lines`, and its first line's and its target's.
        let records = self.span(m).start + i..self.span(m).start + i + len;
        let first = self.lines[records.start];
        let at = self.span(target).start + j;
        let (tfirst, target_line) = (self.lines[at], self.out_lines[at] as usize);
        let text = self.conv.contents[m];
        let (unit_start, unit_end) = (
            first.start as usize,
            self.lines[records.end - 1].end as usize,
        );
        let run = &text[unit_start..unit_end];
        if run.len() < self.options.min_chars {
            return Err(Reject::Short);
        }
        let numbering = match mode {
            Mode::Plain => None,
            Mode::Numbered if first.number == tfirst.number => None,
            Mode::Numbered | Mode::Renumbered => {
                let format = first.format;
                Some(Numbering {
                    first: first.number,
                    target_first: (mode == Mode::Numbered).then_some(tfirst.number),
                    width: format >> 16,
                    separator: (format & 0xFFFF) as u16,
                })
            }
        };
        let values = RefValues {
            lines: len,
            target: self.conv.ids[target],
            from: target_line + 1,
            numbered_from: numbering.map_or(0, |n| n.first),
        };
        let template = if numbering.is_some() {
            &self.options.numbered_reference
        } else {
            &self.options.reference
        };
        let mut rendered = std::mem::take(&mut self.scratch);
        template.render(&values, &mut rendered);
        let one_line = !rendered.contains(&(b'\n' as u16));
        let result = if one_line && rendered.len() < run.len() {
            let tokens_after = count_tokens.count(&rendered);
            let tokens_before = if self.options.full_counts {
                // The replaced text is determined by the target span, the mode and the
                // numbering, so a span replaced again (a file re-read many times, periodic
                // content) is counted once.
                let number = if mode == Mode::Plain {
                    NONE
                } else {
                    first.number
                };
                let span = (
                    to_u32(target),
                    to_u32(j),
                    to_u32(len),
                    mode as u8,
                    number,
                    first.format,
                );
                let n = match self.run_tokens.get(&span) {
                    Some(&n) => n,
                    None => {
                        let n = self.count_run(text, records.clone(), count_tokens);
                        self.run_tokens.insert(span, n);
                        n
                    }
                };
                (tokens_after < n).then_some(Some(n))
            } else {
                self.more_tokens_than(text, records, tokens_after, count_tokens)
                    .then_some(None)
            };
            tokens_before.map(|tokens_before| BlockRef {
                message: m,
                line_start: i,
                line_count: len,
                unit_start,
                unit_end,
                out_line: out as usize,
                target,
                target_line,
                numbering,
                tokens_before,
                tokens_after,
                text: rendered.clone(),
            })
        } else {
            None
        };
        self.scratch = rendered;
        result.ok_or(Reject::NotShorter)
    }
}

/// Runs the block pass over `conv` and returns every reference, ordered by message and line.
///
/// `count_tokens` counts the tokens of a text (the net-positive rule and the reported savings).
/// A run is counted as the sum of its segments ([`starts_segment`]), so the counter must split
/// there as o200k_base and cl100k_base do.
///
/// # Errors
/// A message when the slices of `conv` differ in length or `min_lines` is 0.
pub fn dedupe_blocks(
    conv: &Conversation<'_>,
    options: &BlockOptions,
    count_tokens: &dyn CountTokens,
) -> Result<Blocks, String> {
    let split = SplitThread {
        from_units: if options.split_thread {
            SPLIT_THREAD_FROM_UNITS
        } else {
            usize::MAX
        },
        batch_lines: SPLIT_BATCH_LINES,
        units_per_line: 64,
    };
    dedupe_blocks_with(conv, options, count_tokens, split)
}

/// When a pass splits on a second thread, in batches of how many line records, and the
/// estimate of lines its window index is first sized for (one per `units_per_line` units, and
/// one per message).
#[derive(Debug, Clone, Copy)]
struct SplitThread {
    from_units: usize,
    batch_lines: usize,
    units_per_line: usize,
}

/// [`dedupe_blocks`] with its split thread's settings given (tests force it on small inputs).
fn dedupe_blocks_with(
    conv: &Conversation<'_>,
    options: &BlockOptions,
    count_tokens: &dyn CountTokens,
    split: SplitThread,
) -> Result<Blocks, String> {
    let n = conv.contents.len();
    if conv.ids.len() != n || conv.source.len() != n || conv.eligible.len() != n {
        return Err("contents, ids, source and eligible must have one entry per message".into());
    }
    if !conv.keeper.is_empty() && conv.keeper.len() != n {
        return Err("keeper must be empty or have one entry per message".into());
    }
    let keeper = |m: usize| conv.keeper.get(m).copied().unwrap_or(NO_KEEPER);
    if (0..n).any(|m| keeper(m) != NO_KEEPER && keeper(m) as usize >= m) {
        return Err("a duplicate's keeper must be an earlier message".into());
    }
    if options.min_lines == 0 {
        return Err("min_lines must be at least 1".into());
    }
    let mut scratch = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
    let mut pass = Pass {
        conv,
        options,
        hasher: RandomState::new(),
        index: scratch.index,
        lines: scratch.lines,
        out_lines: scratch.out_lines,
        spans: scratch.spans,
        top: (1..options.min_lines).fold(1u64, |p, _| p.wrapping_mul(ROLL)),
        scratch: Vec::new(),
        run_tokens: AHashMap::new(),
        segment_tokens: KeyMap::with_capacity_and_hasher(256, BuildHasherDefault::default()),
        segments: scratch.segments,
        window_buffers: scratch.windows,
    };
    pass.spans.resize(n, (0, 0));
    let reads = |m: usize| conv.source[m] || conv.eligible[m];
    let units: usize = (0..n)
        .filter(|&m| reads(m))
        .map(|m| conv.contents[m].len())
        .sum();
    pass.reserve_lines(units);
    let mut refs = Vec::new();
    let mut kept_duplicates = Vec::new();
    if units >= split.from_units {
        // The index is sized for an estimate of the lines: it doubles if they are more.
        let lines = units / split.units_per_line + n;
        pass.run_pipelined(
            count_tokens,
            &mut refs,
            &mut kept_duplicates,
            split.batch_lines,
            lines,
        );
    } else {
        // Every message's lines first: the window index is then sized once, for at most one
        // window per line, and never grows.
        for m in (0..n).filter(|&m| reads(m)) {
            pass.split(m);
        }
        // Sized for this call's lines: a table kept from an earlier call is reused only if it
        // is at most 4 times that size (a larger one would spread this call's windows over
        // memory that is no longer in cache).
        pass.index.reset(pass.lines.len());
        pass.process_all(count_tokens, &mut refs, &mut kept_duplicates, |_, _| {});
    }
    scratch = Scratch {
        index: pass.index,
        lines: pass.lines,
        out_lines: pass.out_lines,
        spans: pass.spans,
        segments: pass.segments,
        windows: pass.window_buffers,
    };
    scratch.clear();
    SCRATCH.with(|s| *s.borrow_mut() = scratch);
    Ok(Blocks {
        refs,
        kept_duplicates,
    })
}

/// The working memory of a pass, kept per thread between calls (cleared): a call then allocates
/// (and the allocator consolidates) only when it needs more than an earlier one did.
#[derive(Default)]
struct Scratch {
    index: WindowIndex,
    lines: Vec<Line>,
    out_lines: Vec<u32>,
    spans: Vec<(u32, u32)>,
    segments: Vec<(u32, u32, u64)>,
    windows: (Vec<u64>, Vec<u64>),
}

/// Bytes of working memory a thread keeps between calls, at most: beyond that, a buffer is
/// freed after the call (a call that large is not dominated by allocation).
const SCRATCH_KEEP_BYTES: usize = 8 << 20;

impl Scratch {
    /// Empties every buffer, and frees those beyond [`SCRATCH_KEEP_BYTES`].
    fn clear(&mut self) {
        fn keep<T>(v: &mut Vec<T>) {
            v.clear();
            if v.capacity() * std::mem::size_of::<T>() > SCRATCH_KEEP_BYTES {
                *v = Vec::new();
            }
        }
        if self.index.bytes() > SCRATCH_KEEP_BYTES {
            self.index = WindowIndex::default();
        }
        keep(&mut self.lines);
        keep(&mut self.out_lines);
        keep(&mut self.spans);
        keep(&mut self.segments);
        keep(&mut self.windows.0);
        keep(&mut self.windows.1);
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// What determines a replaced run's text: `(target, target line, lines, mode, first number,
/// format)`.
type SpanKey = (u32, u32, u32, u8, u32, u32);

/// Whether the line starting at `at` (just after a `\n` of `text`) starts a *segment*: a place
/// where the o200k_base and cl100k_base counts split, `tokens(text[s..e]) = tokens(text[s..at]) +
/// tokens(text[at..e])` for any line start `s < at` and line end `e > at`, because both
/// pre-tokenizers put a piece boundary at `at` in all three texts and BPE never merges across
/// pieces. That holds when the line
/// starts with a printable ASCII character other than `/`, or with spaces and tabs followed by a
/// printable ASCII character, or with a non-ASCII character that is not whitespace (JavaScript
/// `\s`; U+0085 is treated as whitespace too, to be safe).
///
/// Proof. Let `u` be the unit at `at`; the `\n` at `at - 1` lies in some piece `P`. The
/// pre-tokenizers' alternatives (gpt-tokenizer's JavaScript patterns, see `tokens.rs`) are
/// letters with an optional one-unit prefix that is not `\r`/`\n`, contractions, one to three
/// digits, ` ?[^\s\p{L}\p{N}]+[\r\n/]*` (cl100k: `[\r\n]*`), `\s*[\r\n]+`, `\s+(?!\S)` and `\s+`
/// (cl100k tries `\s+$` before `\s*[\r\n]+`). Only the punctuation alternative and the
/// whitespace ones can hold a `\n`, and a piece continues past a `\n` only with `\r`, `\n`, `/`
/// or whitespace. So when `u` is neither whitespace nor `/`, `P` ends at `at`. When `u` is a
/// space or tab, the whitespace from `at` holds no line break (a visible character follows on
/// the line): the punctuation alternative stops at `u`, and a whitespace `P` is matched by
/// `\s*[\r\n]+` (the alternatives tried before it need a letter, digit or symbol within `P`'s
/// first two units, which are whitespace), which backtracks to end after the last line break of
/// the whitespace run, at `at` (cl100k's `\s+$` fails: text follows). Either way a piece starts
/// at `at`, and as the patterns look only forward, the pieces from `at` on are those of
/// `text[at..e]`. The pieces before `at` are those of `text[s..at]`: each ends by `at`, and
/// matching one depends on what follows its end only through `\s+(?!\S)` and `\s+$` (which
/// could succeed at the end of `text[s..at]` where they failed before); but a whitespace piece
/// ending at `at` ends with the `\n`, so `\s*[\r\n]+` (or `\s+$`) finds it first, with the same
/// extent in both texts. Checked against the real counts by the proptest `segments_add_up`.
fn starts_segment(text: &[u16], at: usize) -> bool {
    let mut k = at;
    while k < text.len() && (text[k] == b' ' as u16 || text[k] == b'\t' as u16) {
        k += 1;
    }
    let Some(&u) = text.get(k) else {
        return false;
    };
    if u < 0x80 {
        return (0x21..0x7F).contains(&u) && (k > at || u != b'/' as u16);
    }
    k == at
        && !matches!(
            u,
            0x85 | 0xA0 | 0x1680 | 0x2000
                ..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000 | 0xFEFF
        )
}

/// Tokens of each of `texts` (replaced runs: whole lines), counted as the sum of their
/// segments ([`starts_segment`]), each distinct segment text counted once per call: the same
/// counts as `count_tokens` on each text whole, for a counter that splits there as o200k_base and
/// cl100k_base do, at a fraction of the work when runs repeat (a file re-read many times).
pub fn count_runs(texts: &[&[u16]], count_tokens: &dyn CountTokens) -> Vec<usize> {
    let mut known: AHashMap<&[u16], usize> = AHashMap::with_capacity(texts.len() * 2);
    let mut count = |piece| {
        *known
            .entry(piece)
            .or_insert_with(|| count_tokens.count(piece))
    };
    texts
        .iter()
        .map(|&text| {
            let mut total = 0;
            let mut start = 0;
            for (at, &u) in text.iter().enumerate() {
                if u == b'\n' as u16 && starts_segment(text, at + 1) {
                    // This segment ends with its line break.
                    total += count(&text[start..=at]);
                    start = at + 1;
                }
            }
            total + count(&text[start..])
        })
        .collect()
}

/// Flags of the messages the block pass may rewrite: the message stage's eligibility rule over
/// `src`, minus the messages `blocked` by their shape (or already replaced whole).
pub fn eligible_flags<S: crate::Utf16Source>(
    src: &S,
    blocked: &[bool],
    rule: &crate::messages::Eligibility,
) -> Vec<bool> {
    let mut flags = vec![false; src.count()];
    for i in rule.eligible(src, blocked) {
        flags[i] = true;
    }
    flags
}

/// Rebuilds each message's output content from its input and the references of the pass.
pub fn apply(contents: &[&[u16]], refs: &[BlockRef]) -> Vec<Vec<u16>> {
    let mut out: Vec<Vec<u16>> = contents.iter().map(|c| c.to_vec()).collect();
    let mut k = 0;
    while k < refs.len() {
        let m = refs[k].message;
        let text = contents[m];
        let mut built = Vec::with_capacity(text.len());
        let mut at = 0;
        while k < refs.len() && refs[k].message == m {
            built.extend_from_slice(&text[at..refs[k].unit_start]);
            built.extend_from_slice(&refs[k].text);
            at = refs[k].unit_end;
            k += 1;
        }
        built.extend_from_slice(&text[at..]);
        out[m] = built;
    }
    out
}

/// Rebuilds the input contents from output contents alone, given where each reference sits
/// (the information the TypeScript layer keeps in a message's metadata). Messages are expanded
/// in order, and every target line is read from the *output* (it is verbatim there).
pub fn expand(outputs: &[Vec<u16>], refs: &[BlockRef]) -> Vec<Vec<u16>> {
    let split = |t: &[u16]| -> Vec<Vec<u16>> {
        t.split(|&u| u == b'\n' as u16)
            .map(<[u16]>::to_vec)
            .collect()
    };
    let mut result: Vec<Vec<u16>> = outputs.to_vec();
    let split_outputs: Vec<Vec<Vec<u16>>> = outputs.iter().map(|o| split(o)).collect();
    let mut k = 0;
    while k < refs.len() {
        let m = refs[k].message;
        let lines = &split_outputs[m];
        let mut expanded: Vec<Vec<u16>> = Vec::new();
        for (index, line) in lines.iter().enumerate() {
            if k < refs.len() && refs[k].message == m && refs[k].out_line == index {
                let r = &refs[k];
                let target = &split_outputs[r.target];
                for t in 0..r.line_count {
                    let source = &target[r.target_line + t];
                    match r.numbering {
                        None => expanded.push(source.clone()),
                        Some(n) => {
                            let mut prefix = Vec::new();
                            if let Some(target_first) = n.target_first {
                                format_line_number(
                                    n.width,
                                    n.separator,
                                    target_first + to_u32(t),
                                    &mut prefix,
                                );
                            }
                            let mut line = Vec::new();
                            format_line_number(
                                n.width,
                                n.separator,
                                n.first + to_u32(t),
                                &mut line,
                            );
                            line.extend_from_slice(&source[prefix.len()..]);
                            expanded.push(line);
                        }
                    }
                }
                k += 1;
            } else {
                expanded.push(line.clone());
            }
        }
        result[m] = expanded.join(&(b'\n' as u16));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn u(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    /// A token counter.
    type Counter = dyn CountTokens;

    /// Counts "tokens" as runs of letters or digits plus other units (a stand-in BPE).
    fn toy_tokens(t: &[u16]) -> usize {
        let mut n = 0;
        let mut in_word = false;
        for &c in t {
            let word = u8::try_from(c).is_ok_and(|b| b.is_ascii_alphanumeric());
            if !word || !in_word {
                n += 1;
            }
            in_word = word;
        }
        n
    }

    struct Case {
        contents: Vec<Vec<u16>>,
        ids: Vec<Vec<u16>>,
        source: Vec<bool>,
        eligible: Vec<bool>,
        keeper: Vec<u32>,
    }

    impl Case {
        fn new(texts: &[&str]) -> Case {
            let n = texts.len();
            Case {
                contents: texts.iter().map(|t| u(t)).collect(),
                ids: (0..n).map(|i| u(&format!("m{i}"))).collect(),
                source: vec![true; n],
                eligible: vec![true; n],
                keeper: Vec::new(),
            }
        }

        /// Makes every `every`-th message (the last of each `every`) an exact copy of an earlier
        /// one that is not itself a copy, picked by `picks`, and records its keeper.
        fn add_duplicates(&mut self, picks: &[prop::sample::Index], every: usize) {
            let n = self.contents.len();
            self.keeper = vec![NO_KEEPER; n];
            for (m, pick) in (1..n).zip(picks) {
                let k = pick.index(m);
                if self.keeper[k] == NO_KEEPER && m % every == every - 1 {
                    self.contents[m] = self.contents[k].clone();
                    self.keeper[m] = to_u32(k);
                }
            }
        }

        fn run(&self, options: &BlockOptions) -> (Vec<BlockRef>, Vec<Vec<u16>>) {
            let contents: Vec<&[u16]> = self.contents.iter().map(|c| &c[..]).collect();
            let refs = self.run_with(options, &toy_tokens);
            let out = apply(&contents, &refs);
            (refs, out)
        }

        fn run_with(&self, options: &BlockOptions, count: &dyn CountTokens) -> Vec<BlockRef> {
            self.run_blocks(options, count).refs
        }

        fn run_blocks(&self, options: &BlockOptions, count: &dyn CountTokens) -> Blocks {
            let split = SplitThread {
                from_units: usize::MAX,
                batch_lines: SPLIT_BATCH_LINES,
                units_per_line: 64,
            };
            self.run_split(options, count, split)
        }

        fn run_split(
            &self,
            options: &BlockOptions,
            count: &dyn CountTokens,
            split: SplitThread,
        ) -> Blocks {
            let contents: Vec<&[u16]> = self.contents.iter().map(|c| &c[..]).collect();
            let ids: Vec<&[u16]> = self.ids.iter().map(|c| &c[..]).collect();
            let conv = Conversation {
                contents: &contents,
                ids: &ids,
                source: &self.source,
                eligible: &self.eligible,
                keeper: &self.keeper,
            };
            dedupe_blocks_with(&conv, options, count, split).unwrap()
        }
    }

    fn small(min_lines: usize, min_chars: usize) -> BlockOptions {
        BlockOptions {
            min_lines,
            min_chars,
            ..BlockOptions::new()
        }
    }

    fn text(v: &[u16]) -> String {
        String::from_utf16_lossy(v)
    }

    #[test]
    fn a_reread_file_becomes_a_reference_and_new_lines_stay() {
        let file: Vec<String> = (1..=12)
            .map(|i| format!("fn line_{i}() {{ do_something_useful({i}, &context); }}"))
            .collect();
        let mut edited = file.clone();
        edited[6] = "fn line_7() { changed(); }".into();
        let case = Case::new(&[&file.join("\n"), &edited.join("\n")]);
        let (refs, out) = case.run(&BlockOptions::new());
        assert_eq!(refs.len(), 2);
        assert_eq!(
            text(&out[1]),
            "[ctxdedup: 6 lines unchanged, = m0 lines 1–6]\nfn line_7() { changed(); }\n[ctxdedup: 5 lines unchanged, = m0 lines 8–12]"
        );
        assert_eq!(text(&out[0]), file.join("\n"));
    }

    #[test]
    fn shifted_line_numbers_are_regenerated() {
        let body: Vec<String> = (0..10)
            .map(|i| format!("    let value_{i} = compute({i}) + offset;"))
            .collect();
        let read = |first: usize, sep: &str| -> String {
            body.iter()
                .enumerate()
                .map(|(k, l)| format!("{:>6}{sep}{l}", first + k))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let case = Case::new(&[&read(12, "\t"), &format!("header\n{}", read(14, "\t"))]);
        let (refs, out) = case.run(&BlockOptions::new());
        assert_eq!(refs.len(), 1);
        assert_eq!(
            text(&out[1]),
            "header\n[ctxdedup: 10 lines unchanged, = m0 lines 1–10, numbered 14–23 here]"
        );
        let n = refs[0].numbering.unwrap();
        assert_eq!(
            (n.first, n.target_first, n.width, n.separator),
            (14, Some(12), 6, b'\t' as u16)
        );
        // A numbered read of lines first shown without numbers.
        let plain = body.join("\n");
        let case = Case::new(&[&plain, &format!("header\n{}", read(14, "\t"))]);
        let (refs, out) = case.run(&BlockOptions::new());
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].numbering.unwrap().target_first, None);
        assert_eq!(expand(&out, &refs), case.contents);
        // Another separator is another format: no match.
        let case = Case::new(&[&read(12, "\t"), &read(14, "→")]);
        assert!(case.run(&BlockOptions::new()).0.is_empty());
        // With line numbers off, the shifted read is new text.
        let case = Case::new(&[&read(12, "\t"), &read(14, "\t")]);
        let off = BlockOptions {
            line_numbers: false,
            ..BlockOptions::new()
        };
        assert!(case.run(&off).0.is_empty());
    }

    #[test]
    fn repeats_inside_one_message_point_above() {
        let block = (0..6)
            .map(|i| format!("error: test_{i} failed at src/lib.rs:{i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let case = Case::new(&[&format!("{block}\n--- retry ---\n{block}")]);
        let (refs, out) = case.run(&BlockOptions::new());
        assert_eq!(refs.len(), 1);
        assert_eq!((refs[0].target, refs[0].target_line), (0, 0));
        assert!(
            text(&out[0]).ends_with("--- retry ---\n[ctxdedup: 6 lines unchanged, = m0 lines 1–6]")
        );
    }

    #[test]
    fn short_or_unprofitable_runs_stay() {
        let lines = "a\nb\nc\nd\ne";
        let case = Case::new(&[lines, lines]);
        assert!(
            case.run(&BlockOptions::new()).0.is_empty(),
            "below min_chars"
        );
        assert!(
            case.run(&small(4, 0)).0.is_empty(),
            "reference longer than the run"
        );
    }

    #[test]
    fn targets_skip_replaced_lines_and_non_sources() {
        let a = (0..8)
            .map(|i| format!("alpha line number {i} with some padding text"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut case = Case::new(&[&a, &a, &a]);
        case.eligible[0] = false; // a system prompt: a source, never rewritten
        let (refs, _) = case.run(&small(4, 50));
        assert!(refs.iter().all(|r| r.target == 0));
        case.source[0] = false;
        case.eligible[0] = false;
        let (refs, _) = case.run(&small(4, 50));
        assert!(refs.iter().all(|r| r.target == 1 && r.message == 2));
        // Lookback 0: only the same message may be a target.
        let case = Case::new(&[&a, &a]);
        let (refs, _) = case.run(&BlockOptions {
            lookback: Some(0),
            ..small(4, 50)
        });
        assert!(refs.is_empty());
    }

    #[test]
    fn templates_are_checked() {
        assert!(Template::parse(&u("{target} {from}"), false).is_err());
        assert!(Template::parse(&u("{target} {from} {to}\n"), false).is_err());
        assert!(Template::parse(&u("{target} {from} {to} {bogus}"), false).is_err());
        assert!(Template::parse(&u("{target} {from} {to}"), true).is_err());
        assert!(Template::parse(&u("{target} {from} {to} {numberedFrom}"), false).is_err());
        assert!(Template::parse(&u("{target} {from} {to} {numberedTo}"), false).is_err());
        assert!(
            Template::parse(&u("{target} {from} {to} {numberedFrom}-{numberedTo}"), true).is_ok()
        );
        assert!(Template::parse(&u("{ {target} {from} {to} }"), false).is_ok());
    }

    #[test]
    fn a_million_copies_of_one_line_is_linear() {
        let line = "the same line again";
        let big = vec![line; 1_000_000].join("\n");
        let case = Case::new(&[&big]);
        let (refs, out) = case.run(&BlockOptions::new());
        assert!(!refs.is_empty());
        assert!(out[0].len() < big.len() / 3);
        let rebuilt = expand(&out, &refs);
        assert_eq!(rebuilt[0], case.contents[0]);
    }

    #[test]
    fn huge_minimums_do_not_make_the_scan_quadratic() {
        // Every position finds a candidate whose run is too short for these minimums; without
        // the retry budget each would be extended again from scratch (about 10^10 comparisons).
        let big = vec!["same"; 200_000].join("\n");
        let case = Case::new(&[&big]);
        for options in [small(50_000, 0), small(4, 1 << 30)] {
            let (refs, out) = case.run(&options);
            assert_eq!(expand(&out, &refs), case.contents);
        }
    }

    #[test]
    fn twenty_thousand_messages_of_identical_lines() {
        let msg = vec!["identical line of text in every message"; 20].join("\n");
        let texts = vec![msg.as_str(); 20_000];
        let case = Case::new(&texts);
        let (refs, out) = case.run(&BlockOptions::new());
        assert!(refs.len() >= 19_999);
        assert_eq!(expand(&out, &refs), case.contents);
    }

    // ---- properties against brute-force checks ----

    const LINES: [&str; 9] = [
        "num",
        "alpha",
        "beta",
        "gamma delta",
        "",
        "     7\tseven",
        "     8\teight",
        "x\r",
        "{}",
    ];

    fn conversation() -> impl Strategy<Value = (Vec<String>, Vec<bool>, Vec<bool>)> {
        let message = prop::collection::vec(0..LINES.len() + 3, 0..14).prop_map(|picks| {
            picks
                .iter()
                .enumerate()
                .map(|(k, &p)| match p {
                    p if p < LINES.len() => LINES[p].to_string(),
                    p if p == LINES.len() => format!("{:>6}\tnum", 3 + k),
                    p if p == LINES.len() + 1 => format!("{}→num", 1 + k),
                    _ => format!("{}:x", 40 + k),
                })
                .collect::<Vec<_>>()
                .join("\n")
        });
        prop::collection::vec((message, any::<bool>(), any::<bool>()), 1..8).prop_map(|ms| {
            let texts = ms.iter().map(|(t, _, _)| t.clone()).collect();
            let source: Vec<bool> = ms.iter().map(|(_, s, e)| *s || *e).collect();
            let eligible = ms.iter().map(|(_, _, e)| *e).collect();
            (texts, source, eligible)
        })
    }

    fn options() -> impl Strategy<Value = BlockOptions> {
        (
            1usize..5,
            0usize..30,
            any::<bool>(),
            prop::option::of(0usize..4),
        )
            .prop_map(|(k, c, ln, lb)| BlockOptions {
                min_lines: k,
                min_chars: c,
                line_numbers: ln,
                lookback: lb,
                reference: Template::parse(&u("<{target}:{from}-{to}>"), false).unwrap(),
                numbered_reference: Template::parse(
                    &u("<{target}:{from}-{to}#{numberedFrom}>"),
                    true,
                )
                .unwrap(),
                full_counts: true,
                split_thread: true,
            })
    }

    fn case_of(texts: &[String], source: Vec<bool>, eligible: Vec<bool>) -> Case {
        let mut case = Case::new(&texts.iter().map(String::as_str).collect::<Vec<_>>());
        case.source = source;
        case.eligible = eligible;
        case
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        #[test]
        fn lossless_visible_net_positive((texts, source, eligible) in conversation(), options in options()) {
            let case = case_of(&texts, source, eligible);
            let (refs, out) = case.run(&options);
            // Lossless from the output alone.
            prop_assert_eq!(expand(&out, &refs), case.contents.clone());
            for r in &refs {
                // Only eligible messages are rewritten; targets are sources, earlier or above.
                prop_assert!(case.eligible[r.message]);
                prop_assert!(case.source[r.target] && r.target <= r.message);
                if let Some(l) = options.lookback { prop_assert!(r.message - r.target <= l); }
                // Visible: the target lines are output lines that no reference occupies.
                let target_lines = out[r.target].split(|&c| c == b'\n' as u16).count();
                prop_assert!(r.target_line + r.line_count <= target_lines);
                for other in refs.iter().filter(|o| o.message == r.target) {
                    let above = r.target != r.message || other.out_line < r.out_line;
                    if above {
                        prop_assert!(other.out_line < r.target_line || other.out_line >= r.target_line + r.line_count);
                    }
                }
                if r.target == r.message { prop_assert!(r.target_line + r.line_count <= r.out_line); }
                // Net positive, long enough.
                prop_assert!(r.text.len() < r.unit_end - r.unit_start && Some(r.tokens_after) < r.tokens_before);
                prop_assert!(r.line_count >= options.min_lines && r.unit_end - r.unit_start >= options.min_chars);
                prop_assert_eq!(r.tokens_before, Some(toy_tokens(&case.contents[r.message][r.unit_start..r.unit_end])));
            }
        }

        #[test]
        fn prefix_monotonic((texts, source, eligible) in conversation(), options in options(), cut in 0usize..8) {
            let full = case_of(&texts, source.clone(), eligible.clone());
            let cut = cut.min(texts.len());
            let prefix = case_of(&texts[..cut], source[..cut].to_vec(), eligible[..cut].to_vec());
            let (_, a) = full.run(&options);
            let (_, b) = prefix.run(&options);
            prop_assert_eq!(&a[..cut], &b[..]);
        }

        #[test]
        fn duplicates_stay_messages_exactly_when_their_keeper_is_rewritten(
            (texts, source, eligible) in conversation(),
            options in options(),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 7),
            cut in 0usize..8,
        ) {
            let mut case = case_of(&texts, source, eligible);
            let n = case.contents.len();
            case.add_duplicates(&picks, 2);
            let blocks = case.run_blocks(&options, &toy_tokens);
            let rewritten = |m: usize| blocks.refs.iter().any(|r| r.message == m);
            let kept = |m: usize| blocks.kept_duplicates.contains(&to_u32(m));
            for m in 0..n {
                let k = case.keeper[m];
                // A tag only ever names a keeper the model sees in full.
                prop_assert_eq!(kept(m), k != NO_KEEPER && rewritten(k as usize));
                if k != NO_KEEPER && !kept(m) {
                    // A tagged duplicate is neither rewritten nor a target.
                    prop_assert!(!rewritten(m) && blocks.refs.iter().all(|r| r.target != m));
                }
            }
            // Prefix-monotonic with duplicates too.
            let cut = cut.min(n);
            let mut prefix = case_of(&texts[..cut], case.source[..cut].to_vec(), case.eligible[..cut].to_vec());
            prefix.contents = case.contents[..cut].to_vec();
            prefix.keeper = case.keeper[..cut].to_vec();
            let head = prefix.run_blocks(&options, &toy_tokens);
            let within = |b: &Blocks| (b.refs.iter().filter(|r| r.message < cut).cloned().collect::<Vec<_>>(), b.kept_duplicates.iter().copied().filter(|&m| (m as usize) < cut).collect::<Vec<_>>());
            prop_assert_eq!(within(&blocks), within(&head));
        }

        #[test]
        fn the_split_thread_changes_nothing(
            (texts, source, eligible) in conversation(),
            options in options(),
            keepers in prop::collection::vec(any::<prop::sample::Index>(), 7),
            batch_lines in 1usize..6,
            table in 0usize..3,
        ) {
            let mut case = case_of(&texts, source, eligible);
            case.add_duplicates(&keepers, 3);
            // A window index kept from an earlier call, of varying size.
            let warm = Case::new(&["a\nb\nc\nd\ne".repeat(table * 40).as_str()]);
            warm.run_blocks(&small(1, 0), &toy_tokens);
            // A small first estimate: the index grows during the pass.
            let split = SplitThread { from_units: 0, batch_lines, units_per_line: 1 << 20 };
            prop_assert_eq!(
                case.run_split(&options, &toy_tokens, split),
                case.run_blocks(&options, &toy_tokens)
            );
        }

        #[test]
        fn untouched_without_repeats(lines in prop::collection::vec("[a-z]{1,6}", 0..30)) {
            let mut unique = lines.clone();
            unique.sort();
            unique.dedup();
            let text = unique.join("\n");
            let case = Case::new(&[&text, "zzz"]);
            let (refs, _) = case.run(&small(1, 0));
            prop_assert!(refs.is_empty());
        }
    }

    #[test]
    fn mix_inverse_inverts() {
        assert_eq!(MIX.wrapping_mul(MIX_INVERSE), 1);
    }

    proptest! {
        /// The chunked line scan finds the lines `split` finds; decimal formatting matches
        /// `to_string`.
        #[test]
        fn fast_paths_match_the_slow_ones(picks in prop::collection::vec(0usize..4, 0..80), n in any::<u32>(), width in 0u32..12) {
            let text: Vec<u16> = picks.iter().map(|&p| [b'a', b'\n', b' ', b'\r'][p] as u16).collect();
            let mut lines = Vec::new();
            for_each_line(&text, |s, e| lines.push(text[s..e].to_vec()));
            let expected: Vec<Vec<u16>> = text.split(|&u| u == b'\n' as u16).map(<[u16]>::to_vec).collect();
            prop_assert_eq!(lines, expected);
            let mut out = Vec::new();
            format_line_number(width, b':' as u16, n, &mut out);
            prop_assert_eq!(String::from_utf16_lossy(&out), format!("{:>w$}:", n, w = width as usize));
        }
    }

    // ---- segments: the real token counts split where `starts_segment` says ----

    /// Units that matter to the pre-tokenizers around a line break: letters (with a contraction),
    /// digits, symbols, `/`, spaces, tabs, `\r`, Unicode whitespace (and U+0085, which is not
    /// JavaScript whitespace), a byte-order mark, CJK, a surrogate pair and a lone surrogate.
    const UNITS: [&[u16]; 24] = [
        &[b'a' as u16],
        &[b'Z' as u16],
        &[b's' as u16],
        &[b'\'' as u16],
        &[b'1' as u16],
        &[b'7' as u16],
        &[b' ' as u16],
        &[b' ' as u16],
        &[b'\t' as u16],
        &[b'\r' as u16],
        &[b'/' as u16],
        &[b'.' as u16],
        &[b';' as u16],
        &[b'{' as u16],
        &[b'-' as u16],
        &[0xE9],
        &[0x65E5],
        &[0xA0],
        &[0x85],
        &[0x3000],
        &[0x2028],
        &[0xFEFF],
        &[0xD83D, 0xDE00],
        &[0xDC00],
    ];

    fn lines_text() -> impl Strategy<Value = Vec<u16>> {
        let line = prop::collection::vec(0..UNITS.len(), 0..7);
        prop::collection::vec(line, 1..9).prop_map(|lines| {
            let mut text = Vec::new();
            for (k, line) in lines.iter().enumerate() {
                if k > 0 {
                    text.push(b'\n' as u16);
                }
                for &u in line {
                    text.extend_from_slice(UNITS[u]);
                }
            }
            text
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// `tokens(text[s..e]) = tokens(text[s..at]) + tokens(text[at..e])` at every line start
        /// `at` that starts a segment, for any line boundaries `s < at < e`, in both encodings.
        #[test]
        fn segments_add_up(text in lines_text(), picks in (any::<prop::sample::Index>(), any::<prop::sample::Index>())) {
            use crate::tokens::{count_utf16, Encoding};
            let starts: Vec<usize> = std::iter::once(0)
                .chain(text.iter().enumerate().filter(|&(_, &u)| u == b'\n' as u16).map(|(i, _)| i + 1))
                .collect();
            let ends: Vec<usize> = starts[1..].iter().map(|&a| a - 1).chain([text.len()]).collect();
            for &at in starts[1..].iter().filter(|&&at| starts_segment(&text, at)) {
                let before: Vec<usize> = starts.iter().copied().filter(|&s| s < at).collect();
                let after: Vec<usize> = ends.iter().copied().filter(|&e| e > at).collect();
                let (s, e) = (before[picks.0.index(before.len())], after[picks.1.index(after.len())]);
                for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                    prop_assert_eq!(
                        count_utf16(encoding, &text[s..e]),
                        count_utf16(encoding, &text[s..at]) + count_utf16(encoding, &text[at..e]),
                        "{:?} split at {} of {:?}", encoding, at - s, String::from_utf16_lossy(&text[s..e])
                    );
                }
            }
        }

        /// With the real counter, every reference's `tokens_before` is the o200k count of its
        /// run (counted by segments, with segments shared between runs).
        #[test]
        fn run_counts_are_exact_o200k(lines in prop::collection::vec(lines_text(), 1..5), options in options()) {
            use crate::tokens::{count_utf16, Encoding};
            let contents: Vec<&[u16]> = lines.iter().map(|t| &t[..]).collect();
            let ids: Vec<Vec<u16>> = (0..lines.len()).map(|i| u(&format!("m{i}"))).collect();
            let ids: Vec<&[u16]> = ids.iter().map(|t| &t[..]).collect();
            let flags = vec![true; lines.len()];
            let conv = Conversation { contents: &contents, ids: &ids, source: &flags, eligible: &flags, keeper: &[] };
            let count = |t: &[u16]| count_utf16(Encoding::O200kBase, t);
            for r in dedupe_blocks(&conv, &options, &count).unwrap().refs {
                prop_assert_eq!(r.tokens_before, Some(count(&contents[r.message][r.unit_start..r.unit_end])));
                prop_assert_eq!(r.tokens_after, count(&r.text));
            }
        }

        /// `count_runs` gives each text's whole count, in both encodings.
        #[test]
        fn count_runs_counts_each_text_whole(texts in prop::collection::vec(lines_text(), 1..6), repeat in any::<prop::sample::Index>()) {
            use crate::tokens::{count_utf16, Encoding};
            let mut texts = texts;
            // Repeated runs share their segments' counts.
            texts.push(texts[repeat.index(texts.len())].clone());
            let slices: Vec<&[u16]> = texts.iter().map(|t| &t[..]).collect();
            for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let count = |t: &[u16]| count_utf16(encoding, t);
                let whole: Vec<usize> = slices.iter().map(|t| count(t)).collect();
                prop_assert_eq!(count_runs(&slices, &count), whole);
            }
        }

        /// Counting a run only until a lower bound decides (`full_counts: false`) gives the same
        /// references as counting it in full, with the real counter and with the toy one.
        #[test]
        fn lazy_counts_decide_as_full_counts(
            lines in prop::collection::vec(lines_text(), 1..5),
            (texts, source, eligible) in conversation(),
            options in options(),
        ) {
            use crate::tokens::{count_utf16, Encoding};
            // The encoding decides with its lower bound first; the closure only by counting.
            let real = Encoding::O200kBase;
            let counted = |t: &[u16]| count_utf16(Encoding::O200kBase, t);
            let lazy = BlockOptions { full_counts: false, ..options.clone() };
            let unicode: Vec<String> = lines.iter().map(|t| String::from_utf16_lossy(t)).collect();
            let flags = vec![true; unicode.len()];
            let cases = [
                case_of(&texts, source, eligible),
                case_of(&unicode, flags.clone(), flags),
            ];
            // Lone surrogates did not survive `from_utf16_lossy`: the raw units as a third case.
            let raw = Case { contents: lines.clone(), ..case_of(&unicode, vec![true; lines.len()], vec![true; lines.len()]) };
            for case in cases.iter().chain([&raw]) {
                let counters: [&Counter; 3] = [&toy_tokens, &real, &counted];
                for count in counters {
                    let full = case.run_with(&options, count);
                    let mut decided = case.run_with(&lazy, count);
                    prop_assert!(decided.iter().all(|r| r.tokens_before.is_none()));
                    for (d, f) in decided.iter_mut().zip(&full) {
                        d.tokens_before = f.tokens_before;
                    }
                    prop_assert_eq!(decided, full);
                }
            }
        }
    }
}
