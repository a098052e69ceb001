//! Near-duplicate grouping by multiset line Jaccard.
//!
//! A message becomes a bag of normalized lines (split on `\n`, JS `trim()` + `toLowerCase()`,
//! empty lines dropped; at least two lines to take part). Two messages are linked when
//! (1) their fingerprints (first five normalized lines, a multiset) overlap by at least 3,
//! counted with multiplicity; (2) `min(len) / max(len) >= 0.7` on raw UTF-16 lengths; and
//! (3) their multiset Jaccard is `>= threshold`. Groups are the connected components.
//!
//! Candidate pairs come from a prefix-filtered inverted index: with every line occurrence
//! `(line, k)` as a token and tokens ordered rarest first, two bags with Jaccard >= t must share
//! a token among the first `|A| - ceil(t|A|) + 1` tokens of each. That yields exactly the pairs
//! that can match without comparing all pairs, and pairs already in one component are skipped.

use crate::js_text::normalize_line_into;
use crate::source::Utf16Source;
use crate::union_find::UnionFind;
use crate::{huge_pages, to_u32};
use ahash::AHashMap;
use std::ops::ControlFlow;

/// Raw-length ratio below which two messages are never compared.
pub const LENGTH_RATIO: f64 = 0.7;
/// Lines per fingerprint.
pub const FINGERPRINT_LINES: usize = 5;
/// Minimum fingerprint overlap (with multiplicity) for two messages to be compared.
pub const FINGERPRINT_OVERLAP: u32 = 3;

/// A message taking part in the fuzzy pass.
#[derive(Debug, Clone)]
pub struct FuzzyMember {
    /// Message index in the batch.
    pub index: usize,
    /// Raw content length in UTF-16 units.
    pub raw_len: usize,
    fingerprint: Vec<u32>,
    /// Distinct line ids with their counts, sorted by line id.
    pub(crate) bag: Vec<(u32, u32)>,
    /// Number of normalized lines (the bag's total count).
    lines: usize,
    /// XOR of one bit per line occurrence (see [`set_bag`]): bits set in one member's sketch and
    /// not the other's bound how many occurrences the two do not share.
    sketch: [u64; 4],
}

/// A connected component of at least two messages, members ascending by index.
#[derive(Debug, Clone)]
pub struct FuzzyGroup {
    pub members: Vec<FuzzyMember>,
}

impl FuzzyGroup {
    /// Multiset Jaccard between two members (positions in `members`).
    pub fn similarity(&self, a: usize, b: usize) -> f64 {
        jaccard(&self.members[a], &self.members[b])
    }
}

/// Multiset Jaccard: `sum(min) / sum(max)` over line counts, summed as integers.
pub(crate) fn jaccard(a: &FuzzyMember, b: &FuzzyMember) -> f64 {
    let inter = intersection(&a.bag, &b.bag);
    let union = a.lines + b.lines - inter;
    inter as f64 / union as f64
}

fn intersection(a: &[(u32, u32)], b: &[(u32, u32)]) -> usize {
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += a[i].1.min(b[j].1) as usize;
                i += 1;
                j += 1;
            }
        }
    }
    inter
}

/// Fingerprint overlap: sum over distinct lines of countA * countB within the fingerprints.
fn fingerprint_overlap(a: &[u32], b: &[u32]) -> u32 {
    let mut total = 0;
    for (pos, line) in a.iter().enumerate() {
        if a[..pos].contains(line) {
            continue;
        }
        let count_a = to_u32(a.iter().filter(|x| *x == line).count());
        let count_b = to_u32(b.iter().filter(|x| *x == line).count());
        total += count_a * count_b;
    }
    total
}

fn ratio(a: usize, b: usize) -> f64 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    if hi == 0 {
        1.0
    } else {
        lo as f64 / hi as f64
    }
}

/// Distinct normalized lines, numbered in order of first appearance. Lines live in one buffer;
/// an open-addressing table (linear probing, at most half full) maps a line's hash to its id.
/// With millions of distinct lines every lookup is a cache miss, so callers hash the lines of a
/// message first and [`LineInterner::prefetch`] their slots a few lines ahead.
struct LineInterner {
    hasher: ahash::RandomState,
    /// `(hash, id + 1)`; 0 marks a free slot, so a new table is zeroed memory, which the system
    /// maps lazily instead of the table being written through once. Length is a power of two.
    slots: Vec<(u64, u32)>,
    /// Id -> end of the line in `units` (the start is the previous id's end).
    ends: Vec<usize>,
    units: Vec<u16>,
}

const EMPTY: u32 = 0;

/// Largest tables [`LineInterner::give_back`] keeps (slots, and line units: 1 MiB each).
const SPARE_MAX_SLOTS: usize = 1 << 16;
const SPARE_MAX_UNITS: usize = 1 << 19;

thread_local! {
    static SPARE: std::cell::RefCell<Option<LineInterner>> = const { std::cell::RefCell::new(None) };
}

impl LineInterner {
    fn with_capacity(lines: usize, units: usize) -> Self {
        let interner = Self {
            hasher: ahash::RandomState::new(),
            slots: vec![(0, EMPTY); (2 * lines).next_power_of_two().max(64)],
            ends: Vec::with_capacity(lines),
            units: Vec::with_capacity(units),
        };
        // Fresh memory, not touched yet (the zeroed table too): huge pages for the large ones.
        huge_pages::advise(&interner.slots);
        huge_pages::advise(&interner.ends);
        huge_pages::advise(&interner.units);
        interner
    }

    /// An empty interner for about `lines` lines, reusing the tables of an earlier call on
    /// this thread when they are small: a call on a short conversation otherwise spends much of
    /// its time allocating and zeroing them.
    fn take(lines: usize, units: usize) -> Self {
        let slots = (2 * lines).next_power_of_two().max(64);
        if slots <= SPARE_MAX_SLOTS {
            if let Some(mut spare) = SPARE.with(|spare| spare.borrow_mut().take()) {
                spare.slots.clear();
                spare.slots.resize(slots, (0, EMPTY));
                spare.ends.clear();
                spare.units.clear();
                spare.units.reserve(units);
                return spare;
            }
        }
        Self::with_capacity(lines, units)
    }

