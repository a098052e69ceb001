//! Access to a batch of contents as UTF-16 code units.
//!
//! The algorithms read contents through [`Utf16Source`] so that the binding can either stream
//! them straight out of JavaScript strings (synchronous calls, no full copy of the batch) or hand
//! over an owned [`Utf16Arena`] (asynchronous calls that run off the JavaScript thread).

/// Prefix length the algorithms read to tell contents apart cheaply; sources that copy contents
/// out of JavaScript keep this many leading units of each content at hand.
pub const PREFIX_UNITS: usize = 64;

/// How many contents ahead a pass that reads prefixes in order asks for
/// [`Utf16Source::prefetch`]: enough to overlap the memory latency of several contents with the
/// reading of the current one.
pub const PREFETCH_DISTANCE: usize = 8;

/// A batch of contents, each a sequence of UTF-16 code units.
pub trait Utf16Source {
    /// Number of contents in the batch.
    fn count(&self) -> usize;

    /// Length of content `index` in UTF-16 code units.
    fn len_of(&self, index: usize) -> usize;

    /// Calls `f` with the code units of content `index`.
    ///
    /// Implementations may reuse one buffer between calls, so `f` must not call back into the
    /// same source.
    fn with_units<R>(&self, index: usize, f: impl FnOnce(&[u16]) -> R) -> R;

    /// Calls `f` with at most the first `max_units` code units of content `index`. Sources that
    /// copy contents override this to copy only those units.
    fn with_prefix<R>(&self, index: usize, max_units: usize, f: impl FnOnce(&[u16]) -> R) -> R {
        self.with_units(index, |units| f(&units[..units.len().min(max_units)]))
    }

    /// Whether content `index` starts with `prefix`.
    fn starts_with(&self, index: usize, prefix: &[u16]) -> bool {
        prefix.len() <= self.len_of(index)
            && self.with_prefix(index, prefix.len(), |units| units == prefix)
    }

    /// Calls `f` with a fingerprint of content `index`: bytes that are equal whenever the
    /// contents are equal. It may be lossy (unequal contents may share a fingerprint), which lets
    /// a source that copies contents out of JavaScript read one byte per unit; whoever relies on
    /// it confirms a match with [`Utf16Source::same_units`]. The default is lossless: the units'
    /// bytes in native order.
    fn with_fingerprint<R>(&self, index: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        self.with_units(index, |units| f(units_as_bytes(units)))
    }

    /// A hint that content `index` will be read soon (sources whose contents are scattered in
    /// memory start loading it). Never affects results; the default does nothing.
    fn prefetch(&self, index: usize) {
        let _ = index;
    }

    /// Whether contents `a` and `b` have the same code units.
    fn same_units(&self, a: usize, b: usize) -> bool {
        if self.len_of(a) != self.len_of(b) {
            return false;
        }
        // `with_units` may reuse one buffer, so one side is copied first.
        let first = self.with_units(a, <[u16]>::to_vec);
        self.with_units(b, |units| *units == *first)
    }
}

/// The bytes of `units` in native byte order.
pub fn units_as_bytes(units: &[u16]) -> &[u8] {
    // SAFETY: any initialized u16 memory is valid as twice as many bytes, u8's alignment is 1,
    // and the slice borrows `units` for its whole lifetime.
    unsafe { std::slice::from_raw_parts(units.as_ptr().cast::<u8>(), std::mem::size_of_val(units)) }
}

/// An owned batch: all contents concatenated, plus the end offset of each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Utf16Arena {
    units: Vec<u16>,
    ends: Vec<usize>,
}

impl Utf16Arena {
    /// An empty arena.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds an arena from Rust strings (convenient in tests; real callers push UTF-16).
    pub fn from_strs<S: AsRef<str>>(items: &[S]) -> Self {
        let mut arena = Self::new();
        for item in items {
            arena.units.extend(item.as_ref().encode_utf16());
            arena.ends.push(arena.units.len());
        }
        arena
    }

    /// An empty arena with room for `units` code units in `count` contents.
    pub fn with_capacity(units: usize, count: usize) -> Self {
        Self {
            units: Vec::with_capacity(units),
            ends: Vec::with_capacity(count),
        }
    }

