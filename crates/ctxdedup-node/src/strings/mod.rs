//! Raw string reading: every read of a V8 string in the binding is in this module (arrays of
//! strings read lazily as UTF-16 code units, with prefetching and a pool of large buffers; one
//! string into a reused buffer, [`Units`]).
//! Every `unsafe fn` states its contract under `# Safety`, every unsafe block why it holds
//! under `SAFETY:`.

mod units;

pub use units::Units;

use ctxdedup_core::source::PREFIX_UNITS;
use ctxdedup_core::{to_u32, Utf16Arena, Utf16Source};
use napi::bindgen_prelude::*;
use napi::sys;
use std::cell::{Cell, RefCell};
use std::ptr;

/// Room a prefix read needs: the prefix plus napi's terminator.
const PREFIX_STRIDE: usize = PREFIX_UNITS + 1;

/// Marks a prefix not read yet in [`JsStrings::prefix_at`].
const UNREAD: usize = usize::MAX;

/// Appends up to [`PREFIX_UNITS`] leading units of string `value` to `prefixes` and returns how
/// many it appended, or `None` if `value` is not a string.
///
/// # Safety
/// `env` and `value` must be the current call's environment and a value of it.
unsafe fn append_prefix(
    env: sys::napi_env,
    value: sys::napi_value,
    prefixes: &mut Vec<u16>,
) -> Option<usize> {
    // SAFETY: the caller upholds this function's contract (`env` and the handles belong to the current call); every pointer given to napi points into memory reserved for the length passed with it.
    unsafe {
        let start = prefixes.len();
        prefixes.reserve(PREFIX_STRIDE);
        let mut copied = 0usize;
        // The room is spare capacity: napi writes the units and a terminator, which the next prefix
        // overwrites.
        let status = sys::napi_get_value_string_utf16(
            env,
            value,
            prefixes.as_mut_ptr().add(start),
            PREFIX_STRIDE,
            &mut copied,
        );
        if status != sys::Status::napi_ok {
            return None;
        }
        // napi initialized `copied` (<= PREFIX_UNITS) units.
        prefixes.set_len(start + copied);
        Some(copied)
    }
}

/// The strings of a JS array, valid for the duration of one native call.
///
/// Built either by reading every string's length up front ([`FromNapiValue`]), or from lengths
/// the caller measured in JavaScript ([`StringHandles::with_lengths`]), where `s.length` is
/// almost free; then a string no algorithm needs is never touched at all. Given lengths are
/// trusted only as far as no read disproves them: every read that reaches a string's end checks
/// it, and a mismatch is an error.
pub struct JsStrings {
    env: sys::napi_env,
    /// The JS array the strings come from, when their handles are fetched on first use
    /// ([`StringHandles`]); null when every handle was fetched up front.
    array: sys::napi_value,
    /// Each string's handle, or null until it is fetched from `array` ([`JsStrings::value`]):
    /// fetching an element through Node-API costs about as much as reading a short string, and
    /// most strings of a conversation (too short, blocked) are never read.
    values: Vec<Cell<sys::napi_value>>,
    lengths: Vec<usize>,
    /// The first [`PREFIX_UNITS`] units of each string read so far, one after another, each
    /// read once, on first use (or with the length, whose read brings the string's header into
    /// cache anyway). Packed in reading order, so no memory is touched for unread strings.
    prefixes: RefCell<Vec<u16>>,
    /// Where each string's prefix starts in `prefixes`, or [`UNREAD`].
    prefix_at: Vec<Cell<usize>>,
    buffer: RefCell<Vec<u16>>,
    /// Room for one string's fingerprint (see [`Utf16Source::with_fingerprint`]).
    latin1: RefCell<Vec<u8>>,
}

/// The read buffers of a finished [`JsStrings`], kept for the next call on this thread: a call
/// on a short conversation otherwise spends a good part of its time allocating them (and a
/// buffer over the allocator's mmap threshold is mapped and faulted in page by page each time).
struct SpareBuffers {
    prefixes: Vec<u16>,
    buffer: Vec<u16>,
    latin1: Vec<u8>,
}