    /// Keeps this interner's tables for the next small call on this thread.
    fn give_back(self) {
        if self.slots.len() <= SPARE_MAX_SLOTS && self.units.capacity() <= SPARE_MAX_UNITS {
            SPARE.with(|spare| *spare.borrow_mut() = Some(self));
        }
    }

    fn hash(&self, line: &[u16]) -> u64 {
        self.hasher.hash_one(line)
    }

    fn line(&self, id: u32) -> &[u16] {
        let id = id as usize;
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.units[start..self.ends[id]]
    }

    /// Starts loading the slot a line with this hash will probe first.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "only the low bits of a hash pick a slot"
    )]
    fn prefetch(&self, hash: u64) {
        let slot = &self.slots[hash as usize & (self.slots.len() - 1)];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults, and the address is inside `slots`.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch((slot as *const (u64, u32)).cast(), _MM_HINT_T0);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    /// The id of `line`, whose hash is `hash`, numbering it if it is new.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "only the low bits of a hash pick a slot"
    )]
    fn intern(&mut self, line: &[u16], hash: u64) -> u32 {
        if 2 * (self.ends.len() + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            let (slot_hash, stored) = self.slots[at];
            if stored == EMPTY {
                let id = to_u32(self.ends.len());
                self.slots[at] = (hash, id + 1);
                let capacity = (self.units.capacity(), self.ends.capacity());
                self.units.extend_from_slice(line);
                self.ends.push(self.units.len());
                // A grown buffer's pages past the copied ones are not touched yet.
                if self.units.capacity() != capacity.0 {
                    huge_pages::advise(&self.units);
                }
                if self.ends.capacity() != capacity.1 {
                    huge_pages::advise(&self.ends);
                }
                return id;
            }
            if slot_hash == hash && self.line(stored - 1) == line {
                return stored - 1;
            }
            at = (at + 1) & mask;
        }
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "only the low bits of a hash pick a slot"
    )]
    fn grow(&mut self) {
        let doubled = vec![(0, EMPTY); 2 * self.slots.len()];
        huge_pages::advise(&doubled);
        let old = std::mem::replace(&mut self.slots, doubled);
        let mask = self.slots.len() - 1;
        for (hash, id) in old.into_iter().filter(|&(_, id)| id != EMPTY) {
            let mut at = hash as usize & mask;
            while self.slots[at].1 != EMPTY {
                at = (at + 1) & mask;
            }
            self.slots[at] = (hash, id);
        }
    }
}

/// Lines of one message ahead of the one being interned, whose slots are being loaded.
const PREFETCH_LINES: usize = 8;

/// Reusable buffers of [`line_ids`].
#[derive(Default)]
struct LineScratch {
    /// The normalized lines of the current message, one after another.
    units: Vec<u16>,
    /// End in `units` and hash of each line.
    lines: Vec<(usize, u64)>,
}

