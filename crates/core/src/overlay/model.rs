//! Analytic completion time of a broadcast on an idle, non-blocking fabric.
//!
//! Cost of one message of B bytes between two ranks (the caller computes these from
//! link rates and delays):
//! - `nic`: how long it occupies the sender's NIC (its wire bytes at line rate);
//! - `deliver`: post → last byte at the receiver (serialisation, every
//!   store-and-forward hop, propagation);
//! - `ack`: that delivery → the sender's completion (the ACK's way back).
//!
//! Each rank's CPU spends `overhead` on every post, one post at a time: the
//! end-host stack the papers charge overlay multicast for at every hop
//! (Cepheus §II-C). With F = overhead + deliver and P = F + ack, one block at a time
//! (window 1, no flow control) and the same cost between every pair:
//! - chain: T = (n−1)·F + (k−1)·P
//! - sequential: T = ((n−1)·k − 1)·P + F
//! - binomial tree: rank m, child of p in stage j, gets its first block at
//!   t(m) = t(p) + (j − j_p − 1)·k·P + F (j_p: the stage p got it in; −1 for the
//!   root), and T = max t(m) + (k−1)·P
//! - binomial pipeline: between (k−1)·P + l·F (the root's blocks, then l hops) and
//!   RDMC's lock-step (S−1)·P + F with S = k + l − 1 steps (n = 2^l); ranks that
//!   have nothing to send early run ahead of lock-step, so the exact figure comes
//!   from [`critical_path`].
//!
//! [`critical_path`] evaluates any configuration exactly under this cost model by
//! running the real [`BroadcastDriver`](super::BroadcastDriver)s against an ideal network (per-sender FIFO
//! NIC, no contention inside the fabric); the closed forms above are checked
//! against it in the tests, and the simulator is checked against it in
//! `rocast-sim`'s overlay tests.
//!
//! Memory: the drivers (O(blocks) per rank) and one pending event per message in
//! flight.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::driver::{DriverAction, DriverConfig, DriverError};
use super::group::{BroadcastGroup, TimedPost};
use super::rank::OverlayPost;
use super::Scheme;

/// What one message costs on an idle path, in picoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageCost {
    pub nic_ps: u64,
    pub deliver_ps: u64,
    pub ack_ps: u64,
}

/// The result of [`critical_path`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prediction {
    /// When the last receiver has the whole message.
    pub latency_ps: u64,
    /// When each rank had the whole message (root: 0).
    pub rank_done_ps: Vec<u64>,
    pub messages: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    SendDone { rank: u32, id: u32 },
    Ready { to: u32, from: u32, step: u32 },
    Block { to: u32, from: u32, block: u32 },
}

