//! Near duplicates of a new batch against a bounded window of recent contents (the ingestion
//! index's near-duplicate mode).
//!
//! The rules are the message stage's fuzzy rules ([`crate::fuzzy`]): contents become bags of
//! normalized lines (split on `\n`, JS `trim()` + `toLowerCase()`, empty lines dropped, at least
//! two lines to take part), and a content matches an earlier one when their first-five-line
//! fingerprints overlap by at least 3 (with multiplicity), their raw UTF-16 lengths have ratio
//! `>= 0.7` and their multiset line Jaccard is `>= threshold`.
//!
//! Batch items are decided in order, as if they arrived one by one: item `i` is compared with
//! every window content and with every earlier batch item that took part and matched nothing
//! (those are the items an index would add to its window as new). Its match is the candidate
//! with the highest similarity, ties going to the earliest (window contents first, oldest
//! first, then batch order). A matched item is not a candidate for later items.
//!
//! Work stays near-linear: a window content is normalized in full only if one of its first five
//! normalized lines also starts a batch item and its length is within the 0.7 ratio of some batch
//! item's (otherwise no fingerprint overlap or length ratio could pass); candidate pairs then come
//! from the same prefix-filtered inverted index as the message stage. Its work is bounded as the
//! message stage's ([`crate::fuzzy::CALL_VISITS`] and the constants after it): a call visits
//! postings and computes Jaccards exactly as the rule needs up to a call-wide allowance; past it,
//! each further item visits a bounded number of postings and computes a bounded number of
//! Jaccards, newest candidates first. Only batches where thousands of items share lines without
//! being near duplicates of one another get that far; an item can then miss its near copy or
//! match one that is not the most similar, never one below the threshold.
//!
//! A caller that keeps its window between calls holds it in a [`NearWindow`]: each content is
//! copied in once, with its first normalized lines in an index, and a call copies only its batch
//! and looks only at the contents the index offers (the same answers as [`near_duplicates`] on
//! the same contents).

use crate::fuzzy::{
    build_members, jaccard, line_doc_freq, may_link, probe_tokens, WorkBounds, FINGERPRINT_LINES,
    LENGTH_RATIO, WORK_BOUNDS,
};
use crate::js_text::normalize_line_into;
use crate::source::Utf16Source;
use crate::to_u32;
use ahash::{AHashMap, AHashSet};
use std::collections::VecDeque;
use std::sync::Arc;

/// The earlier content a batch item nearly duplicates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NearMatch {
    /// Window content `target` if `target < window.count()`, otherwise batch item
    /// `target - window.count()`.
    pub target: usize,
    /// Multiset line Jaccard between the item and the target, in `[threshold, 1]`.
    pub similarity: f64,
}

/// Window contents followed by batch contents, as one source.
struct Chain<'a, W, B> {
    window: &'a W,
    batch: &'a B,
}

impl<W: Utf16Source, B: Utf16Source> Utf16Source for Chain<'_, W, B> {
    fn count(&self) -> usize {
        self.window.count() + self.batch.count()
    }

    fn len_of(&self, index: usize) -> usize {
        match index.checked_sub(self.window.count()) {
            None => self.window.len_of(index),
            Some(b) => self.batch.len_of(b),
        }
    }

    fn with_units<R>(&self, index: usize, f: impl FnOnce(&[u16]) -> R) -> R {
        match index.checked_sub(self.window.count()) {
            None => self.window.with_units(index, f),
            Some(b) => self.batch.with_units(b, f),
        }
    }
}

/// The first `FINGERPRINT_LINES` non-empty normalized lines of `units`.
fn first_lines(units: &[u16], scratch: &mut Vec<u16>) -> Vec<Vec<u16>> {
    let mut lines = Vec::new();
    for line in units.split(|&u| u == 0x0A) {
        scratch.clear();
        normalize_line_into(line, scratch);
        if !scratch.is_empty() {
            lines.push(scratch.clone());
            if lines.len() == FINGERPRINT_LINES {
                break;
            }
        }
    }
    lines
}

/// Units read first when looking at the start of a window content: enough for five ordinary lines.
const START_UNITS: usize = 512;