/// Appends the interned ids of the normalized lines of `units` (at most `max_lines` of them,
/// counting only lines that end with `\n` unless `whole`, i.e. `units` is the entire content)
/// to `ids`.
fn line_ids(
    units: &[u16],
    whole: bool,
    max_lines: usize,
    interner: &mut LineInterner,
    scratch: &mut LineScratch,
    ids: &mut Vec<u32>,
) {
    scratch.units.clear();
    scratch.lines.clear();
    let last_complete = if whole {
        units.len()
    } else {
        units.iter().rposition(|&u| u == 0x0A).unwrap_or(0)
    };
    let units = &units[..last_complete];
    if max_lines == 0 || (units.is_empty() && !whole) {
        return;
    }
    for_each_line(units, |line| {
        let start = scratch.units.len();
        normalize_line_into(line, &mut scratch.units);
        if scratch.units.len() > start {
            let hash = interner.hash(&scratch.units[start..]);
            scratch.lines.push((scratch.units.len(), hash));
        }
        if scratch.lines.len() == max_lines {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    for &(_, hash) in scratch.lines.iter().take(PREFETCH_LINES) {
        interner.prefetch(hash);
    }
    let mut start = 0;
    for (k, &(end, hash)) in scratch.lines.iter().enumerate() {
        if let Some(&(_, ahead)) = scratch.lines.get(k + PREFETCH_LINES) {
            interner.prefetch(ahead);
        }
        ids.push(interner.intern(&scratch.units[start..end], hash));
        start = end;
    }
}

/// Fills a member's bag and line count from the ids of all its normalized lines.
fn set_bag(member: &mut FuzzyMember, ids: &mut [u32]) {
    member.lines = ids.len();
    ids.sort_unstable();
    let mut bag: Vec<(u32, u32)> = Vec::with_capacity(ids.len());
    for &id in ids.iter() {
        match bag.last_mut() {
            Some((last, count)) if *last == id => *count += 1,
            _ => bag.push((id, 1)),
        }
    }
    let mut sketch = [0u64; 4];
    for &(line, count) in &bag {
        for k in 0..count {
            // Occurrence k of the line: a fixed mix of the pair picks one of the 256 bits.
            let bit = ((u64::from(line) << 32 | u64::from(k)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                >> 56) as usize;
            sketch[bit >> 6] ^= 1 << (bit & 63);
        }
    }
    member.bag = bag;
    member.sketch = sketch;
}

/// Normalizes the participants into bags of interned line ids; drops those with < 2 lines.
pub(crate) fn build_members<S: Utf16Source>(src: &S, participants: &[usize]) -> Vec<FuzzyMember> {
    // Sized up front (about one distinct line per 64 units): growing a table of millions of
    // lines moves every entry again, several times.
    let units: usize = participants.iter().map(|&i| src.len_of(i)).sum();
    let mut interner = LineInterner::take((units / 64).min(1 << 24), units.min(1 << 27));
    let mut scratch = LineScratch::default();
    let mut ids: Vec<u32> = Vec::new();
    let mut members = Vec::with_capacity(participants.len());
    for &index in participants {
        ids.clear();
        let raw_len = src.with_units(index, |units| {
            line_ids(
                units,
                true,
                usize::MAX,
                &mut interner,
                &mut scratch,
                &mut ids,
            );
            units.len()
        });
        if ids.len() < 2 {
            continue;
        }
        let mut member = FuzzyMember {
            index,
            raw_len,
            fingerprint: ids[..ids.len().min(FINGERPRINT_LINES)].to_vec(),
            bag: Vec::new(),
            lines: 0,
            sketch: [0; 4],
        };
        set_bag(&mut member, &mut ids);
        members.push(member);
    }
    interner.give_back();
    members
}

/// Calls `f` with each piece of `units` split on `\n` (U+000A), like
/// `units.split(|&u| u == 0x0A)`, but skips 16 units at a time while no newline is among them
/// (a comparison the compiler vectorizes): most of a message is not line ends. Stops as soon as
/// `f` breaks (a fingerprint needs only the first lines of a prefix).
fn for_each_line(units: &[u16], mut f: impl FnMut(&[u16]) -> ControlFlow<()>) {
    const CHUNK: usize = 16;
    let n = units.len();
    let (mut start, mut at) = (0, 0);
    while at < n {
        while let Some(chunk) = units.get(at..at + CHUNK) {
            let chunk: &[u16; CHUNK] = chunk.try_into().expect("a chunk of CHUNK units");
            if chunk.iter().fold(false, |any, &u| any | (u == 0x0A)) {
                break;
            }
            at += CHUNK;
        }
        let end = (at + CHUNK).min(n);
        while at < end && units[at] != 0x0A {
            at += 1;
        }
        if at < end {
            if f(&units[start..at]).is_break() {
                return;
            }
            at += 1;
            start = at;
        }
    }
    let _ = f(&units[start..]);
}

/// For each line id, how many members contain it (the rarity that orders probe tokens).
pub(crate) fn line_doc_freq(members: &[FuzzyMember]) -> Vec<u32> {
    let max_line = members
        .iter()
        .flat_map(|m| m.bag.iter().map(|&(line, _)| line + 1))
        .max()
        .unwrap_or(0);
    let mut doc_freq = vec![0u32; max_line as usize];
    for m in members {
        for &(line, _) in &m.bag {
            doc_freq[line as usize] += 1;
        }
    }
    doc_freq
}

/// Tokens a member is indexed and probed under. With `threshold > 0`: its prefix under the
/// global rarest-first token order. Otherwise (every candidate pair can match): the distinct
/// lines of its fingerprint, which any pair with overlap >= 3 shares.
pub(crate) fn probe_tokens(member: &FuzzyMember, threshold: f64, doc_freq: &[u32]) -> Vec<u64> {
    if threshold <= 0.0 {
        let mut lines = member.fingerprint.clone();
        lines.sort_unstable();
        lines.dedup();
        return lines.into_iter().map(|l| u64::from(l) << 32).collect();
    }
    let total = member.lines;
    // Minimum shared tokens, rounded down a hair so float error can only lengthen the prefix.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a whole, non-negative number; a huge one saturates and is clamped below"
    )]
    let min_overlap = ((threshold * total as f64) - 1e-9).ceil().max(0.0) as usize;
    let prefix_len = (total + 1).saturating_sub(min_overlap).clamp(1, total);
    let mut lines: Vec<(u32, u32)> = member.bag.clone();
    lines.sort_unstable_by_key(|&(line, _)| (doc_freq[line as usize], line));
    let mut tokens = Vec::with_capacity(prefix_len);
    'outer: for (line, count) in lines {
        for k in 0..count {
            if tokens.len() == prefix_len {
                break 'outer;
            }
            tokens.push((u64::from(line) << 32) | u64::from(k));
        }
    }
    tokens
}

/// Whether two members are linked in the match graph.
pub(crate) fn linked(a: &FuzzyMember, b: &FuzzyMember, threshold: f64) -> bool {
    may_link(a, b, threshold) && jaccard(a, b) >= threshold
}

/// The checks of [`linked`] that cost a few comparisons (line counts, raw lengths, fingerprints):
/// `false` means not linked; `true` leaves the Jaccard to compute.
pub(crate) fn may_link(a: &FuzzyMember, b: &FuzzyMember, threshold: f64) -> bool {
    let (lo, hi) = if a.lines < b.lines {
        (a.lines, b.lines)
    } else {
        (b.lines, a.lines)
    };
    // Jaccard <= lo / hi, and f64 division is monotone, so this never drops a real match.
    (lo as f64 / hi as f64) >= threshold
        && ratio(a.raw_len, b.raw_len) >= LENGTH_RATIO
        && fingerprint_overlap(&a.fingerprint, &b.fingerprint) >= FINGERPRINT_OVERLAP
        && sketches_may_reach(a, b, threshold)
}

/// Whether the sketches leave room for a Jaccard of `threshold`. Occurrences both members hold
/// cancel in the XOR of their sketches, so its set bits are at most the occurrences only one
/// holds: `|A ∩ B| = (|A| + |B| - |A Δ B|) / 2 <= (|A| + |B| - bits) / 2`, and `J >= t` needs
/// `|A ∩ B| >= t / (1 + t) * (|A| + |B|)`.
#[expect(clippy::cast_precision_loss, reason = "line counts far below 2^52")]
fn sketches_may_reach(a: &FuzzyMember, b: &FuzzyMember, threshold: f64) -> bool {
    if threshold <= 0.0 {
        return true;
    }
    let differ: u32 = (0..4)
        .map(|w| (a.sketch[w] ^ b.sketch[w]).count_ones())
        .sum();
    let total = a.lines + b.lines;
    let most = total.saturating_sub(differ as usize) as f64 / 2.0;
    most >= threshold / (1.0 + threshold) * total as f64 - 1e-9
}

/// Batches of up to this many participants take the lazy path ([`lazy_groups`]): every pair's
/// fingerprints are compared (at most 32,640 pairs of five ids), and only messages in a
/// candidate pair are normalized in full. Larger batches use the prefix filter.
pub const LAZY_MAX_PARTICIPANTS: usize = 256;

/// Units read to find a message's fingerprint before reading all of it: five lines usually fit
/// (94% of the messages of the real sessions in `shared/corpus`; the others are read again,
/// eight times further, which costs less than copying 2,048 units of every message).
const FINGERPRINT_READ: usize = 512;

/// Reads the fingerprint line ids of content `index` into `ids` (cleared first): its first
/// [`FINGERPRINT_LINES`] normalized lines, or all its lines if it has fewer. Reads a prefix of
/// `first_read` units, and a prefix eight times longer each time that holds too few complete
/// lines, so a message is usually read only as far as its fingerprint goes.
fn fingerprint_ids<S: Utf16Source>(
    src: &S,
    index: usize,
    first_read: usize,
    interner: &mut LineInterner,
    scratch: &mut LineScratch,
    ids: &mut Vec<u32>,
) {
    let len = src.len_of(index);
    let mut read = first_read;
    loop {
        ids.clear();
        let whole = len <= read;
        src.with_prefix(index, read, |units| {
            line_ids(units, whole, FINGERPRINT_LINES, interner, scratch, ids);
        });
        if ids.len() == FINGERPRINT_LINES || whole {
            return;
        }
        read = read.saturating_mul(8);
    }
}

/// Connected components (size >= 2) of the match graph over `participants` (ascending indices).
pub fn fuzzy_groups<S: Utf16Source>(
    src: &S,
    participants: &[usize],
    threshold: f64,
) -> Vec<FuzzyGroup> {
    // NaN or > 1 can never be reached by a similarity in [0, 1].
    if threshold.is_nan() || threshold > 1.0 {
        return Vec::new();
    }
    if participants.len() <= LAZY_MAX_PARTICIPANTS {
        lazy_groups(src, participants, threshold)
    } else {
        prefix_filter_groups(src, participants, threshold)
    }
}

/// The match graph of a small batch, normalizing lazily: fingerprints first (the first five
/// normalized lines, usually from the first few hundred units), then every pair that passes the
/// length ratio and the fingerprint overlap, whose two messages are normalized in full (once)
/// for the Jaccard. In a conversation most messages share no fingerprint with any other, and
/// their lines are never normalized at all.
fn lazy_groups<S: Utf16Source>(src: &S, participants: &[usize], threshold: f64) -> Vec<FuzzyGroup> {
    let units: usize = participants.iter().map(|&i| src.len_of(i)).sum();
    let mut interner = LineInterner::take((units / 64).min(1 << 24), units.min(1 << 27));
    let mut scratch = LineScratch::default();
    let mut ids: Vec<u32> = Vec::new();
    let mut members: Vec<FuzzyMember> = Vec::with_capacity(participants.len());
    for &index in participants {
        let raw_len = src.len_of(index);
        fingerprint_ids(
            src,
            index,
            FINGERPRINT_READ,
            &mut interner,
            &mut scratch,
            &mut ids,
        );
        // Fewer than two lines in the fingerprint: fewer than two lines at all.
        if ids.len() < 2 {
            continue;
        }
        members.push(FuzzyMember {
            index,
            raw_len,
            fingerprint: ids.clone(),
            bag: Vec::new(),
            lines: 0,
            sketch: [0; 4],
        });
    }

    let mut uf = UnionFind::new(members.len());
    let mut normalized = vec![false; members.len()];
    for i in 0..members.len() {
        for j in 0..i {
            let (a, b) = (&members[i], &members[j]);
            if ratio(a.raw_len, b.raw_len) < LENGTH_RATIO
                || fingerprint_overlap(&a.fingerprint, &b.fingerprint) < FINGERPRINT_OVERLAP
                || uf.find(i) == uf.find(j)
            {
                continue;
            }
            for k in [i, j] {
                if !normalized[k] {
                    normalized[k] = true;
                    ids.clear();
                    src.with_units(members[k].index, |units| {
                        line_ids(
                            units,
                            true,
                            usize::MAX,
                            &mut interner,
                            &mut scratch,
                            &mut ids,
                        );
                    });
                    set_bag(&mut members[k], &mut ids);
                }
            }
            if linked(&members[i], &members[j], threshold) {
                uf.union(i, j);
            }
        }
    }
    interner.give_back();
    into_groups(members, &mut uf)
}

/// The components of at least two members, members ascending.
fn into_groups(members: Vec<FuzzyMember>, uf: &mut UnionFind) -> Vec<FuzzyGroup> {
    let mut slots: Vec<Option<FuzzyMember>> = members.into_iter().map(Some).collect();
    uf.groups(2)
        .into_iter()
        .map(|g| FuzzyGroup {
            members: g
                .into_iter()
                .filter_map(|local| slots[local].take())
                .collect(),
        })
        .collect()
}

/// Units first read for a fingerprint in [`with_possible_candidates`]: five lines of code or
/// log output usually fit.
const FINGERPRINT_FIRST_READ: usize = 512;

/// The participants that may have a candidate pair at all: those whose fingerprint could
/// overlap another's by [`FINGERPRINT_OVERLAP`]. For each distinct fingerprint line, how many
/// fingerprints hold it and its largest count in one; a message whose lines, each weighted by
/// that largest count, cannot reach the overlap with any other fingerprint has no candidate, is
/// in no group, and is never normalized in full. Only fingerprints are read here (usually the
/// first few hundred units of each message).
fn with_possible_candidates<S: Utf16Source>(src: &S, participants: &[usize]) -> Vec<usize> {
    let mut interner = LineInterner::with_capacity(participants.len() * 2, 0);
    let mut scratch = LineScratch::default();
    let mut ids: Vec<u32> = Vec::new();
    // Per participant: its fingerprint ids (`None`: fewer than two lines, out of the pass).
    let mut fingerprints: Vec<Option<[u32; FINGERPRINT_LINES]>> =
        Vec::with_capacity(participants.len());
    let mut lens: Vec<u8> = Vec::with_capacity(participants.len());
    for &index in participants {
        fingerprint_ids(
            src,
            index,
            FINGERPRINT_FIRST_READ,
            &mut interner,
            &mut scratch,
            &mut ids,
        );
        if ids.len() < 2 {
            fingerprints.push(None);
            lens.push(0);
            continue;
        }
        let mut fingerprint = [0u32; FINGERPRINT_LINES];
        fingerprint[..ids.len()].copy_from_slice(&ids);
        fingerprints.push(Some(fingerprint));
        #[expect(
            clippy::cast_possible_truncation,
            reason = "at most FINGERPRINT_LINES ids"
        )]
        lens.push(ids.len() as u8);
    }
    // Line id -> (fingerprints holding it, largest count in one fingerprint).
    let mut seen: Vec<(u32, u32)> = vec![(0, 0); interner.ends.len()];
    for (fp, &n) in fingerprints.iter().zip(&lens) {
        if let Some(fp) = fp {
            for_distinct(&fp[..usize::from(n)], |line, count| {
                let entry = &mut seen[line as usize];
                entry.0 += 1;
                entry.1 = entry.1.max(count);
            });
        }
    }
    let mut out = Vec::with_capacity(participants.len());
    for ((fp, &n), &index) in fingerprints.iter().zip(&lens).zip(participants) {
        let Some(fp) = fp else {
            // Out of the pass either way: build_members drops it too.
            continue;
        };
        let mut bound = 0u32;
        for_distinct(&fp[..usize::from(n)], |line, count| {
            let (holders, largest) = seen[line as usize];
            if holders >= 2 {
                bound += count * largest;
            }
        });
        if bound >= FINGERPRINT_OVERLAP {
            out.push(index);
        }
    }
    out
}

