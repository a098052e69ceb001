//! Stage `deduplicate` for scored items (Cupel pipeline, Stage 3).
//!
//! Duplicates are items with byte-exact equal content. In each group the survivor is the item
//! with the highest score; a later item replaces the current best only on a strictly greater
//! score, so ties (including -0 vs +0) go to the lowest index.

use crate::exact::group_exact;
use crate::source::Utf16Source;
use crate::to_u32;
use crate::LengthMismatch;

/// For every item, the index of the survivor of its duplicate group (itself if it survives).
///
/// `scores` must have one entry per content (else the error) and contain no NaN (callers
/// validate; a NaN never wins a comparison here).
pub fn survivors<S: Utf16Source>(src: &S, scores: &[f64]) -> Result<Vec<u32>, LengthMismatch> {
    LengthMismatch::check("score", "content", src.count(), scores.len())?;
    let groups = group_exact(src);
    Ok(survivors_of_groups(&groups, scores))
}

/// Survivor selection given precomputed groups (`groups[i]` = first index with i's content,
/// one score per group entry).
fn survivors_of_groups(groups: &[u32], scores: &[f64]) -> Vec<u32> {
    let mut best: Vec<u32> = (0..to_u32(groups.len())).collect();
    for (i, &g) in groups.iter().enumerate() {
        let g = g as usize;
        if g != i && scores[i] > scores[best[g] as usize] {
            best[g] = to_u32(i);
        }
    }
    groups.iter().map(|&g| best[g as usize]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Utf16Arena;
    use proptest::prelude::*;

    #[test]
    fn highest_score_wins_ties_to_lowest_index() {
        let arena = Utf16Arena::from_strs(&["a", "b", "a", "a", "b"]);
        let out = survivors(&arena, &[1.0, 2.0, 3.0, 3.0, 2.0]).unwrap();
        assert_eq!(out, vec![2, 1, 2, 2, 1]);
        let zeros = Utf16Arena::from_strs(&["z", "z"]);
        assert_eq!(survivors(&zeros, &[0.0, -0.0]).unwrap(), vec![0, 0]);
        assert_eq!(survivors(&zeros, &[-0.0, 0.0]).unwrap(), vec![0, 0]);
        assert_eq!(
            survivors(&zeros, &[f64::NEG_INFINITY, f64::INFINITY]).unwrap(),
            vec![1, 1]
        );
    }

    #[test]
    fn one_score_per_content_or_an_error() {
        let arena = Utf16Arena::from_strs(&["a", "a"]);
        let error = survivors(&arena, &[1.0]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "one score per content is required: 1 for 2 contents"
        );
        assert!(survivors(&arena, &[1.0, 2.0, 3.0]).is_err());
    }

    proptest! {
        #[test]
        fn survivor_is_maximal_and_unique(items in prop::collection::vec((0u8..6, -3i8..4), 0..60)) {
            let contents: Vec<String> = items.iter().map(|(c, _)| format!("c{c}")).collect();
            let scores: Vec<f64> = items.iter().map(|(_, s)| f64::from(*s)).collect();
            let arena = Utf16Arena::from_strs(&contents);
            let out = survivors(&arena, &scores).unwrap();
            for (i, &s) in out.iter().enumerate() {
                let s = s as usize;
                // Same content, score at least as high, and the first index with that best score.
                prop_assert_eq!(&contents[s], &contents[i]);
                prop_assert!(scores[s] >= scores[i]);
                for j in 0..contents.len() {
                    if contents[j] == contents[i] {
                        prop_assert!(scores[j] <= scores[s]);
                        if scores[j] == scores[s] { prop_assert!(j >= s); }
                    }
                }
            }
            // Survivors (items that are their own survivor) have pairwise distinct contents.
            let kept: Vec<&String> = out.iter().enumerate().filter(|(i, &s)| *i == s as usize).map(|(i, _)| &contents[i]).collect();
            let mut dedup = kept.clone();
            dedup.sort();
            dedup.dedup();
            prop_assert_eq!(dedup.len(), kept.len());
        }
    }
}