/// Largest buffer [`SpareBuffers`] keeps, in elements (at most 2 MiB of units).
const SPARE_MAX: usize = 1 << 20;

thread_local! {
    static SPARE: RefCell<Option<SpareBuffers>> = const { RefCell::new(None) };
}

impl JsStrings {
    fn new(
        env: sys::napi_env,
        array: sys::napi_value,
        values: Vec<Cell<sys::napi_value>>,
        lengths: Vec<usize>,
    ) -> Self {
        let n = values.len();
        let spare = SPARE
            .with(|spare| spare.borrow_mut().take())
            .unwrap_or(SpareBuffers {
                prefixes: Vec::new(),
                buffer: Vec::new(),
                latin1: Vec::new(),
            });
        Self {
            env,
            array,
            values,
            lengths,
            prefixes: RefCell::new(spare.prefixes),
            prefix_at: (0..n).map(|_| Cell::new(UNREAD)).collect(),
            buffer: RefCell::new(spare.buffer),
            latin1: RefCell::new(spare.latin1),
        }
    }

    /// The handle of string `index`, fetched from the array on first use.
    fn value(&self, index: usize) -> sys::napi_value {
        let cached = self.values[index].get();
        if !cached.is_null() {
            return cached;
        }
        let mut value = ptr::null_mut();
        // SAFETY: `array` is an array handle of the current call scope (checked when the handles
        // were taken) with at least `values.len()` elements, and `value` receives one handle.
        let status =
            unsafe { sys::napi_get_element(self.env, self.array, to_u32(index), &mut value) };
        assert_eq!(
            status,
            sys::Status::napi_ok,
            "reading element {index} failed"
        );
        self.values[index].set(value);
        value
    }

    /// Panics (a JS error, through `catch_unwind`) when a read shows a length other than the one
    /// the string was measured or said to have.
    fn check_length(&self, index: usize, read: usize, expected: usize) {
        assert_eq!(
            read, expected,
            "string {index} does not have the length it was given"
        );
    }

    /// Reads the first `len` units of string `index` into `buffer` through `napi_read` (one of
    /// napi's string getters, given the room and where to report the count); `len` is at most
    /// the string's length. The room is one unit larger than needed, so that a string longer
    /// than its given length shows when it is read whole.
    fn read_into<T>(
        &self,
        index: usize,
        len: usize,
        buffer: &mut Vec<T>,
        napi_read: impl FnOnce(*mut T, usize, &mut usize) -> sys::napi_status,
    ) {
        buffer.clear();
        // No zero-fill: V8 writes the units straight into the spare capacity.
        buffer.reserve(len + 2);
        let mut copied = 0usize;
        let status = napi_read(buffer.as_mut_ptr(), len + 2, &mut copied);
        assert_eq!(
            status,
            sys::Status::napi_ok,
            "reading string {index} failed"
        );
        let whole = len == self.lengths[index];
        self.check_length(index, copied.min(len + usize::from(whole)), len);
        // SAFETY: napi initialized `copied` (>= len) units.
        unsafe { buffer.set_len(len) };
    }