/// Calls `f(line, count)` once per distinct line of a fingerprint.
fn for_distinct(fingerprint: &[u32], mut f: impl FnMut(u32, u32)) {
    for (pos, line) in fingerprint.iter().enumerate() {
        if !fingerprint[..pos].contains(line) {
            f(
                *line,
                to_u32(fingerprint.iter().filter(|x| *x == line).count()),
            );
        }
    }
}

/// Index entries and postings one call visits while probing before the per-message bounds apply
/// (a visit costs a few comparisons: the positional filter, line counts, lengths, fingerprints,
/// sketches; this many take about a quarter of a second).
pub const CALL_VISITS: usize = 1 << 25;

/// Multiset Jaccards one call computes in full before the per-message bounds apply.
pub const CALL_COMPARISONS: usize = 1 << 20;

/// Once a call has spent [`CALL_VISITS`], the visits each further message may spend.
pub const MESSAGE_VISITS: usize = 4096;

/// Once a call has spent [`CALL_COMPARISONS`], the Jaccards each further message may compute.
pub const MESSAGE_COMPARISONS: usize = 64;

/// No entry or posting (the end of a chain).
const END: u32 = u32::MAX;

/// The postings of one token that belong to one component: its members sharing the token,
/// chained through [`PrefixIndex::postings`]. `rep` is one of them (the component is found
/// through it, since components merge after the entry is made).
#[derive(Clone, Copy)]
struct Entry {
    rep: u32,
    head: u32,
    tail: u32,
    /// The token's next entry.
    next: u32,
}

