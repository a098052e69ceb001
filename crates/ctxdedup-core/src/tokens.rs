//! BPE token counting for `o200k_base` and `cl100k_base`, in linear time.
//!
//! Counts are identical to the `gpt-tokenizer` npm package (the JavaScript counter ctxdedup used
//! before), with special-token text such as `<|endoftext|>` counted as plain text:
//!
//! - Pre-tokenization follows gpt-tokenizer's JavaScript patterns exactly, not tiktoken's: it is
//!   a hand-written matcher over the character classes of the JavaScript engine
//!   ([`token_classes`](crate::token_classes), generated from Node.js). The patterns differ from
//!   those `bpe-openai` ships in four ways, each of which changes counts: JavaScript `\s` includes
//!   U+FEFF and excludes U+0085; the contraction suffixes match ASCII letters only (`(?i)` in Rust
//!   also folds `'ſ` to `'s`); gpt-tokenizer's `cl100k_base` pattern tries `\s+$` before
//!   `\s*[\r\n]` (so trailing `" \n "` is one piece, not two); and Unicode versions (the tables
//!   here are those of the JavaScript engine, not of the `regex` crate).
//! - Each piece is then counted by the `bpe-openai` vocabularies with the `bpe` crate's
//!   backtracking encoder, which gives exactly the tokens of rank-ordered BPE merging in time
//!   linear in the piece length (the merging loop of gpt-tokenizer and tiktoken is quadratic,
//!   which made a long run of one character take minutes).
//! - The one place where gpt-tokenizer is not rank-ordered BPE: it looks a merged byte pair up by
//!   its UTF-8 text, decoded with a `TextDecoder` that drops a leading byte-order mark, so a pair
//!   whose bytes start with U+FEFF gets the rank of the text after the mark (no rank for the mark
//!   alone). Pieces containing U+FEFF, rare in practice, are merged here with that same rule
//!   (heap-based merging, `O(n log n)`).
//!
//! Lone surrogates count as U+FFFD, as gpt-tokenizer's `TextEncoder` makes them.
//!
//! Time: linear in the text length (the pre-tokenizer looks at each character a bounded number of
//! times; the backtracking encoder is linear in the piece length).

// Per-site `#[expect]`s wait for the block-speed rework of this module (issue 13 item 7).
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::OnceLock;

use bpe_openai::byte_pair_encoding::BytePairEncoding;

use crate::token_classes::{ASCII, RUN_CLASSES, RUN_STARTS};

pub use crate::token_classes::UNICODE_VERSION;

/// A built-in BPE encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `o200k_base` (GPT-4o, GPT-4.1, o-series, GPT-5).
    O200kBase,
    /// `cl100k_base` (GPT-4, GPT-3.5).
    Cl100kBase,
}

impl Encoding {
    /// The encoding named `name` (`"o200k_base"` or `"cl100k_base"`).
    pub fn from_name(name: &str) -> Option<Encoding> {
        match name {
            "o200k_base" => Some(Encoding::O200kBase),
            "cl100k_base" => Some(Encoding::Cl100kBase),
            _ => None,
        }
    }

    /// The encoding's name.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    /// Bytes of the vocabulary's longest token (computed once per process).
    fn longest_token(self) -> usize {
        static LONGEST: [OnceLock<usize>; 2] = [OnceLock::new(), OnceLock::new()];
        *LONGEST[self as usize].get_or_init(|| {
            let bpe = self.bpe();
            (0..bpe.num_tokens())
                .map(|id| bpe.token_len(crate::to_u32(id)))
                .max()
                .unwrap_or(1)
                .max(1)
        })
    }

    fn bpe(self) -> &'static BytePairEncoding {
        match self {
            Encoding::O200kBase => &bpe_openai::o200k_base().bpe,
            Encoding::Cl100kBase => &bpe_openai::cl100k_base().bpe,
        }
    }
}

/// Loads `encoding`'s vocabulary now (once per process; about 50 ms for `o200k_base`), so that
/// the first count does not pay for it. Counting loads it anyway: this only moves the cost, for
/// example onto a thread that would otherwise wait.
pub fn load(encoding: Encoding) {
    encoding.bpe();
    bmp_classes();
}

/// Number of tokens of `text`, given as UTF-16 code units (a JavaScript string). Lone surrogates
/// count as U+FFFD.
pub fn count_utf16(encoding: Encoding, text: &[u16]) -> usize {
    if text.is_empty() {
        return 0;
    }
    with_utf8(text, |utf8| count_str(encoding, utf8))
}

/// A token counter over UTF-16 text, as the block pass uses it: exact counts, and a cheap lower
/// bound that decides most net-positive tests without counting. Closures
/// `Fn(&[u16]) -> usize` are counters without a lower bound; an [`Encoding`] is one with.
pub trait CountTokens: Sync {
    /// Number of tokens of `text`.
    fn count(&self, text: &[u16]) -> usize;

