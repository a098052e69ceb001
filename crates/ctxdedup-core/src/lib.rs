//! ctxdedup-core: the deduplication algorithms behind ctxdedup, in pure Rust.
//!
//! Every algorithm lives here exactly once; the Node-API binding (`ctxdedup-node`) only converts
//! values. Content is handled as UTF-16 code units so that identity matches JavaScript string
//! equality, lone surrogates included (see `DESIGN.md`, "Identity is the contract").

pub mod blocks;
pub mod exact;
pub mod findings;
pub mod fuzzy;
pub mod hashed_embedding;
pub mod ingest;
pub mod js_text;
pub mod messages;
pub mod near_window;
pub mod resources;
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
