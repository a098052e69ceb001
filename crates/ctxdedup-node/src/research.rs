//! Bindings of the agent-pipeline stages: resource checksums in bulk, and research findings.
//! Conversion only: every decision is made in `ctxdedup_core::{resources, findings}`.

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::{array_elements, JsStrings};
use ctxdedup_core::findings::{self, FINDINGS_NORMALIZATION_VERSION};
use ctxdedup_core::resources::{self, ByteSource};
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
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
    fn set_byte_lengths(&mut self, lengths: &[f64]) -> Result<()> {
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
                        *bytes = given as usize;
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

    fn with_bytes<R>(&self, index: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        match self.items[index] {
            Content::Text {
                value,
                units,
                bytes,
            } => {
                let ascii = bytes == units;
                let mut buffer = self.buffer.borrow_mut();
                // Room for one more character than expected, so a wrong length shows up as a
                // different number of bytes copied; napi writes into the spare capacity.
                buffer.clear();
                buffer.reserve(bytes.saturating_add(5));
                let capacity = buffer.capacity();
                let mut copied = 0usize;
                // SAFETY: `value` is a string handle of the current call scope; napi writes at
                // most `capacity` bytes (terminator included) into the buffer's allocation.
                let status = unsafe {
                    if ascii {
                        sys::napi_get_value_string_latin1(
                            self.env,
                            value,
                            buffer.as_mut_ptr().cast(),
                            capacity,
                            &mut copied,
                        )
                    } else {
                        sys::napi_get_value_string_utf8(
                            self.env,
                            value,
                            buffer.as_mut_ptr().cast(),
                            capacity,
                            &mut copied,
                        )
                    }
                };
                assert_eq!(
                    status,
                    sys::Status::napi_ok,
                    "reading contents[{index}] failed"
                );
                assert!(copied < capacity, "contents[{index}] overflowed its buffer");
                // SAFETY: napi initialized the first `copied` bytes, and `copied < capacity`.
                unsafe { buffer.set_len(copied) };
                assert!(
                    copied == bytes && (!ascii || buffer.is_ascii()),
                    "contents[{index}] does not have the UTF-8 length it was given"
                );
                f(&buffer)
            }
            Content::Bytes { value, len } => {
                let mut data = ptr::null_mut();
                let mut length = 0usize;
                let mut kind = 0;
                // SAFETY: `value` is a Uint8Array handle of the current call scope; no JavaScript
                // runs between this read and the end of `f`, so the buffer cannot be detached.
                let status = unsafe {
                    sys::napi_get_typedarray_info(
                        self.env,
                        value,
                        &mut kind,
                        &mut length,
                        &mut data,
                        ptr::null_mut(),
                        ptr::null_mut(),
                    )
                };
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
                    return f(&[]);
                }
                // SAFETY: napi reports `length` bytes at `data` (already adjusted by the offset).
                f(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), length) })
            }
        }
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
    unsafe fn from_napi_value(env: sys::napi_env, array: sys::napi_value) -> Result<Self> {
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

/// SHA-256 of every content longer than `min_bytes`, in one call. `byte_lengths` holds the UTF-8
/// length of each content (the caller measures strings with `Buffer.byteLength`).
#[napi(
    catch_unwind,
    ts_args_type = "contents: Array<string | Uint8Array>, byteLengths: Float64Array, minBytes: number"
)]
pub fn resource_checksums(
    mut contents: JsContents,
    byte_lengths: &[f64],
    min_bytes: f64,
) -> Result<String> {
    contents.set_byte_lengths(byte_lengths)?;
    // `min_bytes` is a validated non-negative integer; the saturating cast keeps huge values huge.
    Ok(resources::checksum_batch(&contents, min_bytes as usize).hex)
}

/// Paragraphs of a findings batch as parallel columns, in order.
#[napi(object)]
pub struct NativeFindings {
    /// Index of the text each paragraph comes from.
    pub text: Uint32Array,
    /// Trimmed span of the paragraph in its text (UTF-16 code units).
    pub start: Uint32Array,
    pub end: Uint32Array,
    /// Index of the first paragraph with the same key (itself when the paragraph is kept).
    pub first: Uint32Array,
}

/// Splits findings texts into paragraphs and marks repeated paragraph keys.
#[napi(catch_unwind, ts_args_type = "texts: string[], minKeyUnits: number")]
pub fn dedupe_findings(texts: JsStrings, min_key_units: u32) -> NativeFindings {
    let result = findings::dedupe_findings(&texts, min_key_units as usize);
    let column = |f: fn(&findings::Paragraph) -> usize| -> Uint32Array {
        Uint32Array::new(result.paragraphs.iter().map(|p| f(p) as u32).collect())
    };
    NativeFindings {
        text: column(|p| p.text),
        start: column(|p| p.start),
        end: column(|p| p.end),
        first: Uint32Array::new(result.first.clone()),
    }
}

/// The dedup key of each paragraph (lossless: lone surrogates survive).
#[napi(catch_unwind, ts_args_type = "paragraphs: string[]")]
pub fn paragraph_keys(paragraphs: JsStrings) -> Vec<Utf16String> {
    use ctxdedup_core::Utf16Source;
    (0..paragraphs.count())
        .map(|i| {
            let mut key = Vec::new();
            paragraphs.with_units(i, |units| findings::paragraph_key_into(units, &mut key));
            Utf16String::from(key)
        })
        .collect()
}

/// Version of the findings paragraph splitting and key normalization.
#[napi(catch_unwind)]
pub fn findings_normalization_version() -> u32 {
    FINDINGS_NORMALIZATION_VERSION
}
