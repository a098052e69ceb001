//! One JS string's UTF-16 code units, read into a buffer reused across calls: the reader of the
//! calls that take one text and are made once per short text (token counting).

use napi::bindgen_prelude::*;
use napi::sys;
use std::cell::RefCell;
use std::ops::Deref;
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

impl Deref for Units {
    type Target = [u16];

    fn deref(&self) -> &[u16] {
        &self.0
    }
}

impl FromNapiValue for Units {
    /// Reads the string in one call when it fits [`FIRST_READ_UNITS`], else asks for its length
    /// and reads it whole.
    ///
    /// # Safety
    /// Node-API's contract for `from_napi_value`: `env` is the current call's environment and
    /// `value` a value of it.
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
