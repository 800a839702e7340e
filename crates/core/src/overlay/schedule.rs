//! Block schedules: for a group of `n` ranks, a root and a message cut into `blocks`
//! blocks, which rank sends which block to whom at every step (RDMC §3, its
//! `schedule.cpp` in Derecho; MPI/NCCL for the tree and ring).
//!
//! A schedule is a pure function of (scheme, n, root, blocks, rank, step). Ranks are
//! rotated so that the root is virtual rank 0; every scheme is written for root 0.
//! `outgoing` and `incoming` are computed independently (as RDMC does), so the
//! exhaustive check in the tests that every send has a matching receive means
//! something.
//!
//! Memory: a `Schedule` is a few words; nothing is tabulated. Each query is
//! O(log n) except the binomial pipeline's twin bookkeeping, O(steps) at worst.

use super::Scheme;

/// One block moving between two ranks at one step. `peer` is the receiver for an
/// outgoing transfer and the sender for an incoming one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockTransfer {
    pub peer: u32,
    pub block: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("a broadcast group needs at least 2 ranks (got {0})")]
    GroupTooSmall(u32),
    #[error("group of {0} ranks is larger than the supported 2^24")]
    GroupTooLarge(u32),
    #[error("root {root} is not a rank of a group of {n}")]
    BadRoot { root: u32, n: u32 },
    #[error("a message has at least one block")]
    NoBlocks,
    #[error("{0} blocks is more than the supported 2^24")]
    TooManyBlocks(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Out,
    In,
}

/// A broadcast schedule for one group and one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    scheme: Scheme,
    n: u32,
    root: u32,
    blocks: u32,
    /// ⌊log2 n⌋: the hypercube dimension of the binomial pipeline.
    l: u32,
}

impl Schedule {
    pub fn new(scheme: Scheme, n: u32, root: u32, blocks: u32) -> Result<Self, ScheduleError> {
        if n < 2 {
            return Err(ScheduleError::GroupTooSmall(n));
        }
        if n > 1 << 24 {
            return Err(ScheduleError::GroupTooLarge(n));
        }
        if root >= n {
            return Err(ScheduleError::BadRoot { root, n });
        }
        if blocks == 0 {
            return Err(ScheduleError::NoBlocks);
        }
        if blocks > 1 << 24 {
            return Err(ScheduleError::TooManyBlocks(blocks));
        }
        Ok(Schedule {
            scheme,
            n,
            root,
            blocks,
            l: 31 - n.leading_zeros(),
        })
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }
    pub fn group_size(&self) -> u32 {
        self.n
    }
    pub fn root(&self) -> u32 {
        self.root
    }
    pub fn blocks(&self) -> u32 {
        self.blocks
    }

    /// Steps from the first send to the last receive.
    pub fn total_steps(&self) -> u32 {
        let (n, k) = (self.n, self.blocks);
        match self.scheme {
            Scheme::Sequential => k * (n - 1),
            Scheme::BinomialTree => k * ceil_log2(n),
            Scheme::Chain | Scheme::Ring => k + n - 2,
            Scheme::BinomialPipeline => {
                if n.is_power_of_two() {
                    k + self.l - 1
                } else {
                    k + self.l
                }
            }
            Scheme::BinaryTree => binary_max_offset(n) + 2 * k - 2,
            Scheme::DoubleBinaryTree => double_total_steps(n - 1, k),
        }
    }

    fn virt(&self, rank: u32) -> u32 {
        (rank + self.n - self.root) % self.n
    }
    fn real(&self, v: u32) -> u32 {
        (v + self.root) % self.n
    }

    /// What `rank` sends at `step`, if anything.
    pub fn outgoing(&self, rank: u32, step: u32) -> Option<BlockTransfer> {
        self.transfer(Direction::Out, rank, step)
    }

    /// What `rank` receives at `step`, if anything.
    pub fn incoming(&self, rank: u32, step: u32) -> Option<BlockTransfer> {
        self.transfer(Direction::In, rank, step)
    }

