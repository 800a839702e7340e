//! Script tests of the group session, packet by packet (smoltcp style): every frame a
//! session emits is parsed and checked, and the next input is what a peer or the
//! driver would do with it.

use super::*;
use crate::control::registration::{RegistrationConfig, SwitchRejection, SwitchReport};
use crate::control::safeguard::SafeguardConfig;
use crate::fabric::cepheus::GroupAddressSpace;
use crate::time::{Duration, Instant};
use crate::transmit::Transmit;
use crate::wire::group_control::{
    parse_frame, BufferResult, Close, Done, Evicted, Join, Message, Params, GROUP_CONTROL_VERSION,
};
use crate::wire::mrp::{MrpPrune, MrpRelease, MrpRepr};
use crate::wire::Ipv4Address;
use proptest::prelude::*;

const MCST: Ipv4Address = Ipv4Address::new(239, 1, 0, 7);
const LEADER: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const T0: Instant = Instant::from_us(1_000);
const DISCOVERY: Duration = Duration::from_ms(100);
const READY: Duration = Duration::from_ms(50);
const VERDICT: Duration = Duration::from_ms(40);
const REG: Duration = Duration::from_ms(1);
const DIGEST: [u8; 32] = [0xfe; 32];

/// A digest that differs from [`DIGEST`] in one bit.
const fn flipped(d: [u8; 32]) -> [u8; 32] {
    let mut d = d;
    d[0] ^= 1;
    d
}

fn member_ip(i: usize) -> Ipv4Address {
    Ipv4Address::new(10, 0, 0, 2 + i as u8)
}
fn qpn(i: usize) -> u32 {
    0x100 + i as u32
}
fn plan(scheme: crate::overlay::Scheme) -> OverlayPlan {
    OverlayPlan {
        scheme,
        block_bytes: 16 << 10,
        rate_mbps: 0,
        window: 1,
    }
}
fn leader_cfg(write: bool, members: usize) -> LeaderSessionConfig {
    LeaderSessionConfig {
        local: LEADER,
        local_qpn: 0x11,
        local_region: (0, 0),
        mcst_id: MCST,
        group_space: GroupAddressSpace::MULTICAST,
        members,
        params: Params {
            write,
            capacity: 1 << 20,
            message_bytes: 64 << 10,
            start_psn: 0x12_3456,
        },
        overlay: None,
        fallback: plan(crate::overlay::Scheme::BinomialPipeline),
        registration: RegistrationConfig {
            timeout: REG,
            retries: 2,
        },
        safeguard: None,
        discovery_timeout: DISCOVERY,
        ready_timeout: READY,
        verdict_timeout: VERDICT,
        refresh: None,
        invitations: None,
        mrp_payload_limit: crate::wire::mrp::MRP_MAX_PAYLOAD,
    }
}
fn member_cfg(i: usize) -> MemberSessionConfig {
    MemberSessionConfig {
        local: member_ip(i),
        mcst_id: MCST,
        group_space: GroupAddressSpace::MULTICAST,
        max_capacity: 4 << 30,
        params_timeout: DISCOVERY,
        idle_timeout: Duration::from_ms(500),
        invitation: None,
    }
}

/// What one transmit carried.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out {
    Control(SessionDest, Message),
    Mrp(MrpRepr),
    Release(MrpRelease),
    Prune(MrpPrune),
}

fn decode(t: Transmit<SessionDest>, b: &[u8]) -> Out {
    let b = &b[..t.len];
    match t.dest {
        SessionDest::Mrp => match (MrpRelease::parse(b), MrpPrune::parse(b)) {
            (Ok(r), _) => Out::Release(r),
            (_, Ok(p)) => Out::Prune(p),
            _ => Out::Mrp(MrpRepr::parse(b).expect("an MRP packet")),
        },
        d => {
            let (m, n) = parse_frame(b).expect("a whole control frame");
            assert_eq!(n, b.len(), "one frame per transmit");
            Out::Control(d, m)
        }
    }
}

fn drain_leader(l: &mut LeaderSession, now: Instant) -> Vec<Out> {
    let mut buf = [0u8; MAX_TRANSMIT_LEN];
    std::iter::from_fn(|| l.poll_transmit(now, &mut buf).map(|t| decode(t, &buf))).collect()
}
fn drain_member(m: &mut MemberSession, now: Instant) -> Vec<Message> {
    let mut buf = [0u8; MAX_TRANSMIT_LEN];
    std::iter::from_fn(|| {
        m.poll_transmit(now, &mut buf)
            .map(|t| match decode(t, &buf) {
                Out::Control(SessionDest::Leader, m) => m,
                o => panic!("a member sent {o:?}"),
            })
    })
    .collect()
}
fn leader_events(l: &mut LeaderSession) -> Vec<LeaderEvent> {
    std::iter::from_fn(|| l.poll_event()).collect()
}
fn member_events(m: &mut MemberSession) -> Vec<MemberEvent> {
    std::iter::from_fn(|| m.poll_event()).collect()
}
fn to(i: usize, m: Message) -> Out {
    Out::Control(SessionDest::Member(ConnId(i as u32)), m)
}
fn frame(m: &Message) -> Vec<u8> {
    m.to_frame().unwrap()
}

/// A leader and `n` members, wired by the test.
struct Group {
    leader: LeaderSession,
    members: Vec<MemberSession>,
    now: Instant,
}

impl Group {
    fn new(write: bool, n: usize) -> Self {
        Self::with(leader_cfg(write, n), n)
    }
    fn with(cfg: LeaderSessionConfig, n: usize) -> Self {
        Group {
            leader: LeaderSession::new(cfg, T0).unwrap(),
            members: (0..n)
                .map(|i| MemberSession::new(member_cfg(i), T0))
                .collect(),
            now: T0,
        }
    }
    /// Delivers what the leader sent to the members' streams; returns the MRP traffic.
    fn leader_to_members(&mut self) -> Vec<Out> {
        let mut mrp = Vec::new();
        for o in drain_leader(&mut self.leader, self.now) {
            match o {
                Out::Control(SessionDest::Member(ConnId(i)), m) => {
                    self.members[i as usize].handle_stream(self.now, &frame(&m))
                }
                o => mrp.push(o),
            }
        }
        mrp
    }
    /// Delivers what each member sent to the leader; returns it per member.
    fn members_to_leader(&mut self) -> Vec<Vec<Message>> {
        let mut all = Vec::new();
        for i in 0..self.members.len() {
            let sent = drain_member(&mut self.members[i], self.now);
            for m in &sent {
                self.leader
                    .handle_stream(self.now, ConnId(i as u32), &frame(m));
            }
            all.push(sent);
        }
        all
    }
    /// Every member connects and joins (its driver opens QP `qpn(i)`).
    fn join_all(&mut self) {
        for i in 0..self.members.len() {
            self.leader
                .handle_connected(self.now, ConnId(i as u32), member_ip(i));
        }
        assert!(self.leader_to_members().is_empty());
        for (i, m) in self.members.iter_mut().enumerate() {
            let ev = member_events(m);
            let [MemberEvent::OpenQp(p)] = ev[..] else {
                panic!("{ev:?}")
            };
            m.handle_qp_ready(self.now, qpn(i), 0x1000_0000, 0x5a5a);
            assert_eq!(m.phase(), MemberPhase::Joined);
            let _ = p;
        }
    }
    /// The switch delivers every MRP packet to every member (as a test, not a tree).
    fn switch_delivers(&mut self, mrp: &[Out]) {
        for o in mrp {
            if let Out::Mrp(p) = o {
                for m in &mut self.members {
                    m.handle_mrp(self.now, p);
                }
            }
        }
    }
    /// Runs one buffer from `start_buffer` to the verdicts; member `i` reports
    /// `digests[i]`.
    fn one_buffer(&mut self, digests: &[[u8; 32]]) -> BufferOutcome {
        let n = self.members.len();
        let seq = self.leader.start_buffer(self.now, 70_000, DIGEST).unwrap();
        assert!(self.leader_to_members().is_empty());
        for m in &mut self.members {
            assert_eq!(
                member_events(m),
                vec![MemberEvent::PostReceives {
                    seq,
                    bytes: 70_000,
                    sha256: DIGEST
                }]
            );
            m.handle_receives_posted(self.now);
        }
        let sent = self.members_to_leader();
        assert!(sent.iter().all(|s| s == &vec![Message::Ready]));
        assert_eq!(
            leader_events(&mut self.leader),
            vec![LeaderEvent::Transfer { seq }]
        );
        self.leader.handle_transfer_done(self.now, Ok(()));
        let write = self.leader.config().params.write && !self.leader.uses_overlay();
        let out = drain_leader(&mut self.leader, self.now);
        if write {
            let want: Vec<Out> = (0..n).map(|i| to(i, Message::Done(Done { seq }))).collect();
            assert_eq!(out, want);
            for (i, o) in out.into_iter().enumerate() {
                let Out::Control(_, m) = o else {
                    unreachable!()
                };
                self.members[i].handle_stream(self.now, &frame(&m));
                assert_eq!(
                    member_events(&mut self.members[i]),
                    vec![MemberEvent::WriteDone { seq }]
                );
            }
        } else {
            assert!(out.is_empty(), "SEND needs no Done: {out:?}");
        }
        for (i, m) in self.members.iter_mut().enumerate() {
            m.handle_received(self.now, digests[i], 77);
            assert_eq!(
                member_events(m),
                vec![MemberEvent::Received {
                    seq,
                    ok: digests[i] == DIGEST,
                    sha256: digests[i]
                }]
            );
        }
        self.members_to_leader();
        let ev = leader_events(&mut self.leader);
        match &ev[..] {
            [LeaderEvent::BufferDone(o), LeaderEvent::Up] => o.clone(),
            _ => panic!("{ev:?}"),
        }
    }
    fn close(&mut self, ok: bool) -> (bool, Vec<Out>) {
        let r = self.leader.close(self.now, ok).unwrap();
        let out = drain_leader(&mut self.leader, self.now);
        for o in &out {
            if let Out::Control(SessionDest::Member(ConnId(i)), m) = o {
                self.members[*i as usize].handle_stream(self.now, &frame(m));
            }
        }
        (r, out)
    }
}