    /// A lower bound of `self.count(text)`; it may stop growing once it exceeds `stop`. The
    /// default, 0, never decides anything.
    fn lower_bound(&self, text: &[u16], stop: usize) -> usize {
        let _ = (text, stop);
        0
    }
}

impl<F: Fn(&[u16]) -> usize + Sync> CountTokens for F {
    fn count(&self, text: &[u16]) -> usize {
        self(text)
    }
}

impl CountTokens for Encoding {
    fn count(&self, text: &[u16]) -> usize {
        count_utf16(*self, text)
    }

    fn lower_bound(&self, text: &[u16], stop: usize) -> usize {
        pieces_utf16(*self, text, stop)
    }
}

/// The number of pre-tokenization pieces of `text` (UTF-16, lone surrogates as U+FFFD), counted
/// only until it exceeds `stop`: a lower bound of [`count_utf16`] found without encoding.
///
/// Proof: [`count_str`] is the sum, over the pieces of [`for_each_piece`], of each piece's count;
/// every piece is non-empty, and a non-empty piece counts at least one token (one byte is one
/// token; the backtracking encoder and [`count_merging_like_gpt_tokenizer`] leave at least one
/// part). So `pieces <= tokens`, and stopping early only lowers the number returned.
pub fn pieces_utf16(encoding: Encoding, text: &[u16], stop: usize) -> usize {
    let mut pieces = 0;
    with_utf8(text, |utf8| {
        let bytes = utf8.as_bytes();
        let mut pos = 0;
        while pos < bytes.len() && pieces <= stop {
            pos = match encoding {
                Encoding::O200kBase => next_o200k(bytes, pos),
                Encoding::Cl100kBase => next_cl100k(bytes, pos),
            };
            pieces += 1;
        }
    });
    pieces
}

/// Calls `f` with `text` as UTF-8 (lone surrogates as U+FFFD), in the reused thread buffer.
fn with_utf8<R>(text: &[u16], f: impl FnOnce(&str) -> R) -> R {
    UTF8.with(|buffer| match buffer.try_borrow_mut() {
        Ok(mut utf8) => {
            utf8.clear();
            utf16_to_utf8_into(text, &mut utf8);
            // SAFETY: `utf16_to_utf8_into` writes ASCII bytes and the UTF-8 encodings of `char`s.
            let result = f(unsafe { std::str::from_utf8_unchecked(&utf8) });
            if utf8.capacity() > UTF8_KEPT_BYTES {
                *utf8 = Vec::new();
            }
            result
        }
        Err(_) => f(&utf16_to_utf8_lossy(text)),
    })
}

thread_local! {
    /// The UTF-8 buffer of [`count_utf16`], reused: the block pass counts many short texts.
    static UTF8: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Capacity of the reused UTF-8 buffer kept between calls.
const UTF8_KEPT_BYTES: usize = 1 << 20;

/// `text` as UTF-8, lone surrogates replaced by U+FFFD (what JavaScript's `TextEncoder` does).
fn utf16_to_utf8_lossy(text: &[u16]) -> String {
    let mut utf8 = Vec::new();
    utf16_to_utf8_into(text, &mut utf8);
    // SAFETY: `utf16_to_utf8_into` writes ASCII bytes and the UTF-8 encodings of `char`s.
    unsafe { String::from_utf8_unchecked(utf8) }
}

/// Appends `text` as UTF-8 to `utf8`, lone surrogates replaced by U+FFFD.
#[expect(
    clippy::cast_possible_truncation,
    reason = "UTF-8 encoding: each byte is a masked or shifted part of a code point, and ASCII chunks are checked below 0x80"
)]
fn utf16_to_utf8_into(text: &[u16], utf8: &mut Vec<u8>) {
    const CHUNK: usize = 16;
    let n = text.len();
    utf8.reserve(n + n / 2);
    let mut buf = [0u8; 4];
    let mut i = 0;
    while i < n {
        // Most text is ASCII: whole chunks are copied in a loop the compiler vectorizes.
        if let Some(chunk) = text.get(i..i + CHUNK) {
            let chunk: &[u16; CHUNK] = chunk.try_into().expect("a chunk of CHUNK units");
            if chunk.iter().fold(0, |any, &u| any | u) < 0x80 {
                let bytes: [u8; CHUNK] = std::array::from_fn(|k| chunk[k] as u8);
                utf8.extend_from_slice(&bytes);
                i += CHUNK;
                continue;
            }
        }
        let u = text[i];
        if u < 0x80 {
            utf8.push(u as u8);
            i += 1;
            continue;
        }
        if u < 0x800 {
            utf8.extend_from_slice(&[0xC0 | (u >> 6) as u8, 0x80 | (u & 0x3F) as u8]);
            i += 1;
            continue;
        }
        if !(0xD800..0xE000).contains(&u) {
            utf8.extend_from_slice(&[
                0xE0 | (u >> 12) as u8,
                0x80 | ((u >> 6) & 0x3F) as u8,
                0x80 | (u & 0x3F) as u8,
            ]);
            i += 1;
            continue;
        }
        let next = text.get(i + 1).copied().unwrap_or(0);
        let (c, width) = if (0xD800..0xDC00).contains(&u) && (0xDC00..0xE000).contains(&next) {
            let cp = 0x10000 + ((u32::from(u) - 0xD800) << 10) + (u32::from(next) - 0xDC00);
            (char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER), 2)
        } else {
            // A lone surrogate is not a `char`: U+FFFD.
            (
                char::from_u32(u32::from(u)).unwrap_or(char::REPLACEMENT_CHARACTER),
                1,
            )
        };
        utf8.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        i += width;
    }
}

