//! SHA-256 checksums of content batches, one call per batch, in lowercase hex: resource blocks
//! as bytes ([`checksum_batch`], for the conversation resource ledger) and contents as UTF-16
//! with their in-batch first occurrences ([`hash_batch`], for the ingestion index).

mod bytes;
mod utf16;

pub use bytes::{checksum_batch, BadEnd, ByteArena, ByteSource, Checksums, PackedBytes};
pub use utf16::{hash_batch, utf16_to_utf8, BatchIdentity, IllFormed};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends a digest in lowercase hex to `out`.
pub fn push_hex(digest: &[u8; 32], out: &mut String) {
    let mut hex = [0u8; 64];
    for (i, byte) in digest.iter().enumerate() {
        hex[2 * i] = HEX[usize::from(byte >> 4)];
        hex[2 * i + 1] = HEX[usize::from(byte & 0x0f)];
    }
    // Every byte of `hex` is an ASCII hex digit.
    out.extend(hex.iter().map(|&b| char::from(b)));
}