    fn transfer(&self, dir: Direction, rank: u32, step: u32) -> Option<BlockTransfer> {
        if rank >= self.n || step >= self.total_steps() {
            return None;
        }
        let (n, k, v) = (self.n, self.blocks, self.virt(rank));
        let t = match (self.scheme, dir) {
            (Scheme::Sequential, Direction::Out) => sequential_out(k, v, step),
            (Scheme::Sequential, Direction::In) => sequential_in(k, v, step),
            (Scheme::BinomialTree, Direction::Out) => tree_out(n, k, v, step),
            (Scheme::BinomialTree, Direction::In) => tree_in(k, v, step),
            (Scheme::Chain | Scheme::Ring, Direction::Out) => chain_out(n, k, v, step),
            (Scheme::Chain | Scheme::Ring, Direction::In) => chain_in(k, v, step),
            (Scheme::BinaryTree, Direction::Out) => binary_out(n, k, v, step),
            (Scheme::BinaryTree, Direction::In) => binary_in(k, v, step),
            (Scheme::DoubleBinaryTree, Direction::Out) => double_out(n - 1, k, v, step),
            (Scheme::DoubleBinaryTree, Direction::In) => double_in(n - 1, k, v, step),
            (Scheme::BinomialPipeline, Direction::Out) => self.pipeline().node_send(v, step as u64),
            (Scheme::BinomialPipeline, Direction::In) => self.pipeline().node_recv(v, step as u64),
        }?;
        Some(BlockTransfer {
            peer: self.real(t.peer),
            block: t.block,
        })
    }

    /// `rank`'s sends in step order: (step, transfer).
    pub fn sends_of(&self, rank: u32) -> Vec<(u32, BlockTransfer)> {
        self.transfers_of(Direction::Out, rank)
    }

    /// `rank`'s receives in step order: (step, transfer).
    pub fn receives_of(&self, rank: u32) -> Vec<(u32, BlockTransfer)> {
        self.transfers_of(Direction::In, rank)
    }

    fn transfers_of(&self, dir: Direction, rank: u32) -> Vec<(u32, BlockTransfer)> {
        (0..self.total_steps())
            .filter_map(|s| self.transfer(dir, rank, s).map(|t| (s, t)))
            .collect()
    }

    /// RDMC §4.2's slack, per step: a rank other than the root that sends block b at
    /// step j has slack j − (the step it received b); the step's average is over its
    /// senders. `None` for a step in which no rank but the root sends. A slack above 1
    /// means the block arrived at least two steps before it must leave, so a rank
    /// running late can catch up. O(n·k) time and memory.
    pub fn average_slack_per_step(&self) -> Vec<Option<f64>> {
        let steps = self.total_steps() as usize;
        let mut sum = vec![0u64; steps];
        let mut senders = vec![0u32; steps];
        let mut received = vec![u32::MAX; self.blocks as usize];
        for rank in (0..self.n).filter(|&r| r != self.root) {
            received.fill(u32::MAX);
            for (step, t) in self.receives_of(rank) {
                received[t.block as usize] = received[t.block as usize].min(step);
            }
            for (step, t) in self.sends_of(rank) {
                let got = received[t.block as usize];
                // A schedule never sends a block before it arrived (check_schedule).
                if got < step {
                    sum[step as usize] += u64::from(step - got);
                    senders[step as usize] += 1;
                }
            }
        }
        sum.iter()
            .zip(&senders)
            .map(|(&s, &c)| (c > 0).then(|| s as f64 / f64::from(c)))
            .collect()
    }