/// Number of tokens of `text`.
pub fn count_str(encoding: Encoding, text: &str) -> usize {
    let bpe = encoding.bpe();
    CACHES.with(|caches| {
        let mut caches = caches.borrow_mut();
        let cache = &mut caches[encoding as usize];
        let mut count = 0;
        for_each_piece(encoding, text, |piece| {
            count += count_piece_cached(bpe, cache, piece)
        });
        count
    })
}

/// [`count_utf16`] of `text`, counted piece by piece only until it exceeds `stop`: the exact
/// count when it is at most `stop`, otherwise some number above `stop`. Whether a text has more
/// tokens than a short reference then costs a few pieces, whatever the text's length.
pub fn count_utf16_up_to(encoding: Encoding, text: &[u16], stop: usize) -> usize {
    if text.is_empty() {
        return 0;
    }
    let bpe = encoding.bpe();
    with_utf8(text, |utf8| {
        CACHES.with(|caches| {
            let mut caches = caches.borrow_mut();
            let cache = &mut caches[encoding as usize];
            let bytes = utf8.as_bytes();
            let (mut pos, mut count) = (0, 0);
            while pos < bytes.len() && count <= stop {
                let end = match encoding {
                    Encoding::O200kBase => next_o200k(bytes, pos),
                    Encoding::Cl100kBase => next_cl100k(bytes, pos),
                };
                // No token is longer than the vocabulary's longest: a piece too long to fit
                // under `stop` is not encoded (one piece of millions of bytes would take seconds).
                let fewest = (end - pos).div_ceil(encoding.longest_token());
                if count + fewest > stop {
                    return count + fewest;
                }
                count += count_piece_cached(bpe, cache, &utf8[pos..end]);
                pos = end;
            }
            count
        })
    })
}

/// Counts of pieces already seen, per encoding: natural text repeats its words, and a lookup is
/// much cheaper than encoding. Short pieces go to two-way set-associative tables (both ways of a
/// set share a cache line; a new piece evicts the less recently used one), so memory is fixed
/// and the hot words stay in cache; longer ones to a map that is cleared when full. Per thread,
/// so no locking.
struct PieceCache {
    /// Pieces of 2 to 7 bytes (most words), keyed by [`short_key`]; key 0 is an empty way.
    tiny: Box<[[(u64, u32); 2]]>,
    /// Pieces of 8 to 15 bytes.
    short: Box<[[(u128, u32); 2]]>,
    /// Pieces of 16 to [`CACHED_PIECE_BYTES`] bytes.
    long: HashMap<Box<[u8]>, u32, ahash::RandomState>,
    /// Bytes of the pieces in `long`.
    long_bytes: usize,
}

/// Sets of the associative tables (512 KiB and 512 KiB per encoding and thread).
const TINY_BITS: u32 = 14;
const SHORT_BITS: u32 = 13;

/// Pieces, and bytes of pieces, in the map of longer pieces at most, per encoding and thread
/// (cleared when either is reached).
const LONG_CAPACITY: usize = 1 << 16;
const LONG_BYTES: usize = 4 << 20;

/// Longest piece (bytes) that is cached. Pieces are words, number groups, punctuation runs and
/// whitespace in most scripts, but a run of Chinese or Japanese characters without spaces or
/// punctuation is one piece of 3 bytes a character, and such sentences repeat in re-read files.
const CACHED_PIECE_BYTES: usize = 256;

impl Default for PieceCache {
    fn default() -> Self {
        Self {
            tiny: vec![[(0, 0); 2]; 1 << TINY_BITS].into_boxed_slice(),
            short: vec![[(0, 0); 2]; 1 << SHORT_BITS].into_boxed_slice(),
            long: HashMap::default(),
            long_bytes: 0,
        }
    }
}

/// The count of the piece whose key is `key` in `set`, or `count()` remembered there.
#[inline(always)]
fn lookup<K: Copy + Eq>(set: &mut [(K, u32); 2], key: K, count: impl FnOnce() -> usize) -> usize {
    if set[0].0 == key {
        return set[0].1 as usize;
    }
    if set[1].0 == key {
        set.swap(0, 1);
        return set[0].1 as usize;
    }
    let n = count();
    set[1] = set[0];
    set[0] = (key, crate::to_u32(n));
    n
}

thread_local! {
    static CACHES: RefCell<[PieceCache; 2]> = RefCell::new(Default::default());
}

