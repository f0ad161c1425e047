//! The transitive caller -> callee relation among a manifest's probes: what failure chains
//! ([`crate::chains`]) follow and what the probe table ([`crate::probes`]) carries. A leaf: it
//! knows the manifest and nothing of the collector.

use std::collections::VecDeque;

use manifest::Manifest;

/// Transitive caller -> callee reachability among the probes of a manifest.
#[derive(Debug, Clone, Default)]
pub struct CallRelation {
    n: usize,
    words: usize,
    /// row `caller`: bit `callee` set when `caller` reaches `callee` through `calls`
    bits: Vec<u64>,
    /// some attachable probe reaches this one (a chain ending here may still grow)
    has_probed_caller: Vec<bool>,
}

impl CallRelation {
    /// From the manifest's `calls` (closed over all probes) and its attachable probes.
    pub fn from_manifest(m: &Manifest) -> Self {
        let edges: Vec<(u32, u32)> = m
            .probes
            .iter()
            .flat_map(|p| p.calls.iter().map(move |&c| (p.id, c)))
            .collect();
        let attachable: Vec<u32> = m.attachable().map(|p| p.id).collect();
        let n = m
            .probes
            .iter()
            .map(|p| p.id as usize + 1)
            .max()
            .unwrap_or(0);
        Self::from_edges(n, &edges, &attachable)
    }

    /// From direct caller -> callee edges among ids `0..n` (edges out of range are ignored)
    /// and the ids that have a program.
    pub fn from_edges(n: usize, edges: &[(u32, u32)], attachable: &[u32]) -> Self {
        let words = n.div_ceil(64);
        let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
        for &(a, b) in edges {
            if (a as usize) < n && (b as usize) < n {
                adj[a as usize].push(b);
            }
        }
        let mut bits = vec![0u64; n * words];
        let mut queue = VecDeque::new();
        for src in 0..n {
            let row = &mut bits[src * words..(src + 1) * words];
            queue.clear();
            queue.extend(adj[src].iter().copied());
            while let Some(v) = queue.pop_front() {
                let (w, b) = (v as usize / 64, v as usize % 64);
                if row[w] & (1 << b) != 0 {
                    continue;
                }
                row[w] |= 1 << b;
                queue.extend(adj[v as usize].iter().copied());
            }
        }
        let mut rel = CallRelation {
            n,
            words,
            bits,
            has_probed_caller: vec![false; n],
        };
        for &a in attachable {
            for v in 0..n {
                if rel.calls(a, v as u32) {
                    rel.has_probed_caller[v] = true;
                }
            }
        }
        rel
    }

    /// `caller` reaches `callee` through one or more `calls` edges.
    #[inline]
    pub fn calls(&self, caller: u32, callee: u32) -> bool {
        let (a, b) = (caller as usize, callee as usize);
        if a >= self.n || b >= self.n {
            return false;
        }
        self.bits[a * self.words + b / 64] & (1 << (b % 64)) != 0
    }

    /// Some attachable probe calls `id` (directly or not): a chain ending at `id` may grow.
    #[inline]
    pub fn has_probed_caller(&self, id: u32) -> bool {
        self.has_probed_caller
            .get(id as usize)
            .copied()
            .unwrap_or(false)
    }
}