/// Whether one of the first `FINGERPRINT_LINES` non-empty normalized lines of `units` is in
/// `starts`; `None` if `units` is a strict prefix of the content that ends before that is known.
fn starts_with_any(
    units: &[u16],
    complete: bool,
    starts: &AHashSet<Vec<u16>>,
    scratch: &mut Vec<u16>,
) -> Option<bool> {
    let mut seen = 0;
    let mut rest = units;
    loop {
        let (line, next) = match rest.iter().position(|&u| u == 0x0A) {
            Some(end) => (&rest[..end], Some(&rest[end + 1..])),
            // The last line is whole only if the content is.
            None if complete => (rest, None),
            None => return None,
        };
        scratch.clear();
        normalize_line_into(line, scratch);
        if !scratch.is_empty() {
            if starts.contains(scratch.as_slice()) {
                return Some(true);
            }
            seen += 1;
            if seen == FINGERPRINT_LINES {
                return Some(false);
            }
        }
        match next {
            Some(next) => rest = next,
            None => return Some(false),
        }
    }
}

/// Whether some length in `sorted` has ratio `>= LENGTH_RATIO` with `len` (the same test as the
/// fuzzy rule: `min / max`, computed in `f64`).
fn length_compatible(len: usize, sorted: &[usize]) -> bool {
    let ratio = |a: usize, b: usize| {
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        if hi == 0 {
            1.0
        } else {
            lo as f64 / hi as f64
        }
    };
    // The ratio grows towards `len` from both sides, so the nearest neighbours decide.
    let at = sorted.partition_point(|&x| x < len);
    [at.checked_sub(1), Some(at)]
        .into_iter()
        .flatten()
        .filter_map(|i| sorted.get(i))
        .any(|&other| ratio(len, other) >= LENGTH_RATIO)
}

/// For each batch item, its best earlier near-duplicate with similarity `>= threshold`, or
/// `None`. `exclude[i]` keeps batch item `i` out entirely (neither matched nor a candidate: e.g.
/// an exact duplicate); missing entries count as `false`. A `threshold` that is NaN or above 1
/// matches nothing. Work is bounded (see the module comment).
pub fn near_duplicates<W: Utf16Source, B: Utf16Source>(
    window: &W,
    batch: &B,
    exclude: &[bool],
    threshold: f64,
) -> Vec<Option<NearMatch>> {
    near_duplicates_bounded(window, batch, exclude, threshold, WORK_BOUNDS).0
}

/// [`near_duplicates`] under `bounds`, and the postings it visited.
fn near_duplicates_bounded<W: Utf16Source, B: Utf16Source>(
    window: &W,
    batch: &B,
    exclude: &[bool],
    threshold: f64,
    bounds: WorkBounds,
) -> (Vec<Option<NearMatch>>, usize) {
    let Some(BatchStarts {
        included,
        starts,
        lengths,
    }) = batch_starts(batch, exclude, threshold)
    else {
        return (vec![None; batch.count()], 0);
    };
    // Which window contents could match some batch item at all.
    let mut scratch = Vec::new();
    let relevant = (0..window.count()).filter(|&w| {
        let len = window.len_of(w);
        length_compatible(len, &lengths)
            && window
                .with_prefix(w, START_UNITS, |units| {
                    starts_with_any(units, units.len() == len, &starts, &mut scratch)
                })
                .unwrap_or_else(|| {
                    window.with_units(w, |units| {
                        starts_with_any(units, true, &starts, &mut scratch) == Some(true)
                    })
                })
    });
    search(window, batch, &included, relevant, threshold, bounds)
}

/// What a search needs of its batch before it looks at the window: the items that take part,
/// the first `FINGERPRINT_LINES` non-empty normalized lines they start with, and their lengths
/// (sorted). `None` when nothing can match (no item takes part, or the threshold is NaN or
/// above 1).
struct BatchStarts {
    included: Vec<usize>,
    starts: AHashSet<Vec<u16>>,
    lengths: Vec<usize>,
}

fn batch_starts<B: Utf16Source>(
    batch: &B,
    exclude: &[bool],
    threshold: f64,
) -> Option<BatchStarts> {
    if threshold.is_nan() || threshold > 1.0 {
        return None;
    }
    let included: Vec<usize> = (0..batch.count())
        .filter(|&i| !exclude.get(i).copied().unwrap_or(false))
        .collect();
    if included.is_empty() {
        return None;
    }
    let mut scratch = Vec::new();
    let mut starts: AHashSet<Vec<u16>> = AHashSet::new();
    let mut lengths = Vec::with_capacity(included.len());
    for &i in &included {
        let len = batch.len_of(i);
        // The first lines usually end within the first START_UNITS units: the rest of a long
        // item is not read here.
        let first = batch
            .with_prefix(i, START_UNITS, |units| {
                if units.len() == len {
                    return Some(first_lines(units, &mut scratch));
                }
                // Only the lines the prefix holds whole (up to its last line feed).
                let whole = &units[..units.iter().rposition(|&u| u == 0x0A)?];
                let lines = first_lines(whole, &mut scratch);
                (lines.len() == FINGERPRINT_LINES).then_some(lines)
            })
            .unwrap_or_else(|| batch.with_units(i, |units| first_lines(units, &mut scratch)));
        starts.extend(first);
        lengths.push(len);
    }
    lengths.sort_unstable();
    Some(BatchStarts {
        included,
        starts,
        lengths,
    })
}