/// `len * 256^len` plus the bytes read as a big-endian number, for pieces of up to 15 bytes: one
/// key per piece, never 0 (the keys of pieces of one length lie in
/// `[len * 256^len, (len + 1) * 256^len)`). Built in registers: copying into a byte array and
/// reading it back stalls on store forwarding.
#[inline(always)]
fn short_key(bytes: &[u8]) -> u128 {
    bytes
        .iter()
        .fold(bytes.len() as u128, |k, &b| (k << 8) | u128::from(b))
}

/// Fibonacci hashing: the top `bits` bits of `x` times 2^64 / phi.
#[inline(always)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "the result has `bits` (at most 20) bits"
)]
fn slot(x: u64, bits: u32) -> usize {
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "keys of 2 to 7 bytes are below 2^59; longer keys are folded to 64 bits only to pick a slot"
)]
fn count_piece_cached(bpe: &BytePairEncoding, cache: &mut PieceCache, piece: &str) -> usize {
    let bytes = piece.as_bytes();
    match bytes.len() {
        1 => 1,
        // 7 * 256^7 + 256^7 = 2^59: fits in a u64.
        2..=7 => {
            let key = short_key(bytes) as u64;
            let set = &mut cache.tiny[slot(key, TINY_BITS)];
            lookup(set, key, || count_piece(bpe, piece))
        }
        8..=15 => {
            let key = short_key(bytes);
            let set = &mut cache.short[slot(key as u64 ^ (key >> 64) as u64, SHORT_BITS)];
            lookup(set, key, || count_piece(bpe, piece))
        }
        16..=CACHED_PIECE_BYTES => {
            if let Some(&n) = cache.long.get(bytes) {
                return n as usize;
            }
            let n = count_piece(bpe, piece);
            if cache.long.len() >= LONG_CAPACITY || cache.long_bytes + bytes.len() > LONG_BYTES {
                cache.long.clear();
                cache.long_bytes = 0;
            }
            cache.long.insert(bytes.into(), crate::to_u32(n));
            cache.long_bytes += bytes.len();
            n
        }
        _ => count_piece(bpe, piece),
    }
}

/// Calls `f` with each pre-tokenization piece of `text`, in order; the pieces concatenate to
/// `text`.
pub fn for_each_piece<'a>(encoding: Encoding, text: &'a str, mut f: impl FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let mut pos = 0;
    while pos < bytes.len() {
        let end = match encoding {
            Encoding::O200kBase => next_o200k(bytes, pos),
            Encoding::Cl100kBase => next_cl100k(bytes, pos),
        };
        debug_assert!(end > pos && text.is_char_boundary(end));
        f(&text[pos..end]);
        pos = end;
    }
}

fn count_piece(bpe: &BytePairEncoding, piece: &str) -> usize {
    if piece.contains('\u{FEFF}') {
        return count_merging_like_gpt_tokenizer(bpe, piece);
    }
    bpe.count(piece.as_bytes())
}

// --- Character classes --------------------------------------------------------------------------

const OTHER: u8 = 0;
const SPACE: u8 = 1;
const NEWLINE: u8 = 2;
const UPPER: u8 = 3; // Lu, Lt
const LOWER: u8 = 4; // Ll
const BOTH: u8 = 5; // Lm, Lo: in both o200k letter classes
const MARK: u8 = 6; // M: in both o200k letter classes, but not \p{L}
const NUMBER: u8 = 7;

/// Class and byte length of the character starting at `pos` (`pos < bytes.len()`, a char
/// boundary).
#[inline(always)]
fn class_at(bytes: &[u8], pos: usize) -> (u8, usize) {
    let b0 = bytes[pos];
    if b0 < 0x80 {
        return (ASCII[b0 as usize], 1);
    }
    non_ascii_class_at(bytes, pos)
}

#[inline(never)]
fn non_ascii_class_at(bytes: &[u8], pos: usize) -> (u8, usize) {
    let b0 = bytes[pos];
    let (cp, len) = if b0 < 0xE0 {
        (
            (u32::from(b0 & 0x1F) << 6) | u32::from(bytes[pos + 1] & 0x3F),
            2,
        )
    } else if b0 < 0xF0 {
        (
            (u32::from(b0 & 0x0F) << 12)
                | (u32::from(bytes[pos + 1] & 0x3F) << 6)
                | u32::from(bytes[pos + 2] & 0x3F),
            3,
        )
    } else {
        (
            (u32::from(b0 & 0x07) << 18)
                | (u32::from(bytes[pos + 1] & 0x3F) << 12)
                | (u32::from(bytes[pos + 2] & 0x3F) << 6)
                | u32::from(bytes[pos + 3] & 0x3F),
            4,
        )
    };
    if let Some(&class) = bmp_classes().get(cp as usize) {
        return (class, len);
    }
    (class_of_code_point(cp), len)
}

/// Class of a code point from U+0080 on, by binary search over the runs.
fn class_of_code_point(cp: u32) -> u8 {
    let run = RUN_STARTS.partition_point(|&start| start <= cp) - 1;
    RUN_CLASSES[run]
}