/// The inverted index of [`prefix_filter_groups`], in flat buffers (no allocation per token):
/// token -> its first entry, entries chained per token, one entry per component as far as the
/// walks have found (two entries of one component are merged when a walk meets them).
struct PrefixIndex {
    first: AHashMap<u64, u32>,
    entries: Vec<Entry>,
    /// `(member, next posting of the same entry, the token's position among the member's
    /// tokens)`.
    postings: Vec<(u32, u32, u32)>,
    /// Per component root: `(walk, entry)` of the entry that walk met for it.
    met: Vec<(u64, u32)>,
    walk: u64,
    /// Entries and postings visited so far (what [`CALL_VISITS`] and [`MESSAGE_VISITS`] bound).
    visits: usize,
}

impl PrefixIndex {
    fn new(members: usize) -> Self {
        PrefixIndex {
            first: AHashMap::with_capacity(members * 4),
            entries: Vec::with_capacity(members * 4),
            postings: Vec::with_capacity(members * 4),
            met: vec![(0, END); members],
            walk: 0,
            visits: 0,
        }
    }

    /// Links member `i` with every earlier member that shares `token` (at position `at_i` of
    /// `i`'s tokens) and passes [`linked`], skipping whole entries of `i`'s component: a member
    /// of the component `i` has already joined is never visited again, so thousands of mutually
    /// near-identical messages cost a link each, not a visit of every earlier one.
    ///
    /// Positional filter: `i` meets a member first through the first token they share, if they
    /// can reach the threshold at all (the prefix filter's argument), so their overlap is at
    /// most what follows that token in either; a pair that cannot reach
    /// `t / (1 + t) * (|A| + |B|)` shared tokens is not compared. Thousands of messages sharing
    /// most lines but just below the threshold are then not all compared with each other.
    #[expect(
        clippy::too_many_arguments,
        reason = "the walk's state, passed apart to borrow it apart"
    )]
    fn probe(
        &mut self,
        token: u64,
        at_i: usize,
        i: usize,
        members: &[FuzzyMember],
        threshold: f64,
        uf: &mut UnionFind,
        seen: &mut [u32],
        budget: &mut (usize, usize),
    ) {
        let Some(&head) = self.first.get(&token) else {
            return;
        };
        self.walk += 1;
        let (mut previous, mut at) = (END, head);
        while at != END {
            if budget.0 == 0 {
                return;
            }
            budget.0 -= 1;
            self.visits += 1;
            let entry = self.entries[at as usize];
            let root = uf.find(entry.rep as usize);
            let (walk, met) = self.met[root];
            let merged = walk == self.walk;
            if merged {
                // A second entry of one component: its postings join the first, and it leaves
                // the chain (`previous` exists: the first entry came before it). Its members
                // are still checked below: the first entry's were, not these.
                let kept = &mut self.entries[met as usize];
                let tail = kept.tail;
                kept.tail = entry.tail;
                self.postings[tail as usize].1 = entry.head;
                self.entries[previous as usize].next = entry.next;
            } else {
                self.met[root] = (self.walk, at);
            }
            if root != uf.find(i) {
                let mut p = entry.head;
                while p != END {
                    if budget.0 == 0 || budget.1 == 0 {
                        return;
                    }
                    budget.0 -= 1;
                    self.visits += 1;
                    let (j, next, at_j) = self.postings[p as usize];
                    p = next;
                    let j = j as usize;
                    if seen[j] == to_u32(i) {
                        continue;
                    }
                    seen[j] = to_u32(i);
                    if !may_reach(&members[i], at_i, &members[j], at_j as usize, threshold)
                        || !may_link(&members[i], &members[j], threshold)
                    {
                        continue;
                    }
                    // Only a Jaccard computed in full counts against the comparison budget.
                    budget.1 -= 1;
                    if jaccard(&members[i], &members[j]) >= threshold {
                        // The rest of the entry is now `i`'s component.
                        uf.union(i, j);
                        break;
                    }
                }
            }
            if !merged {
                previous = at;
            }
            at = entry.next;
        }
    }

    /// Adds member `i` under `token`: into the token's first entry when that is `i`'s
    /// component, as a new first entry otherwise.
    fn insert(&mut self, token: u64, at_i: usize, i: usize, uf: &mut UnionFind) {
        let slot = to_u32(self.postings.len());
        self.postings.push((to_u32(i), END, to_u32(at_i)));
        let head = self.first.get(&token).copied();
        if let Some(head) = head {
            let entry = self.entries[head as usize];
            if uf.find(entry.rep as usize) == uf.find(i) {
                self.postings[entry.tail as usize].1 = slot;
                self.entries[head as usize].tail = slot;
                return;
            }
        }
        self.first.insert(token, to_u32(self.entries.len()));
        self.entries.push(Entry {
            rep: to_u32(i),
            head: slot,
            tail: slot,
            next: head.unwrap_or(END),
        });
    }
}

