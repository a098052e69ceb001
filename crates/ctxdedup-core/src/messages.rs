//! Message dedup: eligibility, keep-target rule and the exact pass; [`crate::fuzzy`] holds the
//! near-duplicate pass. The rules follow context-compression-engine's dedup as described in
//! `shared/golden/cce/README.md`, with the keep rule and the minimum length made configurable.

use crate::exact::group_exact;
use crate::fuzzy::fuzzy_groups;
use crate::source::{Subset, Utf16Source, PREFETCH_DISTANCE};

/// Which copy of a duplicate group stays in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepRule {
    /// The first member at or after `recency_start` if `recency_start > 0` and one exists,
    /// otherwise the last member (context-compression-engine's rule).
    Latest { recency_start: usize },
    /// The first member: later copies become references, so a prompt-cache prefix stays stable.
    Earliest,
}

impl KeepRule {
    /// The keep target among `members` (ascending message indices, at least one).
    pub fn choose(self, members: &[usize]) -> usize {
        match self {
            KeepRule::Earliest => members[0],
            KeepRule::Latest { recency_start } => {
                let in_window = members.iter().copied().find(|&m| m >= recency_start);
                match in_window {
                    Some(m) if recency_start > 0 => m,
                    _ => members[members.len() - 1],
                }
            }
        }
    }
}

/// Who may be deduplicated at all.
#[derive(Debug, Clone)]
pub struct Eligibility {
    /// Minimum content length in UTF-16 code units (CCE: 200).
    pub min_chars: usize,
    /// Contents starting with any of these (case-sensitive, untrimmed) are left alone.
    pub skip_prefixes: Vec<Vec<u16>>,
}

impl Eligibility {
    /// context-compression-engine's rule: at least 200 units, no summary/truncation marker.
    pub fn cce() -> Self {
        Self {
            min_chars: 200,
            skip_prefixes: ["[summary:", "[summary#", "[truncated"]
                .iter()
                .map(|p| p.encode_utf16().collect())
                .collect(),
        }
    }

    /// Indices of eligible messages, ascending. `blocked[i]` marks messages excluded by their
    /// shape (preserved role, tool calls, non-string content), which only the caller can see.
    pub fn eligible<S: Utf16Source>(&self, src: &S, blocked: &[bool]) -> Vec<usize> {
        let sized: Vec<usize> = (0..src.count())
            .filter(|&i| !blocked.get(i).copied().unwrap_or(false))
            .filter(|&i| src.len_of(i) >= self.min_chars)
            .collect();
        if self.skip_prefixes.is_empty() {
            return sized;
        }
        // Reading each prefix is a cache miss in a large batch: ask for a few ahead.
        sized
            .iter()
            .enumerate()
            .filter(|&(k, &i)| {
                if let Some(&ahead) = sized.get(k + PREFETCH_DISTANCE) {
                    src.prefetch(ahead);
                }
                !self.skip_prefixes.iter().any(|p| src.starts_with(i, p))
            })
            .map(|(_, &i)| i)
            .collect()
    }
}

/// One message found to duplicate another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Annotation {
    /// The duplicate message.
    pub index: usize,
    /// The keep target it refers to.
    pub duplicate_of: usize,
    /// Exact pass: the keep target's length; fuzzy pass: the message's own length (UTF-16 units).
    pub content_length: usize,
    /// Fuzzy pass only: multiset line Jaccard between this message and the keep target.
    pub similarity: Option<f64>,
}

/// Exact pass over the `eligible` messages: groups of identical content; every member but the
/// keep target is annotated. Groups come in order of their first member, members ascending.
pub fn exact_duplicates<S: Utf16Source>(
    src: &S,
    eligible: &[usize],
    keep: KeepRule,
) -> Vec<Annotation> {
    let view = Subset {
        inner: src,
        indices: eligible,
    };
    let reps = group_exact(&view);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut slot = vec![u32::MAX; eligible.len()];
    let mut sizes = vec![0u32; eligible.len()];
    for &r in &reps {
        sizes[r as usize] += 1;
    }
    for (local, &r) in reps.iter().enumerate() {
        let r = r as usize;
        if sizes[r] < 2 {
            continue;
        }
        if slot[r] == u32::MAX {
            slot[r] = groups.len() as u32;
            groups.push(Vec::new());
        }
        groups[slot[r] as usize].push(eligible[local]);
    }
    let mut out = Vec::new();
    for members in groups {
        let target = keep.choose(&members);
        let length = src.len_of(target);
        out.extend(
            members
                .iter()
                .filter(|&&m| m != target)
                .map(|&m| Annotation {
                    index: m,
                    duplicate_of: target,
                    content_length: length,
                    similarity: None,
                }),
        );
    }
    out
}

