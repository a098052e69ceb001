//! Batch identity for incremental ingestion.
//!
//! For every content of a batch: the SHA-256 of its UTF-8 bytes (the identity an ingestion index
//! persists and shares between processes) and the index of the first content of the batch with
//! the same digest. Contents are read as UTF-16 code units; a content with a lone surrogate has no
//! UTF-8 encoding, so it has no faithful checksum and the whole batch is rejected, naming it.
//!
//! Grouping is by digest, which is exactly the identity the persistent index uses: two contents
//! are the same for the index iff their SHA-256 digests are equal. The hex encoding is the one of
//! the resource checksums ([`super::push_hex`]).

use super::push_hex;
use crate::sha::sha256_many;
use crate::source::Utf16Source;
use crate::to_u32;
use ahash::AHashMap;

/// Digests and in-batch first occurrences of one batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchIdentity {
    /// Lowercase hex SHA-256 of each content's UTF-8 bytes, 64 characters per content, in input
    /// order, concatenated.
    pub hex: String,
    /// For each content, the index of the first content with the same digest (itself if first).
    pub first: Vec<u32>,
}

impl BatchIdentity {
    /// The hex digest of content `index`.
    pub fn digest(&self, index: usize) -> &str {
        &self.hex[index * 64..index * 64 + 64]
    }
}

/// A content that is not well-formed UTF-16 (it has a lone surrogate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IllFormed {
    /// Index of the first such content in the batch.
    pub index: usize,
}

impl std::fmt::Display for IllFormed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "contents[{}] contains a lone surrogate and has no UTF-8 encoding to checksum",
            self.index
        )
    }
}

impl std::error::Error for IllFormed {}

/// Appends the UTF-8 encoding of `units` to `out`, or returns `false` at a lone surrogate.
#[expect(
    clippy::cast_possible_truncation,
    reason = "UTF-8 encoding: each byte is a masked or shifted part of a code point"
)]
pub fn utf16_to_utf8(units: &[u16], out: &mut Vec<u8>) -> bool {
    out.reserve(units.len());
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        if u < 0x80 {
            out.push(u as u8);
            i += 1;
            continue;
        }
        let c: u32 = if (0xD800..0xDC00).contains(&u) {
            match units.get(i + 1) {
                Some(&low) if (0xDC00..0xE000).contains(&low) => {
                    i += 1;
                    0x10000 + ((u32::from(u) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
                }
                _ => return false,
            }
        } else if (0xDC00..0xE000).contains(&u) {
            return false;
        } else {
            u32::from(u)
        };
        i += 1;
        if c < 0x800 {
            out.extend_from_slice(&[0xC0 | (c >> 6) as u8, 0x80 | (c & 0x3F) as u8]);
        } else if c < 0x10000 {
            out.extend_from_slice(&[
                0xE0 | (c >> 12) as u8,
                0x80 | ((c >> 6) & 0x3F) as u8,
                0x80 | (c & 0x3F) as u8,
            ]);
        } else {
            out.extend_from_slice(&[
                0xF0 | (c >> 18) as u8,
                0x80 | ((c >> 12) & 0x3F) as u8,
                0x80 | ((c >> 6) & 0x3F) as u8,
                0x80 | (c & 0x3F) as u8,
            ]);
        }
    }
    true
}

/// UTF-8 bytes transcoded ahead of hashing, at most (roughly) this many at a time: enough for
/// the two-lane hash to pair contents up, little enough to stay in cache.
const CHUNK_BYTES: usize = 1 << 20;

/// SHA-256 of every content's UTF-8 bytes plus in-batch first occurrences.
///
/// Linear in the total size of the batch; memory beyond the output is about [`CHUNK_BYTES`] of
/// UTF-8 (or one larger content) and one map entry per distinct digest.
pub fn hash_batch<S: Utf16Source>(src: &S) -> Result<BatchIdentity, IllFormed> {
    let n = src.count();
    let mut hex = String::with_capacity(n * 64);
    let mut first = Vec::with_capacity(n);
    let mut seen: AHashMap<[u8; 32], u32> = AHashMap::with_capacity(n);
    let mut utf8 = Vec::new();
    let mut ends = Vec::new();
    let mut start = 0;
    while start < n {
        // Transcode a chunk of contents, then hash them together.
        utf8.clear();
        ends.clear();
        let mut index = start;
        while index < n && (index == start || utf8.len() < CHUNK_BYTES) {
            if !src.with_units(index, |units| utf16_to_utf8(units, &mut utf8)) {
                return Err(IllFormed { index });
            }
            ends.push(utf8.len());
            index += 1;
        }
        let mut from = 0;
        let contents: Vec<&[u8]> = ends
            .iter()
            .map(|&end| {
                let content = &utf8[from..end];
                from = end;
                content
            })
            .collect();
        for (offset, digest) in sha256_many(&contents).into_iter().enumerate() {
            push_hex(&digest, &mut hex);
            first.push(*seen.entry(digest).or_insert(to_u32(start + offset)));
        }
        start = index;
    }
    Ok(BatchIdentity { hex, first })
}

#[cfg(test)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "test data: small indices and byte values"
)]
mod tests {
    use super::*;
    use crate::sha::sha256_hex;
    use crate::source::Utf16Arena;
    use proptest::prelude::*;