    /// The ranks `rank` exchanges blocks with (either direction), sorted.
    pub fn peers_of(&self, rank: u32) -> Vec<u32> {
        let mut p: Vec<u32> = self
            .sends_of(rank)
            .into_iter()
            .chain(self.receives_of(rank))
            .map(|(_, t)| t.peer)
            .collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    fn pipeline(&self) -> Binomial {
        Binomial {
            n: self.n,
            l: self.l,
            k: self.blocks as u64,
            total: self.total_steps() as u64,
        }
    }
}

/// ⌈log2 n⌉ for n ≥ 1.
pub fn ceil_log2(n: u32) -> u32 {
    32 - (n - 1).leading_zeros()
}

fn bt(peer: u32, block: u32) -> Option<BlockTransfer> {
    Some(BlockTransfer { peer, block })
}

// ---- sequential: the root sends every block to rank 1, then to rank 2, ... ----

fn sequential_out(k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    if v != 0 {
        return None;
    }
    bt(1 + step / k, step % k)
}

fn sequential_in(k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    if v == 0 || 1 + step / k != v {
        return None;
    }
    bt(0, step % k)
}

// ---- binomial tree: in stage j, every rank below 2^j sends the whole message (all
// blocks, one per step) to rank + 2^j. ----

fn tree_out(n: u32, k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    let stage = step / k;
    let span = 1u32 << stage;
    if span <= v || span >= n - v {
        return None;
    }
    bt(v + span, step - stage * k)
}

fn tree_in(k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    let stage = step / k;
    let span = 1u32 << stage;
    if !(span <= v && (v as u64) < 2 * span as u64) {
        return None;
    }
    bt(v - span, step - stage * k)
}

// ---- chain (and the NCCL ring broadcast, the same block flow along the ring): rank
// r forwards block b to r + 1 at step b + r. ----

fn chain_out(n: u32, k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    if v > step || v == n - 1 {
        return None;
    }
    let b = step - v;
    (b < k).then(|| BlockTransfer {
        peer: v + 1,
        block: b,
    })
}

fn chain_in(k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    if v == 0 || v > step + 1 {
        return None;
    }
    let b = step + 1 - v;
    (b < k).then(|| BlockTransfer {
        peer: v - 1,
        block: b,
    })
}

// ---- pipelined binary tree: virtual rank v's children are 2v+1 and 2v+2. Rank v
// sends block b to child c ∈ {0, 1} at step A(v) + 2b + c, where A(0) = 0 and a
// child's offset is its parent's plus c + 1 (it holds block b from that step on). ----

/// A(v): one per hop to the root, plus one per hop that is a second child.
fn binary_offset(mut v: u32) -> u32 {
    let mut a = 0;
    while v > 0 {
        a += 1 + (v - 1) % 2;
        v = (v - 1) / 2;
    }
    a
}

/// The largest A(v) over ranks 1..n: at depth d the ranks are 2^d − 1 + i for
/// i < 2^d, with A = d + popcount(i); the largest popcount of an i ≤ m is
/// max(popcount(m), bit length of m − 1).
fn binary_max_offset(n: u32) -> u32 {
    let mut best = 0;
    let mut d = 1u32;
    while d < 32 && (1u64 << d) - 1 < n as u64 {
        let first = (1u64 << d) - 1;
        let m = ((n as u64 - 1 - first).min((1u64 << d) - 1)) as u32;
        let len = 32 - m.leading_zeros();
        best = best.max(d + m.count_ones().max(len.saturating_sub(1)));
        d += 1;
    }
    best
}

fn binary_out(n: u32, k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    let a = binary_offset(v);
    let rel = step.checked_sub(a)?;
    let c = rel % 2;
    let (child, b) = (2 * v as u64 + 1 + c as u64, rel / 2);
    (child < n as u64 && b < k).then(|| BlockTransfer {
        peer: child as u32,
        block: b,
    })
}

fn binary_in(k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    if v == 0 {
        return None;
    }
    let parent = (v - 1) / 2;
    let c = (v - 1) % 2;
    let rel = step.checked_sub(binary_offset(parent) + c)?;
    (rel % 2 == 0 && rel / 2 < k).then(|| BlockTransfer {
        peer: parent,
        block: rel / 2,
    })
}

// ---- NCCL's double binary tree ----
//
// The m = n − 1 non-root ranks j = v − 1 sit in two binary heaps (1-indexed positions,
// children 2p and 2p + 1): tree 0 puts rank j at position j + 1, tree 1 at m − j (the
// mirror), so the first half of the ranks are tree 0's interior and tree 1's leaves and
// the second half the other way round (with m odd, the middle rank is a leaf of both).
// Block b travels tree b mod 2 as that tree's block t = b / 2. The root sends tree T's
// block t to the tree's position 1 at substep 2t; a rank at position p takes block t at
// substep a(p) + 2t, a(1) = 0, and passes it to its child c (0, 1) at substep
// a(p) + 2t + 1 + c, so a(child) = a(p) + 1 + c = depth + popcount − 1 of the position.
// Global step = 2 · substep + T: tree 0 on even steps, tree 1 on odd, so a rank sends
// and receives at most once per step.

/// Blocks of tree `t` (0, 1) among `k`.
fn double_blocks(k: u32, t: u32) -> u32 {
    (k + 1 - t) / 2
}

/// a(p) of a 1-indexed heap position p ≥ 1.
fn double_offset(p: u32) -> u32 {
    let d = 31 - p.leading_zeros();
    d + p.count_ones() - 1
}

/// The largest a(p) over positions 1..=m.
fn double_max_offset(m: u32) -> u32 {
    let mut best = 0;
    let mut d = 0u32;
    while d < 32 && (1u64 << d) <= m as u64 {
        let first = 1u64 << d;
        let hi = (m as u64).min((first << 1) - 1);
        let x = (hi - first) as u32;
        let len = 32 - x.leading_zeros();
        best = best.max(d + x.count_ones().max(len.saturating_sub(1)));
        d += 1;
    }
    best
}

fn double_total_steps(m: u32, k: u32) -> u32 {
    (0..2)
        .filter(|&t| double_blocks(k, t) > 0)
        .map(|t| 2 * (double_max_offset(m) + 2 * (double_blocks(k, t) - 1)) + t + 1)
        .max()
        .unwrap_or(0)
}

/// Tree `t`'s heap position of virtual rank v ≥ 1, and back.
fn double_position(m: u32, t: u32, v: u32) -> u32 {
    if t == 0 {
        v
    } else {
        m + 1 - v
    }
}
fn double_rank(m: u32, t: u32, p: u32) -> u32 {
    double_position(m, t, p) // the mirror is its own inverse
}

fn double_out(m: u32, k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    let (t, s) = (step % 2, step / 2);
    let kt = double_blocks(k, t);
    if v == 0 {
        let b = s / 2;
        return (s % 2 == 0 && b < kt).then(|| BlockTransfer {
            peer: double_rank(m, t, 1),
            block: 2 * b + t,
        });
    }
    let p = double_position(m, t, v);
    let rel = s.checked_sub(double_offset(p) + 1)?;
    let (c, b) = (rel % 2, rel / 2);
    let child = 2 * p as u64 + c as u64;
    (child <= m as u64 && b < kt).then(|| BlockTransfer {
        peer: double_rank(m, t, child as u32),
        block: 2 * b + t,
    })
}

fn double_in(m: u32, k: u32, v: u32, step: u32) -> Option<BlockTransfer> {
    if v == 0 {
        return None;
    }
    let (t, s) = (step % 2, step / 2);
    let kt = double_blocks(k, t);
    let p = double_position(m, t, v);
    let (from, rel) = if p == 1 {
        (0, s)
    } else {
        let parent = p / 2;
        let c = p % 2;
        (
            double_rank(m, t, parent),
            s.checked_sub(double_offset(parent) + 1 + c)?,
        )
    };
    (rel % 2 == 0 && rel / 2 < kt).then(|| BlockTransfer {
        peer: from,
        block: 2 * (rel / 2) + t,
    })
}

// ---- binomial pipeline (RDMC §3.3) ----
//
// The 2^l "vertices" of an l-dimensional hypercube exchange blocks along dimension
// (step mod l) at every step; the root is vertex 0. When n is not a power of two, each
// vertex v in 1..=n−2^l holds two ranks, v and its twin v + 2^l − 1. The pair takes
// turns: one rank plays the vertex's part in the hypercube exchange while the other
// relays to its twin the block the vertex received last; the turn passes each time the
// vertex receives a new block. One extra final step lets every twin fetch the block it
// is still missing, hence blocks + ⌊log2 n⌋ steps instead of blocks + log2 n − 1.

struct Binomial {
    n: u32,
    l: u32,
    k: u64,
    total: u64,
}

impl Binomial {
    fn pow2(&self) -> bool {
        self.n.is_power_of_two()
    }
    fn cube(&self) -> u32 {
        1 << self.l
    }
    fn vertex_of(&self, node: u32) -> u32 {
        if node < self.cube() {
            node
        } else {
            node + 1 - self.cube()
        }
    }
    fn twin_of(&self, node: u32) -> u32 {
        if node < self.cube() {
            node + self.cube() - 1
        } else {
            node + 1 - self.cube()
        }
    }
    fn has_twin(&self, vertex: u32) -> bool {
        vertex != 0 && vertex + self.cube() - 1 < self.n
    }
    /// The rank's twin if it has one (a twin rank itself always has one).
    fn twin_if_any(&self, node: u32) -> u32 {
        if node >= self.cube() || self.has_twin(node) {
            self.twin_of(node)
        } else {
            node
        }
    }

