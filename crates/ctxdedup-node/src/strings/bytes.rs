//! A JS array of strings and `Uint8Array`s read as bytes (UTF-8 of each string, the bytes of
//! each array in place): the reader of the resource checksums.

use super::array_elements;
use ctxdedup_core::checksums::ByteSource;
use napi::bindgen_prelude::*;
use napi::sys;
use std::cell::RefCell;
use std::ptr;

/// One element of a [`JsContents`] array.
enum Content {
    /// A string: its length in UTF-16 code units and its UTF-8 length (given by the caller).
    Text {
        value: sys::napi_value,
        units: usize,
        bytes: usize,
    },
    /// A `Uint8Array` and its length; the data pointer is read when the bytes are used.
    Bytes { value: sys::napi_value, len: usize },
}

/// A JS array whose elements are well-formed strings (hashed as UTF-8; the caller rejects lone
/// surrogates first) or `Uint8Array`s (read in place), valid for the duration of one native call.
///
/// The UTF-8 length of each string comes from the caller (`Buffer.byteLength`, which is much
/// faster than Node-API's length query). A string whose UTF-8 length equals its UTF-16 length is
/// pure ASCII, so its Latin-1 bytes (a plain copy) are its UTF-8 bytes; other strings are read as
/// UTF-8. Either way the bytes read are checked against the given length.
pub struct JsContents {
    env: sys::napi_env,
    items: Vec<Content>,
    buffer: RefCell<Vec<u8>>,
}

impl JsContents {
    /// Sets the UTF-8 length of every string from `lengths` (one per item; ignored for bytes,
    /// but it must match).
    pub fn set_byte_lengths(&mut self, lengths: &[f64]) -> Result<()> {
        if lengths.len() != self.items.len() {
            return Err(Error::new(
                Status::InvalidArg,
                "one byte length per content is required",
            ));
        }
        for (i, (item, &given)) in self.items.iter_mut().zip(lengths).enumerate() {
            let actual = match item {
                Content::Text { units, bytes, .. } => {
                    // UTF-8 takes at least one byte and at most three per UTF-16 unit.
                    if given >= *units as f64 && given <= 3.0 * *units as f64 {
                        #[expect(
                            clippy::cast_possible_truncation,
                            clippy::cast_sign_loss,
                            reason = "between `units` and `3 * units`, checked above; a fraction is caught below"
                        )]
                        let given = given as usize;
                        *bytes = given;
                    }
                    *bytes
                }
                Content::Bytes { len, .. } => *len,
            };
            if actual as f64 != given {
                return Err(Error::new(
                    Status::InvalidArg,
                    format!("byteLengths[{i}] ({given}) is not the length of contents[{i}]"),
                ));
            }
        }
        Ok(())
    }
}

impl JsContents {
    /// Reads string `index` (`bytes` UTF-8 bytes, `units` UTF-16 units) to `dst`, which has room
    /// for `bytes + EXTRA_ROOM` bytes, and checks that it has the length it was given.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `bytes + EXTRA_ROOM` bytes.
    unsafe fn read_text(
        &self,
        index: usize,
        value: sys::napi_value,
        (units, bytes): (usize, usize),
        dst: *mut u8,
    ) {
        // SAFETY: `dst` has room for `bytes + EXTRA_ROOM` bytes (this function's contract), the room passed to napi; `value` is a string handle of the current call; only the bytes napi reports written are read.
        unsafe {
            let ascii = bytes == units;
            let mut copied = 0usize;
            // `value` is a string handle of the current call scope; napi writes at most the room
            // given (terminator included), and never a partial character.
            let status = if ascii {
                sys::napi_get_value_string_latin1(
                    self.env,
                    value,
                    dst.cast(),
                    bytes + EXTRA_ROOM,
                    &mut copied,
                )
            } else {
                sys::napi_get_value_string_utf8(
                    self.env,
                    value,
                    dst.cast(),
                    bytes + EXTRA_ROOM,
                    &mut copied,
                )
            };
            assert_eq!(
                status,
                sys::Status::napi_ok,
                "reading contents[{index}] failed"
            );
            // A pure-ASCII string's Latin-1 bytes are its UTF-8 bytes; checked, since a string with
            // other Latin-1 characters could have been given the wrong length.
            let read = std::slice::from_raw_parts(dst, copied.min(bytes));
            assert!(
                copied == bytes && (!ascii || read.is_ascii()),
                "contents[{index}] does not have the UTF-8 length it was given"
            );
        }
    }