fn registered_group(write: bool) -> Group {
    let mut g = Group::new(write, 3);
    g.join_all();
    let joins = g.members_to_leader();
    for (i, j) in joins.iter().enumerate() {
        assert_eq!(
            j,
            &vec![Message::Join(Join {
                ip: member_ip(i),
                qpn: qpn(i),
                va: 0x1000_0000,
                rkey: 0x5a5a
            })]
        );
    }
    assert_eq!(g.leader.phase(), LeaderPhase::Registering);
    let mrp = g.leader_to_members();
    let [Out::Mrp(p)] = &mrp[..] else {
        panic!("{mrp:?}")
    };
    assert_eq!(p.mcst_id, MCST);
    assert_eq!(p.write, write);
    let listed: Vec<(Ipv4Address, u32)> = p.members.iter().map(|m| (m.ip, m.qpn)).collect();
    assert_eq!(
        listed,
        vec![
            (LEADER, 0x11),
            (member_ip(0), qpn(0)),
            (member_ip(1), qpn(1)),
            (member_ip(2), qpn(2))
        ]
    );
    g.switch_delivers(&mrp);
    g.now += Duration::from_us(30);
    let confirms = g.members_to_leader();
    assert!(confirms
        .iter()
        .all(|c| matches!(&c[..], [Message::Confirm(c)] if c.mcst_id == MCST)));
    assert_eq!(
        leader_events(&mut g.leader),
        vec![
            LeaderEvent::Registered {
                took: Duration::from_us(30)
            },
            LeaderEvent::Up
        ]
    );
    assert_eq!(g.leader.poll_timeout(), None, "idle: nothing to wait for");
    g
}

#[test]
fn happy_path_send_three_members() {
    let mut g = registered_group(false);
    // Params went first to every member, as the connection came up.
    assert_eq!(g.members[0].params().map(|p| p.write), Some(false));
    for b in 0..2 {
        let o = g.one_buffer(&[DIGEST; 3]);
        assert!(o.ok && o.seq == b + 1);
        assert_eq!(
            o.verdicts.iter().map(|v| (v.ip, v.ok)).collect::<Vec<_>>(),
            (0..3).map(|i| (member_ip(i), true)).collect::<Vec<_>>()
        );
    }
    let (ok, out) = g.close(true);
    assert!(ok);
    let release = Out::Release(MrpRelease { mcst_id: MCST });
    let mut want: Vec<Out> = (0..3)
        .map(|i| to(i, Message::Close(Close { ok: true })))
        .collect();
    want.extend([release.clone(), release]);
    assert_eq!(out, want);
    for m in &mut g.members {
        assert_eq!(member_events(m), vec![MemberEvent::Closed { ok: true }]);
    }
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Closed { ok: true }]
    );
    assert_eq!(g.leader.poll_timeout(), None);
    assert!(g.leader.close(g.now, true).is_err(), "close is once");
}

#[test]
fn happy_path_write_three_members() {
    let mut g = registered_group(true);
    let o = g.one_buffer(&[DIGEST; 3]);
    assert!(o.ok);
    let (ok, _) = g.close(true);
    assert!(ok);
    assert!(g.members.iter().all(|m| m.phase() == MemberPhase::Closed));
}

#[test]
fn a_member_that_never_joins_ends_discovery_at_its_deadline() {
    let mut g = Group::new(false, 3);
    g.join_all();
    // Members 0 and 1 answer; member 2's Join never arrives.
    for i in 0..2 {
        for m in drain_member(&mut g.members[i], g.now) {
            g.leader.handle_stream(g.now, ConnId(i as u32), &frame(&m));
        }
    }
    assert_eq!(g.leader.poll_timeout(), Some(T0 + DISCOVERY));
    g.leader
        .handle_timeout(Instant::from_ps((T0 + DISCOVERY).as_ps() - 1));
    assert!(
        leader_events(&mut g.leader).is_empty(),
        "not before the deadline"
    );
    g.leader.handle_timeout(T0 + DISCOVERY);
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Failed(SessionError::Timeout(
            "2 of 3 members joined".into()
        ))]
    );
    // Everyone connected hears the failure; nothing was registered, nothing released.
    let out = drain_leader(&mut g.leader, g.now);
    assert_eq!(
        out,
        (0..3)
            .map(|i| to(i, Message::Close(Close { ok: false })))
            .collect::<Vec<_>>()
    );
    assert_eq!(g.leader.poll_timeout(), None);
    g.leader.handle_timeout(T0 + DISCOVERY + DISCOVERY);
    assert!(leader_events(&mut g.leader).is_empty(), "fires once");
}

#[test]
fn a_switch_refusal_falls_back_to_the_overlay_then_transfers_and_closes() {
    let mut g = Group::new(true, 3);
    g.join_all();
    g.members_to_leader();
    let mrp = g.leader_to_members();
    assert!(matches!(&mrp[..], [Out::Mrp(_)]));
    let report = SwitchReport {
        switch: 4,
        mcst_id: MCST,
        reason: SwitchRejection::TableFull,
    };
    g.leader.handle_switch_report(g.now, report);
    let release = Out::Release(MrpRelease { mcst_id: MCST });
    let out = drain_leader(&mut g.leader, g.now);
    let roster = vec![LEADER, member_ip(0), member_ip(1), member_ip(2)];
    assert_eq!(&out[..2], &[release.clone(), release]);
    for (i, o) in out[2..].iter().enumerate() {
        let Out::Control(d, Message::Overlay(ov)) = o else {
            panic!("{o:?}")
        };
        assert_eq!(*d, SessionDest::Member(ConnId(i as u32)));
        assert_eq!(ov.roster, roster);
        assert_eq!(ov.scheme, crate::overlay::Scheme::BinomialPipeline.code());
        g.members[i].handle_stream(g.now, &frame(&Message::Overlay(ov.clone())));
    }
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::UseOverlay {
            plan: plan(crate::overlay::Scheme::BinomialPipeline),
            roster: roster.clone(),
            reason: OverlayReason::RegistrationFailed(
                crate::control::registration::RegistrationFailure::Rejected(report)
            ),
        }]
    );
    assert_eq!(g.leader.phase(), LeaderPhase::OverlaySetup);
    assert_eq!(g.leader.poll_timeout(), Some(g.now + READY));
    for (i, m) in g.members.iter_mut().enumerate() {
        let ev = member_events(m);
        let [MemberEvent::UseOverlay(role)] = &ev[..] else {
            panic!("{ev:?}")
        };
        assert_eq!((role.rank, &role.roster), (i + 1, &roster));
        m.handle_overlay_ready(g.now);
    }
    // Two of three ready: not up yet.
    for i in 0..2 {
        for m in drain_member(&mut g.members[i], g.now) {
            g.leader.handle_stream(g.now, ConnId(i as u32), &frame(&m));
        }
    }
    assert!(leader_events(&mut g.leader).is_empty());
    g.members_to_leader();
    assert_eq!(leader_events(&mut g.leader), vec![LeaderEvent::Up]);
    // WRITE through an overlay is blocks over RC: no Done.
    let o = g.one_buffer(&[DIGEST; 3]);
    assert!(o.ok);
    let (ok, out) = g.close(true);
    assert!(ok);
    assert!(
        out.iter().all(|o| !matches!(o, Out::Release(_))),
        "the switch was released once, at the fallback"
    );
    // A late report or confirmation changes nothing.
    g.leader.handle_switch_report(g.now, report);
    assert_eq!(g.leader.stats().late_switch_reports, 1);
}

