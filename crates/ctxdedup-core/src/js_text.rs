//! JavaScript string semantics on UTF-16 code units: `String.prototype.trim()`,
//! `String.prototype.toLowerCase()` and the UTF-8 bytes of `JSON.stringify(string)`.
//!
//! Rust's own `trim` and `to_lowercase` disagree with JavaScript (U+FEFF is JS whitespace but not
//! Rust's; U+0085 is the reverse), and JS strings may hold lone surrogates, which Rust strings
//! cannot. Normalization version: [`NORMALIZATION_VERSION`].

use crate::to_u32;

/// Bumped whenever the normalization below changes its output for any input.
pub const NORMALIZATION_VERSION: u32 = 1;

/// ECMAScript WhiteSpace + LineTerminator: exactly what `trim()` strips. All are in the BMP.
pub fn is_js_whitespace(unit: u16) -> bool {
    matches!(
        unit,
        0x0009..=0x000D
            | 0x0020
            | 0x00A0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
            | 0xFEFF
    )
}

/// `s.trim()`: the sub-slice without leading and trailing JS whitespace.
pub fn js_trim(units: &[u16]) -> &[u16] {
    let start = units.iter().position(|&u| !is_js_whitespace(u));
    match start {
        None => &[],
        Some(start) => {
            let end = units
                .iter()
                .rposition(|&u| !is_js_whitespace(u))
                .map_or(start, |e| e + 1);
            &units[start..end]
        }
    }
}

/// Appends `s.toLowerCase()` (full, locale-independent Unicode mapping, Final_Sigma included)
/// to `out`. Lone surrogates pass through unchanged.
pub fn js_to_lower_case_into(units: &[u16], out: &mut Vec<u16>) {
    // Most lines are ASCII: copy, lower A-Z in place, and note whether any unit is not ASCII,
    // in one pass the compiler can vectorize.
    let start = out.len();
    out.extend_from_slice(units);
    let mut any = 0u16;
    for u in &mut out[start..] {
        any |= *u;
        let upper = u.wrapping_sub(u16::from(b'A')) < 26;
        *u += u16::from(upper) << 5;
    }
    if any < 0x80 {
        return;
    }
    // Mostly other BMP text (CJK, accented Latin): one table lookup per unit, in place. A unit
    // the table cannot lower alone (a surrogate, a longer mapping, a capital sigma, whose form
    // depends on its neighbours) sends the line to the general path below.
    let table = bmp_lower();
    let mut special = false;
    for u in &mut out[start..] {
        let lower = table[usize::from(*u)];
        special |= lower == MULTI_UNIT || *u == CAPITAL_SIGMA;
        *u = lower;
    }
    if !special {
        return;
    }
    out.truncate(start);
    // A lone surrogate is neither cased nor case-ignorable, so it ends any Final_Sigma context;
    // lowering each well-formed run on its own therefore matches JavaScript exactly.
    let mut run_start = 0;
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        let pair = (0xD800..0xDC00).contains(&u)
            && units
                .get(i + 1)
                .is_some_and(|n| (0xDC00..0xE000).contains(n));
        if pair {
            i += 2;
        } else if (0xD800..0xE000).contains(&u) {
            lower_well_formed(&units[run_start..i], out);
            out.push(u);
            i += 1;
            run_start = i;
        } else {
            i += 1;
        }
    }
    lower_well_formed(&units[run_start..], out);
}

fn lower_well_formed(units: &[u16], out: &mut Vec<u16>) {
    if units.is_empty() {
        return;
    }
    if units.contains(&CAPITAL_SIGMA) {
        // `str::to_lowercase` implements the full mapping including Final_Sigma, like
        // ECMAScript.
        let text: String = char::decode_utf16(units.iter().copied())
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect();
        out.extend(text.to_lowercase().encode_utf16());
        return;
    }
    // Final_Sigma is the only context-dependent rule of the full mapping: without a capital
    // sigma, lowering character by character is exact. ASCII units (most of a mostly-ASCII
    // line) skip the Unicode tables.
    let mut buf = [0u16; 2];
    let mut i = 0;
    while i < units.len() {
        let u = units[i];
        if u < 0x80 {
            let upper = u.wrapping_sub(u16::from(b'A')) < 26;
            out.push(u + (u16::from(upper) << 5));
            i += 1;
            continue;
        }
        if !(0xD800..0xE000).contains(&u) {
            // A BMP character: its one-unit lowercase from the table, unless its mapping is
            // longer (`İ`) and takes the general path below.
            let lower = bmp_lower()[usize::from(u)];
            if lower != MULTI_UNIT {
                out.push(lower);
                i += 1;
                continue;
            }
        }
        let width = if (0xD800..0xDC00).contains(&u) { 2 } else { 1 };
        let c = char::decode_utf16(units[i..i + width].iter().copied())
            .next()
            .and_then(Result::ok)
            .unwrap_or(char::REPLACEMENT_CHARACTER);
        for lower in c.to_lowercase() {
            out.extend_from_slice(lower.encode_utf16(&mut buf));
        }
        i += width;
    }
}