/// Whether members `a` and `b`, whose first shared token is at position `at_a` of `a`'s tokens
/// and `at_b` of `b`'s (rarest first, as [`probe_tokens`] orders them), can still have a
/// multiset Jaccard of `threshold`: their overlap is at most the tokens from there on in either.
#[expect(clippy::cast_precision_loss, reason = "line counts far below 2^52")]
fn may_reach(a: &FuzzyMember, at_a: usize, b: &FuzzyMember, at_b: usize, threshold: f64) -> bool {
    if threshold <= 0.0 {
        // Probe tokens are then fingerprint lines, in another order: no bound from positions.
        return true;
    }
    let most = (a.lines - at_a).min(b.lines - at_b);
    // J >= t  <=>  overlap >= t / (1 + t) * (|a| + |b|); lowered a hair so float error can
    // only keep a pair.
    most as f64 >= threshold / (1.0 + threshold) * (a.lines + b.lines) as f64 - 1e-9
}

/// The match graph through a prefix-filtered inverted index (see the module comment): every
/// message normalized once, candidate pairs without comparing all pairs, and members of a
/// component already joined skipped an entry at a time ([`PrefixIndex::probe`]).
///
/// Work is bounded, so no input makes the pass superlinear: a call spends up to [`CALL_VISITS`]
/// visits and [`CALL_COMPARISONS`] Jaccards exactly as the rule needs; past those, each further
/// message visits at most [`MESSAGE_VISITS`] entries and postings and computes at most
/// [`MESSAGE_COMPARISONS`] Jaccards (newest first). Only inputs where thousands of messages share
/// lines without being near duplicates of one another get that far; a near copy past the bounds
/// can then be missed, never wrongly matched.
fn prefix_filter_groups<S: Utf16Source>(
    src: &S,
    participants: &[usize],
    threshold: f64,
) -> Vec<FuzzyGroup> {
    prefix_filter_pass(src, participants, threshold, WORK_BOUNDS).0
}

/// How much work [`prefix_filter_pass`] does exactly, and then per message: `(call visits, call
/// Jaccards, message visits, message Jaccards)`.
pub(crate) type WorkBounds = (usize, usize, usize, usize);

/// The bounds of every call (tests pass smaller ones).
pub(crate) const WORK_BOUNDS: WorkBounds = (
    CALL_VISITS,
    CALL_COMPARISONS,
    MESSAGE_VISITS,
    MESSAGE_COMPARISONS,
);

