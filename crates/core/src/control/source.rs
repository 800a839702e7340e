//! Multicast source switching (Cepheus §III-E): a different member of a registered group
//! becomes the sender, on the same MFT and the same QPs.
//!
//! Every member has one RC QP toward the McstID. Its send PSN (sqPSN) numbers what it
//! multicasts; its receive PSN (rqPSN) is what it expects from whoever multicasts. When
//! the old source has sent `n` packets from PSN `p`, every other member expects
//! `p + n`, but the new source's own send PSN is still wherever it last left off, and
//! the old source still expects whatever it last received. PSN synchronisation fixes
//! both, in the paper's words "the old source node assigns its rqPSN as its sqPSN, and
//! the new source node assigns its sqPSN as its rqPSN", which is, as assignments:
//!
//! - `new.sq := new.rq`: the new source starts at the PSN every receiver expects;
//! - `old.rq := old.sq`: the old source, now a receiver, expects that same PSN.
//!
//! The other members' QPs are untouched, and so are the switches (they notice the new
//! source from the ingress port of its data). The switch is safe only once the old
//! source is drained (nothing queued, everything acknowledged): Cepheus' ACK aggregation
//! then guarantees every receiver, the new source included, expects exactly `old.sq`.
//! [`plan_source_switch`] checks that equality on the PSNs alone;
//! [`synchronise_source_switch`] applies it to two [`RcQueuePair`]s with the verbs-style
//! modifies [`RcQueuePair::set_send_psn`] and [`RcQueuePair::set_recv_psn`].

use crate::rnic::{ModifyError, RcQueuePair};
use crate::wire::Psn;

/// The two PSNs of one member's multicast QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpPsns {
    /// sqPSN: the next PSN this QP sends.
    pub send: Psn,
    /// rqPSN: the next PSN this QP expects.
    pub recv: Psn,
}

impl QpPsns {
    pub fn of(qp: &RcQueuePair) -> Self {
        QpPsns {
            send: qp.send_psn(),
            recv: qp.expected_psn(),
        }
    }
}

/// The two assignments of a source switch. Both are the group's next PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PsnSync {
    /// The new source's send PSN (its old receive PSN).
    pub new_send: Psn,
    /// The old source's receive PSN (its send PSN).
    pub old_recv: Psn,
}

impl PsnSync {
    /// The PSN the group continues from.
    pub fn group_psn(&self) -> Psn {
        self.new_send
    }
}

/// Why a source switch was refused. A refused switch changes neither QP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceSwitchError {
    /// The old source still has work: its PSN is not final and receivers may not have
    /// everything it sent.
    #[error("the old source is not drained ({queued} requests queued, {outstanding} PSNs unacknowledged)")]
    OldSourceBusy { queued: usize, outstanding: u32 },
    /// The new source does not expect what the old one sends next: it missed or got
    /// extra packets, or the two QPs are not in the same group.
    #[error(
        "PSNs diverged: the old source sends {old_send} next, the new source expects {new_recv}"
    )]
    Diverged { old_send: Psn, new_recv: Psn },
    #[error("old source: {0}")]
    Old(ModifyError),
    #[error("new source: {0}")]
    New(ModifyError),
}

/// The PSN assignments that hand the group from `old` to `new` (pure: PSNs in, PSNs
/// out). Errors with [`SourceSwitchError::Diverged`] unless the new source expects
/// exactly the old source's next PSN, since otherwise the new source's packets would
/// be dropped (as duplicates or as out of order) by the other receivers.
pub fn plan_source_switch(old: QpPsns, new: QpPsns) -> Result<PsnSync, SourceSwitchError> {
    if old.send != new.recv {
        return Err(SourceSwitchError::Diverged {
            old_send: old.send,
            new_recv: new.recv,
        });
    }
    Ok(PsnSync {
        new_send: new.recv,
        old_recv: old.send,
    })
}