/// Class of every code point of the Basic Multilingual Plane (64 KiB, built on first use).
fn bmp_classes() -> &'static [u8] {
    static TABLE: OnceLock<Box<[u8]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = vec![OTHER; 0x10000];
        table[..0x80].copy_from_slice(&ASCII);
        for (i, &start) in RUN_STARTS.iter().enumerate() {
            let end = RUN_STARTS
                .get(i + 1)
                .map_or(0x10000, |&next| next.min(0x10000));
            if start < end {
                table[start as usize..end as usize].fill(RUN_CLASSES[i]);
            }
        }
        table.into_boxed_slice()
    })
}

#[inline(always)]
fn class_or_end(bytes: &[u8], pos: usize) -> Option<(u8, usize)> {
    (pos < bytes.len()).then(|| class_at(bytes, pos))
}

/// `\p{L}`
#[inline]
fn is_letter(c: u8) -> bool {
    matches!(c, UPPER | LOWER | BOTH)
}

/// `[^\r\n\p{L}\p{N}]`
#[inline]
fn is_prefix(c: u8) -> bool {
    matches!(c, OTHER | SPACE | MARK)
}

/// `[^\s\p{L}\p{N}]`
#[inline]
fn is_symbol(c: u8) -> bool {
    matches!(c, OTHER | MARK)
}

/// `\s`
#[inline]
fn is_space(c: u8) -> bool {
    matches!(c, SPACE | NEWLINE)
}

/// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`
#[inline]
fn is_upperish(c: u8) -> bool {
    matches!(c, UPPER | BOTH | MARK)
}

/// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`
#[inline]
fn is_lowerish(c: u8) -> bool {
    matches!(c, LOWER | BOTH | MARK)
}

/// End of the longest run from `pos` of characters whose class satisfies `pred`.
#[inline]
fn run_end(bytes: &[u8], mut pos: usize, pred: impl Fn(u8) -> bool) -> usize {
    while let Some((c, len)) = class_or_end(bytes, pos) {
        if !pred(c) {
            break;
        }
        pos += len;
    }
    pos
}

/// `'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE])` at `pos`: its end.
#[inline]
fn contraction(bytes: &[u8], pos: usize) -> Option<usize> {
    if bytes.get(pos) != Some(&b'\'') {
        return None;
    }
    let lower = |i: usize| bytes.get(pos + i).map(|b| b.to_ascii_lowercase());
    match lower(1)? {
        b's' | b'd' | b'm' | b't' => Some(pos + 2),
        b'l' if lower(2) == Some(b'l') => Some(pos + 3),
        b'v' | b'r' if lower(2) == Some(b'e') => Some(pos + 3),
        _ => None,
    }
}

/// The whitespace run starting at `pos`: its end, the start of its last character, and the end of
/// its last `\r` or `\n` if any.
fn space_run(bytes: &[u8], pos: usize) -> (usize, usize, Option<usize>) {
    let mut end = pos;
    let mut last_start = pos;
    let mut last_newline = None;
    while let Some((c, len)) = class_or_end(bytes, end) {
        if !is_space(c) {
            break;
        }
        if c == NEWLINE {
            last_newline = Some(end + len);
        }
        last_start = end;
        end += len;
    }
    (end, last_start, last_newline)
}

/// `' ?[^\s\p{L}\p{N}]+'` followed by `tail` (the characters `[\r\n]` or `[\r\n/]`), at `pos`.
fn symbols(bytes: &[u8], pos: usize, class: u8, slash: bool) -> Option<usize> {
    let start =
        if bytes[pos] == b' ' && class_or_end(bytes, pos + 1).is_some_and(|(c, _)| is_symbol(c)) {
            pos + 1
        } else if is_symbol(class) {
            pos
        } else {
            return None;
        };
    let mut end = run_end(bytes, start, is_symbol);
    while let Some(&b) = bytes.get(end) {
        if b == b'\r' || b == b'\n' || (slash && b == b'/') {
            end += 1;
        } else {
            break;
        }
    }
    Some(end)
}

/// `\p{N}{1,3}` at `pos` (whose class is `NUMBER`).
fn digits(bytes: &[u8], mut pos: usize) -> usize {
    for _ in 0..3 {
        match class_or_end(bytes, pos) {
            Some((NUMBER, len)) => pos += len,
            _ => break,
        }
    }
    pos
}

/// gpt-tokenizer's `cl100k_base` pattern, matched at `pos`:
/// `'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
/// ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]|\s+(?!\S)|\s`. Every position matches one alternative.
fn next_cl100k(bytes: &[u8], pos: usize) -> usize {
    if let Some(end) = contraction(bytes, pos) {
        return end;
    }
    let (class, len) = class_at(bytes, pos);
    if is_prefix(class) {
        if let Some((next, _)) = class_or_end(bytes, pos + len) {
            if is_letter(next) {
                return run_end(bytes, pos + len, is_letter);
            }
        }
    }
    if is_letter(class) {
        return run_end(bytes, pos, is_letter);
    }
    if class == NUMBER {
        return digits(bytes, pos);
    }
    if let Some(end) = symbols(bytes, pos, class, false) {
        return end;
    }
    // Whitespace.
    let (end, last_start, last_newline) = space_run(bytes, pos);
    if end == bytes.len() {
        return end; // \s+$
    }
    if let Some(newline_end) = last_newline {
        return newline_end; // \s*[\r\n]
    }
    if last_start > pos {
        return last_start; // \s+(?!\S)
    }
    pos + len // \s
}