/// [`prefix_filter_groups`] under `bounds`, and the entries and postings it visited.
fn prefix_filter_pass<S: Utf16Source>(
    src: &S,
    participants: &[usize],
    threshold: f64,
    bounds: WorkBounds,
) -> (Vec<FuzzyGroup>, usize) {
    let candidates = with_possible_candidates(src, participants);
    let members = build_members(src, &candidates);
    let doc_freq = line_doc_freq(&members);

    let mut uf = UnionFind::new(members.len());
    let mut index = PrefixIndex::new(members.len());
    let mut seen = vec![u32::MAX; members.len()];
    // What the call may still spend exactly (see `prefix_filter_groups`).
    let mut left = (bounds.0, bounds.1);
    for i in 0..members.len() {
        let tokens = probe_tokens(&members[i], threshold, &doc_freq);
        let start = (left.0.max(bounds.2), left.1.max(bounds.3));
        let mut budget = start;
        for (at, &token) in tokens.iter().enumerate() {
            index.probe(
                token,
                at,
                i,
                &members,
                threshold,
                &mut uf,
                &mut seen,
                &mut budget,
            );
        }
        left = (
            left.0.saturating_sub(start.0 - budget.0),
            left.1.saturating_sub(start.1 - budget.1),
        );
        for (at, &token) in tokens.iter().enumerate() {
            index.insert(token, at, i, &mut uf);
        }
    }
    (into_groups(members, &mut uf), index.visits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Utf16Arena;
    use proptest::prelude::*;

    fn member(lines: &[u32], raw_len: usize) -> FuzzyMember {
        let mut sorted = lines.to_vec();
        sorted.sort_unstable();
        let mut bag: Vec<(u32, u32)> = Vec::new();
        for id in sorted {
            match bag.last_mut() {
                Some((l, c)) if *l == id => *c += 1,
                _ => bag.push((id, 1)),
            }
        }
        let mut member = FuzzyMember {
            index: 0,
            raw_len,
            fingerprint: lines[..lines.len().min(5)].to_vec(),
            bag: Vec::new(),
            lines: 0,
            sketch: [0; 4],
        };
        set_bag(&mut member, &mut lines.to_vec());
        assert_eq!((member.bag.clone(), member.lines), (bag, lines.len()));
        member
    }

    #[test]
    fn interner_numbers_lines_in_order_across_growth() {
        let mut interner = LineInterner::with_capacity(0, 0);
        let line = |k: u32| -> Vec<u16> { format!("line {}", k % 5000).encode_utf16().collect() };
        for k in 0..20_000u32 {
            let l = line(k);
            let h = interner.hash(&l);
            interner.prefetch(h);
            assert_eq!(interner.intern(&l, h), k % 5000);
        }
        assert_eq!(interner.ends.len(), 5000);
        // A forced collision: same hash, different lines, both kept apart.
        let (a, b): (Vec<u16>, Vec<u16>) =
            ("x".encode_utf16().collect(), "y".encode_utf16().collect());
        let (ia, ib) = (interner.intern(&a, 42), interner.intern(&b, 42));
        assert_ne!(ia, ib);
        assert_eq!(interner.intern(&b, 42), ib);
        assert_eq!(interner.line(ia), a.as_slice());
    }

    proptest! {
        /// Long lines and blank runs put fingerprints beyond the first read of the lazy path.
        #[test]
        fn lazy_path_reads_fingerprints_past_its_first_read(
            docs in prop::collection::vec(
                prop::collection::vec((0u8..6, prop::sample::select(vec![0usize, 3, 700, 1500])), 1..10),
                2..12),
            t in prop::sample::select(vec![0.0, 0.5, 0.85]),
        ) {
            let texts: Vec<String> = docs.iter()
                .map(|d| d.iter().map(|&(x, pad)| if x == 0 { " ".repeat(pad) } else { format!("L{x}{}", "y".repeat(pad)) })
                    .collect::<Vec<_>>().join("\n"))
                .collect();
            let arena = Utf16Arena::from_strs(&texts);
            let all: Vec<usize> = (0..texts.len()).collect();
            let index_groups = |groups: Vec<FuzzyGroup>| -> Vec<Vec<usize>> {
                groups.iter().map(|g| g.members.iter().map(|m| m.index).collect()).collect()
            };
            let members = build_members(&arena, &all);
            let expected: Vec<Vec<usize>> = brute_force(&members, t)
                .into_iter()
                .map(|g| g.into_iter().map(|local| members[local].index).collect())
                .collect();
            prop_assert_eq!(index_groups(lazy_groups(&arena, &all, t)), expected.clone());
            prop_assert_eq!(index_groups(prefix_filter_groups(&arena, &all, t)), expected);
        }

        #[test]
        fn lines_split_like_slice_split(
            units in prop::collection::vec(prop::sample::select(vec![0x0Au16, 0x61, 0x20, 0x0D, 0x10A]), 0..80),
        ) {
            let mut got: Vec<Vec<u16>> = Vec::new();
            for_each_line(&units, |line| {
                got.push(line.to_vec());
                ControlFlow::Continue(())
            });
            let expected: Vec<Vec<u16>> = units.split(|&u| u == 0x0A).map(<[u16]>::to_vec).collect();
            prop_assert_eq!(&got, &expected);
            // Stopping after k lines gives the first k.
            for k in 1..=expected.len() {
                let mut first: Vec<Vec<u16>> = Vec::new();
                for_each_line(&units, |line| {
                    first.push(line.to_vec());
                    if first.len() == k { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
                });
                prop_assert_eq!(&first[..], &expected[..k]);
            }
        }
    }

    #[test]
    fn interner_reused_between_calls_starts_empty() {
        let line: Vec<u16> = "a line".encode_utf16().collect();
        let mut first = LineInterner::take(10, 100);
        let h = first.hash(&line);
        assert_eq!(first.intern(&line, h), 0);
        let other: Vec<u16> = "another".encode_utf16().collect();
        let h2 = first.hash(&other);
        assert_eq!(first.intern(&other, h2), 1);
        first.give_back();
        let mut second = LineInterner::take(10, 100);
        let h2 = second.hash(&other);
        assert_eq!(second.intern(&other, h2), 0);
        assert_eq!(second.line(0), other.as_slice());
    }

    #[test]
    fn fingerprint_overlap_counts_multiplicity() {
        assert_eq!(fingerprint_overlap(&[1, 1, 2, 3, 4], &[1, 1, 5, 6, 7]), 4);
        assert_eq!(fingerprint_overlap(&[9, 9, 9, 2, 3], &[9, 4, 5, 6, 7]), 3);
        assert_eq!(fingerprint_overlap(&[8, 8, 2, 3, 4], &[8, 5, 6, 7, 1]), 2);
    }

    #[test]
    fn multiset_jaccard() {
        let a = member(&[1, 1, 2, 3], 100);
        let b = member(&[1, 2, 2, 4], 100);
        // min: 1(line1)+1(line2) = 2; max: 2+2+1+1 = 6
        assert_eq!(jaccard(&a, &b), 2.0 / 6.0);
    }

    #[test]
    fn groups_near_copies() {
        let base: Vec<String> = (0..20)
            .map(|i| format!("line number {i} of the file"))
            .collect();
        let mut edited = base.clone();
        edited[10] = "an edited line".into();
        let other: Vec<String> = (0..20).map(|i| format!("unrelated {i}")).collect();
        let arena = Utf16Arena::from_strs(&[base.join("\n"), other.join("\n"), edited.join("\n")]);
        let groups = fuzzy_groups(&arena, &[0, 1, 2], 0.85);
        assert_eq!(groups.len(), 1);
        let idx: Vec<usize> = groups[0].members.iter().map(|m| m.index).collect();
        assert_eq!(idx, vec![0, 2]);
        assert_eq!(groups[0].similarity(0, 1), 19.0 / 21.0);
    }

    /// The rule of the module comment, without any of the filters that only skip work.
    fn rule(a: &FuzzyMember, b: &FuzzyMember, threshold: f64) -> bool {
        ratio(a.raw_len, b.raw_len) >= LENGTH_RATIO
            && fingerprint_overlap(&a.fingerprint, &b.fingerprint) >= FINGERPRINT_OVERLAP
            && jaccard(a, b) >= threshold
    }

    /// Quadratic reference: every pair checked.
    fn brute_force(members: &[FuzzyMember], threshold: f64) -> Vec<Vec<usize>> {
        let mut uf = UnionFind::new(members.len());
        for i in 0..members.len() {
            for j in 0..i {
                if rule(&members[i], &members[j], threshold) {
                    uf.union(i, j);
                }
            }
        }
        uf.groups(2)
    }

    /// The groups of both paths equal the brute force's, member indices ascending, with the
    /// similarities of the full normalization.
    fn assert_components(texts: &[String], t: f64) -> Result<(), TestCaseError> {
        let arena = Utf16Arena::from_strs(texts);
        let all: Vec<usize> = (0..texts.len()).collect();
        let members = build_members(&arena, &all);
        let expected: Vec<Vec<usize>> = brute_force(&members, t)
            .into_iter()
            .map(|g| g.into_iter().map(|local| members[local].index).collect())
            .collect();
        for groups in [
            prefix_filter_groups(&arena, &all, t),
            lazy_groups(&arena, &all, t),
        ] {
            let got: Vec<Vec<usize>> = groups
                .iter()
                .map(|g| g.members.iter().map(|m| m.index).collect())
                .collect();
            prop_assert_eq!(&got, &expected);
            // Similarities from the bags of either path equal the full normalization's.
            for g in &groups {
                for a in 0..g.members.len() {
                    for b in 0..g.members.len() {
                        let full = |m: &FuzzyMember| {
                            members.iter().position(|x| x.index == m.index).unwrap()
                        };
                        let (fa, fb) = (full(&g.members[a]), full(&g.members[b]));
                        prop_assert_eq!(g.similarity(a, b), jaccard(&members[fa], &members[fb]));
                    }
                }
            }
        }
        // Past tiny bounds a link can be missed, never made: each group lies in one component.
        let (bounded, _) = prefix_filter_pass(&arena, &all, t, (0, 0, 3, 1));
        for g in &bounded {
            let first = g.members[0].index;
            let home = expected.iter().find(|e| e.contains(&first));
            prop_assert!(home.is_some_and(|e| g.members.iter().all(|m| e.contains(&m.index))));
        }
        Ok(())
    }

    /// `n` texts of 100 lines: the same `100 - own` lines, then `own` lines of their own.
    fn shared_with_own(n: usize, own: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                (0..100)
                    .map(|k| {
                        if k >= 100 - own {
                            format!("own {i} {k}")
                        } else {
                            format!("shared line {k}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect()
    }

    #[test]
    fn mutually_near_identical_messages_are_near_linear() {
        // 99 shared lines and one of its own each: every pair is linked. Probing used to visit
        // every earlier member sharing a token (quadratic: ~9 s at 16k); now a component is
        // skipped an entry at a time. The test bounds the visits (a test never times).
        let texts = shared_with_own(3000, 1);
        let arena = Utf16Arena::from_strs(&texts);
        let all: Vec<usize> = (0..texts.len()).collect();
        let (groups, visits) = prefix_filter_pass(&arena, &all, 0.85, WORK_BOUNDS);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].members.len(), 3000);
        // 16 probe tokens each: a handful of visits per token, not one per earlier message.
        assert!(visits < 3000 * 16 * 4, "{visits} visits");
    }

    #[test]
    fn messages_sharing_lines_below_the_threshold_are_bounded() {
        // 91 shared lines and 9 of its own each: every pair shares probe lines, and none
        // reaches 0.85 (91 / 109). The positional filter rules most pairs out without a
        // comparison, and the budgets bound what is left.
        let n = 3000;
        let texts = shared_with_own(n, 9);
        let arena = Utf16Arena::from_strs(&texts);
        let all: Vec<usize> = (0..n).collect();
        // Bounds scaled down (the call's first 100,000 visits exact, then 500 a message).
        let bounds = (100_000, 1000, 500, 10);
        let (groups, visits) = prefix_filter_pass(&arena, &all, 0.85, bounds);
        assert!(groups.is_empty());
        assert!(visits <= bounds.0 + n * bounds.2, "{visits} visits");
        let (_, unbounded) = prefix_filter_pass(&arena, &all, 0.85, (usize::MAX, usize::MAX, 0, 0));
        assert!(
            unbounded > 4 * visits,
            "the case should need the bounds: {unbounded} visits"
        );
    }

    proptest! {
        #[test]
        fn the_cheap_checks_never_refuse_a_pair_the_rule_links(
            a in prop::collection::vec(0u32..12, 2..40),
            b in prop::collection::vec(0u32..12, 2..40),
            t in prop::sample::select(vec![0.0, 0.2, 0.5, 0.7, 0.85, 0.95, 1.0]),
        ) {
            let (a, b) = (member(&a, 100), member(&b, 100));
            if rule(&a, &b, t) {
                prop_assert!(may_link(&a, &b, t));
            }
            prop_assert_eq!(linked(&a, &b, t), rule(&a, &b, t));
        }

        #[test]
        fn families_of_near_copies_form_the_brute_force_components(
            // (family, edited line, edit) per message: copies of a few base texts with one line
            // changed, so components grow by many links and index entries merge.
            docs in prop::collection::vec((0u8..3, 0usize..10, 0u8..4), 1..80),
            t in prop::sample::select(vec![0.5, 0.75, 0.85, 0.9]),
        ) {
            let texts: Vec<String> = docs.iter()
                .map(|&(family, at, edit)| {
                    (0..10)
                        .map(|k| if k == at { format!("edit-{edit}") } else { format!("f{family}-line-{k}") })
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .collect();
            assert_components(&texts, t)?;
        }

        #[test]
        fn prefix_filter_finds_every_component(
            docs in prop::collection::vec(prop::collection::vec(0u8..8, 2..12), 1..40),
            t in prop::sample::select(vec![0.0, 0.3, 0.5, 0.6, 0.75, 0.85, 1.0]),
        ) {
            let texts: Vec<String> = docs.iter()
                .map(|d| d.iter().map(|x| format!("line-{x}")).collect::<Vec<_>>().join("\n"))
                .collect();
            assert_components(&texts, t)?;
        }
    }
}