#[test]
fn silent_registration_resends_then_falls_back_each_timer_once() {
    let mut g = Group::new(false, 3);
    g.join_all();
    g.members_to_leader();
    assert_eq!(g.leader_to_members().len(), 1);
    let mut t = g.leader.poll_timeout().unwrap();
    assert_eq!(t, T0 + REG);
    for _ in 0..2 {
        g.leader.handle_timeout(t);
        assert!(
            matches!(&drain_leader(&mut g.leader, t)[..], [Out::Mrp(_)]),
            "resend"
        );
        let next = g.leader.poll_timeout().unwrap();
        assert!(next > t, "a timer fires once");
        t = next;
    }
    g.leader.handle_timeout(t);
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(
            &ev[..],
            [LeaderEvent::UseOverlay {
                reason: OverlayReason::RegistrationFailed(
                    crate::control::registration::RegistrationFailure::Timeout { missing }
                ),
                ..
            }] if missing.len() == 3
        ),
        "{ev:?}"
    );
    // The ready deadline: members never answer Overlay.
    let d = g.leader.poll_timeout().unwrap();
    assert_eq!(d, t + READY);
    g.leader.handle_timeout(d);
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Failed(SessionError::Timeout(
            "members never became ready".into()
        ))]
    );
    assert_eq!(g.leader.poll_timeout(), None);
}

#[test]
fn a_failed_verdict_reaches_every_member_at_the_close() {
    let mut g = registered_group(false);
    let o = g.one_buffer(&[DIGEST, flipped(DIGEST), DIGEST]);
    assert!(!o.ok);
    assert_eq!(
        o.verdicts.iter().map(|v| v.ok).collect::<Vec<_>>(),
        [true, false, true]
    );
    assert_eq!(
        o.verdicts[1].result.map(|r| (r.ok, r.sha256)),
        Some((false, flipped(DIGEST)))
    );
    // A later intact buffer does not undo it: the close says failed, to all.
    assert!(g.one_buffer(&[DIGEST; 3]).ok);
    let (ok, out) = g.close(true);
    assert!(!ok);
    assert_eq!(
        out.iter()
            .filter(|o| matches!(o, Out::Control(_, Message::Close(Close { ok: false }))))
            .count(),
        3
    );
    for m in &mut g.members {
        assert_eq!(member_events(m), vec![MemberEvent::Closed { ok: false }]);
    }
}

#[test]
fn one_member_answering_twice_counts_once() {
    let mut g = registered_group(false);
    let seq = g.leader.start_buffer(g.now, 10, DIGEST).unwrap();
    g.leader_to_members();
    // Member 0 says Ready three times; the others not yet.
    for _ in 0..3 {
        g.leader
            .handle_stream(g.now, ConnId(0), &frame(&Message::Ready));
    }
    assert_eq!(g.leader.phase(), LeaderPhase::Announced);
    assert_eq!(g.leader.stats().duplicate_ready, 2);
    for i in 1..3 {
        g.leader
            .handle_stream(g.now, ConnId(i), &frame(&Message::Ready));
    }
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Transfer { seq }]
    );
    g.leader.handle_transfer_done(g.now, Ok(()));
    let verdict = Message::Result(BufferResult {
        ok: true,
        sha256: DIGEST,
        held_ns: 5,
    });
    // Three verdicts from member 0 (of three members) are one verdict.
    for _ in 0..3 {
        g.leader.handle_stream(g.now, ConnId(0), &frame(&verdict));
    }
    assert_eq!(g.leader.phase(), LeaderPhase::Collecting);
    assert_eq!(g.leader.stats().duplicate_results, 2);
    assert!(leader_events(&mut g.leader).is_empty());
    // Member 1 answers; member 2 never does: the deadline decides, once.
    g.leader.handle_stream(g.now, ConnId(1), &frame(&verdict));
    let d = g.leader.poll_timeout().unwrap();
    assert_eq!(d, g.now + VERDICT);
    g.leader.handle_timeout(d);
    let ev = leader_events(&mut g.leader);
    let [LeaderEvent::BufferDone(o), LeaderEvent::Up] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(
        o.verdicts.iter().map(|v| v.ok).collect::<Vec<_>>(),
        [true, true, false]
    );
    assert_eq!(o.verdicts[2].result, None);
    g.leader.handle_timeout(d + VERDICT);
    assert!(leader_events(&mut g.leader).is_empty(), "fires once");
    // A verdict after the outcome is a counted drop.
    g.leader.handle_stream(g.now, ConnId(2), &frame(&verdict));
    assert_eq!(g.leader.stats().unexpected, 1);
}

fn verdict_ok() -> Vec<u8> {
    frame(&Message::Result(BufferResult {
        ok: true,
        sha256: DIGEST,
        held_ns: 5,
    }))
}

/// Announces a buffer and lets members `ready` answer Ready.
fn announce(g: &mut Group, ready: &[u32]) {
    g.leader.start_buffer(g.now, 10, DIGEST).unwrap();
    g.leader_to_members();
    for &i in ready {
        g.leader
            .handle_stream(g.now, ConnId(i), &frame(&Message::Ready));
    }
}

fn prune_of(i: usize) -> Out {
    Out::Prune(MrpPrune {
        mcst_id: MCST,
        members: vec![member_ip(i)],
    })
}

#[test]
fn a_broken_connection_while_collecting_evicts_that_member_and_the_buffer_completes() {
    let mut g = registered_group(false);
    announce(&mut g, &[0, 1, 2]);
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Transfer { seq: 1 }]
    );
    g.leader.handle_transfer_done(g.now, Ok(()));
    g.leader.handle_stream(g.now, ConnId(0), &verdict_ok());
    g.leader.handle_stream(g.now, ConnId(1), &verdict_ok());
    g.leader
        .handle_conn_error(g.now, ConnId(2), "closed the connection");
    let ev = leader_events(&mut g.leader);
    let [LeaderEvent::MemberEvicted { ip, .. }, LeaderEvent::BufferDone(o), LeaderEvent::Up] =
        &ev[..]
    else {
        panic!("{ev:?}")
    };
    assert_eq!(*ip, member_ip(2));
    assert!(o.ok, "every member still in the group holds it: {o:?}");
    assert_eq!(o.evicted, vec![member_ip(2)]);
    assert!(o.verdicts[0].ok && o.verdicts[1].ok && !o.verdicts[2].ok);
    assert!(o.verdicts[2].result.is_none());
    assert_eq!(
        drain_leader(&mut g.leader, g.now),
        vec![
            prune_of(2),
            prune_of(2),
            to(0, Message::Evicted(Evicted { ip: member_ip(2) })),
            to(1, Message::Evicted(Evicted { ip: member_ip(2) })),
        ]
    );
    assert_eq!(g.leader.stats().evicted, 1);
    // The close goes to the members still there, and says ok.
    let (ok, out) = g.close(true);
    assert!(ok);
    let closes: Vec<&Out> = out
        .iter()
        .filter(|o| matches!(o, Out::Control(..)))
        .collect();
    assert_eq!(
        closes,
        vec![
            &to(0, Message::Close(Close { ok: true })),
            &to(1, Message::Close(Close { ok: true }))
        ]
    );
}