    /// Reads the first `len` units of string `index` into the unit buffer.
    fn read(&self, index: usize, len: usize) -> std::cell::RefMut<'_, Vec<u16>> {
        let mut buffer = self.buffer.borrow_mut();
        self.read_into(index, len, &mut buffer, |room, size, copied| {
            // SAFETY: `values[index]` is a string handle of the current call scope; `room` has
            // capacity for `size` units (terminator included), and napi reports how many units
            // it initialized.
            unsafe {
                sys::napi_get_value_string_utf16(self.env, self.value(index), room, size, copied)
            }
        });
        buffer
    }

    /// Where string `index`'s prefix starts in [`JsStrings::prefixes`], reading it first if
    /// needed.
    fn prefix_start(&self, index: usize) -> usize {
        let at = self.prefix_at[index].get();
        if at != UNREAD {
            return at;
        }
        let mut prefixes = self.prefixes.borrow_mut();
        if prefixes.is_empty() {
            // Room for every prefix up front: pages are only touched as prefixes are written.
            prefixes.reserve(self.values.len() * PREFIX_UNITS + 1);
        }
        let start = prefixes.len();
        // SAFETY: `values[index]` is a value of the current call scope.
        let copied = unsafe { append_prefix(self.env, self.value(index), &mut prefixes) };
        let copied = copied.unwrap_or_else(|| panic!("reading string {index} failed"));
        self.check_length(index, copied, self.lengths[index].min(PREFIX_UNITS));
        self.prefix_at[index].set(start);
        start
    }

    /// Copies every string into an owned arena (for work off the JS thread), each written by
    /// V8 straight into its place.
    pub fn to_arena(&self) -> Utf16Arena {
        let total: usize = self.lengths.iter().sum();
        // Spare units for the terminator napi writes and the length check after the last content.
        let room = total + 2;
        let mut units = buffer_pool::take(room);
        units.clear();
        // Not advised onto huge pages: zeroing them made a process's first large call slower
        // than the faults they save (bench/README.md, run 13).
        units.reserve(room);
        let base = units.as_mut_ptr();
        let mut ends = Vec::with_capacity(self.values.len());
        let mut at = 0usize;
        for (i, &len) in self.lengths.iter().enumerate() {
            let mut copied = 0usize;
            // SAFETY: `values[i]` is a string handle of the current call scope. The strings
            // written so far take `at` units (each exactly its recorded length, checked below),
            // so `at + len + 2 <= total + 2 <= capacity`: the room from `base + at` holds the
            // string, one more unit and napi's terminator, all inside the allocation. napi
            // writes at most `len + 2` units there and reports how many it copied.
            let status = unsafe {
                sys::napi_get_value_string_utf16(
                    self.env,
                    self.value(i),
                    base.add(at),
                    len + 2,
                    &mut copied,
                )
            };
            assert_eq!(status, sys::Status::napi_ok, "reading string {i} failed");
            self.check_length(i, copied, len);
            at += copied;
            ends.push(at);
        }
        // SAFETY: the units below `at` are the strings napi wrote, back to back (the terminator
        // of each was overwritten by the next string, or lies past `at`), and `at <= capacity`.
        unsafe { units.set_len(at) };
        Utf16Arena::from_parts(units, ends)
    }
}

impl Drop for JsStrings {
    /// Gives the read buffers back for the next call on this thread, emptied, unless one grew
    /// past [`SPARE_MAX`] (idle memory stays bounded).
    fn drop(&mut self) {
        let mut prefixes = std::mem::take(self.prefixes.get_mut());
        let mut buffer = std::mem::take(self.buffer.get_mut());
        let mut latin1 = std::mem::take(self.latin1.get_mut());
        if prefixes.capacity() > SPARE_MAX
            || buffer.capacity() > SPARE_MAX
            || latin1.capacity() > SPARE_MAX
        {
            return;
        }
        prefixes.clear();
        buffer.clear();
        latin1.clear();
        SPARE.with(|spare| {
            *spare.borrow_mut() = Some(SpareBuffers {
                prefixes,
                buffer,
                latin1,
            });
        });
    }
}

impl Utf16Source for JsStrings {
    fn count(&self) -> usize {
        self.values.len()
    }

    fn len_of(&self, index: usize) -> usize {
        self.lengths[index]
    }

    fn with_units<R>(&self, index: usize, f: impl FnOnce(&[u16]) -> R) -> R {
        let buffer = self.read(index, self.lengths[index]);
        f(&buffer)
    }

