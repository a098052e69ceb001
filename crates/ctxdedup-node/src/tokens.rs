//! Bindings of BPE token counting. Conversion only: counting is `ctxdedup_core::tokens`.
//! Strings are read as UTF-16 code units (lossless: a lone surrogate is counted as U+FFFD by the
//! core, as gpt-tokenizer does, never turned into one by Node-API's UTF-8 conversion).

// napi-derive does not register exports in test builds, so outside the crate root they would
// count as dead code there.
#![cfg_attr(test, allow(dead_code))]

use crate::strings::JsStrings;
use ctxdedup_core::tokens::{count_utf16, Encoding};
use ctxdedup_core::Utf16Source;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::cell::RefCell;
use std::ptr;

/// Room of the first read of a text (UTF-16 units).
const FIRST_READ_UNITS: usize = 4096;
/// Largest buffer kept for the next call (UTF-16 units: 2 MiB).
const KEPT_UNITS: usize = 1 << 20;

thread_local! {
    static BUFFER: RefCell<Vec<u16>> = const { RefCell::new(Vec::new()) };
}

/// A JS string's UTF-16 code units, read into a buffer reused across calls (no allocation or
/// zero-filling for each call).
pub struct Units(Vec<u16>);

impl Drop for Units {
    fn drop(&mut self) {
        if self.0.capacity() <= KEPT_UNITS {
            let buffer = std::mem::take(&mut self.0);
            BUFFER.with(|b| *b.borrow_mut() = buffer);
        }
    }
}

impl FromNapiValue for Units {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        // SAFETY: `env` and `value` belong to the current call (napi's contract for from_napi_value); the buffer has room for the length passed to napi, and only initialized units are kept.
        unsafe {
            let mut buffer = BUFFER.with(|b| std::mem::take(&mut *b.borrow_mut()));
            buffer.clear();
            buffer.reserve(FIRST_READ_UNITS);
            // One read when the text fits the buffer (most texts counted one by one are short):
            // napi copies at most `room - 1` units, so fewer than that means the whole text.
            let room = buffer.capacity();
            let mut copied = 0usize;
            check_status!(
                sys::napi_get_value_string_utf16(
                    env,
                    value,
                    buffer.as_mut_ptr(),
                    room,
                    &mut copied
                ),
                "text must be a string"
            )?;
            if copied + 1 < room {
                // SAFETY: napi initialized `copied` units.
                buffer.set_len(copied);
                return Ok(Units(buffer));
            }
            let mut len = 0usize;
            check_status!(
                sys::napi_get_value_string_utf16(env, value, ptr::null_mut(), 0, &mut len),
                "text must be a string"
            )?;
            // Room for the units and napi's terminator; V8 writes straight into the spare capacity.
            buffer.reserve(len + 1);
            let mut copied = 0usize;
            check_status!(
                sys::napi_get_value_string_utf16(
                    env,
                    value,
                    buffer.as_mut_ptr(),
                    len + 1,
                    &mut copied
                ),
                "reading the text failed"
            )?;
            // SAFETY: napi initialized `copied` (<= len) units.
            buffer.set_len(copied.min(len));
            Ok(Units(buffer))
        }
    }
}

impl TypeName for Units {
    fn type_name() -> &'static str {
        "string"
    }

    fn value_type() -> ValueType {
        ValueType::String
    }
}

impl ValidateNapiValue for Units {}

fn encoding(name: &str) -> Result<Encoding> {
    Encoding::from_name(name).ok_or_else(|| {
        Error::new(
            Status::InvalidArg,
            format!("encoding must be o200k_base or cl100k_base, got {name:?}"),
        )
    })
}

/// Number of tokens of `text` in encoding `encoding` (0: o200k_base, 1: cl100k_base; a number,
/// so a call per short text does not convert a name), special-token text counted as plain text.
#[napi(catch_unwind, ts_args_type = "text: string, encoding: number")]
pub fn count_tokens(text: Units, encoding: u32) -> Result<u32> {
    let encoding = match encoding {
        0 => Encoding::O200kBase,
        1 => Encoding::Cl100kBase,
        _ => {
            return Err(Error::new(
                Status::InvalidArg,
                format!("encoding must be 0 or 1, got {encoding}"),
            ))
        }
    };
    Ok(count_utf16(encoding, &text.0) as u32)
}

/// [`count_tokens`] of each text, in one call.
#[napi(catch_unwind, ts_args_type = "texts: string[], encoding: string")]
pub fn count_tokens_batch(texts: JsStrings, encoding: String) -> Result<Uint32Array> {
    let encoding = self::encoding(&encoding)?;
    let counts = (0..texts.count())
        .map(|i| texts.with_units(i, |units| count_utf16(encoding, units) as u32))
        .collect();
    Ok(Uint32Array::new(counts))
}