#[test]
fn a_member_lost_mid_transfer_is_pruned_and_later_buffers_skip_it() {
    let mut g = registered_group(true);
    announce(&mut g, &[0, 1, 2]);
    leader_events(&mut g.leader);
    // Member 1 dies while the buffer is in flight: pruned at once, so the switch's
    // aggregated ACK stops waiting for it.
    g.leader
        .handle_conn_error(g.now, ConnId(1), "reset by peer");
    assert_eq!(g.leader.phase(), LeaderPhase::Transferring);
    let out = drain_leader(&mut g.leader, g.now);
    assert_eq!(&out[..2], &[prune_of(1), prune_of(1)]);
    for (i, o) in out[2..].iter().enumerate() {
        let i = [0, 2][i];
        assert_eq!(o, &to(i, Message::Evicted(Evicted { ip: member_ip(1) })));
        let Out::Control(_, m) = o else {
            unreachable!()
        };
        g.members[i].handle_stream(g.now, &frame(m));
        let ev = member_events(&mut g.members[i]);
        assert_eq!(
            ev.last(),
            Some(&MemberEvent::PeerEvicted { ip: member_ip(1) }),
            "{ev:?}"
        );
    }
    assert!(matches!(
        &leader_events(&mut g.leader)[..],
        [LeaderEvent::MemberEvicted { .. }]
    ));
    g.leader.handle_transfer_done(g.now, Ok(()));
    let done = drain_leader(&mut g.leader, g.now);
    assert_eq!(
        done,
        vec![
            to(0, Message::Done(Done { seq: 1 })),
            to(2, Message::Done(Done { seq: 1 }))
        ],
        "Done goes to the members still in the group"
    );
    g.leader.handle_stream(g.now, ConnId(0), &verdict_ok());
    assert!(
        leader_events(&mut g.leader).is_empty(),
        "member 2 still owes its verdict"
    );
    g.leader.handle_stream(g.now, ConnId(2), &verdict_ok());
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::BufferDone(o), LeaderEvent::Up] if o.ok && o.evicted == vec![member_ip(1)]),
        "{ev:?}"
    );
    // The next buffer is announced to the two, and needs only their Ready.
    g.leader.start_buffer(g.now, 10, DIGEST).unwrap();
    let out = drain_leader(&mut g.leader, g.now);
    assert_eq!(out.len(), 2, "{out:?}");
    for i in [0, 2] {
        g.leader
            .handle_stream(g.now, ConnId(i), &frame(&Message::Ready));
    }
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Transfer { seq: 2 }]
    );
}

#[test]
fn a_member_that_never_answers_an_announcement_is_evicted_at_the_deadline() {
    let mut g = registered_group(false);
    announce(&mut g, &[0, 2]);
    assert!(leader_events(&mut g.leader).is_empty());
    assert_eq!(g.leader.poll_timeout(), Some(g.now + READY));
    g.now += READY;
    g.leader.handle_timeout(g.now);
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::MemberEvicted { ip, .. }, LeaderEvent::Transfer { seq: 1 }] if *ip == member_ip(1)),
        "{ev:?}"
    );
    let out = drain_leader(&mut g.leader, g.now);
    assert_eq!(
        out[0],
        to(1, Message::Close(Close { ok: false })),
        "it hears it is out"
    );
    assert_eq!(&out[1..3], &[prune_of(1), prune_of(1)]);
    // Nobody ready at the deadline: that is no group at all.
    let mut g = registered_group(false);
    announce(&mut g, &[]);
    g.now += READY;
    g.leader.handle_timeout(g.now);
    assert_eq!(g.leader.phase(), LeaderPhase::Failed);
}

#[test]
fn losing_every_member_fails_the_group_and_an_overlay_member_loss_fails_it_too() {
    let mut g = registered_group(false);
    for i in 0..3 {
        g.leader.handle_conn_error(g.now, ConnId(i), "gone");
    }
    let ev = leader_events(&mut g.leader);
    assert!(matches!(ev.last(), Some(LeaderEvent::Failed(_))), "{ev:?}");
    assert_eq!(g.leader.stats().evicted, 3);
    // The release follows the prunes: the switch frees the group.
    let out = drain_leader(&mut g.leader, g.now);
    assert!(
        out.contains(&Out::Release(MrpRelease { mcst_id: MCST })),
        "{out:?}"
    );

    let mut cfg = leader_cfg(false, 2);
    cfg.overlay = Some(plan(crate::overlay::Scheme::BinomialPipeline));
    let mut g = Group::with(cfg, 2);
    g.join_all();
    g.members_to_leader();
    g.leader_to_members();
    for m in &mut g.members {
        member_events(m);
        m.handle_overlay_ready(g.now);
    }
    g.members_to_leader();
    assert_eq!(g.leader.phase(), LeaderPhase::Idle);
    g.leader.handle_conn_error(g.now, ConnId(0), "gone");
    assert_eq!(
        g.leader.phase(),
        LeaderPhase::Failed,
        "an overlay has no eviction"
    );
}

#[test]
fn the_registration_is_refreshed_without_evicted_members() {
    let mut g = refreshing_group(Duration::from_ms(100));
    assert_eq!(g.leader.phase(), LeaderPhase::Idle);
    let due = g.now + Duration::from_ms(100);
    assert_eq!(g.leader.poll_timeout(), Some(due));
    g.leader.handle_timeout(g.now + Duration::from_us(99_999));
    assert!(drain_leader(&mut g.leader, g.now).is_empty(), "not yet");
    g.leader.handle_conn_error(g.now, ConnId(1), "gone");
    drain_leader(&mut g.leader, g.now);
    assert!(matches!(
        &leader_events(&mut g.leader)[..],
        [LeaderEvent::MemberEvicted { .. }]
    ));
    g.now = due;
    g.leader.handle_timeout(g.now);
    let out = drain_leader(&mut g.leader, g.now);
    let [Out::Mrp(p)] = &out[..] else {
        panic!("{out:?}")
    };
    let ips: Vec<Ipv4Address> = p.members.iter().map(|m| m.ip).collect();
    assert_eq!(ips, vec![LEADER, member_ip(0), member_ip(2)]);
    assert_eq!(g.leader.stats().refreshes, 1);
    assert_eq!(g.leader.poll_timeout(), Some(due + Duration::from_ms(100)));
    // A member answers a refresh with a confirmation; the leader counts it, no more.
    g.switch_delivers(&out);
    g.members_to_leader();
    assert!(leader_events(&mut g.leader).is_empty());
    assert_eq!(g.leader.stats().refresh_confirmations, 2);
    assert_eq!(g.leader.phase(), LeaderPhase::Idle);
    // No refresh once the group is closed (the switch is released).
    g.close(true);
    assert_eq!(g.leader.poll_timeout(), None);
}

/// Three members joined and registered through the switch under `cfg`.
fn registered_with(cfg: LeaderSessionConfig) -> Group {
    let mut g = Group::with(cfg, 3);
    g.join_all();
    g.members_to_leader();
    let mrp = g.leader_to_members();
    g.switch_delivers(&mrp);
    g.members_to_leader();
    leader_events(&mut g.leader);
    g
}

/// Three members, registered, refreshed every `every`.
fn refreshing_group(every: Duration) -> Group {
    let mut cfg = leader_cfg(false, 3);
    cfg.refresh = Some(every);
    registered_with(cfg)
}

/// Announces a buffer of `bytes`; every member posts its receives; the transfer
/// starts.
fn start_transfer(g: &mut Group, bytes: u64) {
    let seq = g.leader.start_buffer(g.now, bytes, DIGEST).unwrap();
    g.leader_to_members();
    for m in &mut g.members {
        member_events(m);
        m.handle_receives_posted(g.now);
    }
    g.members_to_leader();
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Transfer { seq }]
    );
}

