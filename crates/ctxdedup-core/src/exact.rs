//! Byte-exact grouping: contents are equal iff their UTF-16 code units are equal.
//!
//! Candidates are narrowed in stages, each cheaper than reading everything: contents of a length
//! no other content has are unique; then those whose (length, first [`PREFIX_UNITS`] units) is
//! unique. The rest are compared in place with the first content of their (length, prefix); only
//! where that finds distinct contents does a keyed in-memory hash (ahash, never exposed) of each
//! content's fingerprint split them further. A content joins a group only after comparing equal
//! unit by unit, so a hash collision, accidental or crafted, or a lossy fingerprint can cost time
//! proportional to the colliding contents but never merges distinct ones; and no content is
//! compared with more than one content it is not equal to unless their full hashes collide.
//! With sources that copy contents out of JavaScript, most contents are thus never copied in
//! full: duplicates are compared where they lie.

use crate::source::{units_as_bytes, Utf16Source, PREFETCH_DISTANCE, PREFIX_UNITS};
use ahash::{AHashMap, RandomState};

/// Keeps the members of `candidates` whose key is shared with another candidate, with their keys.
fn shared_keys<K: std::hash::Hash + Eq>(
    candidates: impl IntoIterator<Item = usize>,
    mut key: impl FnMut(usize) -> K,
) -> Vec<(usize, K)> {
    let keyed: Vec<(usize, K)> = candidates.into_iter().map(|i| (i, key(i))).collect();
    let mut count: AHashMap<&K, u32> = AHashMap::with_capacity(keyed.len());
    for (_, k) in &keyed {
        *count.entry(k).or_insert(0) += 1;
    }
    let shared: Vec<bool> = keyed.iter().map(|(_, k)| count[k] > 1).collect();
    drop(count);
    keyed
        .into_iter()
        .zip(shared)
        .filter_map(|(item, shared)| shared.then_some(item))
        .collect()
}

/// For every item, the index of the first item with the same content (itself if it is first).
pub fn group_exact<S: Utf16Source>(src: &S) -> Vec<u32> {
    let hasher = RandomState::new();
    group_exact_with(src, |bytes| hasher.hash_one(bytes))
}

/// The contents seen so far with one (length, prefix hash).
enum Bucket {
    /// One distinct content so far: a new one is compared with it directly, with no hashing.
    One(u32),
    /// Distinct contents met here: from then on every content of the bucket is told apart by the
    /// hash of its full fingerprint, so none is compared with more than the contents it collides
    /// with in full.
    Hashed,
}

/// How many candidates ahead the comparison stage asks the source to prefetch.
const COMPARE_PREFETCH_DISTANCE: usize = 4;

/// [`group_exact`] with a given hash (tests pass a constant one to make every content collide).
fn group_exact_with<S: Utf16Source>(src: &S, hash: impl Fn(&[u8]) -> u64) -> Vec<u32> {
    let n = src.count();
    let mut rep: Vec<u32> = (0..n as u32).collect();

    let candidates = shared_keys(0..n, |i| src.len_of(i));
    let same_length: Vec<usize> = candidates.into_iter().map(|(i, _)| i).collect();
    let mut position = 0;
    let candidates = shared_keys(same_length.iter().copied(), |i| {
        // Keys are computed in order: start loading a prefix a few contents ahead.
        if let Some(&ahead) = same_length.get(position + PREFETCH_DISTANCE) {
            src.prefetch(ahead);
        }
        position += 1;
        let len = src.len_of(i);
        if len <= PREFIX_UNITS {
            // The prefix is the whole content: the full-content stage decides.
            return (len, 0);
        }
        (
            len,
            src.with_prefix(i, PREFIX_UNITS, |units| hash(units_as_bytes(units))),
        )
    });

    // Most contents left share their prefix with an equal content, so the first of each
    // (length, prefix) is compared with the next one in place (`same_units`), without copying
    // or hashing either. Only buckets that turn out to hold distinct contents fall back to
    // hashing full fingerprints, each content's once.
    let mut buckets: AHashMap<(usize, u64), Bucket> = AHashMap::with_capacity(candidates.len());
    let mut hashed = HashedGroups::new(n);
    for (k, &(i, prefix_key)) in candidates.iter().enumerate() {
        // Start loading a candidate a few places ahead, and the content it will be compared with.
        if let Some(&(ahead, ahead_key)) = candidates.get(k + COMPARE_PREFETCH_DISTANCE) {
            src.prefetch(ahead);
            if let Some(Bucket::One(first)) = buckets.get(&ahead_key) {
                src.prefetch(*first as usize);
            }
        }
        match buckets.get_mut(&prefix_key) {
            None => {
                buckets.insert(prefix_key, Bucket::One(i as u32));
            }
            Some(Bucket::One(first)) => {
                let first = *first as usize;
                if src.same_units(first, i) {
                    rep[i] = first as u32;
                } else {
                    hashed.add(src, &hash, prefix_key, first, &mut rep);
                    hashed.add(src, &hash, prefix_key, i, &mut rep);
                    buckets.insert(prefix_key, Bucket::Hashed);
                }
            }
            Some(Bucket::Hashed) => hashed.add(src, &hash, prefix_key, i, &mut rep),
        }
    }
    rep
}