/// Fuzzy pass over `participants` (eligible messages not already annotated by the exact pass).
pub fn fuzzy_duplicates<S: Utf16Source>(
    src: &S,
    participants: &[usize],
    threshold: f64,
    keep: KeepRule,
) -> Vec<Annotation> {
    let mut out = Vec::new();
    for group in fuzzy_groups(src, participants, threshold) {
        let indices: Vec<usize> = group.members.iter().map(|m| m.index).collect();
        let target = keep.choose(&indices);
        let target_pos = indices.iter().position(|&i| i == target).unwrap_or(0);
        for (pos, member) in group.members.iter().enumerate() {
            if pos != target_pos {
                out.push(Annotation {
                    index: member.index,
                    duplicate_of: target,
                    content_length: member.raw_len,
                    similarity: Some(group.similarity(pos, target_pos)),
                });
            }
        }
    }
    out
}

/// Options for [`analyze`].
#[derive(Debug, Clone)]
pub struct AnalyzeOptions {
    pub eligibility: Eligibility,
    pub keep: KeepRule,
    pub exact: bool,
    /// `Some(threshold)` runs the fuzzy pass.
    pub fuzzy_threshold: Option<f64>,
}

/// Both passes in one call: exact first, then fuzzy over the eligible messages the exact pass
/// did not annotate (keep targets of exact groups take part, giving `a -dup-> c -near-> d`).
/// `fuzzy_excluded[i]` additionally keeps message `i` out of the fuzzy pass (a caller that ran
/// the exact pass elsewhere passes its annotated messages here).
pub fn analyze<S: Utf16Source>(
    src: &S,
    blocked: &[bool],
    fuzzy_excluded: &[bool],
    options: &AnalyzeOptions,
) -> (Vec<Annotation>, Vec<Annotation>) {
    let eligible = options.eligibility.eligible(src, blocked);
    let exact = if options.exact {
        exact_duplicates(src, &eligible, options.keep)
    } else {
        Vec::new()
    };
    let fuzzy = match options.fuzzy_threshold {
        Some(threshold) => {
            let mut annotated: Vec<bool> = (0..src.count())
                .map(|i| fuzzy_excluded.get(i).copied().unwrap_or(false))
                .collect();
            for a in &exact {
                annotated[a.index] = true;
            }
            let participants: Vec<usize> =
                eligible.into_iter().filter(|&i| !annotated[i]).collect();
            fuzzy_duplicates(src, &participants, threshold, options.keep)
        }
        None => Vec::new(),
    };
    (exact, fuzzy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Utf16Arena;

    #[test]
    fn keep_rule_follows_recency_window() {
        let latest = |recency_start| KeepRule::Latest { recency_start };
        assert_eq!(latest(0).choose(&[1, 4, 9]), 9);
        assert_eq!(latest(5).choose(&[1, 4, 9, 12]), 9);
        assert_eq!(latest(20).choose(&[1, 4, 9]), 9);
        assert_eq!(KeepRule::Earliest.choose(&[1, 4, 9]), 1);
    }

    #[test]
    fn exact_pass_respects_eligibility() {
        let long = "x".repeat(200);
        let short = "y".repeat(199);
        let summary = format!("[summary:{long}");
        let arena =
            Utf16Arena::from_strs(&[&long, &short, &long, &short, &summary, &summary, &long]);
        let eligibility = Eligibility::cce();
        let eligible =
            eligibility.eligible(&arena, &[false, false, false, false, false, false, true]);
        assert_eq!(eligible, vec![0, 2]);
        let out = exact_duplicates(&arena, &eligible, KeepRule::Latest { recency_start: 7 });
        assert_eq!(
            out,
            vec![Annotation {
                index: 0,
                duplicate_of: 2,
                content_length: 200,
                similarity: None
            }]
        );
    }
}
