//! This module contains optimization passes that transform the graphs in different
//! phases of the program. Here you can find things like optimizations for
//! sinking or hoisting nodes to reduce the number of live edges, and
//! optimizations that move nodes within a row to reduce edge crossing.

use crate::adt::dag::NodeHandle;
use crate::adt::dag::DAG;
use crate::core::base::Direction;

/// This optimizations changes the order of nodes within a rank (ordering along
/// the x-axis). The transformation tries to reduce the number of edges that
/// cross each other.
#[derive(Debug)]
pub struct EdgeCrossOptimizer<'a> {
    dag: &'a mut DAG,
    /// probegen: the buffers every row's count reuses (see `Scratch`).
    scratch: Scratch,
}
impl<'a> EdgeCrossOptimizer<'a> {
    pub fn new(dag: &'a mut DAG) -> Self {
        Self {
            dag,
            scratch: Scratch::default(),
        }
    }

    /// Given two nodes that may have connections in \p row, check how many of
    /// these edges intersect. Check both successors and predecessors.
    ///               A   B
    ///             /   \/ \
    ///            /    /\  \
    ///  Row: [][][][][][][][][][]
    ///
    /// probegen: the count from the sorted positions of each node's neighbors
    /// in the row (see `push_neighbors`), not by scanning the row for every pair:
    /// for each neighbor of A, the neighbors of B left of it. The original
    /// scan is `num_crossing_by_scan`, kept for the comparison test. The
    /// optimizer calls `crossings` on neighbor lists it keeps.
    #[cfg(test)]
    fn num_crossing(
        &self,
        a: NodeHandle,
        b: NodeHandle,
        row: &[NodeHandle],
    ) -> usize {
        let (mut at, mut flat) = (Vec::new(), Vec::new());
        mark(&mut at, self.dag, row);
        let a = push_neighbors(&at, self.dag, a, &mut flat);
        let b = push_neighbors(&at, self.dag, b, &mut flat);
        crossings(span(&flat, a), span(&flat, b))
    }

    #[cfg(test)]
    fn num_crossing_by_scan(
        &self,
        a: NodeHandle,
        b: NodeHandle,
        row: &[NodeHandle],
    ) -> usize {
        let mut sum = 0;
        // Record the number of edges that previously connected with node B.
        let mut num_b = 0;

        let a_edges1 = self.dag.successors(a);
        let a_edges2 = self.dag.predecessors(a);
        let b_edges1 = self.dag.successors(b);
        let b_edges2 = self.dag.predecessors(b);

        for node in row {
            let is_a1 = a_edges1.iter().any(|x| x == node);
            let is_a2 = a_edges2.iter().any(|x| x == node);
            let is_b1 = b_edges1.iter().any(|x| x == node);
            let is_b2 = b_edges2.iter().any(|x| x == node);
            if is_a1 || is_a2 {
                sum += num_b;
            }
            if is_b1 || is_b2 {
                num_b += 1;
            }
        }
        sum
    }

    // Shuffle the nodes in all of the ranks.
    pub fn perturb_rank(&mut self) {
        for i in 0..self.dag.num_levels() {
            let row = self.dag.row_mut(i);
            let len = row.len();
            for j in 0..len {
                row.swap((j * 17) % len, j);
            }
        }
    }

    // Move the elements in the rank to the left, to perturb the graph.
    pub fn rotate_rank(&mut self) {
        for i in 0..self.dag.num_levels() {
            let row = self.dag.row_mut(i);
            row.rotate_left(1);
        }
    }

    pub fn optimize(&mut self) {
        self.dag.verify();
        #[cfg(feature = "log")]
        log::info!("Optimizing edge crossing.");
        let mut best_rank = self.dag.ranks().clone();
        let mut best_cnt = self.count_crossed_edges();
        #[cfg(feature = "log")]
        log::info!("Starting with {} crossings.", best_cnt);
        for i in 0..50 {
            let dir = match i % 4 {
                0 => Direction::Both,
                1 => Direction::Up,
                _ => Direction::Down,
            };
            self.swap_crossed_edges(dir);
            let new_cnt = self.count_crossed_edges();
            if new_cnt < best_cnt {
                #[cfg(feature = "log")]
                log::info!("Found a rank with {} crossings.", new_cnt);
                best_rank = self.dag.ranks().clone();
                best_cnt = new_cnt;
            }
            self.rotate_rank();
            if i % 10 == 0 {
                self.perturb_rank();
            }
        }
        *self.dag.ranks_mut() = best_rank;
    }

