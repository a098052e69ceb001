//! Byte-exact grouping: contents are equal iff their UTF-16 code units are equal.
//!
//! A keyed in-memory hash (ahash, never exposed) buckets contents by (length, hash); every
//! bucket is then verified by comparing the code units, so a hash collision, accidental or
//! crafted, can cost time proportional to the colliding contents but never merges distinct ones.

use crate::source::Utf16Source;
use ahash::{AHashMap, RandomState};

/// For every item, the index of the first item with the same content (itself if it is first).
pub fn group_exact<S: Utf16Source>(src: &S) -> Vec<u32> {
    let n = src.count();
    let hasher = RandomState::new();
    // (length, hash) -> first index in the bucket; `next` chains the rest of the bucket.
    let mut heads: AHashMap<(usize, u64), u32> = AHashMap::with_capacity(n);
    let mut next = vec![u32::MAX; n];
    let mut tail = vec![u32::MAX; n];
    let mut multi: Vec<u32> = Vec::new();
    for i in 0..n {
        let key = src.with_units(i, |units| (units.len(), hasher.hash_one(units)));
        match heads.get(&key) {
            Some(&head) => {
                let h = head as usize;
                let last = if tail[h] == u32::MAX {
                    h
                } else {
                    tail[h] as usize
                };
                next[last] = i as u32;
                tail[h] = i as u32;
                if last == h {
                    multi.push(head);
                }
            }
            None => {
                heads.insert(key, i as u32);
            }
        }
    }
    drop(heads);

    let mut rep: Vec<u32> = (0..n as u32).collect();
    for head in multi {
        let mut members = Vec::new();
        let mut cur = head;
        while cur != u32::MAX {
            members.push(cur as usize);
            cur = next[cur as usize];
        }
        verify_bucket(src, members, &mut rep);
    }
    rep
}

/// Splits one hash bucket (ascending indices) into groups of truly equal contents.
fn verify_bucket<S: Utf16Source>(src: &S, mut members: Vec<usize>, rep: &mut [u32]) {
    while members.len() > 1 {
        let first = members[0];
        let reference: Vec<u16> = src.with_units(first, |u| u.to_vec());
        let mut rest = Vec::new();
        for &m in &members[1..] {
            if src.with_units(m, |u| u == reference.as_slice()) {
                rep[m] = first as u32;
            } else {
                rest.push(m);
            }
        }
        members = rest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Utf16Arena;

    #[test]
    fn groups_by_code_units() {
        let mut arena = Utf16Arena::new();
        for units in [
            &[0x61, 0xD800][..],
            &[0x61, 0xDC00],
            &[0x61, 0xFFFD],
            &[0x61, 0xD800],
            &[],
            &[],
        ] {
            arena.push(units);
        }
        assert_eq!(group_exact(&arena), vec![0, 1, 2, 0, 4, 4]);
    }

    #[test]
    fn verifies_colliding_buckets() {
        // Exercise verify_bucket directly with a bucket that mixes unequal contents.
        let arena = Utf16Arena::from_strs(&["x", "y", "x", "y", "z"]);
        let mut rep: Vec<u32> = (0..5).collect();
        verify_bucket(&arena, vec![0, 1, 2, 3, 4], &mut rep);
        assert_eq!(rep, vec![0, 1, 0, 1, 4]);
    }
}