/// Marks a BMP character whose lowercase form is not one BMP unit in [`bmp_lower`]: a surrogate
/// code unit, which no lowercase mapping yields.
const MULTI_UNIT: u16 = 0xD800;

/// The lowercase of every BMP character that lowers to a single BMP character (most map to
/// themselves: CJK, kana, symbols), [`MULTI_UNIT`] otherwise, from Rust's own full mapping.
/// Built once (64 Ki lookups, about a millisecond): a per-character search of the case tables
/// made non-Latin text several times slower to normalize than ASCII.
fn bmp_lower() -> &'static [u16; 0x10000] {
    static TABLE: std::sync::OnceLock<Box<[u16; 0x10000]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Box::new([MULTI_UNIT; 0x10000]);
        for (unit, slot) in table.iter_mut().enumerate() {
            let Some(c) = char::from_u32(to_u32(unit)) else {
                continue;
            };
            let mut lower = c.to_lowercase();
            if let (Some(l), None) = (lower.next(), lower.next()) {
                if let Ok(l) = u16::try_from(u32::from(l)) {
                    *slot = l;
                }
            }
        }
        table
    })
}

/// U+03A3, whose lowercase form depends on its neighbours (Final_Sigma).
const CAPITAL_SIGMA: u16 = 0x03A3;

/// `line.trim().toLowerCase()` appended to `out`.
pub fn normalize_line_into(line: &[u16], out: &mut Vec<u16>) {
    js_to_lower_case_into(js_trim(line), out);
}