    fn count_crossed_edges(&mut self) -> usize {
        let mut sum = 0;
        // Compare each row to the row afterwards.
        for row_idx in 0..self.dag.num_levels() - 1 {
            sum += self.count_crossing_in_rows(row_idx, row_idx + 1);
        }
        sum
    }

    fn count_crossing_in_rows(
        &mut self,
        first: usize,
        second: usize,
    ) -> usize {
        let dag = &*self.dag;
        let first = dag.row(first);
        if first.len() < 2 {
            return 0;
        }
        let mut sum = 0;
        // probegen: each node's neighbors in `second` found once, not once per pair.
        let Scratch { above, below: _, flat, lists } = &mut self.scratch;
        mark(above, dag, dag.row(second));
        flat.clear();
        lists.clear();
        for &a in first {
            let r = push_neighbors(above, dag, a, flat);
            lists.push((r, (r.1, r.1)));
        }
        unmark(above, dag.row(second));
        // Check for each pair of nodes a,b where b comes after a.
        for i in 0..first.len() {
            for j in i + 1..first.len() {
                sum += crossings(span(flat, lists[i].0), span(flat, lists[j].0));
            }
        }
        sum
    }

    /// Scan all of the node pairs in the module and count the number of crossed
    /// edges. If \p allow_swap is set then swap the edges if it reduces the
    /// number of crossing.
    fn swap_crossed_edges(&mut self, dir: Direction) {
        // probegen: a row's pass depends only on its order and on the orders
        // of the rows around it; one that swapped nothing is not run again
        // (it would swap nothing again) until one of the three has changed.
        // Each row's version counts its changes; `idle` keeps the versions a
        // row last swapped nothing with.
        let levels = self.dag.num_levels();
        let mut version = vec![0usize; levels];
        let mut idle: Vec<Option<[usize; 3]>> = vec![None; levels];
        let mut pass = |opt: &mut Self, i: usize| {
            let key = [
                i.checked_sub(1).map_or(0, |p| version[p]),
                version[i],
                version.get(i + 1).copied().unwrap_or(0),
            ];
            if idle[i] == Some(key) {
                return false;
            }
            let changed = opt.swap_crossed_edges_on_row(i, dir);
            if changed {
                version[i] += 1;
                idle[i] = None;
            } else {
                idle[i] = Some(key);
            }
            changed
        };
        let mut changed = true;
        while changed {
            changed = false;
            if dir.is_down() {
                for i in 0..levels {
                    changed |= pass(self, i);
                }
            }
            if dir.is_up() {
                for i in (0..levels).rev() {
                    changed |= pass(self, i);
                }
            }
        }
    }

    /// The release's loop: every row's pass until none swaps (for the test).
    #[cfg(test)]
    fn swap_crossed_edges_every_row(&mut self, dir: Direction) {
        let mut changed = true;
        while changed {
            changed = false;
            if dir.is_down() {
                for i in 0..self.dag.num_levels() {
                    changed |= self.swap_crossed_edges_on_row(i, dir);
                }
            }
            if dir.is_up() {
                for i in (0..self.dag.num_levels()).rev() {
                    changed |= self.swap_crossed_edges_on_row(i, dir);
                }
            }
        }
    }

