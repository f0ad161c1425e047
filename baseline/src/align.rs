//! Aligning a failing call's path with the success shapes of its handler.
//!
//! Paths are steps in call order ([`super::trace`]): a probe id with its outcome, a failure
//! marked where it was born. The noise between successes is subtracted first, the
//! way Anduril (SOSP '24) cancels run-to-run differences: an id that some success shape has
//! outside its longest common subsequence (LCS) with the most common shape differs between
//! good runs, so it says nothing about a failure and is left out of both sides. The nearest
//! shape is the one with the longest LCS with the failing path (ties: the more common shape,
//! then the first). The bifurcation is where the failing path stops following that shape: the
//! last step of their common prefix, the function the shape entered next and the one the call
//! entered next (or the same one, failing).

use std::collections::BTreeSet;

/// Length of the longest common subsequence of `a` and `b` (O(|a|·|b|) time, O(|b|) space;
/// paths are at most `TRACE_STEPS` long).
pub(crate) fn lcs_len(a: &[u32], b: &[u32]) -> usize {
    let mut row = vec![0usize; b.len() + 1];
    for &x in a {
        let mut diag = 0;
        for (j, &y) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if x == y { diag + 1 } else { up.max(row[j]) };
            diag = up;
        }
    }
    row[b.len()]
}

/// Which elements of `a` lie on one LCS of `a` and `b` (a standard traceback).
fn on_lcs(a: &[u32], b: &[u32]) -> Vec<bool> {
    let (n, m) = (a.len(), b.len());
    // suffix table: t[i][j] = LCS of a[i..] and b[j..]
    let mut t = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[i][j] = if a[i] == b[j] {
                t[i + 1][j + 1] + 1
            } else {
                t[i + 1][j].max(t[i][j + 1])
            };
        }
    }
    let mut on = vec![false; n];
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if a[i] == b[j] {
            on[i] = true;
            i += 1;
            j += 1;
        } else if t[i + 1][j] >= t[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    on
}

/// The noise of a handler's success shapes (with their counts): the ids some shape has off
/// its LCS with the most common shape. Only shapes near that one count (an LCS of at least
/// half the longer of the two): a different path altogether is another way to succeed, not
/// run-to-run noise, and would otherwise cancel everything.
pub(crate) fn noise(shapes: &[(&[u32], u64)]) -> BTreeSet<u32> {
    let Some(&(main, _)) = shapes
        .iter()
        .max_by_key(|(s, c)| (*c, std::cmp::Reverse(s.len())))
    else {
        return BTreeSet::new();
    };
    let mut out = BTreeSet::new();
    for &(s, _) in shapes {
        if 2 * lcs_len(s, main) < s.len().max(main.len()) {
            continue;
        }
        for (i, on) in on_lcs(s, main).into_iter().enumerate() {
            if !on {
                out.insert(s[i]);
            }
        }
        for (i, on) in on_lcs(main, s).into_iter().enumerate() {
            if !on {
                out.insert(main[i]);
            }
        }
    }
    out
}

/// Where a failing path left the nearest success shape.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Split {
    /// index of the shape compared with
    pub shape: usize,
    /// the last shared step (`None`: none, the split is at the handler's entry)
    pub after: Option<u32>,
    pub baseline_next: Option<u32>,
    pub this_next: Option<u32>,
    /// of all the successes, those whose path has the same steps up to the split and then
    /// `baseline_next`
    pub share: f64,
    /// the LCS of the path and the shape (noise left out)
    pub common: usize,
}

