//! Resource checksums in bulk, for the conversation resource ledger.
//!
//! A resource block is identified by its URI and the SHA-256 of its content's bytes (the UTF-8
//! bytes of a well-formed string, or the bytes the caller passed). Blocks of at most `min_bytes`
//! bytes are never deduplicated, so they are measured but not hashed. One call handles every
//! resource block of a tool response, so the JS/native boundary is crossed once per response,
//! and the blocks of a response are hashed two at a time where the CPU allows
//! ([`crate::sha::sha256_many`]).

use super::push_hex;
use crate::sha::sha256_many;

/// A batch of contents, each a sequence of bytes.
pub trait ByteSource {
    /// Number of contents in the batch.
    fn count(&self) -> usize;

    /// Length of content `index` in bytes.
    fn byte_len(&self, index: usize) -> usize;

    /// Calls `f` with the bytes of the contents `indices`, in that order, all at once.
    /// Implementations may reuse one buffer between calls, so `f` must not call back into the
    /// same source.
    fn with_many<R>(&self, indices: &[usize], f: impl FnOnce(&[&[u8]]) -> R) -> R;
}

/// An owned batch: all contents concatenated, plus the end offset of each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ByteArena {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl ByteArena {
    /// An empty arena.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one content.
    pub fn push(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
        self.ends.push(self.bytes.len());
    }

    /// The bytes of content `index`.
    pub fn get(&self, index: usize) -> &[u8] {
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.bytes[start..self.ends[index]]
    }
}

impl ByteSource for ByteArena {
    fn count(&self) -> usize {
        self.ends.len()
    }

    fn byte_len(&self, index: usize) -> usize {
        self.get(index).len()
    }

    fn with_many<R>(&self, indices: &[usize], f: impl FnOnce(&[&[u8]]) -> R) -> R {
        let slices: Vec<&[u8]> = indices.iter().map(|&i| self.get(i)).collect();
        f(&slices)
    }
}

/// A borrowed batch: all contents in one buffer, plus the end offset of each (what a caller
/// fills with `TextEncoder.encodeInto` or `Buffer.write`, one call per content).
#[derive(Debug, Clone, Copy)]
pub struct PackedBytes<'a> {
    bytes: &'a [u8],
    ends: &'a [u32],
}

/// Why `ends` does not describe a batch in its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadEnd {
    /// The first offending entry of `ends`.
    pub index: usize,
}

impl std::fmt::Display for BadEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ends[{}] is before the end before it or past the buffer",
            self.index
        )
    }
}

impl std::error::Error for BadEnd {}

impl<'a> PackedBytes<'a> {
    /// Content `i` is `bytes[ends[i - 1]..ends[i]]` (from 0 for the first); `ends` must not
    /// decrease nor pass the buffer's end (bytes after the last end are ignored).
    pub fn new(bytes: &'a [u8], ends: &'a [u32]) -> Result<Self, BadEnd> {
        let mut start = 0;
        for (index, &end) in ends.iter().enumerate() {
            let end = end as usize;
            if end < start || end > bytes.len() {
                return Err(BadEnd { index });
            }
            start = end;
        }
        Ok(Self { bytes, ends })
    }

    fn get(&self, index: usize) -> &'a [u8] {
        let start = if index == 0 {
            0
        } else {
            self.ends[index - 1] as usize
        };
        &self.bytes[start..self.ends[index] as usize]
    }
}

impl ByteSource for PackedBytes<'_> {
    fn count(&self) -> usize {
        self.ends.len()
    }

    fn byte_len(&self, index: usize) -> usize {
        self.get(index).len()
    }

    fn with_many<R>(&self, indices: &[usize], f: impl FnOnce(&[&[u8]]) -> R) -> R {
        let slices: Vec<&[u8]> = indices.iter().map(|&i| self.get(i)).collect();
        f(&slices)
    }
}

/// Result of [`checksum_batch`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checksums {
    /// Byte length of every content.
    pub byte_lengths: Vec<usize>,
    /// Lowercase hex SHA-256 (64 characters each) of every content longer than `min_bytes`, in
    /// batch order, concatenated. Contents of at most `min_bytes` bytes contribute nothing.
    pub hex: String,
}

impl Checksums {
    /// The checksum of the `nth` hashed content.
    pub fn nth(&self, nth: usize) -> &str {
        &self.hex[nth * 64..nth * 64 + 64]
    }
}

/// Measures every content and hashes those longer than `min_bytes` bytes.
pub fn checksum_batch<S: ByteSource>(src: &S, min_bytes: usize) -> Checksums {
    let n = src.count();
    let mut out = Checksums {
        byte_lengths: Vec::with_capacity(n),
        hex: String::new(),
    };
    let mut hashed = Vec::new();
    for i in 0..n {
        let len = src.byte_len(i);
        out.byte_lengths.push(len);
        if len > min_bytes {
            hashed.push(i);
        }
    }
    out.hex.reserve(hashed.len() * 64);
    for digest in src.with_many(&hashed, sha256_many) {
        push_hex(&digest, &mut out.hex);
    }
    out
}

#[cfg(test)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "test data: small indices and byte values"
)]
mod tests {
    use super::*;
    use crate::sha::sha256_hex;
    use sha2::Digest;

    #[test]
    fn hashes_only_contents_above_the_threshold() {
        let mut arena = ByteArena::new();
        for content in [&b"abc"[..], b"", b"abcd", "é".as_bytes()] {
            arena.push(content);
        }
        let sums = checksum_batch(&arena, 3);
        assert_eq!(sums.byte_lengths, vec![3, 0, 4, 2]);
        assert_eq!(sums.hex.len(), 64);
        assert_eq!(sums.nth(0), sha256_hex(b"abcd"));

        let all = checksum_batch(&arena, 0);
        assert_eq!(all.hex.len(), 3 * 64);
        assert_eq!(
            all.nth(0),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(all.nth(2), sha256_hex("é".as_bytes()));
    }

    #[test]
    fn hex_matches_the_reference_encoder() {
        let mut out = String::new();
        for len in [0usize, 1, 55, 56, 63, 64, 65, 1000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            out.clear();
            push_hex(&sha2::Sha256::digest(&data).into(), &mut out);
            assert_eq!(out, sha256_hex(&data));
        }
    }

    #[test]
    fn packed_contents_hash_like_an_arena() {
        let parts: [&[u8]; 4] = [b"", &[7u8; 400], b"short", &[1u8; 301]];
        let mut arena = ByteArena::new();
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for p in parts {
            arena.push(p);
            bytes.extend_from_slice(p);
            ends.push(u32::try_from(bytes.len()).unwrap());
        }
        bytes.extend_from_slice(b"ignored tail");
        let packed = PackedBytes::new(&bytes, &ends).unwrap();
        assert_eq!(checksum_batch(&packed, 300), checksum_batch(&arena, 300));
        assert_eq!(
            PackedBytes::new(&bytes, &[3, 2]).unwrap_err(),
            BadEnd { index: 1 }
        );
        assert_eq!(
            PackedBytes::new(b"abc", &[4]).unwrap_err(),
            BadEnd { index: 0 }
        );
        assert_eq!(
            BadEnd { index: 1 }.to_string(),
            "ends[1] is before the end before it or past the buffer"
        );
    }

    #[test]
    fn empty_batch() {
        assert_eq!(checksum_batch(&ByteArena::new(), 300), Checksums::default());
    }
}