    /// See swap_crossed_edges.
    fn swap_crossed_edges_on_row(
        &mut self,
        row_idx: usize,
        dir: Direction,
    ) -> bool {
        let num_rows = self.dag.num_levels();
        let dag = &*self.dag;
        let row = dag.row(row_idx);
        if row.len() < 2 {
            return false;
        }
        let up = (row_idx > 0 && dir.is_up()).then(|| dag.row(row_idx - 1));
        let down =
            (row_idx + 1 < num_rows && dir.is_down()).then(|| dag.row(row_idx + 1));

        // probegen: each node's neighbors in the rows above and below, found
        // once and moved with it (only the order of this row changes here),
        // into buffers reused from row to row.
        let Scratch { above, below, flat, lists } = &mut self.scratch;
        flat.clear();
        lists.clear();
        for (at, other) in [(&mut *above, up), (&mut *below, down)] {
            if let Some(other) = other {
                mark(at, dag, other);
            }
        }
        for &n in row {
            let prev = match up {
                Some(_) => push_neighbors(above, dag, n, flat),
                None => (flat.len(), flat.len()),
            };
            let next = match down {
                Some(_) => push_neighbors(below, dag, n, flat),
                None => (flat.len(), flat.len()),
            };
            lists.push((prev, next));
        }
        for (at, other) in [(&mut *above, up), (&mut *below, down)] {
            if let Some(other) = other {
                unmark(at, other);
            }
        }

        let mut changed = false;
        let row = self.dag.row_mut(row_idx);
        // For each two consecutive elements in the row:
        for i in 0..row.len() - 1 {
            let ((a_prev, a_next), (b_prev, b_next)) = (lists[i], lists[i + 1]);
            let (a_prev, b_prev) = (span(flat, a_prev), span(flat, b_prev));
            let (a_next, b_next) = (span(flat, a_next), span(flat, b_next));

            let mut ab = 0;
            let mut ba = 0;
            // Figure out if A crosses the edges of B, and vice versa, on both
            // the edges pointing up and down.
            ab += crossings(a_prev, b_prev);
            ba += crossings(b_prev, a_prev);
            ab += crossings(a_next, b_next);
            ba += crossings(b_next, a_next);

            // Swap the edges.
            if ab > ba {
                row.swap(i, i + 1);
                lists.swap(i, i + 1);
                changed = true;
            }
        }
        changed
    }
}

/// probegen: the buffers of the crossing counts, kept by the optimizer from
/// row to row instead of allocated per row and per node: where each node
/// stands in the row above and in the row below (`usize::MAX` when not in
/// it; set for one row by `mark`, put back by `unmark`), and the sorted
/// neighbor positions of the current row's nodes, one flat list with each
/// node's (above, below) ranges of it.
#[derive(Debug, Default)]
struct Scratch {
    above: Vec<usize>,
    below: Vec<usize>,
    flat: Vec<usize>,
    lists: Vec<(Span, Span)>,
}

/// probegen: a node's neighbor positions in one row: a range of `Scratch::flat`.
type Span = (usize, usize);

fn span(flat: &[usize], (start, end): Span) -> &[usize] {
    &flat[start..end]
}

/// probegen: record in `at` where each node of `row` stands.
fn mark(at: &mut Vec<usize>, dag: &DAG, row: &[NodeHandle]) {
    if at.len() < dag.len() {
        at.resize(dag.len(), usize::MAX);
    }
    for (i, n) in row.iter().enumerate() {
        at[n.get_index()] = i;
    }
}

/// probegen: forget the positions `mark` recorded for `row`.
fn unmark(at: &mut [usize], row: &[NodeHandle]) {
    for n in row {
        at[n.get_index()] = usize::MAX;
    }
}

/// probegen: append to `flat` the positions (per `at`) of the successors and
/// predecessors of `a`, sorted, each once; returns
/// their range in `flat`.
fn push_neighbors(
    at: &[usize],
    dag: &DAG,
    a: NodeHandle,
    flat: &mut Vec<usize>,
) -> Span {
    let start = flat.len();
    flat.extend(
        dag.successors(a)
            .iter()
            .chain(dag.predecessors(a))
            .filter_map(|n| at.get(n.get_index()).copied().filter(|&p| p != usize::MAX)),
    );
    flat[start..].sort_unstable();
    let mut end = start;
    for i in start..flat.len() {
        if i == start || flat[i] != flat[end - 1] {
            flat[end] = flat[i];
            end += 1;
        }
    }
    flat.truncate(end);
    (start, end)
}

/// probegen: for each position in `a`, how many positions in `b` are smaller
/// (both sorted): the pairs of edges that cross when A is left of B.
fn crossings(a: &[usize], b: &[usize]) -> usize {
    let (mut sum, mut left) = (0, 0);
    for &p in a {
        while left < b.len() && b[left] < p {
            left += 1;
        }
        sum += left;
    }
    sum
}

#[cfg(test)]
mod probegen_tests {
    use super::*;