/// The split of `path` against `shapes` (probe ids and counts), `None` without shapes.
pub(crate) fn split(shapes: &[(&[u32], u64)], path: &[u32]) -> Option<Split> {
    let noise = noise(shapes);
    let clean =
        |s: &[u32]| -> Vec<u32> { s.iter().copied().filter(|i| !noise.contains(i)).collect() };
    let f = clean(path);
    let cleaned: Vec<(Vec<u32>, u64)> = shapes.iter().map(|&(s, c)| (clean(s), c)).collect();
    let (best, _) = cleaned
        .iter()
        .enumerate()
        .map(|(i, (s, c))| (i, (lcs_len(&f, s), *c)))
        // the longest LCS, then the most common; max_by_key keeps the last of equals: reverse
        .rev()
        .max_by_key(|&(_, k)| k)?;
    let s = &cleaned[best].0;
    let k = f.iter().zip(s).take_while(|(a, b)| a == b).count();
    let baseline_next = s.get(k).copied();
    let total: u64 = cleaned.iter().map(|(_, c)| c).sum();
    let same: u64 = cleaned
        .iter()
        .filter(|(o, _)| o.len() > k && o[..k] == f[..k] && o.get(k).copied() == baseline_next)
        .map(|(_, c)| c)
        .sum();
    Some(Split {
        shape: best,
        after: k.checked_sub(1).map(|i| f[i]),
        baseline_next,
        this_next: f.get(k).copied(),
        share: if total == 0 {
            0.0
        } else {
            same as f64 / total as f64
        },
        common: lcs_len(&f, s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcs_lengths() {
        assert_eq!(lcs_len(&[1, 2, 3, 4], &[1, 3, 4]), 3);
        assert_eq!(lcs_len(&[], &[1]), 0);
        assert_eq!(lcs_len(&[5, 1, 2], &[1, 2, 5]), 2);
    }

    #[test]
    fn the_split_names_the_last_shared_step_and_both_next_steps() {
        // successes: 1 2 3 (9 times), 1 2 4 3 (once: 4 is noise between good runs)
        let a = [1, 2, 3];
        let b = [1, 2, 4, 3];
        let shapes: Vec<(&[u32], u64)> = vec![(&a, 9), (&b, 1)];
        assert_eq!(noise(&shapes), [4].into());
        // the failing call went 1 then 7 (failed there) instead of 2
        let s = split(&shapes, &[1, 7]).expect("split");
        assert_eq!(
            (s.after, s.baseline_next, s.this_next),
            (Some(1), Some(2), Some(7))
        );
        assert_eq!(s.shape, 0);
        assert!((s.share - 1.0).abs() < 1e-9, "{}", s.share);
        // stopped after 1 2, where the successes went on to 3 (the noise step 4 left out)
        let s = split(&shapes, &[1, 2, 4]).expect("split");
        assert_eq!(
            (s.after, s.baseline_next, s.this_next),
            (Some(2), Some(3), None)
        );
        // diverged at the entry: no shared step
        let s = split(&shapes, &[8, 1]).expect("split");
        assert_eq!(
            (s.after, s.baseline_next, s.this_next),
            (None, Some(1), Some(8))
        );
        assert!(split(&[], &[1]).is_none());
    }

    #[test]
    fn the_share_counts_only_successes_that_took_the_same_steps_first() {
        let a = [1, 2, 3];
        let b = [1, 5, 3];
        let shapes: Vec<(&[u32], u64)> = vec![(&a, 3), (&b, 1)];
        // 2 and 5 differ between good runs: noise, so both shapes are 1 3
        let s = split(&shapes, &[1, 9]).expect("split");
        assert_eq!(
            (s.after, s.baseline_next, s.this_next),
            (Some(1), Some(3), Some(9))
        );
        assert!((s.share - 1.0).abs() < 1e-9);
        // a path far from the main one is another way to succeed, not noise
        let c = [6, 7];
        let shapes: Vec<(&[u32], u64)> = vec![(&a, 3), (&c, 1)];
        assert!(noise(&shapes).is_empty());
        let s = split(&shapes, &[1, 2, 9]).expect("split");
        assert_eq!((s.shape, s.after, s.this_next), (0, Some(2), Some(9)));
        assert!((s.share - 0.75).abs() < 1e-9, "{}", s.share);
        let s = split(&shapes, &[6, 9]).expect("split");
        assert_eq!((s.shape, s.after, s.baseline_next), (1, Some(6), Some(7)));
    }
}
