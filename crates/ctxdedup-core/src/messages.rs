//! Message dedup: eligibility, keep-target rule and the exact pass; [`crate::fuzzy`] holds the
//! near-duplicate pass. The rules follow context-compression-engine's dedup as described in
//! `shared/golden/cce/README.md`, with the keep rule and the minimum length made configurable.

use crate::exact::group_exact;
use crate::fuzzy::fuzzy_groups;
use crate::source::{Subset, Utf16Source, PREFETCH_DISTANCE};
use crate::to_u32;

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
            slot[r] = to_u32(groups.len());
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
    /// `Some(kept_from)`: ctxdedup's visible-targets rule, where annotated messages at
    /// `index >= kept_from` stay in full (the recency window; the message count for none). No
    /// reference may point at a replaced message: an exact duplicate whose keep target is a
    /// replaced near duplicate is redirected to that near duplicate's keep target, as a near
    /// duplicate with the same similarity (see [`resolve_chains`]). `None`: context-compression-
    /// engine's behaviour, where such `a -dup-> c -near-> d` chains stay as they are.
    pub visible_targets: Option<usize>,
}

/// Which copy of a duplicate group a caller asks to keep, by name (see [`KeepRule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// [`KeepRule::Earliest`].
    Earliest,
    /// [`KeepRule::Latest`], with the recency window of [`AnalyzeSettings::recency_start`].
    Latest,
}

/// The options of [`analyze`] as a caller states them: plain values, each meaning one thing.
/// [`AnalyzeOptions::from`] applies the rules that combine them (the keep rule's recency window,
/// the visible-targets default), so a binding converts values and decides nothing.
#[derive(Debug, Clone)]
pub struct AnalyzeSettings {
    /// [`Eligibility::min_chars`].
    pub min_chars: usize,
    /// [`Eligibility::skip_prefixes`].
    pub skip_prefixes: Vec<Vec<u16>>,
    pub keep: Keep,
    /// Index of the first message of the recency window (0: none). With [`Keep::Latest`], the
    /// first group member from there on is kept; with visible targets, annotated messages from
    /// there on stay in full.
    pub recency_start: usize,
    /// Run the exact pass.
    pub exact: bool,
    /// `Some(threshold)` runs the fuzzy pass.
    pub fuzzy_threshold: Option<f64>,
    /// Whether a reference may only point at a message kept in full; `None` is the default,
    /// `true` (ctxdedup's rule; `false` is context-compression-engine's behaviour, chains
    /// included). See [`AnalyzeOptions::visible_targets`].
    pub visible_targets: Option<bool>,
}

impl From<AnalyzeSettings> for AnalyzeOptions {
    fn from(s: AnalyzeSettings) -> Self {
        AnalyzeOptions {
            eligibility: Eligibility {
                min_chars: s.min_chars,
                skip_prefixes: s.skip_prefixes,
            },
            keep: match s.keep {
                Keep::Earliest => KeepRule::Earliest,
                Keep::Latest => KeepRule::Latest {
                    recency_start: s.recency_start,
                },
            },
            exact: s.exact,
            fuzzy_threshold: s.fuzzy_threshold,
            visible_targets: s.visible_targets.unwrap_or(true).then_some(s.recency_start),
        }
    }
}

/// Both passes in one call: exact first, then fuzzy over the eligible messages the exact pass
/// did not annotate (keep targets of exact groups take part, giving `a -dup-> c -near-> d`,
/// which [`AnalyzeOptions::visible_targets`] resolves to `a -near-> d`).
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
    match options.visible_targets {
        Some(kept_from) => resolve_chains(src, exact, fuzzy, kept_from),
        None => (exact, fuzzy),
    }
}