/// The search of [`near_duplicates_bounded`] once the window contents that could match
/// (`relevant`, in window order) are known; `included` are the batch items taking part.
fn search<W: Utf16Source, B: Utf16Source>(
    window: &W,
    batch: &B,
    included: &[usize],
    relevant: impl Iterator<Item = usize>,
    threshold: f64,
    bounds: WorkBounds,
) -> (Vec<Option<NearMatch>>, usize) {
    let mut result = vec![None; batch.count()];
    let mut visits = 0;
    let chain = Chain { window, batch };
    let window_len = window.count();
    let participants: Vec<usize> = relevant
        .chain(included.iter().map(|&i| window_len + i))
        .collect();
    let members = build_members(&chain, &participants);
    if members.is_empty() {
        return (result, visits);
    }
    let doc_freq = line_doc_freq(&members);

    // Window members are candidates from the start; batch members (after them, in batch order)
    // are decided one by one and become candidates only if they match nothing.
    let mut postings: AHashMap<u64, Vec<u32>> = AHashMap::new();
    let mut seen = vec![u32::MAX; members.len()];
    // What the call may still spend exactly: `(visits, Jaccards)`.
    let mut left = (bounds.0, bounds.1);
    for (pos, member) in members.iter().enumerate() {
        let tokens = probe_tokens(member, threshold, &doc_freq);
        if member.index >= window_len {
            let mut best: Option<(usize, f64)> = None;
            let start = (left.0.max(bounds.2), left.1.max(bounds.3));
            let mut budget = start;
            'probe: for token in &tokens {
                let Some(list) = postings.get(token) else {
                    continue;
                };
                // Newest first: past the call's allowance, the bounds keep the recent candidates.
                for &other in list.iter().rev() {
                    if budget.0 == 0 {
                        break 'probe;
                    }
                    budget.0 -= 1;
                    let other = other as usize;
                    if seen[other] == to_u32(pos) {
                        continue;
                    }
                    seen[other] = to_u32(pos);
                    let candidate = &members[other];
                    if !may_link(member, candidate, threshold) {
                        continue;
                    }
                    if budget.1 == 0 {
                        break 'probe;
                    }
                    budget.1 -= 1;
                    let similarity = jaccard(member, candidate);
                    if similarity < threshold {
                        continue;
                    }
                    let better = match best {
                        None => true,
                        Some((target, s)) => {
                            similarity > s || (similarity == s && candidate.index < target)
                        }
                    };
                    if better {
                        best = Some((candidate.index, similarity));
                    }
                }
            }
            visits += start.0 - budget.0;
            left = (
                left.0.saturating_sub(start.0 - budget.0),
                left.1.saturating_sub(start.1 - budget.1),
            );
            if let Some((target, similarity)) = best {
                result[member.index - window_len] = Some(NearMatch { target, similarity });
                continue;
            }
        }
        for token in tokens {
            postings.entry(token).or_default().push(to_u32(pos));
        }
    }
    (result, visits)
}

/// A content of a [`NearWindow`]: its code units, when it arrived, and the hashes of its first
/// `FINGERPRINT_LINES` non-empty normalized lines (each once), computed when it enters.
#[derive(Debug)]
pub struct WindowContent {
    units: Box<[u16]>,
    added_ms: f64,
    first: Vec<u64>,
}

impl WindowContent {
    /// Bytes this content holds, with its share of the window's index (an estimate).
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + 2 * self.units.len()
            + self.first.len() * (std::mem::size_of::<u64>() + INDEX_ENTRY_BYTES)
            + ARC_BYTES
    }
}

/// Estimated bytes of one index entry (a sequence number in a list, a share of a table slot).
const INDEX_ENTRY_BYTES: usize = 48;
/// Estimated bytes of an `Arc` allocation besides its value, plus the window's pointer to it.
const ARC_BYTES: usize = 24;

/// Window contents taken along by a search, as a source.
struct Kept<'a>(&'a [Arc<WindowContent>]);

impl Utf16Source for Kept<'_> {
    fn count(&self) -> usize {
        self.0.len()
    }

    fn len_of(&self, index: usize) -> usize {
        self.0[index].units.len()
    }

    fn with_units<R>(&self, index: usize, f: impl FnOnce(&[u16]) -> R) -> R {
        f(&self.0[index].units)
    }
}