/// Exact completion under the cost model of this module.
pub fn critical_path(
    scheme: Scheme,
    n: u32,
    root: u32,
    cfg: DriverConfig,
    overhead_ps: u64,
    cost: &dyn Fn(u32, u32, u64) -> MessageCost,
) -> Result<Prediction, DriverError> {
    let mut group = BroadcastGroup::new(scheme, n, root, cfg, overhead_ps)?;
    let mut nic_free = vec![0u64; n as usize];
    let mut rx_free = vec![0u64; n as usize];
    // (time, posting order, event): ties go in posting order, deterministically.
    let mut heap: BinaryHeap<Reverse<(u64, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut messages = 0u64;
    let mut now = 0u64;
    let mut posts = Vec::new();
    loop {
        group.drain_posts(now, &mut posts);
        for TimedPost {
            rank: r,
            at_ps: post,
            post: OverlayPost { action: a, .. },
        } in posts.drain(..)
        {
            let (to, bytes) = match a {
                DriverAction::SendBlock { to, block, .. } => (to, cfg.block_range(block).1),
                DriverAction::SendReady { to, .. } => (to, 0),
                // No member fails on the model's ideal network, so nothing is
                // relayed or probed.
                DriverAction::NotifyFailure { .. } | DriverAction::Probe { .. } => continue,
            };
            let c = cost(r, to, bytes);
            let start = post.max(nic_free[r as usize]);
            nic_free[r as usize] = start + c.nic_ps;
            // The receiver's downlink carries one block at a time: a block that
            // meets another there finishes after it. (A ready message is one small
            // packet that slips in between a block's packets.)
            let mut deliver = start + c.deliver_ps;
            if let DriverAction::SendBlock { .. } = a {
                deliver = deliver.max(rx_free[to as usize] + c.nic_ps);
                rx_free[to as usize] = deliver;
            }
            messages += 1;
            let ev = match a {
                DriverAction::SendBlock { id, block, .. } => {
                    seq += 1;
                    heap.push(Reverse((
                        deliver + c.ack_ps,
                        seq,
                        Ev::SendDone { rank: r, id },
                    )));
                    Ev::Block { to, from: r, block }
                }
                DriverAction::SendReady { step, .. } => Ev::Ready { to, from: r, step },
                DriverAction::NotifyFailure { .. } | DriverAction::Probe { .. } => continue,
            };
            seq += 1;
            heap.push(Reverse((deliver, seq, ev)));
        }
        let Some(Reverse((t, _, ev))) = heap.pop() else {
            break;
        };
        now = t;
        match ev {
            Ev::SendDone { rank, id } => group.handle_send_complete(t, rank, id as u64)?,
            Ev::Ready { to, from, step } => group.handle_ready(t, to, from, step)?,
            Ev::Block { to, from, block } => group.handle_block(t, to, from, block)?,
        }
    }
    Ok(Prediction {
        latency_ps: group.latency_ps(),
        rank_done_ps: group.rank_done_ps(),
        messages,
    })
}

/// The closed form of the module docs for window 1 without flow control and a
/// uniform cost `c` per block; `None` for the binomial pipeline (no closed form under
/// asynchronous execution) and the ring (several blocks in flight).
pub fn closed_form(
    scheme: Scheme,
    n: u32,
    k: u32,
    c: MessageCost,
    overhead_ps: u64,
) -> Option<u64> {
    let f = overhead_ps + c.deliver_ps;
    let p = f + c.ack_ps;
    let (n64, k64) = (n as u64, k as u64);
    match scheme {
        Scheme::Chain => Some((n64 - 1) * f + (k64 - 1) * p),
        Scheme::Sequential => Some(((n64 - 1) * k64 - 1) * p + f),
        Scheme::BinomialTree => {
            // t[m] = first-block arrival; stage[m] = the stage m received in.
            let mut t = vec![0u64; n as usize];
            let mut stage = vec![-1i64; n as usize];
            for m in 1..n {
                let j = 31 - m.leading_zeros();
                let parent = m - (1 << j);
                let gap = (j as i64 - stage[parent as usize] - 1) as u64;
                t[m as usize] = t[parent as usize] + gap * k64 * p + f;
                stage[m as usize] = j as i64;
            }
            Some(t.iter().max().copied().unwrap_or(0) + (k64 - 1) * p)
        }
        Scheme::BinomialPipeline | Scheme::Ring | Scheme::BinaryTree | Scheme::DoubleBinaryTree => {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniform(deliver: u64, ack: u64, nic: u64) -> impl Fn(u32, u32, u64) -> MessageCost {
        move |_, _, _| MessageCost {
            nic_ps: nic,
            deliver_ps: deliver,
            ack_ps: ack,
        }
    }

    fn cfg(k: u32) -> DriverConfig {
        DriverConfig {
            message_bytes: k as u64 * 1000,
            block_bytes: 1000,
            window: 1,
            ready_for_block: false,
        }
    }

    #[test]
    fn critical_path_equals_the_closed_forms() {
        let c = MessageCost {
            nic_ps: 80_000,
            deliver_ps: 1_000_000,
            ack_ps: 600_000,
        };
        let o = 2_000_000;
        for scheme in [Scheme::Chain, Scheme::Sequential, Scheme::BinomialTree] {
            for n in 2..=33u32 {
                for k in [1u32, 2, 7, 16] {
                    let cp = critical_path(
                        scheme,
                        n,
                        0,
                        cfg(k),
                        o,
                        &uniform(c.deliver_ps, c.ack_ps, c.nic_ps),
                    )
                    .unwrap();
                    let cf = closed_form(scheme, n, k, c, o).unwrap();
                    assert_eq!(cp.latency_ps, cf, "{scheme} n={n} k={k}");
                }
            }
        }
    }

    #[test]
    fn pipeline_lies_between_its_bounds() {
        let (d, a, o) = (1_000_000u64, 600_000u64, 2_000_000u64);
        let (f, p) = (o + d, o + d + a);
        for l in 1..=6u32 {
            let n = 1 << l;
            for k in [1u32, 4, 32] {
                let cp =
                    critical_path(Scheme::BinomialPipeline, n, 0, cfg(k), o, &uniform(d, a, 1))
                        .unwrap()
                        .latency_ps;
                let s = (k + l - 1) as u64;
                let lock_step = (s - 1) * p + f;
                let lower = (k as u64 - 1) * p + l as u64 * f;
                assert!(
                    lower <= cp && cp <= lock_step,
                    "n={n} k={k}: {lower} <= {cp} <= {lock_step}"
                );
            }
        }
    }

    #[test]
    fn pipeline_beats_chain_for_many_ranks_and_chain_is_not_worse_for_few() {
        let cost = uniform(10_000_000, 500_000, 9_000_000);
        let o = 1_000_000;
        let lat = |s, n| {
            critical_path(s, n, 0, cfg(32), o, &cost)
                .unwrap()
                .latency_ps
        };
        assert!(lat(Scheme::BinomialPipeline, 64) < lat(Scheme::Chain, 64));
        assert!(lat(Scheme::BinomialPipeline, 64) < lat(Scheme::BinomialTree, 64));
        assert!(lat(Scheme::BinomialTree, 64) < lat(Scheme::Sequential, 64));
    }

    #[test]
    fn flow_control_only_adds_time() {
        let cost = uniform(1_000_000, 500_000, 100_000);
        for scheme in Scheme::ALL {
            let mut c = cfg(8);
            let free = critical_path(scheme, 12, 3, c, 1_000, &cost)
                .unwrap()
                .latency_ps;
            c.ready_for_block = true;
            let fc = critical_path(scheme, 12, 3, c, 1_000, &cost)
                .unwrap()
                .latency_ps;
            assert!(fc >= free, "{scheme}: {fc} < {free}");
        }
    }
}