    /// An empty arena that reuses `buffer`'s allocation (its contents are discarded).
    pub fn from_buffer(mut buffer: Vec<u16>, count: usize) -> Self {
        buffer.clear();
        Self {
            units: buffer,
            ends: Vec::with_capacity(count),
        }
    }

    /// An arena of contents already laid out in `units`: content `i` ends at `ends[i]`.
    ///
    /// # Panics
    /// If `ends` decreases or goes past `units.len()`.
    pub fn from_parts(units: Vec<u16>, ends: Vec<usize>) -> Self {
        let mut start = 0;
        for &end in &ends {
            assert!(
                start <= end && end <= units.len(),
                "arena ends must rise within the units"
            );
            start = end;
        }
        Self { units, ends }
    }

    /// Gives the unit buffer back (for reuse by [`Utf16Arena::from_buffer`]).
    pub fn into_buffer(self) -> Vec<u16> {
        self.units
    }

    /// Appends one content written in place by `fill`, which gets room for `max_len` units and
    /// returns how many it wrote (saves a copy when the units come from elsewhere).
    pub fn push_with(&mut self, max_len: usize, fill: impl FnOnce(&mut [u16]) -> usize) {
        let start = self.units.len();
        self.units.resize(start + max_len, 0);
        let written = fill(&mut self.units[start..]).min(max_len);
        self.units.truncate(start + written);
        self.ends.push(self.units.len());
    }

    /// Appends one content.
    pub fn push(&mut self, units: &[u16]) {
        self.units.extend_from_slice(units);
        self.ends.push(self.units.len());
    }

    /// The code units of content `index`.
    pub fn get(&self, index: usize) -> &[u16] {
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.units[start..self.ends[index]]
    }
}

impl Utf16Source for Utf16Arena {
    fn count(&self) -> usize {
        self.ends.len()
    }

    fn len_of(&self, index: usize) -> usize {
        self.get(index).len()
    }

    fn with_units<R>(&self, index: usize, f: impl FnOnce(&[u16]) -> R) -> R {
        f(self.get(index))
    }

    fn same_units(&self, a: usize, b: usize) -> bool {
        self.get(a) == self.get(b)
    }
}

/// A view of some items of another source, in the order given by `indices`.
pub struct Subset<'a, S: Utf16Source> {
    pub(crate) inner: &'a S,
    pub(crate) indices: &'a [usize],
}

impl<S: Utf16Source> Utf16Source for Subset<'_, S> {
    fn count(&self) -> usize {
        self.indices.len()
    }

    fn len_of(&self, index: usize) -> usize {
        self.inner.len_of(self.indices[index])
    }

    fn with_units<R>(&self, index: usize, f: impl FnOnce(&[u16]) -> R) -> R {
        self.inner.with_units(self.indices[index], f)
    }

    fn with_prefix<R>(&self, index: usize, max_units: usize, f: impl FnOnce(&[u16]) -> R) -> R {
        self.inner.with_prefix(self.indices[index], max_units, f)
    }

    fn starts_with(&self, index: usize, prefix: &[u16]) -> bool {
        self.inner.starts_with(self.indices[index], prefix)
    }

    fn with_fingerprint<R>(&self, index: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        self.inner.with_fingerprint(self.indices[index], f)
    }

    fn prefetch(&self, index: usize) {
        self.inner.prefetch(self.indices[index]);
    }

    fn same_units(&self, a: usize, b: usize) -> bool {
        self.inner.same_units(self.indices[a], self.indices[b])
    }
}

#[cfg(test)]
mod tests {
    use super::{Utf16Arena, Utf16Source};

    #[test]
    fn an_arena_from_parts_reads_like_a_pushed_one() {
        let units: Vec<u16> = "abcdef".encode_utf16().collect();
        let arena = Utf16Arena::from_parts(units, vec![2, 2, 6]);
        assert_eq!(arena, Utf16Arena::from_strs(&["ab", "", "cdef"]));
        assert_eq!(arena.count(), 3);
    }

    #[test]
    #[should_panic(expected = "arena ends must rise within the units")]
    fn arena_parts_must_fit() {
        let _ = Utf16Arena::from_parts(vec![1, 2], vec![1, 3]);
    }
}