/// A window of recent contents kept between calls, oldest first: a content is copied in once
/// ([`NearWindow::push`]), with the hashes of its first normalized lines in an index, and
/// contents leave from the oldest end. A search ([`NearWindow::search`]) takes along only the
/// live contents that start with a line some batch item starts with (shared pointers, not
/// copies), so its cost follows the batch and the contents that could match it, not the
/// window's size; and it can run on another thread while the window changes.
#[derive(Debug, Default)]
pub struct NearWindow {
    contents: VecDeque<Arc<WindowContent>>,
    /// Sequence number of the oldest content (contents are numbered in push order).
    oldest: u64,
    /// For each first-line hash, the sequence numbers of the contents that start with such a
    /// line, oldest first. A search confirms each candidate's lines (hashes may collide).
    by_start: AHashMap<u64, VecDeque<u64>>,
    hasher: ahash::RandomState,
    units: usize,
    bytes: usize,
}

impl NearWindow {
    /// An empty window.
    pub fn new() -> Self {
        NearWindow::default()
    }

    /// Contents held.
    pub fn len(&self) -> usize {
        self.contents.len()
    }

    /// Whether the window holds no content.
    pub fn is_empty(&self) -> bool {
        self.contents.is_empty()
    }

    /// Code units held by all contents.
    pub fn units(&self) -> usize {
        self.units
    }

    /// Bytes of memory the window holds (an estimate: contents, index and bookkeeping).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Appends `units`, which arrived at `added_ms`, as the newest content.
    pub fn push(&mut self, units: &[u16], added_ms: f64) {
        let mut first: Vec<u64> = first_lines(units, &mut Vec::new())
            .iter()
            .map(|line| self.hasher.hash_one(line))
            .collect();
        let mut k = 0;
        while k < first.len() {
            if first[..k].contains(&first[k]) {
                first.remove(k);
            } else {
                k += 1;
            }
        }
        let content = WindowContent {
            units: units.into(),
            added_ms,
            first,
        };
        let seq = self.oldest + self.contents.len() as u64;
        for &hash in &content.first {
            self.by_start.entry(hash).or_default().push_back(seq);
        }
        self.units += units.len();
        self.bytes += content.bytes();
        self.contents.push_back(Arc::new(content));
    }

    /// Drops the `n` oldest contents (all of them if there are fewer).
    pub fn drop_oldest(&mut self, n: usize) {
        for _ in 0..n {
            let Some(content) = self.contents.pop_front() else {
                return;
            };
            // The oldest content is the oldest of every list it is in: at their fronts.
            for hash in &content.first {
                if let Some(list) = self.by_start.get_mut(hash) {
                    debug_assert_eq!(list.front(), Some(&self.oldest));
                    list.pop_front();
                    if list.is_empty() {
                        self.by_start.remove(hash);
                    }
                }
            }
            self.units -= content.units.len();
            self.bytes -= content.bytes();
            self.oldest += 1;
        }
    }

    /// A search of `batch` against the window as it is now. With `ttl_ms`, a content that
    /// arrived at `added_ms` is offered only while `added_ms + ttl_ms > now_ms` (as JavaScript
    /// computes it). Only the first lines of the batch items are read here.
    pub fn search<B: Utf16Source>(
        &self,
        batch: &B,
        exclude: &[bool],
        threshold: f64,
        now_ms: f64,
        ttl_ms: Option<f64>,
    ) -> WindowSearch {
        let mut search = WindowSearch {
            contents: Vec::new(),
            positions: Vec::new(),
            total: self.contents.len(),
        };
        let Some(BatchStarts {
            starts, lengths, ..
        }) = batch_starts(batch, exclude, threshold)
        else {
            return search;
        };
        let mut positions: Vec<usize> = starts
            .iter()
            .filter_map(|line| self.by_start.get(&self.hasher.hash_one(line)))
            .flatten()
            .map(|&seq| usize::try_from(seq - self.oldest).expect("a position in the window"))
            .collect();
        positions.sort_unstable();
        positions.dedup();
        let mut scratch = Vec::new();
        for position in positions {
            let content = &self.contents[position];
            let live = ttl_ms.map_or(true, |ttl| content.added_ms + ttl > now_ms);
            if live
                && length_compatible(content.units.len(), &lengths)
                && starts_with_any(&content.units, true, &starts, &mut scratch) == Some(true)
            {
                search.contents.push(Arc::clone(content));
                search.positions.push(position);
            }
        }
        search
    }
}