/// gpt-tokenizer's (and tiktoken's) `o200k_base` pattern, matched at `pos`, with contractions
/// `'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE])` (ASCII only):
/// `[^\r\n\p{L}\p{N}]?[UP]*[LO]+(?:C)?|[^\r\n\p{L}\p{N}]?[UP]+[LO]*(?:C)?|\p{N}{1,3}|
/// ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+` where `UP` is
/// `\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}` and `LO` is `\p{Ll}\p{Lm}\p{Lo}\p{M}`.
fn next_o200k(bytes: &[u8], pos: usize) -> usize {
    let (class, len) = class_at(bytes, pos);
    let prefixed = is_prefix(class).then_some(pos + len);
    // First alternative, with the optional prefix taken, then without (backtracking order).
    for start in prefixed.into_iter().chain([pos]) {
        if let Some(end) = upper_then_lower(bytes, start) {
            return contraction(bytes, end).unwrap_or(end);
        }
    }
    // Second alternative.
    for start in prefixed.into_iter().chain([pos]) {
        if class_or_end(bytes, start).is_some_and(|(c, _)| is_upperish(c)) {
            let upper_end = run_end(bytes, start, is_upperish);
            let end = run_end(bytes, upper_end, is_lowerish);
            return contraction(bytes, end).unwrap_or(end);
        }
    }
    if class == NUMBER {
        return digits(bytes, pos);
    }
    if let Some(end) = symbols(bytes, pos, class, true) {
        return end;
    }
    // Whitespace.
    let (end, last_start, last_newline) = space_run(bytes, pos);
    if let Some(newline_end) = last_newline {
        return newline_end; // \s*[\r\n]+
    }
    if end == bytes.len() || last_start == pos {
        return end; // \s+(?!\S) to the end, or \s+ of one character
    }
    last_start // \s+(?!\S)
}

/// `[UP]*[LO]+` at `start`, as a backtracking matcher finds it: `[UP]*` takes the longest run
/// that is followed by an `LO` character, then `[LO]+` the longest run from there.
fn upper_then_lower(bytes: &[u8], start: usize) -> Option<usize> {
    let mut pos = start;
    // Start of the last character of the `UP` run that is also `LO`.
    let mut last_both = None;
    while let Some((c, len)) = class_or_end(bytes, pos) {
        if !is_upperish(c) {
            break;
        }
        if is_lowerish(c) {
            last_both = Some(pos);
        }
        pos += len;
    }
    let lower_start = match class_or_end(bytes, pos) {
        Some((c, _)) if is_lowerish(c) => pos,
        _ => last_both?,
    };
    Some(run_end(bytes, lower_start, is_lowerish))
}

// --- gpt-tokenizer's merging, for pieces containing U+FEFF ---------------------------------------

/// Byte-order mark.
const BOM: &str = "\u{FEFF}";

/// gpt-tokenizer's count of one piece containing U+FEFF.
///
/// gpt-tokenizer keeps the tokens that are valid UTF-8 in a map keyed by their text, the others
/// as bytes. A token whose bytes start with U+FEFF is kept as bytes, but looked up by text: the
/// piece itself is looked up by its text, so a piece starting with U+FEFF is never found whole;
/// a byte pair that is valid UTF-8 is decoded by a `TextDecoder` that drops a leading U+FEFF, so
/// it gets the rank of the text after the mark, if that text is a token (and not itself kept as
/// bytes). Merging is rank-ordered (leftmost pair first among equal ranks), here with a heap in
/// `O(n log n)`. The count is the number of parts left (gpt-tokenizer's final lookup of each part
/// never fails: every part is a byte or was merged because its text has a rank).
fn count_merging_like_gpt_tokenizer(bpe: &BytePairEncoding, piece: &str) -> usize {
    if !piece.starts_with(BOM) && token_of(bpe, piece.as_bytes()).is_some() {
        return 1;
    }
    let bytes = piece.as_bytes();
    let n = bytes.len();
    // Parts: each live part starts at a byte position `p` and ends at `next[p]`.
    let mut next: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut alive = vec![true; n];
    // Candidate merges: (rank, start of the left part, end of the right part).
    let mut heap: BinaryHeap<Reverse<(u32, usize, usize)>> = BinaryHeap::new();
    let candidate =
        |heap: &mut BinaryHeap<Reverse<(u32, usize, usize)>>, left: usize, end: usize| {
            if let Some(rank) = rank_like_gpt_tokenizer(bpe, &bytes[left..end]) {
                heap.push(Reverse((rank, left, end)));
            }
        };
    for i in 0..n.saturating_sub(1) {
        candidate(&mut heap, i, i + 2);
    }
    let mut parts = n;
    while let Some(Reverse((_, left, end))) = heap.pop() {
        // A candidate is stale unless its two parts are still adjacent and span the same bytes.
        let right = next[left];
        if !alive[left] || right >= n || next[right] != end {
            continue;
        }
        alive[right] = false;
        next[left] = end;
        parts -= 1;
        if end < n {
            prev[end] = left;
            candidate(&mut heap, left, next[end]);
        }
        if left > 0 {
            candidate(&mut heap, prev[left], end);
        }
    }
    parts
}