/// Groups by (length, prefix hash, full fingerprint hash); distinct contents with one key (a
/// hash collision or a lossy fingerprint) are chained and told apart by `same_units`.
struct HashedGroups {
    first_with_key: AHashMap<(usize, u64, u64), u32>,
    /// Distinct contents sharing a key: first -> next.
    next_with_key: Vec<u32>,
}

impl HashedGroups {
    fn new(n: usize) -> Self {
        Self {
            first_with_key: AHashMap::new(),
            next_with_key: vec![u32::MAX; n],
        }
    }

    /// Adds item `i`, pointing `rep[i]` at an earlier equal content if there is one.
    fn add<S: Utf16Source>(
        &mut self,
        src: &S,
        hash: impl Fn(&[u8]) -> u64,
        (len, prefix): (usize, u64),
        i: usize,
        rep: &mut [u32],
    ) {
        let key = (len, prefix, src.with_fingerprint(i, hash));
        let Some(&first) = self.first_with_key.get(&key) else {
            self.first_with_key.insert(key, i as u32);
            return;
        };
        let mut at = first;
        loop {
            if src.same_units(at as usize, i) {
                rep[i] = at;
                return;
            }
            match self.next_with_key[at as usize] {
                u32::MAX => {
                    self.next_with_key[at as usize] = i as u32;
                    return;
                }
                next => at = next,
            }
        }
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

    /// A source whose fingerprint keeps only each unit's low byte.
    struct LowBytes<'a>(&'a Utf16Arena);

    impl Utf16Source for LowBytes<'_> {
        fn count(&self) -> usize {
            self.0.count()
        }
        fn len_of(&self, index: usize) -> usize {
            self.0.len_of(index)
        }
        fn with_units<R>(&self, index: usize, f: impl FnOnce(&[u16]) -> R) -> R {
            self.0.with_units(index, f)
        }
        fn with_fingerprint<R>(&self, index: usize, f: impl FnOnce(&[u8]) -> R) -> R {
            let bytes: Vec<u8> = self.0.get(index).iter().map(|&u| u as u8).collect();
            f(&bytes)
        }
    }

    #[test]
    fn a_lossy_fingerprint_never_merges_distinct_contents() {
        // Equal low bytes, distinct units; one shared prefix so the full stage decides.
        let mut items: Vec<Vec<u16>> = Vec::new();
        for high in [0x0000u16, 0x0100, 0x0000, 0x4100, 0x0100] {
            let mut v = vec![0x61u16; PREFIX_UNITS + 10];
            v[PREFIX_UNITS + 5] = high | 0x62;
            items.push(v);
        }
        let mut arena = Utf16Arena::new();
        for item in &items {
            arena.push(item);
        }
        assert_eq!(group_exact(&LowBytes(&arena)), vec![0, 1, 0, 3, 1]);
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
            proptest::prop_assert_eq!(group_exact_with(&arena, |_| 7), expected.clone());
            // A lossy fingerprint (one byte per unit, as the binding reads JS strings).
            let lossy = LowBytes(&arena);
            proptest::prop_assert_eq!(group_exact(&lossy), expected);
        }
    }
}