#[test]
fn a_member_that_stops_confirming_refreshes_while_a_transfer_stalls_is_evicted_as_unreachable() {
    let every = Duration::from_ms(100);
    let mut g = refreshing_group(every);
    // The next refresh: the switch delivers it to the members in `reach` only.
    let refresh = |g: &mut Group, reach: &[usize]| -> Vec<Out> {
        g.now = g.leader.poll_timeout().unwrap();
        g.leader.handle_timeout(g.now);
        let out = drain_leader(&mut g.leader, g.now);
        for o in &out {
            if let Out::Mrp(p) = o {
                for &i in reach {
                    g.members[i].handle_mrp(g.now, p);
                }
            }
        }
        g.members_to_leader();
        out
    };
    // Idle, member 1 silent for many refreshes: no transfer is held up, nobody goes.
    for _ in 0..4 {
        refresh(&mut g, &[0, 2]);
    }
    assert!(leader_events(&mut g.leader).is_empty());
    // A transfer starts; every member confirms once.
    start_transfer(&mut g, 70_000);
    // While transferring the registration is refreshed four times as often.
    let before = g.now;
    refresh(&mut g, &[0, 1, 2]);
    assert!(
        g.now.saturating_since(before)
            <= Duration::from_ps(every.as_ps() / TRANSFER_REFRESH_DIVISOR)
    );
    assert_eq!(
        g.leader.poll_timeout(),
        Some(g.now + Duration::from_ps(every.as_ps() / TRANSFER_REFRESH_DIVISOR))
    );
    // Member 1 is cut off, but the transfer moves (a lossy path, say): nobody goes.
    for _ in 0..60 {
        refresh(&mut g, &[0, 2]);
        g.leader.handle_acked(g.now, 1000);
    }
    assert!(leader_events(&mut g.leader).is_empty());
    // The transfer stalls: member 1 is evicted once it has been stalled for 1 s.
    let last_ack = g.now;
    let mut out = Vec::new();
    while g.leader.stats().evicted == 0 {
        assert!(
            g.now.saturating_since(last_ack) < STALLED_AFTER,
            "not evicted in time"
        );
        out = refresh(&mut g, &[0, 2]);
    }
    assert_eq!(g.now.saturating_since(last_ack), STALLED_AFTER);
    assert!(out.contains(&prune_of(1)), "{out:?}");
    assert!(
        out.contains(&to(1, Message::Close(Close { ok: false }))),
        "{out:?}"
    );
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::MemberEvicted { ip, reason }]
            if *ip == member_ip(1) && reason.contains("unreachable")),
        "{ev:?}"
    );
    // The refresh that followed the eviction lists the members left.
    let mrps: Vec<&Out> = out.iter().filter(|o| matches!(o, Out::Mrp(_))).collect();
    let [Out::Mrp(p)] = &mrps[..] else {
        panic!("{out:?}")
    };
    let ips: Vec<Ipv4Address> = p.members.iter().map(|m| m.ip).collect();
    assert_eq!(ips, vec![LEADER, member_ip(0), member_ip(2)]);
}

/// The switch (or the leader's host) stalls for seconds: no refresh is answered, then
/// the members' confirmations drain one after another. Nobody is evicted: a silent
/// interval counts against no member, so the member that drains last is one refresh
/// behind, not forty.
#[test]
fn after_a_stall_that_silenced_every_member_the_last_to_confirm_is_not_evicted() {
    let every = Duration::from_ms(100);
    let mut g = refreshing_group(every);
    start_transfer(&mut g, 70_000);
    let refresh = |g: &mut Group, reach: &[usize]| {
        g.now = g.leader.poll_timeout().unwrap();
        g.leader.handle_timeout(g.now);
        for o in drain_leader(&mut g.leader, g.now) {
            if let Out::Mrp(p) = o {
                for &i in reach {
                    g.members[i].handle_mrp(g.now, &p);
                }
            }
        }
        g.members_to_leader();
    };
    refresh(&mut g, &[0, 1, 2]);
    // Two seconds of silence from everyone, the transfer stalled.
    for _ in 0..80 {
        refresh(&mut g, &[]);
    }
    // Members 0 and 2 drain first; member 1 a refresh later, then all go on.
    refresh(&mut g, &[0, 2]);
    for _ in 0..3 {
        refresh(&mut g, &[0, 1, 2]);
    }
    let evicted = g.leader.stats().evicted;
    assert_eq!(evicted, 0, "{:?}", leader_events(&mut g.leader));
    assert_eq!(g.leader.phase(), LeaderPhase::Transferring);
    // A member cut off for good is still found: the others confirm, it does not.
    while g.leader.stats().evicted == 0 {
        refresh(&mut g, &[0, 2]);
    }
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::MemberEvicted { ip, .. }] if *ip == member_ip(1)),
        "{ev:?}"
    );
}

#[test]
fn a_stalled_transfer_evicts_nobody_when_no_member_confirms() {
    // A restarted switch (or the leader's own link down): no refresh is confirmed, so
    // no member can be singled out.
    let every = Duration::from_ms(100);
    let mut g = refreshing_group(every);
    start_transfer(&mut g, 70_000);
    for _ in 0..40 {
        g.now += every;
        g.leader.handle_timeout(g.now);
        drain_leader(&mut g.leader, g.now);
    }
    assert_eq!(g.leader.stats().evicted, 0);
    assert_eq!(g.leader.phase(), LeaderPhase::Transferring);
}

#[test]
fn with_invitations_only_invited_members_join_from_their_own_address() {
    use crate::control::invitation::InvitationKey;
    let key = InvitationKey::new([9; 32]);
    let mut cfg = leader_cfg(false, 2);
    cfg.invitations = Some(key.clone());
    let mut l = LeaderSession::new(cfg, T0).unwrap();
    let join = |i: usize| {
        frame(&Message::Join(Join {
            ip: member_ip(i),
            qpn: qpn(i),
            va: 0,
            rkey: 0,
        }))
    };
    let invite = |i: usize| frame(&Message::Invitation(key.token(MCST, member_ip(i))));
    // A stranger without a token; another presenting member 0's token from its own
    // address; a bad token.
    l.handle_connected(T0, ConnId(0), member_ip(5));
    l.handle_stream(T0, ConnId(0), &join(5));
    l.handle_connected(T0, ConnId(1), member_ip(6));
    l.handle_stream(T0, ConnId(1), &[invite(0), join(6)].concat());
    l.handle_connected(T0, ConnId(2), member_ip(7));
    l.handle_stream(T0, ConnId(2), &frame(&Message::Invitation([0; 16])));
    assert_eq!(l.stats().uninvited, 3);
    assert_eq!(l.phase(), LeaderPhase::Discovering, "the group goes on");
    // The invited members join.
    for (c, i) in [(3, 0), (4, 1)] {
        l.handle_connected(T0, ConnId(c), member_ip(i));
        l.handle_stream(T0, ConnId(c), &[invite(i), join(i)].concat());
    }
    assert_eq!(l.phase(), LeaderPhase::Registering);
    assert_eq!(l.member_ips(), vec![member_ip(0), member_ip(1)]);
    let closes = drain_leader(&mut l, T0)
        .into_iter()
        .filter(|o| matches!(o, Out::Control(_, Message::Close(Close { ok: false }))))
        .count();
    assert_eq!(closes, 3, "each refused connection is told");
    // A member session with a token presents it before its Join.
    let mut mc = member_cfg(0);
    mc.invitation = Some(key.token(MCST, member_ip(0)));
    let mut m = MemberSession::new(mc, T0);
    m.handle_stream(T0, &frame(&Message::Params(leader_cfg(false, 2).params)));
    member_events(&mut m);
    m.handle_qp_ready(T0, qpn(0), 0, 0);
    let sent = drain_member(&mut m, T0);
    assert!(
        matches!(&sent[..], [Message::Invitation(_), Message::Join(_)]),
        "{sent:?}"
    );
}

#[test]
fn a_member_told_of_its_own_eviction_fails() {
    let mut g = registered_group(false);
    g.members[0].handle_stream(
        g.now,
        &frame(&Message::Evicted(Evicted { ip: member_ip(0) })),
    );
    let ev = member_events(&mut g.members[0]);
    assert!(matches!(&ev[..], [MemberEvent::Failed(_)]), "{ev:?}");
}

#[test]
fn wrong_version_params_or_join_is_a_protocol_error() {
    // A member facing a leader of the unversioned layout (13-byte Params, op first).
    let mut m = MemberSession::new(member_cfg(0), T0);
    m.handle_stream(T0, &[1, 0, 13, 1, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0]);
    let ev = member_events(&mut m);
    let [MemberEvent::Failed(SessionError::Protocol(text))] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert!(text.contains("unsupported group control version"), "{text}");
    assert!(text.contains(&format!("speaks version {GROUP_CONTROL_VERSION}")));
    assert!(drain_member(&mut m, T0).is_empty(), "no Join");
    assert_eq!(m.poll_timeout(), None);

    // A leader facing a member whose Join carries another version.
    let mut l = LeaderSession::new(leader_cfg(false, 2), T0).unwrap();
    l.handle_connected(T0, ConnId(0), member_ip(0));
    l.handle_connected(T0, ConnId(1), member_ip(1));
    let mut join = frame(&Message::Join(Join {
        ip: member_ip(0),
        qpn: 1,
        va: 0,
        rkey: 0,
    }));
    join[3] = GROUP_CONTROL_VERSION + 1;
    l.handle_stream(T0, ConnId(0), &join);
    let ev = leader_events(&mut l);
    let [LeaderEvent::Failed(SessionError::Protocol(text))] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert!(text.contains("unsupported group control version"), "{text}");
    let out = drain_leader(&mut l, T0);
    let params = Message::Params(leader_cfg(false, 2).params);
    assert_eq!(
        out,
        vec![
            to(0, params.clone()),
            to(1, params),
            to(0, Message::Close(Close { ok: false })),
            to(1, Message::Close(Close { ok: false })),
        ]
    );
    // A member sending what only a leader sends is refused too.
    let mut l = LeaderSession::new(leader_cfg(false, 1), T0).unwrap();
    l.handle_connected(T0, ConnId(7), member_ip(7));
    l.handle_message(T0, ConnId(7), Message::Close(Close { ok: true }));
    assert!(matches!(
        &leader_events(&mut l)[..],
        [LeaderEvent::Failed(SessionError::Protocol(_))]
    ));
}