/// Appends the UTF-8 bytes of `JSON.stringify(s)` to `out`, for `s` given as UTF-16 code units:
/// the ECMAScript `QuoteJSONString` escapes (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other
/// units below U+0020 as `\u00xx`, lone surrogates as `\udxxx`, lowercase hex), every other code
/// point as its UTF-8 bytes (U+2028, U+2029 and U+007F included, unescaped).
///
/// Time: one pass, at most 6 bytes out per unit in.
pub fn json_quote_utf8_into(units: &[u16], out: &mut Vec<u8>) {
    // Room for the common case (no escapes, at most 3 bytes per unit): pushes rarely reallocate.
    out.reserve(units.len() * 3 + 2);
    out.push(b'"');
    let mut i = 0;
    while i < units.len() {
        let u = u32::from(units[i]);
        i += 1;
        if (0x20..0x80).contains(&u) && u != 0x22 && u != 0x5C {
            out.push(low_byte(u));
        } else if u < 0x80 {
            match u {
                0x22 => out.extend_from_slice(b"\\\""),
                0x5C => out.extend_from_slice(b"\\\\"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0C => out.extend_from_slice(b"\\f"),
                0x0A => out.extend_from_slice(b"\\n"),
                0x0D => out.extend_from_slice(b"\\r"),
                0x09 => out.extend_from_slice(b"\\t"),
                _ => unicode_escape(u, out),
            }
        } else if u < 0x800 {
            out.extend_from_slice(&[low_byte(0xC0 | u >> 6), low_byte(0x80 | (u & 0x3F))]);
        } else if !(0xD800..0xE000).contains(&u) {
            out.extend_from_slice(&[
                low_byte(0xE0 | u >> 12),
                low_byte(0x80 | ((u >> 6) & 0x3F)),
                low_byte(0x80 | (u & 0x3F)),
            ]);
        } else if u < 0xDC00 && i < units.len() && (0xDC00..0xE000).contains(&units[i]) {
            let c = 0x10000 + ((u - 0xD800) << 10) + (u32::from(units[i]) - 0xDC00);
            i += 1;
            out.extend_from_slice(&[
                low_byte(0xF0 | c >> 18),
                low_byte(0x80 | ((c >> 12) & 0x3F)),
                low_byte(0x80 | ((c >> 6) & 0x3F)),
                low_byte(0x80 | (c & 0x3F)),
            ]);
        } else {
            unicode_escape(u, out); // a lone surrogate
        }
    }
    out.push(b'"');
}

/// The low 8 bits of `x` (callers mask or bound `x` first).
fn low_byte(x: u32) -> u8 {
    x.to_le_bytes()[0]
}

/// `\uxxxx`, lowercase hex, as `JSON.stringify` writes it.
fn unicode_escape(u: u32, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[usize::from(low_byte((u >> shift) & 0xF))]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    /// The output of an `*_into(input, &mut out)` function of this module, as a new vector.
    fn collected<T>(into: fn(&[u16], &mut Vec<T>), input: &[u16]) -> Vec<T> {
        let mut out = Vec::new();
        into(input, &mut out);
        out
    }

    fn lower(s: &[u16]) -> Vec<u16> {
        collected(js_to_lower_case_into, s)
    }

    #[test]
    fn trim_matches_javascript() {
        assert_eq!(js_trim(&u("\u{FEFF} a b\u{00A0}")), u("a b").as_slice());
        assert_eq!(
            js_trim(&u("\u{0085}a\u{0085}")),
            u("\u{0085}a\u{0085}").as_slice()
        );
        assert_eq!(
            js_trim(&u("\u{200B}a\u{180E}")),
            u("\u{200B}a\u{180E}").as_slice()
        );
        assert_eq!(js_trim(&u("\u{2028}\u{3000}\r")), &[] as &[u16]);
        assert_eq!(js_trim(&[]), &[] as &[u16]);
    }

    #[test]
    fn lower_case_matches_javascript() {
        assert_eq!(lower(&u("HeLLo")), u("hello"));
        assert_eq!(lower(&u("\u{0130}")), u("i\u{0307}"));
        assert_eq!(lower(&u("ΟΔΟΣ ΣΑΣ")), u("οδος σας"));
        assert_eq!(lower(&u("Σ")), u("σ"));
        assert_eq!(lower(&u("ß ẞ ﬁ ϒ")), u("ß ß ﬁ ϒ"));
        assert_eq!(lower(&u("\u{212A}\u{212B}")), u("k\u{00E5}"));
        assert_eq!(lower(&u("\u{10400}")), u("\u{10428}"));
    }

    #[test]
    fn lone_surrogates_pass_through() {
        assert_eq!(lower(&[0x41, 0xD800, 0x42]), vec![0x61, 0xD800, 0x62]);
        assert_eq!(lower(&[0xDC00, 0x3A3]), vec![0xDC00, 0x3C3]);
        // "AΣ" then a lone surrogate: the sigma is word-final, as in JavaScript.
        assert_eq!(lower(&[0x41, 0x3A3, 0xD800]), vec![0x61, 0x3C2, 0xD800]);
    }

    #[test]
    fn every_bmp_character_lowers_like_the_full_mapping() {
        for unit in 0..=0xFFFFu32 {
            let Some(c) = char::from_u32(unit) else {
                continue;
            };
            if unit == u32::from(CAPITAL_SIGMA) {
                continue;
            }
            let text = format!("x{c}");
            let expected: Vec<u16> = text.to_lowercase().encode_utf16().collect();
            assert_eq!(lower(&u(&text)), expected, "U+{unit:04X}");
        }
    }

    proptest::proptest! {
        #[test]
        fn char_by_char_lowering_matches_the_full_mapping(
            text in "[A-Za-zÀ-ÿΣσςΑ-Ωİıẞ\u{10400}-\u{1044F}\u{212A} .,-]{0,40}"
        ) {
            let units: Vec<u16> = text.encode_utf16().collect();
            let expected: Vec<u16> = text.to_lowercase().encode_utf16().collect();
            proptest::prop_assert_eq!(lower(&units), expected);
        }
    }

    /// `JSON.stringify` of a UTF-16 string by another implementation: `serde_json` escapes a
    /// well-formed string as `JSON.stringify` does (lowercase `\u00xx` for other controls, U+007F
    /// and U+2028 as they are); each lone surrogate becomes `\udxxx` between such runs.
    fn quote_oracle(units: &[u16]) -> Vec<u8> {
        let mut s = String::from("\"");
        let mut run = String::new();
        let flush = |run: &mut String, s: &mut String| {
            let quoted = serde_json::to_string(run).unwrap();
            s.push_str(&quoted[1..quoted.len() - 1]);
            run.clear();
        };
        for c in char::decode_utf16(units.iter().copied()) {
            match c {
                Ok(c) => run.push(c),
                Err(e) => {
                    flush(&mut run, &mut s);
                    s.push_str(&format!("\\u{:04x}", e.unpaired_surrogate()));
                }
            }
        }
        flush(&mut run, &mut s);
        s.push('"');
        s.into_bytes()
    }

    fn quote(units: &[u16]) -> Vec<u8> {
        collected(json_quote_utf8_into, units)
    }

    #[test]
    fn json_quoting_matches_json_stringify() {
        assert_eq!(quote(&u("a\"b\\c\n")), b"\"a\\\"b\\\\c\\n\"");
        assert_eq!(
            quote(&u("\u{0}\u{1f}\u{7f}\u{2028}é日\u{1F600}")),
            "\"\\u0000\\u001f\u{7f}\u{2028}é日\u{1F600}\"".as_bytes()
        );
        assert_eq!(quote(&[0xD800, 0x41, 0xDFFF]), b"\"\\ud800A\\udfff\"");
        assert_eq!(quote(&[0xDBFF, 0xDC00]), "\"\u{10FC00}\"".as_bytes());
        assert_eq!(quote(&[]), b"\"\"");
    }

    proptest::proptest! {
        #[test]
        fn json_quoting_matches_the_oracle(
            units in proptest::collection::vec(proptest::prop_oneof![
                0u16..0x80, 0x80u16..0x800, 0x800u16..0xD800, 0xD800u16..0xE000, 0xE000u16..=0xFFFF
            ], 0..64)
        ) {
            proptest::prop_assert_eq!(quote(&units), quote_oracle(&units));
        }
    }
}