    /// The hypercube exchange at `step`: what `vertex` sends, as (neighbour vertex,
    /// block). The neighbour's bits, rotated so that the current dimension is bit 0,
    /// say how far behind the front of the pipeline the neighbour is.
    fn vertex_send(&self, vertex: u32, step: u64) -> Option<(u32, u64)> {
        let l = self.l as u64;
        let i = (step % l) as u32;
        let nb = vertex ^ (1 << i);
        if step >= self.total || nb == 0 || (step == self.total - 1 && !self.pow2()) {
            return None;
        }
        let mask = (1u64 << l) - 1;
        let wide = nb as u64 | (nb as u64) << l;
        let rot = (wide >> i) & mask;
        if rot & 1 == 0 {
            return (step >= l).then(|| (nb, step - l));
        }
        for idx in 1..l {
            if rot & (1 << idx) != 0 {
                return (step + idx >= l).then(|| (nb, (step + idx - l).min(self.k - 1)));
            }
        }
        Some((nb, step.min(self.k - 1)))
    }

    fn vertex_recv(&self, vertex: u32, step: u64) -> Option<(u32, u64)> {
        let i = (step % self.l as u64) as u32;
        let nb = vertex ^ (1 << i);
        self.vertex_send(nb, step).map(|(_, b)| (nb, b))
    }