/// A Join names the address its connection came from. A host that claims
/// another member's address (to enrol it uninvited, or to aim the group's WRITEs at
/// it) is refused alone; the real member then joins and the group registers.
#[test]
fn a_join_naming_another_address_is_refused_and_the_group_goes_on() {
    let mut l = LeaderSession::new(leader_cfg(false, 1), T0).unwrap();
    let join = |i: usize| {
        frame(&Message::Join(Join {
            ip: member_ip(i),
            qpn: qpn(i),
            va: 0,
            rkey: 0,
        }))
    };
    // A stranger at member 5's address claims member 0's.
    l.handle_connected(T0, ConnId(0), member_ip(5));
    l.handle_stream(T0, ConnId(0), &join(0));
    let params = Message::Params(leader_cfg(false, 1).params);
    assert_eq!(
        drain_leader(&mut l, T0),
        vec![
            to(0, params.clone()),
            to(0, Message::Close(Close { ok: false }))
        ]
    );
    assert_eq!(l.stats().refused_joins, 1);
    assert_eq!(l.phase(), LeaderPhase::Discovering);
    assert!(leader_events(&mut l).is_empty(), "the group did not fail");
    // Its further input is ignored; the real member 0 joins from its own address.
    l.handle_stream(T0, ConnId(0), &join(0));
    l.handle_connected(T0, ConnId(1), member_ip(0));
    l.handle_stream(T0, ConnId(1), &join(0));
    assert_eq!(l.phase(), LeaderPhase::Registering);
    assert_eq!(l.stats().refused_joins, 1);
}

#[test]
fn connections_past_the_group_size_are_refused_and_buffers_must_fit() {
    let mut g = registered_group(false);
    g.leader.handle_connected(g.now, ConnId(9), member_ip(9));
    assert_eq!(
        drain_leader(&mut g.leader, g.now),
        vec![to(9, Message::Close(Close { ok: false }))]
    );
    assert_eq!(g.leader.stats().refused_connections, 1);
    assert!(g.leader.start_buffer(g.now, 0, DIGEST).is_err());
    assert!(g.leader.start_buffer(g.now, (1 << 20) + 1, DIGEST).is_err());
    assert_eq!(
        g.leader.phase(),
        LeaderPhase::Idle,
        "a refused buffer changes nothing"
    );
    assert!(drain_leader(&mut g.leader, g.now).is_empty());
}

#[test]
fn a_too_small_buffer_keeps_the_output_queued() {
    let mut l = LeaderSession::new(leader_cfg(false, 1), T0).unwrap();
    l.handle_connected(T0, ConnId(0), member_ip(0));
    let mut small = [0u8; 4];
    assert_eq!(l.poll_transmit(T0, &mut small), None);
    assert_eq!(drain_leader(&mut l, T0).len(), 1);
}

/// A group of three whose first buffer (1 MiB) is in flight through the switch and
/// acknowledged at a trickle: the safeguard has decided (its `Reroute` is queued).
fn slow_group() -> Group {
    let mut cfg = leader_cfg(false, 3);
    cfg.safeguard = Some(SafeguardConfig {
        expected_bps: 100_000_000_000,
        threshold: 0.5,
        window: Duration::from_ms(1),
        grace: Duration::from_us(10),
    });
    let mut g = registered_with(cfg);
    start_transfer(&mut g, 1 << 20);
    // A trickle of ACKs: the monitor's timer judges it.
    g.leader.handle_acked(g.now, 1000);
    let mut fired = 0;
    while let Some(t) = g.leader.poll_timeout() {
        g.now = t;
        g.leader.handle_timeout(t);
        fired += 1;
        assert!(fired < 100, "the safeguard decides within its window");
        if g.leader.rerouting() {
            break;
        }
    }
    assert!(g.leader.rerouting());
    g
}

/// Cepheus §V-D at run time: the safeguard decides while a buffer is in
/// flight; the driver stops the switch path after what every member acknowledged, the
/// members set up the overlay and resume from that byte, and the buffer's verdicts
/// cover all of it.
#[test]
fn the_safeguard_moves_the_rest_of_a_buffer_in_flight_to_the_overlay() {
    let mut g = slow_group();
    let seq = 1;
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Reroute { seq }]
    );
    assert!(
        g.leader.handle_transfer_cut(g.now, 1 << 20).is_err(),
        "nothing left"
    );
    g.leader.handle_transfer_cut(g.now, 3 * 65536).unwrap();
    assert!(!g.leader.rerouting());
    assert!(g.leader.handle_transfer_cut(g.now, 0).is_err(), "once");
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::UseOverlay { reason: OverlayReason::Safeguard(_), roster, .. }] if roster.len() == 4),
        "{ev:?}"
    );
    // The switch is released; members in the middle of the buffer get the overlay.
    let mrp = g.leader_to_members();
    assert_eq!(
        mrp.iter().filter(|o| matches!(o, Out::Release(_))).count(),
        2
    );
    for m in &mut g.members {
        let ev = member_events(m);
        assert!(matches!(&ev[..], [MemberEvent::UseOverlay(_)]), "{ev:?}");
        m.handle_overlay_ready(g.now);
    }
    g.members_to_leader();
    assert!(leader_events(&mut g.leader).is_empty());
    // Every member is ready: Resume from the cut.
    g.leader_to_members();
    for m in &mut g.members {
        assert_eq!(
            member_events(m),
            vec![MemberEvent::ResumeReceive {
                seq,
                offset: 3 * 65536,
                bytes: 1 << 20,
                held: false,
            }]
        );
        m.handle_receives_posted(g.now);
    }
    g.members_to_leader();
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::ResumeTransfer {
            seq,
            offset: 3 * 65536,
            holding: (0..3).map(|i| (member_ip(i), 3 * 65536)).collect(),
        }]
    );
    g.leader.handle_transfer_done(g.now, Ok(()));
    for m in &mut g.members {
        m.handle_received(g.now, DIGEST, 1);
        member_events(m);
    }
    g.members_to_leader();
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::BufferDone(o), LeaderEvent::Up] if o.ok && o.seq == seq),
        "{ev:?}"
    );
    // The next buffer goes through the overlay from the start.
    assert!(g.leader.uses_overlay());
    let next = g.leader.start_buffer(g.now, 1000, DIGEST).unwrap();
    assert_eq!(next, seq + 1);
    // A Resume a member does not expect is a protocol error.
    let mut m = MemberSession::new(member_cfg(0), T0);
    m.handle_stream(
        T0,
        &frame(&Message::Resume(crate::wire::group_control::Resume {
            seq: 1,
            offset: 0,
        })),
    );
    assert!(matches!(
        &member_events(&mut m)[..],
        [MemberEvent::Failed(_)]
    ));
}

/// Members may hold more of the buffer than every member acknowledged when the path is
/// cut (the switch delivered, the aggregated ACK had not come back): each says how much
/// (`Holding`), the overlay resumes from the lowest, and the driver learns every
/// member's prefix, so nothing that every member holds is sent again.
#[test]
fn the_overlay_resumes_from_the_lowest_prefix_a_member_holds() {
    let mut g = slow_group();
    leader_events(&mut g.leader);
    g.leader.handle_transfer_cut(g.now, 65536).unwrap();
    leader_events(&mut g.leader);
    g.leader_to_members();
    let held = [5 * 65536, 3 * 65536, 4 * 65536];
    for (m, &h) in g.members.iter_mut().zip(&held) {
        member_events(m);
        m.handle_overlay_ready_holding(g.now, h);
    }
    g.members_to_leader();
    g.leader_to_members();
    for m in &mut g.members {
        assert!(matches!(
            &member_events(m)[..],
            [MemberEvent::ResumeReceive { offset, .. }] if *offset == 3 * 65536
        ));
        m.handle_receives_posted(g.now);
    }
    g.members_to_leader();
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::ResumeTransfer {
            seq: 1,
            offset: 3 * 65536,
            holding: (0..3).map(|i| (member_ip(i), held[i])).collect(),
        }]
    );
    // A Holding past the buffer's end is a protocol error; one outside a reroute is
    // counted and changes nothing.
    let before = g.leader.stats().unexpected;
    let conn = ConnId(0);
    g.leader.handle_message(
        g.now,
        conn,
        Message::Holding(crate::wire::group_control::Holding { seq: 1, bytes: 1 }),
    );
    assert_eq!(g.leader.stats().unexpected, before + 1);
    let mut g = slow_group();
    leader_events(&mut g.leader);
    g.leader.handle_transfer_cut(g.now, 65536).unwrap();
    g.leader.handle_message(
        g.now,
        conn,
        Message::Holding(crate::wire::group_control::Holding {
            seq: 1,
            bytes: (1 << 20) + 1,
        }),
    );
    assert!(matches!(
        leader_events(&mut g.leader).last(),
        Some(LeaderEvent::Failed(SessionError::Protocol(_)))
    ));
}