/// The window contents one search compares with ([`NearWindow::search`]), fixed when it was
/// made.
#[derive(Debug)]
pub struct WindowSearch {
    contents: Vec<Arc<WindowContent>>,
    /// Window position of each content.
    positions: Vec<usize>,
    /// Contents the window held.
    total: usize,
}

impl WindowSearch {
    /// Window contents the search held when it was made.
    pub fn window_len(&self) -> usize {
        self.total
    }

    /// Window positions of the contents it took along, ascending: the only window positions a
    /// match can name.
    pub fn positions(&self) -> &[usize] {
        &self.positions
    }

    /// Code units of the window contents it took along (the ones it may read in full).
    pub fn units(&self) -> usize {
        self.contents.iter().map(|c| c.units.len()).sum()
    }

    /// [`near_duplicates`] of `batch` (the batch the search was made for) against the window:
    /// the same answers as on a source of the window's contents without the skipped ones, except
    /// that a window `target` is the content's position in the whole window (oldest = 0) and a
    /// batch item's is [`WindowSearch::window_len`] + its index.
    pub fn run<B: Utf16Source>(
        &self,
        batch: &B,
        exclude: &[bool],
        threshold: f64,
    ) -> Vec<Option<NearMatch>> {
        let Some(BatchStarts { included, .. }) = batch_starts(batch, exclude, threshold) else {
            return vec![None; batch.count()];
        };
        let kept = Kept(&self.contents);
        let (mut found, _) = search(
            &kept,
            batch,
            &included,
            0..self.contents.len(),
            threshold,
            WORK_BOUNDS,
        );
        for m in found.iter_mut().flatten() {
            m.target = match self.positions.get(m.target) {
                Some(&position) => position,
                None => self.total + (m.target - self.contents.len()),
            };
        }
        found
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
    use proptest::prelude::*;

    fn text(lines: &[&str]) -> String {
        lines.join("\n")
    }

    #[test]
    fn finds_the_window_content_an_item_nearly_repeats() {
        let base: Vec<String> = (0..20).map(|i| format!("Line {i} of the file")).collect();
        let mut edited = base.clone();
        edited[10] = "an edited line".into();
        let other: Vec<String> = (0..20).map(|i| format!("unrelated {i}")).collect();
        let window = Utf16Arena::from_strs(&[other.join("\n"), base.join("\n")]);
        let batch = Utf16Arena::from_strs(&[edited.join("\n"), other.join("\n").to_uppercase()]);
        let got = near_duplicates(&window, &batch, &[], 0.85);
        assert_eq!(
            got,
            vec![
                Some(NearMatch {
                    target: 1,
                    similarity: 19.0 / 21.0
                }),
                // Normalization lowercases: identical bags.
                Some(NearMatch {
                    target: 0,
                    similarity: 1.0
                }),
            ]
        );
        assert_eq!(near_duplicates(&window, &batch, &[], 0.95)[0], None);
    }

    #[test]
    fn earlier_batch_items_count_unless_matched_or_excluded() {
        let a = text(&["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]);
        let b = text(&["alpha", "beta", "gamma", "delta", "epsilon", "eta"]);
        let window = Utf16Arena::new();
        let batch = Utf16Arena::from_strs(&[a.clone(), a.clone(), b.clone()]);
        // Item 1 matches item 0; item 2 matches item 0 (item 1 matched, so it is no candidate).
        let got = near_duplicates(&window, &batch, &[], 0.7);
        assert_eq!(got[0], None);
        assert_eq!(got[1].map(|m| m.target), Some(0));
        assert_eq!(got[2].map(|m| m.target), Some(0));
        // Excluding item 0: item 1 is first, item 2 matches it.
        let got = near_duplicates(&window, &batch, &[true], 0.7);
        assert_eq!(got[0], None);
        assert_eq!(got[1], None);
        assert_eq!(got[2].map(|m| m.target), Some(1));
    }

    #[test]
    fn ties_go_to_the_earliest_and_rules_are_the_fuzzy_ones() {
        let a = text(&["one", "two", "three", "four", "five", "six"]);
        let window = Utf16Arena::from_strs(&[a.clone(), a.clone()]);
        let batch = Utf16Arena::from_strs(&[a.as_str()]);
        assert_eq!(
            near_duplicates(&window, &batch, &[], 0.5),
            vec![Some(NearMatch {
                target: 0,
                similarity: 1.0
            })]
        );
        // Single-line contents never take part; NaN and > 1 match nothing.
        let one = Utf16Arena::from_strs(&["same line"]);
        assert_eq!(near_duplicates(&one, &one, &[], 0.5), vec![None]);
        assert_eq!(near_duplicates(&window, &batch, &[], f64::NAN), vec![None]);
        assert_eq!(near_duplicates(&window, &batch, &[], 1.5), vec![None]);
        // Equal bags, but raw lengths with ratio below 0.7 (trailing spaces on a line): no match.
        let padded = text(&[
            "one",
            "two",
            "three",
            "four",
            "five",
            &format!("six{}", " ".repeat(60)),
        ]);
        let batch = Utf16Arena::from_strs(&[padded]);
        assert_eq!(near_duplicates(&window, &batch, &[], 0.5), vec![None]);
    }

    #[test]
    fn long_first_lines_are_read_past_the_start() {
        // Five 400-unit lines: the fingerprint ends far beyond the first START_UNITS units.
        let long: Vec<String> = (0..8).map(|i| format!("{i}{}", "x".repeat(400))).collect();
        let mut edited = long.clone();
        edited[7] = "short".into();
        let window = Utf16Arena::from_strs(&[long.join("\n")]);
        let batch = Utf16Arena::from_strs(&[edited.join("\n")]);
        let got = near_duplicates(&window, &batch, &[], 0.7);
        assert_eq!(
            got,
            vec![Some(NearMatch {
                target: 0,
                similarity: 7.0 / 9.0
            })]
        );
        let mut scratch = Vec::new();
        let starts: AHashSet<Vec<u16>> = [u16s("b")].into_iter().collect();
        assert_eq!(
            starts_with_any(&u16s("a\nb\n"), false, &starts, &mut scratch),
            Some(true)
        );
        // An unterminated last line of a strict prefix may go on: not decided.
        assert_eq!(
            starts_with_any(&u16s("a\nb"), false, &starts, &mut scratch),
            None
        );
        assert_eq!(
            starts_with_any(&u16s("a\nbb"), true, &starts, &mut scratch),
            Some(false)
        );
        assert_eq!(
            starts_with_any(&u16s("1\n2\n\n3\n4\n5\nb"), false, &starts, &mut scratch),
            Some(false)
        );
    }

    #[test]
    fn a_batch_item_whose_first_lines_end_past_its_start_is_read_further() {
        // The batch item's fifth line is the one it shares with the window content's first
        // lines, and it straddles the first START_UNITS units: read whole, it makes the content
        // a candidate (fingerprint overlap 1 × 3, Jaccard 41/49).
        let long = format!("shared {}", "L".repeat(400));
        let tail: Vec<String> = (0..40).map(|i| format!("tail line {i}")).collect();
        let mut content = vec![
            long.clone(),
            long.clone(),
            long.clone(),
            "y".into(),
            "z".into(),
        ];
        content.extend(tail.iter().cloned());
        let mut item: Vec<String> = (0..4).map(|i| format!("{i}{}", "x".repeat(99))).collect();
        item.push(long);
        item.extend(tail);
        let item = item.join("\n");
        assert!(
            item.find("shared").unwrap() < START_UNITS
                && item.find("shared").unwrap() + 407 > START_UNITS
        );
        let batch = Utf16Arena::from_strs(&[item]);
        let expected = Some(NearMatch {
            target: 0,
            similarity: 41.0 / 49.0,
        });
        let mut kept = NearWindow::new();
        kept.push(&u16s(&content.join("\n")), 0.0);
        let search = kept.search(&batch, &[], 0.5, 0.0, None);
        assert_eq!(search.run(&batch, &[], 0.5), vec![expected]);
        let window = Utf16Arena::from_strs(&[content.join("\n")]);
        assert_eq!(near_duplicates(&window, &batch, &[], 0.5), vec![expected]);
    }

    fn u16s(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    /// An independent oracle on ASCII input (where JS `trim` + `toLowerCase` are Rust's
    /// `trim_matches` of ASCII whitespace + `to_ascii_lowercase`): every pair, sequentially.
    fn oracle(
        window: &[String],
        batch: &[String],
        exclude: &[bool],
        t: f64,
    ) -> Vec<Option<(usize, f64)>> {
        struct Doc {
            lines: Vec<String>,
            len: usize,
        }
        let doc = |s: &String| Doc {
            lines: s
                .split('\n')
                .map(|l| {
                    l.trim_matches(|c: char| c.is_ascii_whitespace())
                        .to_ascii_lowercase()
                })
                .filter(|l| !l.is_empty())
                .collect(),
            len: s.len(),
        };
        fn counts(lines: &[String]) -> std::collections::HashMap<&str, u32> {
            let mut m = std::collections::HashMap::new();
            for l in lines {
                *m.entry(l.as_str()).or_default() += 1;
            }
            m
        }
        let similar = |a: &Doc, b: &Doc| -> Option<f64> {
            if a.lines.len() < 2 || b.lines.len() < 2 {
                return None;
            }
            let (fa, fb) = (
                counts(&a.lines[..a.lines.len().min(5)]),
                counts(&b.lines[..b.lines.len().min(5)]),
            );
            let overlap: u32 = fa
                .iter()
                .map(|(l, n)| n * fb.get(l).copied().unwrap_or(0))
                .sum();
            let (lo, hi) = (a.len.min(b.len), a.len.max(b.len));
            let ratio = if hi == 0 { 1.0 } else { lo as f64 / hi as f64 };
            let (ca, cb) = (counts(&a.lines), counts(&b.lines));
            let inter: u32 = ca
                .iter()
                .map(|(l, n)| (*n).min(cb.get(l).copied().unwrap_or(0)))
                .sum();
            let union = a.lines.len() as u32 + b.lines.len() as u32 - inter;
            let jaccard = f64::from(inter) / f64::from(union);
            (overlap >= 3 && ratio >= 0.7 && jaccard >= t).then_some(jaccard)
        };
        let mut candidates: Vec<(usize, Doc)> = window
            .iter()
            .enumerate()
            .map(|(i, s)| (i, doc(s)))
            .collect();
        let mut out = vec![None; batch.len()];
        for (i, s) in batch.iter().enumerate() {
            if exclude.get(i).copied().unwrap_or(false) {
                continue;
            }
            let d = doc(s);
            let mut best: Option<(usize, f64)> = None;
            for (target, c) in &candidates {
                if let Some(sim) = similar(&d, c) {
                    if best.is_none_or(|(_, b)| sim > b) {
                        best = Some((*target, sim));
                    }
                }
            }
            out[i] = best;
            if best.is_none() {
                candidates.push((window.len() + i, d));
            }
        }
        out
    }

    /// Lines drawn from `alphabet` distinct ones (few: near duplicates are common; many: the
    /// first-lines filter has window contents to skip); case and leading spaces vary the raw text.
    fn doc_strategy(alphabet: u8) -> impl Strategy<Value = String> {
        // Some line kinds are 400 units long, so that the first five lines may end past the
        // START_UNITS the first-lines filter reads first.
        prop::collection::vec((0..alphabet, any::<bool>(), 0usize..3), 0..10).prop_map(|lines| {
            lines
                .into_iter()
                .map(|(x, upper, pad)| {
                    let tail = if x % 4 == 3 {
                        "-".repeat(400)
                    } else {
                        String::new()
                    };
                    let line = format!("{}line-{x}{tail}", " ".repeat(pad));
                    if upper {
                        line.to_uppercase()
                    } else {
                        line
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    type Case = (Vec<String>, Vec<String>);

    fn case_strategy() -> impl Strategy<Value = Case> {
        (3u8..24).prop_flat_map(|alphabet| {
            (
                prop::collection::vec(doc_strategy(alphabet), 0..25),
                prop::collection::vec(doc_strategy(alphabet), 1..25),
            )
        })
    }

    proptest! {
        #[test]
        fn matches_the_brute_force_oracle(
            (window, batch) in case_strategy(),
            exclude in prop::collection::vec(prop::bool::weighted(0.25), 0..25),
            t in prop::sample::select(vec![0.0, 0.3, 0.5, 0.6, 0.75, 0.85, 1.0]),
        ) {
            let got: Vec<Option<(usize, f64)>> = near_duplicates(
                &Utf16Arena::from_strs(&window),
                &Utf16Arena::from_strs(&batch),
                &exclude,
                t,
            )
            .into_iter()
            .map(|m| m.map(|m| (m.target, m.similarity)))
            .collect();
            prop_assert_eq!(got, oracle(&window, &batch, &exclude, t));
        }

        /// A kept window (contents pushed in, some dropped from the oldest end, some expired by
        /// a TTL, in any time order) answers as the brute-force oracle does on the contents it
        /// offers, at their window positions.
        #[test]
        fn a_kept_window_matches_the_oracle_on_the_contents_offered(
            (window, batch) in case_strategy(),
            dropped in 0usize..6,
            times in prop::collection::vec(0u8..8, 25),
            ttl in prop::option::of(1u8..6),
            exclude in prop::collection::vec(prop::bool::weighted(0.25), 0..25),
            t in prop::sample::select(vec![0.0, 0.5, 0.75, 0.85, 1.0, f64::NAN]),
        ) {
            let now = 8.0;
            let ttl = ttl.map(f64::from);
            let mut kept = NearWindow::new();
            for (k, content) in window.iter().enumerate() {
                kept.push(&u16s(content), f64::from(times[k]));
            }
            kept.drop_oldest(dropped);
            let held = &window[dropped.min(window.len())..];
            prop_assert_eq!(kept.len(), held.len());
            prop_assert_eq!(kept.units(), held.iter().map(String::len).sum::<usize>());
            // Offered: the held contents still live; `positions[k]` is offered content k's.
            let live = |p: usize| ttl.is_none_or(|ttl| f64::from(times[dropped + p]) + ttl > now);
            let positions: Vec<usize> = (0..held.len()).filter(|&p| live(p)).collect();
            let offered: Vec<String> = positions.iter().map(|&p| held[p].clone()).collect();
            let batch_arena = Utf16Arena::from_strs(&batch);
            let search = kept.search(&batch_arena, &exclude, t, now, ttl);
            prop_assert_eq!(search.window_len(), held.len());
            prop_assert!(search.positions().windows(2).all(|w| w[0] < w[1]));
            let got: Vec<Option<(usize, f64)>> = search
                .run(&batch_arena, &exclude, t)
                .into_iter()
                .map(|m| m.map(|m| (m.target, m.similarity)))
                .collect();
            for (target, _) in got.iter().flatten() {
                prop_assert!(*target >= held.len() || search.positions().contains(target));
            }
            let expected: Vec<Option<(usize, f64)>> = oracle(&offered, &batch, &exclude, t)
                .into_iter()
                .map(|m| m.map(|(k, s)| (positions.get(k).copied().unwrap_or(held.len() + k - offered.len()), s)))
                .collect();
            prop_assert_eq!(got, expected);
            kept.drop_oldest(usize::MAX);
            prop_assert_eq!((kept.units(), kept.bytes(), kept.by_start.len()), (0, 0, 0));
        }

        #[test]
        fn under_tiny_bounds_every_match_is_one_the_rule_allows(
            (window, batch) in case_strategy(),
            exclude in prop::collection::vec(prop::bool::weighted(0.25), 0..25),
            t in prop::sample::select(vec![0.0, 0.5, 0.75, 0.85]),
            bounds in (0usize..40, 0usize..6, 0usize..4, 0usize..3),
        ) {
            let (got, _) = near_duplicates_bounded(
                &Utf16Arena::from_strs(&window),
                &Utf16Arena::from_strs(&batch),
                &exclude,
                t,
                bounds,
            );
            let text = |k: usize| if k < window.len() { &window[k] } else { &batch[k - window.len()] };
            for (i, m) in got.iter().enumerate() {
                let Some(m) = m else { continue };
                prop_assert!(!exclude.get(i).copied().unwrap_or(false));
                // An earlier candidate: a window content, or an earlier batch item that matched nothing.
                let k = m.target;
                prop_assert!(k < window.len() + i);
                if k >= window.len() {
                    prop_assert!(got[k - window.len()].is_none());
                    prop_assert!(!exclude.get(k - window.len()).copied().unwrap_or(false));
                }
                // Near by the rule, with the similarity the oracle computes.
                let pair = oracle(&[text(k).clone()], &[batch[i].clone()], &[], t);
                prop_assert_eq!(pair[0], Some((0, m.similarity)));
            }
        }
    }

    #[test]
    fn items_sharing_lines_without_being_near_visit_a_bounded_number_of_postings() {
        // Every item starts with the same five lines and takes fifteen more from a pool of thirty:
        // no two are near duplicates at 0.85, and each item's probe tokens are shared by all the
        // earlier ones (the walk visited every earlier item: quadratic).
        let header: Vec<String> = (0..5).map(|i| format!("shared header line {i}")).collect();
        let mut state = 7u64;
        let batch: Vec<String> = (0..2000)
            .map(|_| {
                let mut lines = header.clone();
                for _ in 0..15 {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1);
                    lines.push(format!("pool line {}", (state >> 33) % 30));
                }
                lines.join("\n")
            })
            .collect();
        let arena = Utf16Arena::from_strs(&batch);
        let bounds = (1000, 100, 50, 5);
        let (got, visits) = near_duplicates_bounded(&Utf16Arena::new(), &arena, &[], 0.85, bounds);
        assert!(
            visits <= bounds.0 + batch.len() * bounds.2,
            "{visits} visits"
        );
        // Unbounded, the walk visits far more (what the bounds are for), with the same answer here.
        let (exact, all) =
            near_duplicates_bounded(&Utf16Arena::new(), &arena, &[], 0.85, WORK_BOUNDS);
        assert!(
            all > 10 * (bounds.0 + batch.len() * bounds.2),
            "{all} visits"
        );
        assert_eq!(got, exact);
    }
}
