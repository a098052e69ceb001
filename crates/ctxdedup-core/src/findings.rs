//! Research findings: split texts into paragraphs and keep the first occurrence of each
//! normalized paragraph.
//!
//! Everything is computed on UTF-16 code units with JavaScript semantics (see [`crate::js_text`]),
//! so the result is the same as the JavaScript reference below, lone surrogates included.
//!
//! # Normalization, version [`FINDINGS_NORMALIZATION_VERSION`]
//!
//! *Whitespace* is the ECMAScript WhiteSpace + LineTerminator set, i.e. what JavaScript's `\s`
//! and `trim()` match ([`is_js_whitespace`]): it includes U+FEFF and U+2028 but not U+0085.
//!
//! 1. **Lines.** A text is cut into lines at every U+000A (LF). A line is *blank* when it is empty
//!    or holds only whitespace (so the CR of a CRLF line ending makes no line non-blank).
//! 2. **Paragraphs.** A paragraph is a maximal run of consecutive non-blank lines: paragraphs are
//!    separated by one or more blank lines, i.e. by two or more line feeds with nothing but
//!    whitespace between them. A paragraph's text is that run, from the start of its first line to
//!    the end of its last line, trimmed (`trim()`). Texts that are blank produce no paragraph.
//! 3. **Key.** `paragraph.toLowerCase().replace(/\s+/g, ' ').trim()`, in that order: the
//!    paragraph is lowercased with the full, locale-independent Unicode mapping of
//!    `String.prototype.toLowerCase` (final sigma: `Σ` at the end of a word becomes `ς`; dotted
//!    `İ` becomes `i` + U+0307, two code units), then every run of whitespace becomes one U+0020
//!    and the ends are trimmed. The order matters: U+FEFF is both whitespace and Case_Ignorable,
//!    so in `"AΣ\u{FEFF}B"` the sigma is not word-final (`"aσ b"`), while collapsing first would
//!    make it so (`"aς b"`).
//! 4. **Dedup.** Paragraphs are visited in order (texts in order, paragraphs in text order). A
//!    paragraph whose key is shorter than `min_key_units` UTF-16 code units (20 by default) is
//!    always kept. Otherwise it is kept if no earlier paragraph had the same key (compared as
//!    code units, exactly), and marked as a duplicate of that first paragraph if one did.

use crate::js_text::{is_js_whitespace, js_to_lower_case_into, js_trim};
use crate::source::Utf16Source;
use crate::to_u32;
use ahash::AHashMap;

/// Bumped whenever paragraph splitting or the key of [`paragraph_key_into`] changes for any input.
pub const FINDINGS_NORMALIZATION_VERSION: u32 = 1;

/// Default minimum key length (UTF-16 code units) for a paragraph to take part in dedup.
pub const DEFAULT_MIN_KEY_UNITS: usize = 20;

const LF: u16 = 0x000A;

/// One paragraph: the trimmed span `[start, end)` (UTF-16 code units) of text number `text`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paragraph {
    pub text: usize,
    pub start: usize,
    pub end: usize,
}

/// Appends the paragraphs of `units` (text number `text`) to `out`, in order.
pub fn split_paragraphs(units: &[u16], text: usize, out: &mut Vec<Paragraph>) {
    // Span of the paragraph being built: start of its first line, end of its last line.
    let mut open: Option<(usize, usize)> = None;
    let close = |span: (usize, usize), out: &mut Vec<Paragraph>| {
        let slice = &units[span.0..span.1];
        let lead = slice
            .iter()
            .position(|&u| !is_js_whitespace(u))
            .unwrap_or(slice.len());
        let trimmed = js_trim(slice).len();
        if trimmed > 0 {
            out.push(Paragraph {
                text,
                start: span.0 + lead,
                end: span.0 + lead + trimmed,
            });
        }
    };
    let mut line_start = 0;
    while line_start <= units.len() {
        let line_end = units[line_start..]
            .iter()
            .position(|&u| u == LF)
            .map_or(units.len(), |p| line_start + p);
        let blank = js_trim(&units[line_start..line_end]).is_empty();
        if blank {
            if let Some(span) = open.take() {
                close(span, out);
            }
        } else {
            open = Some((open.map_or(line_start, |(s, _)| s), line_end));
        }
        line_start = line_end + 1;
    }
    if let Some(span) = open {
        close(span, out);
    }
}

