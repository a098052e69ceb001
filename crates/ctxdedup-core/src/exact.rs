//! Byte-exact grouping: contents are equal iff their UTF-16 code units are equal.
//!
//! Candidates are narrowed in stages, each cheaper than reading everything: contents of a length
//! no other content has are unique; then those whose (length, first [`PREFIX_UNITS`] units) is
//! unique. The rest are compared in place with the first content of their (length, prefix); only
//! where that finds distinct contents does a keyed in-memory hash (ahash, never exposed) of each
//! content's fingerprint split them further, and only where distinct contents share a fingerprint
//! (a source may make it lossy) the hash of their code units. A content joins a group only after
//! comparing equal unit by unit, so nothing, accidental or crafted, merges distinct contents; and
//! a content fails at most one comparison per level, so crafted collisions (equal prefixes, equal
//! lossy fingerprints) cost linear time. Only a true collision of the keyed 64-bit hash of code
//! units, which an input cannot be crafted to cause, chains distinct contents.
//! With sources that copy contents out of JavaScript, most contents are thus never copied in
//! full: duplicates are compared where they lie.

use crate::source::{units_as_bytes, Utf16Source, PREFETCH_DISTANCE, PREFIX_UNITS};
use crate::to_u32;
use ahash::{AHashMap, RandomState};
use std::collections::hash_map::Entry;

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

/// The contents met so far under one key of a [`Level`].
#[derive(Clone, Copy)]
enum Bucket {
    /// One distinct content so far: the next one is compared with it directly.
    One(u32),
    /// Distinct contents met here: the key is split by the next level's.
    Split,
}

/// Where [`Level::place`] put a content.
enum Placement {
    /// First under its key.
    New,
    /// Equal to the first content under its key.
    Duplicate(usize),
    /// Not equal to the first content under its key, whose bucket is now split: both go to the
    /// next level.
    Split(usize),
    /// Its key was split before: it goes to the next level.
    Next,
}

/// One level of refinement. Contents with equal keys are compared in place with the first one;
/// a key that turns out to hold distinct contents is split by the next, finer key. Every content
/// fails at most one comparison per level, so crafted collisions of a key (equal prefixes, equal
/// lossy fingerprints) cost linear time.
struct Level<K> {
    buckets: AHashMap<K, Bucket>,
}

impl<K: std::hash::Hash + Eq> Level<K> {
    fn new(capacity: usize) -> Self {
        Self {
            buckets: AHashMap::with_capacity(capacity),
        }
    }

    /// Places content `i` under `key`; `same(first)` says whether `i` equals content `first`.
    fn place(&mut self, key: K, i: usize, same: impl FnOnce(usize) -> bool) -> Placement {
        match self.buckets.entry(key) {
            Entry::Vacant(vacant) => {
                vacant.insert(Bucket::One(to_u32(i)));
                Placement::New
            }
            Entry::Occupied(mut occupied) => match *occupied.get() {
                Bucket::One(first) if same(first as usize) => Placement::Duplicate(first as usize),
                Bucket::One(first) => {
                    occupied.insert(Bucket::Split);
                    Placement::Split(first as usize)
                }
                Bucket::Split => Placement::Next,
            },
        }
    }

    /// The first content under `key`, if it has not been split.
    fn first(&self, key: &K) -> Option<usize> {
        match self.buckets.get(key) {
            Some(Bucket::One(first)) => Some(*first as usize),
            _ => None,
        }
    }
}

/// How many candidates ahead the comparison stage asks the source to prefetch.
const COMPARE_PREFETCH_DISTANCE: usize = 4;

/// [`group_exact`] with a given hash (tests pass a constant one to make every content collide).
fn group_exact_with<S: Utf16Source>(src: &S, hash: impl Fn(&[u8]) -> u64) -> Vec<u32> {
    let n = src.count();
    let mut rep: Vec<u32> = (0..to_u32(n)).collect();

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
            // The prefix is the whole content: the comparisons decide.
            return (len, 0);
        }
        (
            len,
            src.with_prefix(i, PREFIX_UNITS, |units| hash(units_as_bytes(units))),
        )
    });

    // Most contents left share their prefix with an equal content, so each is compared in place
    // with the first content of its (length, prefix), without copying or hashing either. Only a
    // (length, prefix) that holds distinct contents is split by the hash of each content's
    // fingerprint (read once), and only a fingerprint shared by distinct contents (a lossy
    // fingerprint, or a hash collision) by the hash of its code units.
    let mut by_prefix = Level::new(candidates.len());
    let mut finer = FinerLevels::new(n);
    for (k, &(i, prefix_key)) in candidates.iter().enumerate() {
        // Start loading a candidate a few places ahead, and the content it will be compared with.
        if let Some(&(ahead, ahead_key)) = candidates.get(k + COMPARE_PREFETCH_DISTANCE) {
            src.prefetch(ahead);
            if let Some(first) = by_prefix.first(&ahead_key) {
                src.prefetch(first);
            }
        }
        match by_prefix.place(prefix_key, i, |first| src.same_units(first, i)) {
            Placement::New => {}
            Placement::Duplicate(first) => rep[i] = to_u32(first),
            Placement::Split(first) => {
                finer.place(src, &hash, prefix_key, first, &mut rep);
                finer.place(src, &hash, prefix_key, i, &mut rep);
            }
            Placement::Next => finer.place(src, &hash, prefix_key, i, &mut rep),
        }
    }
    rep
}