    /// The bytes of `Uint8Array` `index`, in place.
    ///
    /// # Safety
    /// No JavaScript may run while the slice is in use (it could detach the buffer).
    unsafe fn typed_bytes(&self, index: usize, value: sys::napi_value, len: usize) -> &[u8] {
        // SAFETY: the caller upholds this function's contract (handles of the current call, no JavaScript runs meanwhile); napi reports the lengths the slices are built from.
        unsafe {
            let mut data = ptr::null_mut();
            let mut length = 0usize;
            let mut kind = 0;
            let status = sys::napi_get_typedarray_info(
                self.env,
                value,
                &mut kind,
                &mut length,
                &mut data,
                ptr::null_mut(),
                ptr::null_mut(),
            );
            assert_eq!(
                status,
                sys::Status::napi_ok,
                "reading contents[{index}] failed"
            );
            assert_eq!(
                length, len,
                "contents[{index}] changed length during the call"
            );
            if data.is_null() || length == 0 {
                return &[];
            }
            // napi reports `length` bytes at `data` (already adjusted by the offset).
            std::slice::from_raw_parts(data.cast::<u8>(), length)
        }
    }
}

/// Spare bytes after a string being read: one more character than expected (at most 4 UTF-8
/// bytes) and napi's terminator, so that a wrong length shows up as a different byte count.
const EXTRA_ROOM: usize = 5;

impl ByteSource for JsContents {
    fn count(&self) -> usize {
        self.items.len()
    }

    fn byte_len(&self, index: usize) -> usize {
        match self.items[index] {
            Content::Text { bytes, .. } => bytes,
            Content::Bytes { len, .. } => len,
        }
    }

    /// Strings are read one after another into one buffer (each written by V8 in its place);
    /// `Uint8Array`s are used in place.
    fn with_many<R>(&self, indices: &[usize], f: impl FnOnce(&[&[u8]]) -> R) -> R {
        let text_bytes: usize = indices
            .iter()
            .filter_map(|&i| match self.items[i] {
                Content::Text { bytes, .. } => Some(bytes),
                Content::Bytes { .. } => None,
            })
            .sum();
        let mut buffer = self.buffer.borrow_mut();
        buffer.clear();
        buffer.reserve(text_bytes + EXTRA_ROOM);
        let base = buffer.as_mut_ptr();
        let mut at = 0usize;
        let mut starts = Vec::with_capacity(indices.len());
        for &i in indices {
            if let Content::Text {
                value,
                units,
                bytes,
            } = self.items[i]
            {
                // SAFETY: the buffer has room for `text_bytes + EXTRA_ROOM` bytes, so for this
                // string's bytes (after those before it) plus EXTRA_ROOM; a later string
                // overwrites the spare bytes.
                unsafe { self.read_text(i, value, (units, bytes), base.add(at)) };
                starts.push(at);
                at += bytes;
            } else {
                starts.push(usize::MAX);
            }
        }
        // SAFETY: every byte up to `text_bytes` was written by napi above.
        unsafe { buffer.set_len(text_bytes) };
        let slices: Vec<&[u8]> = indices
            .iter()
            .zip(starts)
            .map(|(&i, start)| match self.items[i] {
                Content::Text { bytes, .. } => &buffer[start..start + bytes],
                // SAFETY: no JavaScript runs before `f` returns.
                Content::Bytes { value, len } => unsafe { self.typed_bytes(i, value, len) },
            })
            .collect();
        f(&slices)
    }
}

impl TypeName for JsContents {
    fn type_name() -> &'static str {
        "Array<string | Uint8Array>"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ValidateNapiValue for JsContents {}

impl FromNapiValue for JsContents {
    /// Classifies every element (string or `Uint8Array`) without reading its contents.
    ///
    /// # Safety
    /// Node-API's contract for `from_napi_value`: `env` is the current call's environment and
    /// `array` a value of it.
    unsafe fn from_napi_value(env: sys::napi_env, array: sys::napi_value) -> Result<Self> {
        // SAFETY: the caller upholds this function's contract (handles of the current call, no JavaScript runs meanwhile); napi reports the lengths the slices are built from.
        unsafe {
            let values = array_elements(env, array, "an array of strings and Uint8Arrays")?;
            let mut items = Vec::with_capacity(values.len());
            for (i, value) in values.into_iter().enumerate() {
                let mut units = 0usize;
                if sys::napi_get_value_string_utf16(env, value, ptr::null_mut(), 0, &mut units)
                    == sys::Status::napi_ok
                {
                    // The UTF-8 length is set by `set_byte_lengths`; until then it is invalid.
                    items.push(Content::Text {
                        value,
                        units,
                        bytes: usize::MAX,
                    });
                    continue;
                }
                let mut bytes = 0usize;
                let mut is_typed = false;
                check_status!(sys::napi_is_typedarray(env, value, &mut is_typed))?;
                let mut kind = -1;
                if is_typed {
                    check_status!(sys::napi_get_typedarray_info(
                        env,
                        value,
                        &mut kind,
                        &mut bytes,
                        ptr::null_mut(),
                        ptr::null_mut(),
                        ptr::null_mut(),
                    ))?;
                }
                if kind != sys::TypedarrayType::uint8_array {
                    return Err(Error::new(
                        Status::InvalidArg,
                        format!("contents[{i}] is neither a string nor a Uint8Array"),
                    ));
                }
                items.push(Content::Bytes { value, len: bytes });
            }
            Ok(Self {
                env,
                items,
                buffer: RefCell::new(Vec::new()),
            })
        }
    }
}