/// Every member held the whole buffer when the path was cut (`Holding` = its size): the
/// overlay has nothing left, so each member answers its verdict right after its
/// `Ready`, before the leader has even started the (empty) rest; the leader keeps those
/// early verdicts and the buffer completes ok.
#[test]
fn verdicts_right_after_ready_count_when_every_member_held_the_whole_buffer() {
    let mut g = slow_group();
    leader_events(&mut g.leader);
    g.leader.handle_transfer_cut(g.now, 65536).unwrap();
    leader_events(&mut g.leader);
    g.leader_to_members();
    for m in &mut g.members {
        member_events(m);
        m.handle_overlay_ready_holding(g.now, 1 << 20);
    }
    g.members_to_leader();
    g.leader_to_members();
    for m in &mut g.members {
        assert!(matches!(
            &member_events(m)[..],
            [MemberEvent::ResumeReceive { offset, bytes, .. }] if *offset == *bytes
        ));
        m.handle_receives_posted(g.now);
        m.handle_received(g.now, DIGEST, 1);
    }
    // The first member's Ready and verdict arrive before the others' Ready.
    g.members_to_leader();
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::ResumeTransfer { offset, .. }] if *offset == 1 << 20),
        "{ev:?}"
    );
    g.leader.handle_transfer_done(g.now, Ok(()));
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::BufferDone(o), LeaderEvent::Up] if o.ok),
        "{ev:?}"
    );
}

/// A switch path that fails under a buffer (the source's QP out of retries) moves the
/// rest of it to the overlay like the safeguard does, and says why.
#[test]
fn a_failed_switch_path_reroutes_the_buffer_in_flight() {
    let mut g = registered_with(leader_cfg(false, 3));
    g.leader.handle_path_failed(g.now, "retry exceeded".into());
    assert_eq!(g.leader.stats().unexpected, 1, "nothing in flight");
    start_transfer(&mut g, 1 << 20);
    g.leader.handle_path_failed(g.now, "retry exceeded".into());
    g.leader.handle_path_failed(g.now, "again".into());
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Reroute { seq: 1 }],
        "one reroute"
    );
    g.leader.handle_transfer_cut(g.now, 0).unwrap();
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::UseOverlay { reason: OverlayReason::PathFailed(w), .. }] if w == "retry exceeded"),
        "{ev:?}"
    );
}

/// The reroute crosses a fast member's verdict: it already holds the whole buffer
/// when `Overlay` and `Resume` arrive. It still takes its place in the overlay (the
/// others need its relaying), keeps nothing new, and sends its verdict again (the
/// leader forgot the early ones at the cut).
#[test]
fn a_member_that_already_held_the_buffer_relays_the_rest_and_answers_again() {
    let mut g = slow_group();
    leader_events(&mut g.leader);
    // Member 0 completes before it hears of the reroute.
    g.members[0].handle_received(g.now, DIGEST, 1);
    member_events(&mut g.members[0]);
    g.members_to_leader();
    g.leader.handle_transfer_cut(g.now, 65536).unwrap();
    leader_events(&mut g.leader);
    g.leader_to_members();
    for m in &mut g.members {
        let ev = member_events(m);
        assert!(matches!(&ev[..], [MemberEvent::UseOverlay(_)]), "{ev:?}");
        m.handle_overlay_ready(g.now);
    }
    g.members_to_leader();
    g.leader_to_members();
    let ev = member_events(&mut g.members[0]);
    assert_eq!(
        ev,
        vec![MemberEvent::ResumeReceive {
            seq: 1,
            offset: 65536,
            bytes: 1 << 20,
            held: true
        }]
    );
    for (i, m) in g.members.iter_mut().enumerate() {
        if i > 0 {
            member_events(m);
        }
        m.handle_receives_posted(g.now);
    }
    g.members_to_leader();
    assert!(matches!(
        &leader_events(&mut g.leader)[..],
        [LeaderEvent::ResumeTransfer {
            seq: 1,
            offset: 65536,
            ..
        }]
    ));
    g.leader.handle_transfer_done(g.now, Ok(()));
    g.members[0].handle_relayed(g.now);
    assert!(
        member_events(&mut g.members[0]).is_empty(),
        "no second delivery"
    );
    for m in &mut g.members[1..] {
        m.handle_received(g.now, DIGEST, 2);
    }
    g.members_to_leader();
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(&ev[..], [LeaderEvent::BufferDone(o), LeaderEvent::Up] if o.ok),
        "{ev:?}"
    );
}

#[test]
fn a_driver_that_finishes_the_buffer_anyway_gets_the_fallback_after_it() {
    let mut g = slow_group();
    let seq = 1;
    assert_eq!(
        leader_events(&mut g.leader),
        vec![LeaderEvent::Reroute { seq }]
    );
    // This driver cannot cut a transfer: it finishes the buffer on the switch.
    g.leader.handle_transfer_done(g.now, Ok(()));
    for m in &mut g.members {
        m.handle_received(g.now, DIGEST, 1);
    }
    g.members_to_leader();
    let ev = leader_events(&mut g.leader);
    assert!(
        matches!(
            &ev[..],
            [LeaderEvent::BufferDone(o), LeaderEvent::UseOverlay { reason: OverlayReason::Safeguard(_), .. }] if o.ok
        ),
        "{ev:?}"
    );
    let out = drain_leader(&mut g.leader, g.now);
    assert_eq!(
        out.iter().filter(|o| matches!(o, Out::Release(_))).count(),
        2
    );
}

#[test]
fn the_member_refuses_what_a_leader_never_sends_and_times_out_once() {
    let mut m = MemberSession::new(member_cfg(0), T0);
    assert_eq!(m.poll_timeout(), Some(T0 + DISCOVERY));
    m.handle_timeout(T0 + DISCOVERY);
    assert_eq!(
        member_events(&mut m),
        vec![MemberEvent::Failed(SessionError::Timeout(
            "no parameters from the leader".into()
        ))]
    );
    m.handle_timeout(T0 + DISCOVERY + DISCOVERY);
    assert!(member_events(&mut m).is_empty());

    let mut m = MemberSession::new(member_cfg(0), T0);
    m.handle_message(T0, Message::Params(leader_cfg(false, 1).params));
    m.handle_qp_ready(T0, qpn(0), 0, 0);
    m.handle_message(T0, Message::Ready);
    assert!(matches!(
        &member_events(&mut m)[..],
        [
            MemberEvent::OpenQp(_),
            MemberEvent::Failed(SessionError::Protocol(_))
        ]
    ));
    // Over the capacity.
    let mut m = MemberSession::new(member_cfg(0), T0);
    m.handle_message(T0, Message::Params(leader_cfg(false, 1).params));
    m.handle_qp_ready(T0, qpn(0), 0, 0);
    m.handle_message(
        T0,
        Message::Announce(crate::wire::group_control::Announce {
            seq: 1,
            bytes: (1 << 20) + 1,
            sha256: [0; 32],
        }),
    );
    assert!(matches!(
        &member_events(&mut m)[..],
        [
            MemberEvent::OpenQp(_),
            MemberEvent::Failed(SessionError::Protocol(_))
        ]
    ));
}

/// One arbitrary input to a leader.
#[derive(Clone, Debug)]
enum LeaderInput {
    Connect(u8),
    Message(u8, u8, u8),
    Garbage(u8, Vec<u8>),
    ConnError(u8),
    SwitchReport,
    Timeout,
    StartBuffer(u8),
    TransferDone(bool),
    Acked(u16),
    Close(bool),
}