    #[test]
    fn digests_and_first_occurrences() {
        let arena = Utf16Arena::from_strs(&["abc", "", "abc", "é€😀", "", "x"]);
        let batch = hash_batch(&arena).unwrap();
        assert_eq!(batch.first, vec![0, 1, 0, 3, 1, 5]);
        assert_eq!(batch.hex.len(), 6 * 64);
        assert_eq!(
            batch.digest(0),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            batch.digest(1),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(batch.digest(3), sha256_hex("é€😀".as_bytes()));
    }

    #[test]
    fn chunks_hash_like_one_content_at_a_time() {
        // About 3 MiB of UTF-8 in contents of uneven sizes, so chunks end at various places and
        // repeats span chunk boundaries.
        let contents: Vec<String> = (0..120)
            .map(|i| {
                let size = [10, 70_000, 4_000, 31_000][i % 4];
                let seed = i % 12;
                (0..size)
                    .map(|k| char::from(b'a' + ((k * 7 + seed) % 26) as u8))
                    .collect()
            })
            .collect();
        let batch = hash_batch(&Utf16Arena::from_strs(&contents)).unwrap();
        for (i, content) in contents.iter().enumerate() {
            assert_eq!(batch.digest(i), sha256_hex(content.as_bytes()));
            let first = contents.iter().position(|c| c == content).unwrap();
            assert_eq!(batch.first[i], first as u32);
        }
        // Twelve distinct contents, each ten times.
        let repeats = batch
            .first
            .iter()
            .enumerate()
            .filter(|&(i, &f)| f as usize != i);
        assert_eq!(repeats.count(), 108);
    }

    #[test]
    fn rejects_lone_surrogates_naming_the_first() {
        for bad in [
            &[0x61, 0xD800][..],
            &[0xDC00, 0x61],
            &[0xD800, 0xD800, 0xDC00],
        ] {
            let mut arena = Utf16Arena::from_strs(&["ok"]);
            arena.push(bad);
            arena.push(&[0xD800]);
            assert_eq!(hash_batch(&arena), Err(IllFormed { index: 1 }));
        }
    }

    #[test]
    fn empty_batch() {
        let batch = hash_batch(&Utf16Arena::new()).unwrap();
        assert_eq!(batch, BatchIdentity::default());
    }

    proptest! {
        #[test]
        fn utf8_matches_std(s in "\\PC{0,40}") {
            let units: Vec<u16> = s.encode_utf16().collect();
            let mut out = Vec::new();
            prop_assert!(utf16_to_utf8(&units, &mut out));
            prop_assert_eq!(out, s.as_bytes().to_vec());
        }

        #[test]
        fn ill_formed_iff_std_rejects(units in proptest::collection::vec(
            prop_oneof![Just(0x61u16), Just(0xD800u16), Just(0xDC00u16), Just(0xDBFFu16), Just(0xE000u16)],
            0..12,
        )) {
            let mut out = Vec::new();
            let ok = utf16_to_utf8(&units, &mut out);
            match String::from_utf16(&units) {
                Ok(s) => { prop_assert!(ok); prop_assert_eq!(out, s.into_bytes()); }
                Err(_) => prop_assert!(!ok),
            }
        }

        #[test]
        fn first_is_first_equal(items in proptest::collection::vec("[ab]{0,3}", 0..30)) {
            let arena = Utf16Arena::from_strs(&items);
            let batch = hash_batch(&arena).unwrap();
            for (i, item) in items.iter().enumerate() {
                let expected = items.iter().position(|x| x == item).unwrap() as u32;
                prop_assert_eq!(batch.first[i], expected);
            }
        }
    }
}