/// The levels below (length, prefix): the fingerprint's hash, then the code units' hash, under
/// which distinct contents share a key only on a true hash collision (chained, told apart by
/// `same_units`).
struct FinerLevels {
    by_fingerprint: Level<(usize, u64, u64)>,
    by_units: AHashMap<(usize, u64, u64, u64), u32>,
    /// Distinct contents sharing a `by_units` key: first -> next.
    next_with_key: Vec<u32>,
}

impl FinerLevels {
    fn new(n: usize) -> Self {
        Self {
            by_fingerprint: Level::new(0),
            by_units: AHashMap::new(),
            next_with_key: vec![u32::MAX; n],
        }
    }

    /// Places content `i` of (length, prefix hash) `key`, pointing `rep[i]` at an earlier equal
    /// content if there is one.
    fn place<S: Utf16Source>(
        &mut self,
        src: &S,
        hash: impl Fn(&[u8]) -> u64,
        (len, prefix): (usize, u64),
        i: usize,
        rep: &mut [u32],
    ) {
        let key = (len, prefix, src.with_fingerprint(i, &hash));
        match self
            .by_fingerprint
            .place(key, i, |first| src.same_units(first, i))
        {
            Placement::New => {}
            Placement::Duplicate(first) => rep[i] = to_u32(first),
            Placement::Split(first) => {
                self.place_by_units(src, &hash, key, first, rep);
                self.place_by_units(src, &hash, key, i, rep);
            }
            Placement::Next => self.place_by_units(src, &hash, key, i, rep),
        }
    }

    fn place_by_units<S: Utf16Source>(
        &mut self,
        src: &S,
        hash: impl Fn(&[u8]) -> u64,
        (len, prefix, fingerprint): (usize, u64, u64),
        i: usize,
        rep: &mut [u32],
    ) {
        let units = src.with_units(i, |units| hash(units_as_bytes(units)));
        let key = (len, prefix, fingerprint, units);
        let Some(&first) = self.by_units.get(&key) else {
            self.by_units.insert(key, to_u32(i));
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
                    self.next_with_key[at as usize] = to_u32(i);
                    return;
                }
                next => at = next,
            }
        }
    }
}

#[cfg(test)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "test data: small indices and byte values"
)]
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

    /// A source whose fingerprint keeps only each unit's low byte; counts comparisons.
    struct LowBytes<'a>(&'a Utf16Arena, std::cell::Cell<usize>);

    impl<'a> LowBytes<'a> {
        fn new(arena: &'a Utf16Arena) -> Self {
            Self(arena, std::cell::Cell::new(0))
        }
    }

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
        fn same_units(&self, a: usize, b: usize) -> bool {
            self.1.set(self.1.get() + 1);
            self.0.same_units(a, b)
        }
    }

    #[test]
    fn crafted_fingerprint_collisions_cost_linear_comparisons() {
        // 400 distinct contents with one length, one prefix and one lossy fingerprint (they
        // differ only in high bytes), each twice, interleaved.
        let distinct: Vec<Vec<u16>> = (0..400u16)
            .map(|k| {
                let mut v = vec![0x61u16; PREFIX_UNITS + 40];
                v[PREFIX_UNITS + 10] = 0x62 | ((k % 200 + 1) << 8);
                v[PREFIX_UNITS + 30] = 0x63 | ((k / 200 + 1) << 8);
                v
            })
            .collect();
        let items: Vec<&Vec<u16>> = distinct.iter().chain(distinct.iter().rev()).collect();
        let mut arena = Utf16Arena::new();
        for item in &items {
            arena.push(item);
        }
        let source = LowBytes::new(&arena);
        let expected: Vec<u32> = (0..items.len())
            .map(|i| items.iter().position(|x| *x == items[i]).unwrap() as u32)
            .collect();
        assert_eq!(group_exact(&source), expected);
        // Without the split levels this is about n² / 2 = 320,000.
        assert!(
            source.1.get() <= 5 * items.len(),
            "{} comparisons",
            source.1.get()
        );
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
        assert_eq!(group_exact(&LowBytes::new(&arena)), vec![0, 1, 0, 3, 1]);
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
            let lossy = LowBytes::new(&arena);
            proptest::prop_assert_eq!(group_exact(&lossy), expected);
        }
    }
}
