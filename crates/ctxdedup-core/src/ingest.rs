//! Batch identity for incremental ingestion.
//!
//! For every content of a batch: the SHA-256 of its UTF-8 bytes (the identity an ingestion index
//! persists and shares between processes) and the index of the first content of the batch with
//! the same digest. Contents are read as UTF-16 code units; a content with a lone surrogate has no
//! UTF-8 encoding, so it has no faithful checksum and the whole batch is rejected, naming it.
//!
//! Grouping is by digest, which is exactly the identity the persistent index uses: two contents
//! are the same for the index iff their SHA-256 digests are equal. The hex encoding is the one of
//! the resource checksums ([`crate::resources::push_sha256_hex`]).

use crate::resources::push_sha256_hex;
use crate::source::Utf16Source;
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

/// Appends the UTF-8 encoding of `units` to `out`, or returns `false` at a lone surrogate.
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

/// SHA-256 of every content's UTF-8 bytes plus in-batch first occurrences, in one pass.
///
/// Linear in the total size of the batch; memory beyond the output is one content's UTF-8 bytes
/// and one map entry per distinct digest.
pub fn hash_batch<S: Utf16Source>(src: &S) -> Result<BatchIdentity, IllFormed> {
    let n = src.count();
    let mut hex = String::with_capacity(n * 64);
    let mut first = Vec::with_capacity(n);
    let mut seen: AHashMap<[u8; 64], u32> = AHashMap::with_capacity(n);
    let mut utf8 = Vec::new();
    for index in 0..n {
        utf8.clear();
        if !src.with_units(index, |units| utf16_to_utf8(units, &mut utf8)) {
            return Err(IllFormed { index });
        }
        push_sha256_hex(&utf8, &mut hex);
        let mut key = [0u8; 64];
        key.copy_from_slice(&hex.as_bytes()[index * 64..]);
        first.push(*seen.entry(key).or_insert(index as u32));
    }
    Ok(BatchIdentity { hex, first })
}

#[cfg(test)]
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