/// The rank gpt-tokenizer finds for the byte string `bytes` while merging.
fn rank_like_gpt_tokenizer(bpe: &BytePairEncoding, bytes: &[u8]) -> Option<u32> {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let text = text.strip_prefix(BOM).unwrap_or(text);
            if text.starts_with(BOM) {
                None
            } else {
                token_of(bpe, text.as_bytes())
            }
        }
        Err(_) => token_of(bpe, bytes),
    }
}

/// The token whose bytes are exactly `bytes` (token ids are ranks).
fn token_of(bpe: &BytePairEncoding, bytes: &[u8]) -> Option<u32> {
    // No token is longer than 128 bytes.
    if bytes.is_empty() || bytes.len() > 256 {
        return None;
    }
    let tokens = bpe.encode_via_backtracking(bytes);
    (tokens.len() == 1).then(|| tokens[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(encoding: Encoding, text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for_each_piece(encoding, text, |p| out.push(p));
        out
    }

    #[test]
    fn bmp_table_agrees_with_the_runs() {
        let table = bmp_classes();
        for cp in 0x80..0x10000u32 {
            assert_eq!(table[cp as usize], class_of_code_point(cp), "U+{cp:04X}");
        }
        assert_eq!(table[0xFEFF], SPACE);
        assert_eq!(table[0x85], OTHER);
        assert_eq!(class_of_code_point(0x1F600), OTHER);
        assert_eq!(class_of_code_point(0x10400), UPPER);
    }

    #[test]
    fn known_counts() {
        use Encoding::*;
        assert_eq!(count_str(O200kBase, ""), 0);
        assert_eq!(count_str(O200kBase, "Hello, world!"), 4);
        assert_eq!(count_str(Cl100kBase, "hello world"), 2);
        // Special-token text is plain text.
        assert_eq!(count_str(Cl100kBase, "<|endoftext|>"), 7);
        assert_eq!(count_str(O200kBase, "<|endoftext|>"), 7);
    }

    #[test]
    fn utf16_lone_surrogates_count_as_replacement_characters() {
        let text: Vec<u16> = "a\u{FFFD}b".encode_utf16().collect();
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let expected = count_utf16(enc, &text);
            assert_eq!(count_utf16(enc, &[0x61, 0xD800, 0x62]), expected);
            assert_eq!(count_utf16(enc, &[0x61, 0xDC00, 0x62]), expected);
            let emoji: Vec<u16> = "a😀b".encode_utf16().collect();
            assert_eq!(count_utf16(enc, &emoji), count_str(enc, "a😀b"));
        }
    }

    #[test]
    fn utf16_conversion_matches_the_standard_library() {
        let samples = [
            "plain ASCII text that is longer than one chunk of sixteen units",
            "mixed: café, naïve, 中文, 😀 and more ASCII after the astral character",
            "😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀",
            "",
        ];
        for s in samples {
            let units: Vec<u16> = s.encode_utf16().collect();
            assert_eq!(utf16_to_utf8_lossy(&units), s);
        }
        let mut units: Vec<u16> = "0123456789abcdef".encode_utf16().collect();
        units.extend([0xD800, 0x41, 0xDC00, 0xDBFF, 0xDFFF, 0xD83D]);
        let expected: String = char::decode_utf16(units.iter().copied())
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect();
        assert_eq!(utf16_to_utf8_lossy(&units), expected);
    }

    #[test]
    fn splits_like_the_javascript_patterns() {
        use Encoding::*;
        assert_eq!(pieces(O200kBase, "Hello  world"), ["Hello", " ", " world"]);
        assert_eq!(pieces(O200kBase, "don't'S'ſ"), ["don't", "'S", "'ſ"]);
        assert_eq!(pieces(O200kBase, "ABCdef GHI"), ["ABCdef", " GHI"]);
        assert_eq!(pieces(O200kBase, "12345"), ["123", "45"]);
        assert_eq!(pieces(O200kBase, "a \n \n b"), ["a", " \n \n", " b"]);
        assert_eq!(pieces(O200kBase, "x!!\n/\n//y"), ["x", "!!\n/\n//", "y"]);
        // JavaScript \s: U+FEFF is whitespace, U+0085 is not.
        assert_eq!(
            pieces(O200kBase, "a\u{FEFF}\u{FEFF}"),
            ["a", "\u{FEFF}\u{FEFF}"]
        );
        assert_eq!(pieces(O200kBase, "a\u{85}\u{85}"), ["a", "\u{85}\u{85}"]);
        // Trailing whitespace: cl100k (gpt-tokenizer) tries \s+$ first; o200k splits at the newline.
        assert_eq!(pieces(Cl100kBase, "abc \n "), ["abc", " \n "]);
        assert_eq!(pieces(O200kBase, "abc \n "), ["abc", " \n", " "]);
        assert_eq!(
            pieces(Cl100kBase, "it's  \n\n x"),
            ["it", "'s", "  \n\n", " x"]
        );
        // A mark before an upper-case run: the first alternative matches the mark alone.
        assert_eq!(pieces(O200kBase, "\u{301}AB "), ["\u{301}", "AB", " "]);
    }

    #[test]
    fn byte_order_mark_merges_like_gpt_tokenizer() {
        // gpt-tokenizer 4.0.0: "\u{FEFF}" -> [5416, 123] (o200k), [171, 3299] (cl100k).
        assert_eq!(count_str(Encoding::O200kBase, "\u{FEFF}"), 2);
        assert_eq!(count_str(Encoding::Cl100kBase, "\u{FEFF}"), 2);
        assert_eq!(count_str(Encoding::O200kBase, "\u{FEFF}hello"), 3);
        assert_eq!(count_str(Encoding::O200kBase, " \u{FEFF}"), 1);
    }

    #[test]
    fn cached_counts_equal_uncached_counts() {
        // Many distinct pieces of every cached length, so that slots are replaced and the map of
        // longer pieces is cleared; counted twice (cold, then warm).
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut text = String::new();
        // Pieces up to 300 bytes: past CACHED_PIECE_BYTES too; 9 MB in all, past LONG_BYTES.
        for _ in 0..60_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = 1 + (state % 300) as usize;
            text.push(' ');
            for i in 0..len {
                text.push(char::from(b'a' + ((state >> (i % 60)) % 26) as u8));
            }
        }
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let bpe = enc.bpe();
            let mut uncached = 0;
            for_each_piece(enc, &text, |p| uncached += count_piece(bpe, p));
            assert_eq!(count_str(enc, &text), uncached);
            assert_eq!(count_str(enc, &text), uncached);
        }
    }

    #[test]
    fn long_runs_of_one_character() {
        let n = 1_000_000;
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            for c in ["x", "-", " ", "\n", "7", "\u{FEFF}"] {
                let count = count_str(enc, &c.repeat(n));
                assert!(count > 0 && count <= 3 * n, "{enc:?} {c:?}: {count}");
            }
        }
    }

    #[test]
    fn counting_up_to_a_limit_skips_a_piece_too_long_to_fit() {
        // One piece of 200,000 letters: at least 200,000 / (longest token) tokens, so whether
        // it has more than 20 is known without encoding it (it used to be encoded in full: about
        // 55 ms per million units, on the event loop for keep 'earliest' tags).
        let text: Vec<u16> = "x".repeat(200_000).encode_utf16().collect();
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let up_to = count_utf16_up_to(enc, &text, 20);
            assert!(up_to > 20, "{enc:?}: {up_to}");
            assert!(
                up_to < count_utf16(enc, &text),
                "{enc:?}: encoded the whole piece"
            );
        }
    }

    proptest::proptest! {
        /// The piece count is a lower bound of the token count (exactly the number of pieces
        /// when not stopped), and stops once it exceeds `stop`.
        #[test]
        fn pieces_bound_the_count(
            picks in proptest::collection::vec(0usize..12, 0..120),
            stop in 0usize..40,
        ) {
            const UNITS: [&[u16]; 12] = [
                &[0x61], &[0x41, 0x62], &[0x20], &[0x0A], &[0x37], &[0x27, 0x73], &[0x2D],
                &[0xE9], &[0x4E2D], &[0xFEFF], &[0xD83D, 0xDE00], &[0xD800],
            ];
            let text: Vec<u16> = picks.iter().flat_map(|&k| UNITS[k].iter().copied()).collect();
            for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let all = pieces_utf16(enc, &text, usize::MAX);
                let utf8 = utf16_to_utf8_lossy(&text);
                proptest::prop_assert_eq!(all, pieces(enc, &utf8).len());
                proptest::prop_assert!(all <= count_utf16(enc, &text));
                proptest::prop_assert_eq!(pieces_utf16(enc, &text, stop), all.min(stop + 1));
                proptest::prop_assert!(CountTokens::lower_bound(&enc, &text, stop) <= enc.count(&text));
                // Counting up to `stop`: exact up to it, above it past it.
                let count = count_utf16(enc, &text);
                let up_to = count_utf16_up_to(enc, &text, stop);
                if count <= stop {
                    proptest::prop_assert_eq!(up_to, count);
                } else {
                    proptest::prop_assert!(up_to > stop && up_to <= count);
                }
            }
        }
    }
}