    fn with_prefix<R>(&self, index: usize, max_units: usize, f: impl FnOnce(&[u16]) -> R) -> R {
        let len = self.lengths[index].min(max_units);
        if len <= PREFIX_UNITS {
            let start = self.prefix_start(index);
            return f(&self.prefixes.borrow()[start..start + len]);
        }
        let buffer = self.read(index, len);
        f(&buffer)
    }

    /// The string as Latin-1: a plain copy of a one-byte string (V8's usual representation),
    /// half the bytes of its UTF-16 units. A two-byte string loses its high bytes, which the
    /// fingerprint contract allows: equal strings still give equal bytes.
    fn with_fingerprint<R>(&self, index: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let mut buffer = self.latin1.borrow_mut();
        self.read_into(
            index,
            self.lengths[index],
            &mut buffer,
            |room, size, copied| {
                // SAFETY: as in `read`, with one byte per unit.
                unsafe {
                    sys::napi_get_value_string_latin1(
                        self.env,
                        self.value(index),
                        room.cast(),
                        size,
                        copied,
                    )
                }
            },
        );
        f(&buffer)
    }

    fn prefetch(&self, index: usize) {
        prefetch_string_lines(self.value(index), 4);
    }

    /// JavaScript's `===`, which compares the code units in place: no copy on either side.
    fn same_units(&self, a: usize, b: usize) -> bool {
        if self.lengths[a] != self.lengths[b] {
            return false;
        }
        let mut equal = false;
        // SAFETY: both are string handles of the current call scope.
        let status =
            unsafe { sys::napi_strict_equals(self.env, self.value(a), self.value(b), &mut equal) };
        assert_eq!(
            status,
            sys::Status::napi_ok,
            "comparing strings {a} and {b} failed"
        );
        equal
    }
}

