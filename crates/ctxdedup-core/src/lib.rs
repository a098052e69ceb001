//! ctxdedup-core: the deduplication algorithms behind ctxdedup, in pure Rust.
//!
//! Every algorithm lives here exactly once; the Node-API binding (`ctxdedup-node`) only converts
//! values. Content is handled as UTF-16 code units so that identity matches JavaScript string
//! equality, lone surrogates included (see `DESIGN.md`, "Identity is the contract").

pub mod blocks;
pub mod checksums;
pub mod exact;
pub mod findings;
pub mod fuzzy;
pub mod hashed_embedding;
pub mod huge_pages;
pub mod js_text;
pub mod messages;
pub mod near_window;
pub mod scored;
pub mod sha;
#[cfg(target_arch = "x86_64")]
mod sha_ni;
pub mod source;
#[rustfmt::skip]
mod token_classes;
pub mod tokens;
pub mod union_find;
pub mod vectors;

pub use source::{Utf16Arena, Utf16Source};

/// `i`, an index or count of a batch or an offset in one content, as the `u32` the core stores
/// and returns. It fits: a batch has fewer than 2^32 items and a content fewer than 2^32 units
/// (a JS array holds at most 2^32 - 1 elements, a JS string fewer than 2^30 units).
#[inline]
#[expect(
    clippy::cast_possible_truncation,
    reason = "batch indices and content offsets are below 2^32 (see the doc comment)"
)]
pub fn to_u32(i: usize) -> u32 {
    debug_assert!(u32::try_from(i).is_ok(), "{i} does not fit u32");
    i as u32
}

/// A caller error: an input that must have one entry per content has another length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthMismatch {
    /// What one entry is, e.g. `"score"`.
    pub what: &'static str,
    /// What the entries are per, e.g. `"content"`.
    pub per: &'static str,
    /// The number of contents.
    pub expected: usize,
    /// The number of entries given.
    pub got: usize,
}

impl LengthMismatch {
    /// `Ok` if `got == expected`, else the error.
    pub fn check(
        what: &'static str,
        per: &'static str,
        expected: usize,
        got: usize,
    ) -> Result<(), Self> {
        if got == expected {
            Ok(())
        } else {
            Err(Self {
                what,
                per,
                expected,
                got,
            })
        }
    }
}

impl std::fmt::Display for LengthMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            what,
            per,
            expected,
            got,
        } = self;
        write!(
            f,
            "one {what} per {per} is required: {got} for {expected} {per}s"
        )
    }
}

impl std::error::Error for LengthMismatch {}