/// Switches the multicast source from `old` to `new` (the two hosts' QPs toward the
/// McstID), Cepheus' PSN synchronisation. Returns the PSN the group continues from:
/// the new source's next packet carries it and the old source now expects it.
///
/// Refused, changing nothing, when the old source is not drained, the PSNs diverged,
/// the new source has queued or unacknowledged sends, either QP is in the error state,
/// or the old source is half-way through receiving a message.
pub fn synchronise_source_switch(
    old: &mut RcQueuePair,
    new: &mut RcQueuePair,
) -> Result<Psn, SourceSwitchError> {
    if old.is_error() {
        return Err(SourceSwitchError::Old(ModifyError::QpInError));
    }
    if old.send_queue_len() > 0 || old.outstanding() > 0 {
        return Err(SourceSwitchError::OldSourceBusy {
            queued: old.send_queue_len(),
            outstanding: old.outstanding(),
        });
    }
    let plan = plan_source_switch(QpPsns::of(old), QpPsns::of(new))?;
    let previous = new.send_psn();
    new.set_send_psn(plan.new_send)
        .map_err(SourceSwitchError::New)?;
    if let Err(e) = old.set_recv_psn(plan.old_recv) {
        // Undo the first half. It cannot fail: `new` was just found drained and nothing
        // has happened to it since.
        let _ = new.set_send_psn(previous);
        return Err(SourceSwitchError::Old(e));
    }
    Ok(plan.group_psn())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rnic::{Event, QpConfig, SendOp, SendRequest};
    use crate::time::Instant;
    use crate::wire::{BthRepr, Ecn, ExtHeaders, Ipv4Address, Opcode, RoceRepr};

    const MCST: Ipv4Address = Ipv4Address::new(239, 0, 0, 1);
    const MTU: usize = 256;
    /// Every QP starts here; 100 packets wrap past 2^24.
    const X: u32 = 0xff_ffc0;

    fn psns(send: u32, recv: u32) -> QpPsns {
        QpPsns {
            send: Psn::new(send),
            recv: Psn::new(recv),
        }
    }

    #[test]
    fn the_papers_figure_6() {
        // A multicast 100 packets from 0: A.sq = 100, B.rq = 100; A.rq and B.sq are 0.
        let plan = plan_source_switch(psns(100, 0), psns(0, 100)).unwrap();
        assert_eq!(
            plan,
            PsnSync {
                new_send: Psn::new(100),
                old_recv: Psn::new(100)
            }
        );
        assert_eq!(plan.group_psn(), Psn::new(100));
        // Across the wrap.
        let plan = plan_source_switch(psns(3, 0xff_fff0), psns(0xff_fff0, 3)).unwrap();
        assert_eq!(plan.new_send, Psn::new(3));
        // B missed the last packet: B.rq = 99.
        assert_eq!(
            plan_source_switch(psns(100, 0), psns(0, 99)),
            Err(SourceSwitchError::Diverged {
                old_send: Psn::new(100),
                new_recv: Psn::new(99)
            })
        );
    }

    /// Host `i` of a group: 10.0.0.(i+1), QPN 0x10 + i, QP toward (McstID, QP 1).
    fn host(i: u8) -> RcQueuePair {
        let mut c = QpConfig::new(Ipv4Address::new(10, 0, 0, i + 1), 0x10 + i as u32, MCST, 1);
        c.mtu = MTU;
        c.send_psn = Psn::new(X);
        c.recv_psn = Psn::new(X);
        let mut qp = RcQueuePair::new(c).unwrap();
        for w in 0..8 {
            qp.post_recv(w, 200 * MTU).unwrap();
        }
        qp
    }

    /// A lossless one-switch fabric doing what Cepheus' switch does: replicate the
    /// source's packets to every other member, rewriting dstIP/dstQP to the member's and
    /// srcIP to the McstID, and send feedback back to the source's QP (from the McstID). Every receiver gets
    /// each packet before any feedback moves, so forwarding each ACK is equivalent to the
    /// switch's aggregation (§III-D) here. Runs until nothing moves.
    fn pump(hosts: &mut [RcQueuePair], src: usize, now: Instant) {
        let mut buf = vec![0u8; hosts[src].max_packet_len()];
        for _ in 0..10_000 {
            let mut moved = false;
            while let Some(n) = hosts[src].poll_transmit(now, &mut buf).map(|t| t.len) {
                moved = true;
                let pkt = RoceRepr::parse(&buf[..n]).unwrap();
                for (i, h) in hosts.iter_mut().enumerate() {
                    if i != src {
                        let mut p = pkt;
                        p.ip.src_addr = MCST;
                        p.ip.dst_addr = h.config().local_ip;
                        p.bth.dest_qp = h.config().local_qpn;
                        let _ = h.handle_repr(now, &p);
                    }
                }
            }
            let src_qpn = hosts[src].config().local_qpn;
            for i in 0..hosts.len() {
                if i == src {
                    continue;
                }
                while let Some(n) = hosts[i].poll_transmit(now, &mut buf).map(|t| t.len) {
                    moved = true;
                    let mut p = RoceRepr::parse(&buf[..n]).unwrap();
                    // Feedback leaves the switch from the McstID, as its aggregation
                    // sends it: the source's QP takes nothing from another address.
                    p.ip.src_addr = MCST;
                    p.ip.dst_addr = hosts[src].config().local_ip;
                    p.bth.dest_qp = src_qpn;
                    let _ = hosts[src].handle_repr(now, &p);
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the fabric never went quiet");
    }

    fn send(wr_id: u64, len: usize) -> SendRequest {
        SendRequest {
            wr_id,
            op: SendOp::Send,
            data: vec![wr_id as u8; len].into(),
        }
    }

    /// Messages each host received, as (wr_id of the send, length).
    fn received(qp: &mut RcQueuePair) -> Vec<(u8, usize)> {
        std::iter::from_fn(|| qp.poll_event())
            .filter_map(|e| match e {
                Event::Recv { data, .. } => Some((data[0], data.len())),
                _ => None,
            })
            .collect()
    }

    fn pair(
        hosts: &mut [RcQueuePair],
        old: usize,
        new: usize,
    ) -> (&mut RcQueuePair, &mut RcQueuePair) {
        assert_ne!(old, new);
        let (lo, hi) = hosts.split_at_mut(old.max(new));
        if old < new {
            (&mut lo[old], &mut hi[0])
        } else {
            (&mut hi[0], &mut lo[new])
        }
    }

    #[test]
    fn source_switch_keeps_every_receiver_in_step() {
        let now = Instant::ZERO;
        let mut hosts: Vec<RcQueuePair> = (0..3).map(host).collect();
        // A multicasts 100 packets.
        hosts[0].post_send(send(1, 100 * MTU)).unwrap();
        pump(&mut hosts, 0, now);
        assert_eq!(received(&mut hosts[1]), vec![(1, 100 * MTU)]);
        assert_eq!(received(&mut hosts[2]), vec![(1, 100 * MTU)]);
        let after_a = Psn::new(X).add(100);
        assert_eq!(hosts[0].send_psn(), after_a);
        assert_eq!(hosts[1].expected_psn(), after_a);
        assert_eq!(hosts[1].send_psn(), Psn::new(X), "B has never sent");

        // Hand over to B: B sends from where everyone is; A now expects that too.
        let (a, b) = pair(&mut hosts, 0, 1);
        assert_eq!(synchronise_source_switch(a, b), Ok(after_a));
        assert_eq!(QpPsns::of(a), psns(after_a.value(), after_a.value()));
        assert_eq!(b.send_psn(), after_a);
        hosts[1].post_send(send(2, 3 * MTU)).unwrap();
        pump(&mut hosts, 1, now);
        assert_eq!(received(&mut hosts[0]), vec![(2, 3 * MTU)]);
        assert_eq!(received(&mut hosts[2]), vec![(2, 3 * MTU)]);

        // And back to A.
        let (b, a) = pair(&mut hosts, 1, 0);
        assert_eq!(synchronise_source_switch(b, a), Ok(after_a.add(3)));
        hosts[0].post_send(send(3, 10)).unwrap();
        pump(&mut hosts, 0, now);
        assert_eq!(received(&mut hosts[1]), vec![(3, 10)]);
        assert_eq!(received(&mut hosts[2]), vec![(3, 10)]);
        for h in &mut hosts {
            assert!(!h.is_error());
            assert_eq!(h.stats().rx_duplicates, 0);
            assert_eq!(h.stats().rx_out_of_order, 0);
        }
    }

    #[test]
    fn without_synchronisation_the_other_receivers_drop_the_new_source() {
        let now = Instant::ZERO;
        let mut hosts: Vec<RcQueuePair> = (0..3).map(host).collect();
        hosts[0].post_send(send(1, 100 * MTU)).unwrap();
        pump(&mut hosts, 0, now);
        received(&mut hosts[2]);
        // B sends from its own stale send PSN X; C expects X + 100 and takes it for a
        // duplicate (the problem §III-E describes).
        hosts[1].post_send(send(2, 10)).unwrap();
        pump(&mut hosts, 1, now);
        assert_eq!(received(&mut hosts[2]), vec![]);
        assert!(hosts[2].stats().rx_duplicates > 0);
    }

    #[test]
    fn refused_switches_change_nothing() {
        let now = Instant::ZERO;
        let mut hosts: Vec<RcQueuePair> = (0..3).map(host).collect();
        hosts[0].post_send(send(1, 2 * MTU)).unwrap();
        // Old source not drained: queued, then in flight.
        let (a, b) = pair(&mut hosts, 0, 1);
        assert_eq!(
            synchronise_source_switch(a, b),
            Err(SourceSwitchError::OldSourceBusy {
                queued: 1,
                outstanding: 0
            })
        );
        let mut buf = vec![0u8; a.max_packet_len()];
        while a.poll_transmit(now, &mut buf).is_some() {}
        assert_eq!(
            synchronise_source_switch(a, b),
            Err(SourceSwitchError::OldSourceBusy {
                queued: 1,
                outstanding: 2
            })
        );
        // Drained, but the would-be new source is not in the group: diverged.
        let mut hosts: Vec<RcQueuePair> = (0..3).map(host).collect();
        hosts[0].post_send(send(1, 2 * MTU)).unwrap();
        pump(&mut hosts, 0, now);
        let mut stranger = host(5);
        assert_eq!(
            synchronise_source_switch(&mut hosts[0], &mut stranger),
            Err(SourceSwitchError::Diverged {
                old_send: Psn::new(X).add(2),
                new_recv: Psn::new(X)
            })
        );
        // New source with a queued send of its own.
        hosts[1].post_send(send(9, 10)).unwrap();
        let before: Vec<QpPsns> = hosts.iter().map(QpPsns::of).collect();
        let (a, b) = pair(&mut hosts, 0, 1);
        assert!(matches!(
            synchronise_source_switch(a, b),
            Err(SourceSwitchError::New(ModifyError::SendQueueBusy { .. }))
        ));
        assert_eq!(hosts.iter().map(QpPsns::of).collect::<Vec<_>>(), before);
    }

    #[test]
    fn a_refusal_by_the_old_source_rolls_back_the_new_one() {
        let now = Instant::ZERO;
        // Old source A sent 100 (so A.sq = X + 100) and is half-way through receiving a
        // message from someone else at its rq X.
        let mut a = host(0);
        a.set_send_psn(Psn::new(X).add(100)).unwrap();
        let mut b = host(1);
        b.set_recv_psn(Psn::new(X).add(100)).unwrap();
        let bth = BthRepr::new(Opcode::RC_SEND_FIRST, a.config().local_qpn, Psn::new(X));
        let first = RoceRepr::new(
            MCST,
            a.config().local_ip,
            0,
            Ecn::Ect0,
            49152,
            bth,
            ExtHeaders::default(),
            &[7; MTU],
        );
        a.handle_repr(now, &first).unwrap();
        assert_eq!(
            synchronise_source_switch(&mut a, &mut b),
            Err(SourceSwitchError::Old(ModifyError::MessageInProgress))
        );
        assert_eq!(b.send_psn(), Psn::new(X), "rolled back");
        assert_eq!(a.expected_psn(), Psn::new(X).add(1));
    }
}