impl TypeName for JsStrings {
    fn type_name() -> &'static str {
        "string[]"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ValidateNapiValue for JsStrings {}

/// The elements of a JS array, as handles valid for the current call.
///
/// # Safety
/// `env` and `array` must be the current call's environment and a value of it.
pub(crate) unsafe fn array_elements(
    env: sys::napi_env,
    array: sys::napi_value,
    expected: &str,
) -> Result<Vec<sys::napi_value>> {
    // SAFETY: the caller upholds this function's contract (`env` and the handles belong to the current call); every pointer given to napi points into memory reserved for the length passed with it.
    unsafe {
        let mut is_array = false;
        check_status!(sys::napi_is_array(env, array, &mut is_array))?;
        if !is_array {
            return Err(Error::new(
                Status::InvalidArg,
                format!("contents must be {expected}"),
            ));
        }
        let mut len = 0u32;
        check_status!(sys::napi_get_array_length(env, array, &mut len))?;
        let mut values = Vec::with_capacity(len as usize);
        for i in 0..len {
            let mut value = ptr::null_mut();
            check_status!(sys::napi_get_element(env, array, i, &mut value))?;
            values.push(value);
        }
        Ok(values)
    }
}

impl FromNapiValue for JsStrings {
    /// Reads every string's length, with its prefix: one read per string, prefetched ahead.
    ///
    /// # Safety
    /// Node-API's contract for `from_napi_value`: `env` is the current call's environment and
    /// `array` a value of it.
    unsafe fn from_napi_value(env: sys::napi_env, array: sys::napi_value) -> Result<Self> {
        // SAFETY: the caller upholds this function's contract (`env` and the handles belong to the current call); every pointer given to napi points into memory reserved for the length passed with it.
        unsafe {
            let values = array_elements(env, array, "an array of strings")?;
            let len = values.len();
            let mut lengths = Vec::with_capacity(len);
            let mut prefixes = Vec::with_capacity(len * PREFIX_UNITS + 1);
            for (i, &value) in values.iter().enumerate() {
                if let Some(&ahead) = values.get(i + PREFETCH_DISTANCE) {
                    prefetch_string(ahead);
                }
                let Some(copied) = append_prefix(env, value, &mut prefixes) else {
                    return Err(Error::new(
                        Status::StringExpected,
                        format!("contents[{i}] is not a string"),
                    ));
                };
                let mut units = copied;
                if copied == PREFIX_UNITS {
                    // Possibly longer: ask for the length (the string's header is in cache now).
                    check_status!(sys::napi_get_value_string_utf16(
                        env,
                        value,
                        ptr::null_mut(),
                        0,
                        &mut units
                    ))?;
                }
                lengths.push(units);
            }
            let values = values.into_iter().map(Cell::new).collect();
            let strings = JsStrings::new(env, ptr::null_mut(), values, lengths);
            let mut start = 0;
            for (at, &units) in strings.prefix_at.iter().zip(&strings.lengths) {
                at.set(start);
                start += units.min(PREFIX_UNITS);
            }
            *strings.prefixes.borrow_mut() = prefixes;
            Ok(strings)
        }
    }
}

/// A JS array of strings, none of its elements read yet.
pub struct StringHandles {
    env: sys::napi_env,
    array: sys::napi_value,
    len: usize,
}

impl StringHandles {
    /// The strings, with the lengths (UTF-16 code units) JavaScript measured: one per string.
    /// Strings are read only when an algorithm needs them, and their handles fetched then (see
    /// [`JsStrings`] for the checks).
    pub fn with_lengths(self, lengths: &[u32]) -> Result<JsStrings> {
        if lengths.len() != self.len {
            return Err(Error::new(
                Status::InvalidArg,
                "one length per content is required",
            ));
        }
        let lengths = lengths.iter().map(|&l| l as usize).collect();
        let values = (0..self.len).map(|_| Cell::new(ptr::null_mut())).collect();
        Ok(JsStrings::new(self.env, self.array, values, lengths))
    }
}

impl FromNapiValue for StringHandles {
    /// Checks that `array` is an array and takes its length; no element is read.
    ///
    /// # Safety
    /// Node-API's contract for `from_napi_value`: `env` is the current call's environment and
    /// `array` a value of it.
    unsafe fn from_napi_value(env: sys::napi_env, array: sys::napi_value) -> Result<Self> {
        // SAFETY: the caller upholds this function's contract (`env` and `array` belong to the current call); the out-pointers point to locals.
        unsafe {
            let mut is_array = false;
            check_status!(sys::napi_is_array(env, array, &mut is_array))?;
            if !is_array {
                return Err(Error::new(
                    Status::InvalidArg,
                    "contents must be an array of strings",
                ));
            }
            let mut len = 0u32;
            check_status!(sys::napi_get_array_length(env, array, &mut len))?;
            Ok(Self {
                env,
                array,
                len: len as usize,
            })
        }
    }
}

impl TypeName for StringHandles {
    fn type_name() -> &'static str {
        "string[]"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ValidateNapiValue for StringHandles {}

/// How many strings ahead [`prefetch_string`] runs: enough to overlap the memory latency of
/// several strings with the copying of the current one.
const PREFETCH_DISTANCE: usize = 8;

/// Asks the CPU to start loading a string's header and first units. In a large batch every
/// string sits elsewhere in the heap, and reading them one after another otherwise waits for one
/// cache miss at a time, which costs more than copying the units.
///
/// A hint only: it relies on Node-API's representation of a `napi_value` (the address of a
/// handle slot holding the object's tagged address) and never affects results. A prefetch of any
/// address is harmless, so a different representation only makes the hint useless.
#[inline]
fn prefetch_string(value: sys::napi_value) {
    prefetch_string_lines(value, 2);
}

/// [`prefetch_string`] for the first `lines` cache lines of the string (a whole comparison
/// reads on, and the hardware picks up a sequential stream only after a few misses).
#[inline]
fn prefetch_string_lines(value: sys::napi_value, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `value` points to a live handle slot of the current scope (reading it is valid);
    // prefetch instructions never fault, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let tagged = *(value as *const usize);
        let object = (tagged & !1) as *const i8;
        for line in 0..lines {
            _mm_prefetch(object.wrapping_add(64 * line), _MM_HINT_T0);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (value, lines);
}

/// Reuses the large unit buffers of asynchronous calls. A fresh multi-megabyte allocation is
/// mapped page by page on first touch, which costs more than copying the strings into it; a
/// server or the CLI calling again and again keeps its pages mapped instead.
pub mod buffer_pool {
    use std::sync::Mutex;

    /// Buffers kept at most, and the units they may hold in total (256 Mi units: 512 MiB): the
    /// idle memory the pool may keep, whatever the sizes of the buffers (one conversation of
    /// 100k messages fills a single buffer of ~400 MB).
    const MAX_BUFFERS: usize = 4;
    const MAX_TOTAL_UNITS: usize = 256 << 20;

    static POOL: Mutex<Vec<Vec<u16>>> = Mutex::new(Vec::new());

    /// The smallest pooled buffer that holds `units` units, or a new one (growing a smaller
    /// one would copy its whole capacity).
    pub fn take(units: usize) -> Vec<u16> {
        let Ok(mut pool) = POOL.lock() else {
            return Vec::new();
        };
        pick(&pool, units)
            .map(|i| pool.swap_remove(i))
            .unwrap_or_default()
    }

    /// Which buffer of `pool` [`take`] gives for `units` units.
    fn pick(pool: &[Vec<u16>], units: usize) -> Option<usize> {
        (0..pool.len())
            .filter(|&i| pool[i].capacity() >= units)
            .min_by_key(|&i| pool[i].capacity())
    }

    /// Returns a buffer for reuse (emptied); past [`MAX_BUFFERS`] or [`MAX_TOTAL_UNITS`], the
    /// smallest buffers are dropped, so idle memory stays bounded.
    pub fn give_back(mut buffer: Vec<u16>) {
        if buffer.capacity() > MAX_TOTAL_UNITS {
            return;
        }
        buffer.clear();
        if let Ok(mut pool) = POOL.lock() {
            keep(&mut pool, buffer, MAX_BUFFERS, MAX_TOTAL_UNITS);
        }
    }

    /// Adds `buffer` to `pool`, then keeps the largest buffers that fit in `max_buffers` and
    /// `max_units` of capacity together.
    fn keep(pool: &mut Vec<Vec<u16>>, buffer: Vec<u16>, max_buffers: usize, max_units: usize) {
        pool.push(buffer);
        pool.sort_unstable_by_key(|b| std::cmp::Reverse(b.capacity()));
        let mut total = 0;
        pool.retain(|b| {
            let kept = total + b.capacity() <= max_units;
            if kept {
                total += b.capacity();
            }
            kept
        });
        pool.truncate(max_buffers);
    }

    #[cfg(test)]
    mod tests {
        use super::{keep, pick};

        #[test]
        fn a_call_gets_the_smallest_buffer_that_holds_it_or_none() {
            let pool: Vec<Vec<u16>> = [300, 40, 60].map(Vec::with_capacity).into();
            assert_eq!(pick(&pool, 50), Some(2));
            assert_eq!(pick(&pool, 40), Some(1));
            assert_eq!(pick(&pool, 301), None);
        }

        #[test]
        fn idle_memory_stays_within_both_bounds() {
            let mut pool = Vec::new();
            for units in [10, 300, 40, 200, 5, 60, 1000] {
                keep(&mut pool, Vec::with_capacity(units), 3, 400);
                let total: usize = pool.iter().map(Vec::capacity).sum();
                assert!(pool.len() <= 3 && total <= 400, "{pool:?}");
            }
            // The largest buffers that fit are kept: 300, then 60 and 40 (200 no longer fits).
            let kept: Vec<usize> = pool.iter().map(Vec::capacity).collect();
            assert_eq!(kept, [300, 60, 40]);
        }
    }
}