/// Redirects references that would point at a replaced message. The only such references are
/// exact ones whose keep target `t` was then annotated as a near duplicate of `f` by the fuzzy
/// pass and is replaced (`t < kept_from`): fuzzy keep targets are never annotated by either pass,
/// so `f` stays in full. Such an exact duplicate has `t`'s content, so it becomes a near duplicate
/// of `f` with `t`'s similarity. Annotations at `index >= kept_from` stay in full and are left
/// alone as targets.
pub fn resolve_chains<S: Utf16Source>(
    src: &S,
    exact: Vec<Annotation>,
    mut fuzzy: Vec<Annotation>,
    kept_from: usize,
) -> (Vec<Annotation>, Vec<Annotation>) {
    if exact.is_empty() || fuzzy.is_empty() {
        return (exact, fuzzy);
    }
    let mut replaced_near: Vec<Option<(usize, Option<f64>)>> = vec![None; src.count()];
    for a in fuzzy.iter().filter(|a| a.index < kept_from) {
        replaced_near[a.index] = Some((a.duplicate_of, a.similarity));
    }
    let mut kept = Vec::with_capacity(exact.len());
    for a in exact {
        match replaced_near[a.duplicate_of] {
            Some((target, similarity)) => fuzzy.push(Annotation {
                index: a.index,
                duplicate_of: target,
                content_length: src.len_of(a.index),
                similarity,
            }),
            None => kept.push(a),
        }
    }
    (kept, fuzzy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Utf16Arena;
    use proptest::prelude::*;

    fn options(keep: KeepRule, visible_targets: Option<usize>) -> AnalyzeOptions {
        AnalyzeOptions {
            eligibility: Eligibility {
                min_chars: 0,
                skip_prefixes: Vec::new(),
            },
            keep,
            exact: true,
            fuzzy_threshold: Some(0.85),
            visible_targets,
        }
    }

    #[test]
    fn exact_duplicate_of_a_replaced_near_duplicate_points_at_its_keep_target() {
        let a: Vec<String> = (0..20).map(|i| format!("line {i} of the file")).collect();
        let mut b = a.clone();
        b[7] = "an edited line".into();
        let (a, b) = (a.join("\n"), b.join("\n"));
        let arena = Utf16Arena::from_strs(&[&b, &b, &a]);
        let keep = KeepRule::Latest { recency_start: 3 };
        // context-compression-engine: m0 -dup-> m1 -near-> m2, so m0 points at a replaced message.
        let (exact, fuzzy) = analyze(&arena, &[], &[], &options(keep, None));
        assert_eq!((exact[0].index, exact[0].duplicate_of), (0, 1));
        assert_eq!((fuzzy[0].index, fuzzy[0].duplicate_of), (1, 2));
        // ctxdedup: m0 is a near duplicate of m2, with m1's similarity.
        let (exact, fuzzy) = analyze(&arena, &[], &[], &options(keep, Some(3)));
        assert!(exact.is_empty());
        let sim = fuzzy[0].similarity;
        assert_eq!(
            fuzzy,
            vec![
                Annotation {
                    index: 1,
                    duplicate_of: 2,
                    content_length: b.encode_utf16().count(),
                    similarity: sim
                },
                Annotation {
                    index: 0,
                    duplicate_of: 2,
                    content_length: b.encode_utf16().count(),
                    similarity: sim
                }
            ]
        );
        // Keep earliest: [A, B, B] gives m2 -dup-> m1 -near-> m0, redirected to m0 ...
        let arena = Utf16Arena::from_strs(&[&a, &b, &b]);
        let (exact, fuzzy) = analyze(&arena, &[], &[], &options(KeepRule::Earliest, Some(3)));
        assert!(exact.is_empty());
        let pairs: Vec<(usize, usize)> = fuzzy.iter().map(|a| (a.index, a.duplicate_of)).collect();
        assert_eq!(pairs, vec![(1, 0), (2, 0)]);
        // ... unless m1 sits in the recency window: it stays in full, and m2 keeps pointing at it.
        let (exact, fuzzy) = analyze(&arena, &[], &[], &options(KeepRule::Earliest, Some(1)));
        assert_eq!((exact[0].index, exact[0].duplicate_of), (2, 1));
        assert_eq!((fuzzy[0].index, fuzzy[0].duplicate_of), (1, 0));
    }

    proptest! {
        /// Oracle: every replaced message (annotated, before `kept_from`) points at a message that
        /// is not replaced; the set of annotated messages is CCE's; a redirected reference has the
        /// multiset Jaccard of its content and its new target.
        #[test]
        fn references_only_point_at_messages_kept_in_full(
            docs in prop::collection::vec(
                prop::sample::select(vec![0usize, 1, 2, 3, 4, 5]), 1..30),
            earliest in any::<bool>(),
            window in 0usize..6,
            threshold in prop::sample::select(vec![0.0, 0.5, 0.85, 1.0]),
        ) {
            let base: Vec<String> = (0..12).map(|i| format!("line {i}")).collect();
            let variant = |k: usize| -> String {
                let mut lines = base.clone();
                if k > 0 {
                    lines[k] = format!("edited {k}");
                }
                if k == 5 {
                    lines[2] = "edited two".into();
                }
                lines.join("\n")
            };
            let texts: Vec<String> = docs.iter().map(|&k| variant(k)).collect();
            let arena = Utf16Arena::from_strs(&texts);
            let n = texts.len();
            let kept_from = if window == 0 { n } else { n.saturating_sub(window) };
            let keep = if earliest { KeepRule::Earliest } else { KeepRule::Latest { recency_start: kept_from } };
            let mut o = options(keep, None);
            o.fuzzy_threshold = Some(threshold);
            let (cce_exact, cce_fuzzy) = analyze(&arena, &[], &[], &o);
            o.visible_targets = Some(kept_from);
            let (exact, fuzzy) = analyze(&arena, &[], &[], &o);

            let all: Vec<&Annotation> = exact.iter().chain(fuzzy.iter()).collect();
            let replaced: Vec<bool> = {
                let mut r = vec![false; n];
                for a in &all {
                    if a.index < kept_from {
                        r[a.index] = true;
                    }
                }
                r
            };
            for a in &all {
                if a.index < kept_from {
                    prop_assert!(!replaced[a.duplicate_of], "{:?} points at a replaced message", a);
                }
            }
            let mut got: Vec<usize> = all.iter().map(|a| a.index).collect();
            let mut want: Vec<usize> = cce_exact.iter().chain(cce_fuzzy.iter()).map(|a| a.index).collect();
            got.sort_unstable();
            want.sort_unstable();
            prop_assert_eq!(got, want);
            prop_assert!(exact.iter().all(|a| texts[a.index] == texts[a.duplicate_of]));
            let members = crate::fuzzy::build_members(&arena, &(0..n).collect::<Vec<_>>());
            for a in &fuzzy {
                let m = |i: usize| members.iter().find(|m| m.index == i).unwrap();
                prop_assert_eq!(a.similarity, Some(crate::fuzzy::jaccard(m(a.index), m(a.duplicate_of))));
                prop_assert_eq!(a.content_length, texts[a.index].len());
            }
        }
    }

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