    /// The position count equals the original scan on every pair of every
    /// row of random layered graphs.
    #[test]
    fn crossings_equal_the_scan() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % m
        };
        for _ in 0..200 {
            let mut dag = DAG::new();
            let levels = 2 + next(4);
            let mut rows: Vec<Vec<NodeHandle>> = Vec::new();
            for _ in 0..levels {
                let row: Vec<NodeHandle> =
                    (0..1 + next(8)).map(|_| dag.new_node()).collect();
                rows.push(row);
            }
            for l in 0..levels - 1 {
                for _ in 0..next(20) {
                    let a = rows[l][next(rows[l].len())];
                    let b = rows[l + 1][next(rows[l + 1].len())];
                    dag.add_edge(a, b);
                }
            }
            let opt = EdgeCrossOptimizer::new(&mut dag);
            for l in 0..levels {
                for &other in &[l.wrapping_sub(1), l + 1] {
                    let Some(row) = rows.get(other) else {
                        continue;
                    };
                    for &a in &rows[l] {
                        for &b in &rows[l] {
                            if a != b {
                                assert_eq!(
                                    opt.num_crossing(a, b, row),
                                    opt.num_crossing_by_scan(a, b, row)
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod probegen_skip_tests {
    use super::*;

    /// Skipping the rows that cannot swap leaves every row in the order the
    /// release's loop (every row, every pass) leaves it, in each direction,
    /// on random layered graphs in shuffled orders.
    #[test]
    fn skipped_rows_leave_the_same_order() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % m
        };
        for _ in 0..300 {
            // Each node's level, then the edges between adjacent levels.
            let levels = 2 + next(6);
            let sizes: Vec<usize> = (0..levels).map(|_| 1 + next(9)).collect();
            let starts: Vec<usize> = sizes
                .iter()
                .scan(0, |n, &s| {
                    *n += s;
                    Some(*n - s)
                })
                .collect();
            let mut edges = Vec::new();
            for l in 0..levels - 1 {
                for _ in 0..next(25) {
                    edges.push((
                        starts[l] + next(sizes[l]),
                        starts[l + 1] + next(sizes[l + 1]),
                    ));
                }
            }
            let shuffle = next(17);
            let build = || {
                let mut dag = DAG::new();
                let nodes: Vec<NodeHandle> =
                    (0..sizes.iter().sum()).map(|_| dag.new_node()).collect();
                for &(a, b) in &edges {
                    dag.add_edge(nodes[a], nodes[b]);
                }
                for (l, (&start, &size)) in starts.iter().zip(&sizes).enumerate() {
                    for n in &nodes[start..start + size] {
                        dag.update_node_rank_level(*n, l, None);
                    }
                }
                for _ in 0..shuffle {
                    EdgeCrossOptimizer::new(&mut dag).perturb_rank();
                }
                dag
            };
            for dir in [Direction::Both, Direction::Up, Direction::Down] {
                let (mut a, mut b) = (build(), build());
                EdgeCrossOptimizer::new(&mut a).swap_crossed_edges(dir);
                EdgeCrossOptimizer::new(&mut b).swap_crossed_edges_every_row(dir);
                assert_eq!(a.ranks(), b.ranks());
            }
        }
    }
}

/// This optimization sinks nodes in an attempt to shorten the length of edges
/// that run through the graph.
#[derive(Debug)]
pub struct RankOptimizer<'a> {
    dag: &'a mut DAG,
}

impl<'a> RankOptimizer<'a> {
    pub fn new(dag: &'a mut DAG) -> Self {
        Self { dag }
    }

    pub fn try_to_sink_node(&mut self, node: NodeHandle) -> bool {
        let backs = self.dag.predecessors(node);
        let fwds = self.dag.successors(node);

        // Don't try to sink if we increase the number of live edges,
        // or if there are no forward edges.
        if backs.len() > fwds.len() || backs.len() + fwds.len() == 0 {
            return false;
        }

        let curr_rank = self.dag.level(node);
        let mut highest_next = self.dag.len();
        for elem in fwds {
            let next_rank = self.dag.level(*elem);
            highest_next = highest_next.min(next_rank);
        }

        // We found an opportunity to sink a node.
        if highest_next > curr_rank + 1 {
            self.dag
                .update_node_rank_level(node, highest_next - 1, None);
            return true;
        }
        false
    }

    // Try to sink nodes to shorten the length of edges.
    pub fn optimize(&mut self) {
        self.dag.verify();

        #[cfg(feature = "log")]
        log::info!("Optimizing the ranks.");
        #[cfg(feature = "log")]
        let mut cnt = 0;
        #[cfg(feature = "log")]
        let mut iter = 0;

        loop {
            let mut c = 0;
            for node in self.dag.iter() {
                if self.try_to_sink_node(node) {
                    c += 1;
                }
            }
            #[cfg(feature = "log")]
            {
                cnt += c;
                iter += 1;
            }
            if c == 0 {
                break;
            }
        }

        #[cfg(feature = "log")]
        log::info!("Sank {} nodes in {} iteration.", cnt, iter);
    }
}
