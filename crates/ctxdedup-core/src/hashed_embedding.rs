//! The built-in offline embedding: signed feature hashing of words and character trigrams.
//!
//! It needs no model and is deterministic across processes and platforms (FNV-1a over UTF-16
//! code units, never a seeded hasher), so vectors can be persisted next to memories. It captures
//! lexical overlap, not meaning: two rewordings that share few words score low. Production
//! deployments should pass a neural sentence embedder; this one keeps the library working
//! offline and in tests.
//!
//! Features of one text (version [`HASHED_EMBEDDING_VERSION`]):
//! - the text is lowercased with JavaScript `toLowerCase()` semantics;
//! - words are maximal runs of units that are ASCII letters or digits, or any unit ≥ U+0080;
//! - each word adds weight 1 to the feature `word`, and each trigram of ` word ` (the word padded
//!   with one space on both sides) adds weight 0.5;
//! - a feature's FNV-1a hash picks the component (`hash % dim`) and the sign (top bit);
//! - the vector is scaled to unit length (all zeros when the text has no word).

use crate::js_text::js_to_lower_case_into;
use crate::source::Utf16Source;
use crate::vectors::VectorError;

/// Bumped whenever the features or hashing change, which changes every vector.
pub const HASHED_EMBEDDING_VERSION: u32 = 1;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// Distinguishes word features from trigram features that happen to have the same units.
const WORD_SEED: u64 = 0x9e37_79b9_7f4a_7c15;
const WORD_WEIGHT: f32 = 1.0;
const TRIGRAM_WEIGHT: f32 = 0.5;

fn fnv1a(seed: u64, units: &[u16]) -> u64 {
    let mut h = FNV_OFFSET ^ seed;
    for &u in units {
        h ^= (u & 0xff) as u64;
        h = h.wrapping_mul(FNV_PRIME);
        h ^= (u >> 8) as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

fn is_word_unit(u: u16) -> bool {
    u >= 0x80 || u8::try_from(u).is_ok_and(|b| b.is_ascii_alphanumeric())
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "the remainder is below the vector's length"
)]
fn add_feature(vector: &mut [f32], hash: u64, weight: f32) {
    let slot = (hash % vector.len() as u64) as usize;
    if hash >> 63 == 1 {
        vector[slot] -= weight;
    } else {
        vector[slot] += weight;
    }
}

/// Embeds one lowercased text into `vector` (zeroed by the caller).
fn embed_one(lower: &[u16], vector: &mut [f32], padded: &mut Vec<u16>) {
    for word in lower.split(|&u| !is_word_unit(u)).filter(|w| !w.is_empty()) {
        add_feature(vector, fnv1a(WORD_SEED, word), WORD_WEIGHT);
        padded.clear();
        padded.push(u16::from(b' '));
        padded.extend_from_slice(word);
        padded.push(u16::from(b' '));
        for gram in padded.windows(3) {
            add_feature(vector, fnv1a(0, gram), TRIGRAM_WEIGHT);
        }
    }
    let norm = vector
        .iter()
        .map(|&v| v as f64 * v as f64)
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "f32 vectors, scaled in f64 for accuracy"
        )]
        let scale = (1.0 / norm) as f32;
        vector.iter_mut().for_each(|v| *v *= scale);
    }
}

/// Embeds every content of `source` into `dim` components each, row-major; a `dim` of zero is
/// [`VectorError::ZeroDimension`].
pub fn embed_hashed<S: Utf16Source>(source: &S, dim: usize) -> Result<Vec<f32>, VectorError> {
    if dim == 0 {
        return Err(VectorError::ZeroDimension);
    }
    let n = source.count();
    let mut out = vec![0f32; n * dim];
    let mut lower = Vec::new();
    let mut padded = Vec::new();
    for (i, vector) in out.chunks_exact_mut(dim).enumerate() {
        lower.clear();
        source.with_units(i, |units| js_to_lower_case_into(units, &mut lower));
        embed_one(&lower, vector, &mut padded);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Utf16Arena;
    use crate::vectors::cosine;

    fn embed(texts: &[&str], dim: usize) -> Vec<Vec<f32>> {
        embed_hashed(&Utf16Arena::from_strs(texts), dim)
            .unwrap()
            .chunks(dim)
            .map(<[f32]>::to_vec)
            .collect()
    }

    #[test]
    fn unit_length_deterministic_and_case_insensitive() {
        let v = embed(
            &["The user prefers dark mode", "the USER prefers Dark mode."],
            256,
        );
        let norm: f32 = v[0].iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5);
        assert_eq!(v[0], v[1]);
        assert_eq!(v[0], embed(&["The user prefers dark mode"], 256)[0]);
    }

    #[test]
    fn zero_dimension_is_an_error() {
        let texts = Utf16Arena::from_strs(&["a"]);
        assert_eq!(embed_hashed(&texts, 0), Err(VectorError::ZeroDimension));
    }

    #[test]
    fn empty_and_wordless_texts_are_zero() {
        let v = embed(&["", "  ... !!"], 64);
        assert!(v.iter().flatten().all(|&x| x == 0.0));
    }

    #[test]
    fn overlap_orders_similarity() {
        let v = embed(
            &[
                "Alice's favourite editor is Neovim with the gruvbox theme",
                "Alice's favorite editor is Neovim with the gruvbox theme",
                "Alice uses Neovim as her editor",
                "The deployment pipeline runs on GitHub Actions every night",
            ],
            512,
        );
        let near = cosine(&v[0], &v[1]);
        let reworded = cosine(&v[0], &v[2]);
        let unrelated = cosine(&v[0], &v[3]);
        assert!(near > 0.9, "{near}");
        assert!(
            near > reworded && reworded > unrelated,
            "{reworded} {unrelated}"
        );
        assert!(unrelated < 0.3, "{unrelated}");
    }

    #[test]
    fn pinned_vectors_guard_the_version() {
        // If these change, bump HASHED_EMBEDDING_VERSION: persisted vectors would be stale.
        let v = embed_hashed(&Utf16Arena::from_strs(&["ab", "Straße café"]), 8).unwrap();
        let h = std::f32::consts::FRAC_1_SQRT_2;
        #[rustfmt::skip]
        let expected = [
            0.0, 0.0, 0.0, h, 0.0, 0.0, -h, 0.0,
            -0.25, 0.0, 0.25, 0.25, 0.0, -0.5, -0.75, 0.0,
        ];
        for (a, b) in v.iter().zip(expected) {
            assert!((a - b).abs() < 1e-6, "{v:?}");
        }
        assert_eq!(HASHED_EMBEDDING_VERSION, 1);
    }
}