    /// How many new blocks `vertex` received before `step`: each passes the turn.
    fn turns(&self, vertex: u32, step: u64) -> u64 {
        let l = self.l as u64;
        let mut t = (step / l) * vertex.count_ones() as u64;
        for i in 0..(step % l) {
            if vertex & (1 << i) != 0 {
                t += 1;
            }
        }
        t
    }

    /// The rank of `vertex` that takes part in the hypercube exchange at `step`.
    fn exchanging_rank(&self, vertex: u32, step: u64) -> u32 {
        if !self.has_twin(vertex) || self.turns(vertex, step) % 2 == 0 {
            vertex
        } else {
            vertex + self.cube() - 1
        }
    }

    /// The block relayed inside a twin vertex at `step`: the one the vertex received
    /// at its previous receiving turn.
    fn relay_block(&self, vertex: u32, step: u64) -> Option<u64> {
        if !self.has_twin(vertex) {
            return None;
        }
        let t = self.turns(vertex, step);
        if t == 0 {
            return None;
        }
        let mut prev = step - 1;
        if t != self.turns(vertex, step - 1) {
            if t <= 1 {
                return None;
            }
            while self.turns(vertex, prev) != t - 2 {
                prev -= 1;
            }
        }
        self.vertex_recv(vertex, prev).map(|(_, b)| b)
    }

    fn last_step_non_pow2(&self, step: u64) -> bool {
        step == self.total - 1 && !self.pow2()
    }

    fn node_send(&self, node: u32, step: u64) -> Option<BlockTransfer> {
        let v = self.vertex_of(node);
        let ex = self.exchanging_rank(v, step);
        if step >= self.total {
            return None;
        }
        if self.k == 1 && self.last_step_non_pow2(step) {
            // A single block: the last step crosses dimension 0 to the partner
            // vertex's rank that does not have it yet.
            let target = self.exchanging_rank(v ^ 1, step);
            let node_paired = node != 0 && self.has_twin(v);
            let target_paired = target != 0 && self.twin_if_any(target) != target;
            if (node_paired && node == ex) || node == 1 || !target_paired {
                return None;
            }
            return bt(target, 0);
        }
        if node == ex && self.has_twin(v) {
            let b = self.relay_block(v, step)?;
            return bt(self.twin_of(node), b as u32);
        }
        if self.last_step_non_pow2(step) {
            if !self.has_twin(v) {
                return None;
            }
            // Hand the twin the block this rank received at its last exchanging turn.
            let twin = self.twin_of(node);
            let mut s = step;
            let mut r = twin;
            while r == twin {
                s = s.checked_sub(1)?;
                r = self.exchanging_rank(v, s);
            }
            let (_, b) = self.vertex_recv(v, s)?;
            return bt(twin, b as u32);
        }
        let (nb, b) = self.vertex_send(v, step)?;
        bt(self.exchanging_rank(nb, step), b as u32)
    }

    fn node_recv(&self, node: u32, step: u64) -> Option<BlockTransfer> {
        let v = self.vertex_of(node);
        let ex = self.exchanging_rank(v, step);
        if step >= self.total {
            return None;
        }
        if self.k == 1 && self.last_step_non_pow2(step) {
            let target = self.exchanging_rank(v ^ 1, step);
            let node_paired = node != 0 && self.has_twin(v);
            if !node_paired || node != ex {
                return None;
            }
            let from = if target == 0 {
                0
            } else {
                self.twin_if_any(target)
            };
            return bt(from, 0);
        }
        if node != ex {
            let b = self.relay_block(v, step)?;
            return bt(self.twin_of(node), b as u32);
        }
        if self.last_step_non_pow2(step) {
            if !self.has_twin(v) {
                return None;
            }
            let twin = self.twin_of(node);
            let t = self.node_send(twin, step)?;
            return bt(twin, t.block);
        }
        let (nb, b) = self.vertex_recv(v, step)?;
        // The neighbour vertex sends from the rank that is not its exchanging one.
        let ex_nb = self.exchanging_rank(nb, step);
        let from = if ex_nb == 0 {
            0
        } else {
            self.twin_if_any(ex_nb)
        };
        bt(from, b as u32)
    }
}