fn arb_leader_input() -> impl Strategy<Value = LeaderInput> {
    prop_oneof![
        (0u8..5).prop_map(LeaderInput::Connect),
        (0u8..5, 0u8..10, any::<u8>()).prop_map(|(c, k, x)| LeaderInput::Message(c, k, x)),
        (0u8..5, proptest::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(c, b)| LeaderInput::Garbage(c, b)),
        (0u8..5).prop_map(LeaderInput::ConnError),
        Just(LeaderInput::SwitchReport),
        Just(LeaderInput::Timeout),
        any::<u8>().prop_map(LeaderInput::StartBuffer),
        any::<bool>().prop_map(LeaderInput::TransferDone),
        any::<u16>().prop_map(LeaderInput::Acked),
        any::<bool>().prop_map(LeaderInput::Close),
    ]
}

/// A plausible message from member connection `c` (kind `k`, variant `x`).
fn member_message(c: u8, k: u8, x: u8) -> Message {
    let i = (c % 4) as usize;
    match k {
        0 | 1 => Message::Join(Join {
            ip: member_ip(i),
            qpn: qpn(i),
            va: 0,
            rkey: 0,
        }),
        2 => Message::Confirm(crate::wire::group_control::Confirmation {
            mcst_id: MCST,
            ip: member_ip(i),
            qpn: qpn(i) ^ (x as u32 & 1),
        }),
        3 | 4 => Message::Ready,
        5 | 6 => Message::Result(BufferResult {
            ok: x & 1 == 0,
            sha256: if x & 2 == 0 { DIGEST } else { [0; 32] },
            held_ns: x as u64,
        }),
        7 => Message::Close(Close { ok: true }),
        8 => Message::Done(Done { seq: x as u32 }),
        _ => Message::Params(Params {
            write: false,
            capacity: 1,
            message_bytes: 1,
            start_psn: x as u32 & 0xff_ffff,
        }),
    }
}

proptest! {
    /// Whatever arrives, in whatever order and at whatever times, the leader never
    /// panics, reports at most one end (Closed or Failed) and nothing after it, every
    /// deadline it arms moves it on when it fires, and once the inputs stop a driver
    /// that only lets timers fire (and finishes what the session asked of it) sees it
    /// end within the sum of its deadlines.
    #[test]
    fn the_leader_always_ends_within_its_deadlines(
        inputs in proptest::collection::vec((arb_leader_input(), 0u64..30_000), 0..60),
        write in any::<bool>(),
    ) {
        let mut l = LeaderSession::new(leader_cfg(write, 3), T0).unwrap();
        let mut now = T0;
        let mut ends = 0;
        let mut buf = [0u8; MAX_TRANSMIT_LEN];
        let mut check = |l: &mut LeaderSession, ends: &mut usize, now: Instant| -> Result<(), TestCaseError> {
            while l.poll_transmit(now, &mut buf).is_some() {}
            for e in std::iter::from_fn(|| l.poll_event()) {
                prop_assert!(*ends == 0, "an event after the end: {e:?}");
                if matches!(e, LeaderEvent::Closed { .. } | LeaderEvent::Failed(_)) {
                    *ends += 1;
                }
            }
            Ok(())
        };
        for (input, dt) in inputs {
            now += Duration::from_us(dt);
            match input {
                LeaderInput::Connect(c) => l.handle_connected(now, ConnId(c as u32), member_ip(c as usize)),
                LeaderInput::Message(c, k, x) => {
                    l.handle_stream(now, ConnId(c as u32), &frame(&member_message(c, k, x)))
                }
                LeaderInput::Garbage(c, b) => l.handle_stream(now, ConnId(c as u32), &b),
                LeaderInput::ConnError(c) => l.handle_conn_error(now, ConnId(c as u32), "gone"),
                LeaderInput::SwitchReport => l.handle_switch_report(now, SwitchReport {
                    switch: 1, mcst_id: MCST, reason: SwitchRejection::NotInTree,
                }),
                LeaderInput::Timeout => {
                    let before = l.poll_timeout();
                    l.handle_timeout(now);
                    if let Some(t) = before {
                        if t <= now {
                            prop_assert!(l.poll_timeout() != Some(t), "a deadline fired twice");
                        }
                    }
                }
                LeaderInput::StartBuffer(n) => { let _ = l.start_buffer(now, n as u64, DIGEST); }
                LeaderInput::TransferDone(ok) => {
                    l.handle_transfer_done(
                        now,
                        if ok {
                            Ok(())
                        } else {
                            Err(SessionError::Transfer("lost".into()))
                        },
                    )
                }
                LeaderInput::Acked(b) => l.handle_acked(now, b as u64),
                LeaderInput::Close(ok) => { let _ = l.close(now, ok); }
            }
            check(&mut l, &mut ends, now)?;
        }
        // Run out: timers fire; the driver completes a transfer and closes when idle.
        let bound = now + DISCOVERY + REG + REG + REG + READY + READY + VERDICT + Duration::from_ms(1);
        let mut steps = 0;
        while !l.is_terminal() {
            steps += 1;
            prop_assert!(steps < 50, "no progress in {:?}", l.phase());
            match l.phase() {
                LeaderPhase::Idle => { let _ = l.close(now, true); }
                LeaderPhase::Transferring => l.handle_transfer_done(now, Ok(())),
                _ => {
                    let t = l.poll_timeout();
                    prop_assert!(t.is_some(), "{:?} waits on nothing", l.phase());
                    let t = t.unwrap().max(now);
                    now = t;
                    l.handle_timeout(t);
                    prop_assert!(l.poll_timeout() != Some(t) || l.is_terminal(), "a deadline fired twice");
                }
            }
            check(&mut l, &mut ends, now)?;
        }
        prop_assert!(now <= bound, "ended at {now:?}, bound {bound:?}");
        prop_assert_eq!(ends, 1);
        prop_assert_eq!(l.poll_timeout(), None);
    }

    /// The member likewise: any sequence of leader messages, bytes, MRP and driver
    /// calls never panics and ends at most once; a member left alone ends by its
    /// deadlines.
    #[test]
    fn the_member_always_ends_within_its_deadlines(
        inputs in proptest::collection::vec((0u8..8, any::<u8>(), proptest::collection::vec(any::<u8>(), 0..20), 0u64..30_000), 0..40),
    ) {
        let mut m = MemberSession::new(member_cfg(0), T0);
        let mut now = T0;
        let mut ends = 0;
        let mut buf = [0u8; MAX_TRANSMIT_LEN];
        for (k, x, bytes, dt) in inputs {
            now += Duration::from_us(dt);
            match k {
                0 => m.handle_message(now, Message::Params(Params { write: x & 1 == 1, capacity: 1 + x as u64, message_bytes: 1, start_psn: 0 })),
                1 => m.handle_message(now, Message::Announce(crate::wire::group_control::Announce { seq: x as u32, bytes: x as u64, sha256: DIGEST })),
                2 => m.handle_stream(now, &bytes),
                3 => m.handle_qp_ready(now, qpn(0), 0, 0),
                4 => m.handle_receives_posted(now),
                5 => m.handle_received(now, if x & 1 == 0 { DIGEST } else { flipped(DIGEST) }, 1),
                6 => m.handle_timeout(now),
                _ => m.handle_message(now, Message::Overlay(crate::wire::group_control::Overlay {
                    scheme: x % 6, block_bytes: 1, rate_mbps: 0, window: 1,
                    roster: vec![LEADER, member_ip((x % 2) as usize)],
                })),
            }
            while m.poll_transmit(now, &mut buf).is_some() {}
            for e in member_events(&mut m) {
                prop_assert!(ends == 0, "an event after the end: {e:?}");
                ends += matches!(e, MemberEvent::Closed { .. } | MemberEvent::Failed(_)) as usize;
            }
        }
        // Run out: the driver finishes what it was asked; timers fire.
        let mut steps = 0;
        while !m.is_terminal() {
            steps += 1;
            prop_assert!(steps < 20, "no progress in {:?}", m.phase());
            match m.phase() {
                MemberPhase::OpeningQp => m.handle_qp_ready(now, qpn(0), 0, 0),
                MemberPhase::OverlaySetup => m.handle_overlay_ready(now),
                MemberPhase::Posting => m.handle_receives_posted(now),
                MemberPhase::Receiving => m.handle_received(now, DIGEST, 1),
                _ => {
                    let t = m.poll_timeout().unwrap().max(now);
                    now = t;
                    m.handle_timeout(t);
                }
            }
            for e in member_events(&mut m) {
                prop_assert!(ends == 0, "an event after the end: {e:?}");
                ends += matches!(e, MemberEvent::Closed { .. } | MemberEvent::Failed(_)) as usize;
            }
        }
        prop_assert_eq!(ends, 1);
    }
}
