//! Byte-exact grouping: contents are equal iff their UTF-16 code units are equal.
//!
//! Candidates are narrowed in stages, each cheaper than reading everything: contents of a length
//! no other content has are unique; then those whose (length, first [`PREFIX_UNITS`] units) is
//! unique; only the rest are read whole. A keyed in-memory hash (ahash, never exposed)
//! buckets them by (length, hash), and a content joins a group only after comparing equal unit by
//! unit, so a hash collision, accidental or crafted, can cost time proportional to the colliding
//! contents but never merges distinct ones. With sources that copy contents out of JavaScript,
//! most distinct contents are thus never copied in full.

use crate::source::{Utf16Source, PREFIX_UNITS};
use ahash::{AHashMap, RandomState};

/// Keeps the members of `candidates` whose key is shared with another candidate.
fn shared_keys<K: std::hash::Hash + Eq>(
    candidates: Vec<usize>,
    mut key: impl FnMut(usize) -> K,
) -> Vec<usize> {
    let keys: Vec<K> = candidates.iter().map(|&i| key(i)).collect();
    let mut count: AHashMap<&K, u32> = AHashMap::with_capacity(keys.len());
    for k in &keys {
        *count.entry(k).or_insert(0) += 1;
    }
    candidates
        .iter()
        .zip(&keys)
        .filter(|(_, k)| count[k] > 1)
        .map(|(&i, _)| i)
        .collect()
}

/// For every item, the index of the first item with the same content (itself if it is first).
pub fn group_exact<S: Utf16Source>(src: &S) -> Vec<u32> {
    let hasher = RandomState::new();
    group_exact_with(src, |units| hasher.hash_one(units))
}

/// [`group_exact`] with a given hash (tests pass a constant one to make every content collide).
fn group_exact_with<S: Utf16Source>(src: &S, hash: impl Fn(&[u16]) -> u64) -> Vec<u32> {
    let n = src.count();
    let mut rep: Vec<u32> = (0..n as u32).collect();

    let candidates = shared_keys((0..n).collect(), |i| src.len_of(i));
    let candidates = shared_keys(candidates, |i| {
        let len = src.len_of(i);
        if len <= PREFIX_UNITS {
            // The prefix is the whole content: skip straight to the full-content stage.
            return (len, 0);
        }
        (len, src.with_prefix(i, PREFIX_UNITS, &hash))
    });

    // Each candidate is read and hashed once. Only when an earlier distinct content has the same
    // (length, hash), i.e. almost always a true duplicate, is it copied and compared with that
    // content, read again. Distinct contents are never copied or read twice.
    let mut first_with_key: AHashMap<(usize, u64), u32> = AHashMap::with_capacity(candidates.len());
    // Distinct contents sharing a key (only on a hash collision): first -> next.
    let mut next_with_key = vec![u32::MAX; n];
    let mut copy: Vec<u16> = Vec::new();
    for i in candidates {
        let key = src.with_units(i, |units| {
            let key = (units.len(), hash(units));
            if first_with_key.contains_key(&key) {
                copy.clear();
                copy.extend_from_slice(units);
            }
            key
        });
        let Some(&first) = first_with_key.get(&key) else {
            first_with_key.insert(key, i as u32);
            continue;
        };
        let mut at = first;
        loop {
            if src.with_units(at as usize, |units| *units == *copy) {
                rep[i] = at;
                break;
            }
            match next_with_key[at as usize] {
                u32::MAX => {
                    next_with_key[at as usize] = i as u32;
                    break;
                }
                next => at = next,
            }
        }
    }
    rep
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

    fn brute_force(items: &[Vec<u16>]) -> Vec<u32> {
        (0..items.len())
            .map(|i| items.iter().position(|x| *x == items[i]).unwrap() as u32)
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn matches_brute_force_across_stages(
            picks in proptest::collection::vec((0usize..4, 0usize..3, 0u16..3), 0..60)
        ) {
            // Lengths around the prefix size, a shared long prefix, and differences placed
            // before, at and after the prefix boundary, so every stage decides some items.
            let items: Vec<Vec<u16>> = picks
                .iter()
                .map(|&(len, at, unit)| {
                    let len = [3, PREFIX_UNITS, PREFIX_UNITS + 1, 3 * PREFIX_UNITS][len];
                    let mut v = vec![0x61u16; len];
                    let pos = [0, PREFIX_UNITS, len - 1][at].min(len - 1);
                    v[pos] = unit;
                    v
                })
                .collect();
            let mut arena = Utf16Arena::new();
            for item in &items {
                arena.push(item);
            }
            let expected = brute_force(&items);
            proptest::prop_assert_eq!(group_exact(&arena), expected.clone());
            // Every content colliding with every other.
            proptest::prop_assert_eq!(group_exact_with(&arena, |_| 7), expected);
        }
    }
}