/// Appends the dedup key of `paragraph` to `out`:
/// `paragraph.toLowerCase().replace(/\s+/g, ' ').trim()` in JavaScript terms.
pub fn paragraph_key_into(paragraph: &[u16], out: &mut Vec<u16>) {
    // Lowercase first, as JavaScript does: collapsing first would change the final-sigma context
    // when the whitespace is U+FEFF, which is also Case_Ignorable ("aΣ\u{FEFF}b" keeps σ).
    let mut lowered = Vec::with_capacity(paragraph.len());
    js_to_lower_case_into(paragraph, &mut lowered);
    let mut in_space = false;
    for &u in js_trim(&lowered) {
        if is_js_whitespace(u) {
            if !in_space {
                out.push(0x0020);
                in_space = true;
            }
        } else {
            out.push(u);
            in_space = false;
        }
    }
}

/// Result of [`dedupe_findings`]: every paragraph, and for each the index (into `paragraphs`) of
/// the first paragraph with the same key, itself when it is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    pub paragraphs: Vec<Paragraph>,
    pub first: Vec<u32>,
}

/// Splits every text of `src` into paragraphs and keeps the first occurrence of each key; keys
/// shorter than `min_key_units` code units never deduplicate.
pub fn dedupe_findings<S: Utf16Source>(src: &S, min_key_units: usize) -> Findings {
    let mut findings = Findings::default();
    let mut seen: AHashMap<Vec<u16>, u32> = AHashMap::new();
    let mut key = Vec::new();
    for text in 0..src.count() {
        let before = findings.paragraphs.len();
        src.with_units(text, |units| {
            split_paragraphs(units, text, &mut findings.paragraphs);
            for p in &findings.paragraphs[before..] {
                let index = to_u32(findings.first.len());
                key.clear();
                paragraph_key_into(&units[p.start..p.end], &mut key);
                if key.len() < min_key_units {
                    findings.first.push(index);
                    continue;
                }
                match seen.get(key.as_slice()) {
                    Some(&first) => findings.first.push(first),
                    None => {
                        seen.insert(key.clone(), index);
                        findings.first.push(index);
                    }
                }
            }
        });
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Utf16Arena;

    fn u(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    fn key(units: &[u16]) -> Vec<u16> {
        let mut out = Vec::new();
        paragraph_key_into(units, &mut out);
        out
    }

    fn paragraphs(s: &str) -> Vec<String> {
        let units = u(s);
        let mut out = Vec::new();
        split_paragraphs(&units, 0, &mut out);
        out.iter()
            .map(|p| String::from_utf16(&units[p.start..p.end]).unwrap())
            .collect()
    }

    #[test]
    fn splits_on_blank_lines() {
        assert_eq!(paragraphs("a\n\nb"), ["a", "b"]);
        assert_eq!(paragraphs("a\nb"), ["a\nb"]);
        assert_eq!(paragraphs("\n\n a \n\n\n\nb\n"), ["a", "b"]);
        assert_eq!(paragraphs("a\r\n\r\nb\r\nc"), ["a", "b\r\nc"]);
        assert_eq!(paragraphs("a\n \t\u{FEFF}\nb"), ["a", "b"]);
        // U+0085 is not JavaScript whitespace: that line is not blank.
        assert_eq!(paragraphs("a\n\u{0085}\nb"), ["a\n\u{0085}\nb"]);
        assert_eq!(paragraphs(""), Vec::<String>::new());
        assert_eq!(paragraphs(" \n\u{2028}\n"), Vec::<String>::new());
    }

    #[test]
    fn key_collapses_whitespace_and_lowercases_like_javascript() {
        assert_eq!(key(&u("  Hello \t\n  WORLD  ")), u("hello world"));
        assert_eq!(key(&u("\u{FEFF}A\u{FEFF}\u{3000}B\u{FEFF}")), u("a b"));
        // U+0085 is kept (JS `\s` does not match it), and lowercases to itself.
        assert_eq!(key(&u("\u{0085}A\u{0085}")), u("\u{0085}a\u{0085}"));
        // Final sigma: word-final Σ becomes ς, also when the word ends at collapsed whitespace.
        assert_eq!(key(&u("ΟΔΟΣ\n\n  ΣΑΣ")), u("οδος σας"));
        assert_eq!(key(&u("ΑΣ\u{2028}Β")), u("ας β"));
        // U+FEFF is whitespace and Case_Ignorable: the sigma sees the letter beyond it.
        assert_eq!(key(&u("AΣ\u{FEFF}B")), u("aσ b"));
        assert_eq!(key(&u("A\u{FEFF}ΣB")), u("a σb"));
        assert_eq!(key(&u("AΣ\u{FEFF}")), u("aς"));
        // Dotted capital I lowercases to i + combining dot above (two code units).
        assert_eq!(key(&u("\u{0130}STANBUL")), u("i\u{0307}stanbul"));
        // Lone surrogates pass through.
        assert_eq!(key(&[0x41, 0x20, 0x20, 0xD800]), vec![0x61, 0x20, 0xD800]);
    }

    #[test]
    fn keeps_first_occurrence_across_texts() {
        let arena = Utf16Arena::from_strs(&[
            "Rust is a systems programming language.\n\nshort\n\nSecond unique paragraph here.",
            "rust   is a SYSTEMS programming\nlanguage.\n\nshort\n\nA third paragraph, long enough.",
        ]);
        let f = dedupe_findings(&arena, DEFAULT_MIN_KEY_UNITS);
        assert_eq!(f.paragraphs.len(), 6);
        assert_eq!(f.first, vec![0, 1, 2, 0, 4, 5]);
        assert_eq!(
            f.paragraphs[3],
            Paragraph {
                text: 1,
                start: 0,
                end: 41
            }
        );
    }

    #[test]
    fn min_key_length_boundary() {
        let nineteen = "abcdefghijklmnopqrs";
        let twenty = "abcdefghijklmnopqrst";
        let arena = Utf16Arena::from_strs(&[nineteen, nineteen, twenty, twenty]);
        assert_eq!(
            dedupe_findings(&arena, DEFAULT_MIN_KEY_UNITS).first,
            vec![0, 1, 2, 2]
        );
        // The key length counts after lowercasing: 19 units with İ become 20.
        let dotted = "\u{0130}bcdefghijklmnopqrs";
        let arena = Utf16Arena::from_strs(&[dotted, dotted]);
        assert_eq!(
            dedupe_findings(&arena, DEFAULT_MIN_KEY_UNITS).first,
            vec![0, 0]
        );
    }

    #[test]
    fn empty_batch() {
        let f = dedupe_findings(&Utf16Arena::new(), DEFAULT_MIN_KEY_UNITS);
        assert!(f.paragraphs.is_empty() && f.first.is_empty());
    }

    proptest::proptest! {
        #[test]
        fn paragraphs_are_trimmed_ordered_and_free_of_blank_lines(
            units in proptest::collection::vec(proptest::sample::select(vec![
                0x61u16, 0x42, 0x20, 0x09, 0x0A, 0x0A, 0x0D, 0x85, 0xFEFF, 0x2028, 0x3A3, 0xD800, 0xDC00,
            ]), 0..80)
        ) {
            let mut out = Vec::new();
            split_paragraphs(&units, 0, &mut out);
            let mut last_end = 0;
            for p in &out {
                proptest::prop_assert!(p.start >= last_end && p.start < p.end && p.end <= units.len());
                let text = &units[p.start..p.end];
                proptest::prop_assert_eq!(js_trim(text), text);
                for line in text.split(|&u| u == LF) {
                    proptest::prop_assert!(!js_trim(line).is_empty());
                }
                last_end = p.end;
            }
            // Nothing but whitespace lies outside the paragraphs.
            let mut covered = vec![false; units.len()];
            for p in &out {
                covered[p.start..p.end].iter_mut().for_each(|c| *c = true);
            }
            for (i, &u) in units.iter().enumerate() {
                proptest::prop_assert!(covered[i] || is_js_whitespace(u));
            }
        }

        #[test]
        fn keys_are_idempotent(units in proptest::collection::vec(proptest::sample::select(vec![
            0x61u16, 0x42, 0x20, 0x09, 0x0A, 0x85, 0xFEFF, 0x130, 0x3A3, 0xD800, 0xDC00,
        ]), 0..40)) {
            let once = key(&units);
            proptest::prop_assert_eq!(key(&once), once);
        }
    }
}
