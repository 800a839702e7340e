//! Packet-by-packet script tests (smoltcp style): each test feeds hand-built packets at
//! explicit times and asserts exactly what the QP sends back.

use super::*;
use crate::time::{Duration, Instant};
use crate::wire::{
    AckSyndrome, AethRepr, BthRepr, Ecn, ExtHeaders, Ipv4Address, NakCode, Opcode, Psn, RethRepr,
    RoceRepr,
};

const A: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const B: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
const QPA: u32 = 0x11;
const QPB: u32 = 0x22;
const MTU: usize = 256;
const PSN_A: u32 = 0xfffffd; // A's send PSNs wrap during the tests
const PSN_B: u32 = 1000;

fn cfg_a() -> QpConfig {
    let mut c = QpConfig::new(A, QPA, B, QPB);
    c.mtu = MTU;
    c.send_psn = Psn::new(PSN_A);
    c.recv_psn = Psn::new(PSN_B);
    c.ack_every = 4;
    c.ack_req_every = 8;
    c
}
/// The responder under test: B, receiving from A.
fn cfg_b() -> QpConfig {
    let mut c = QpConfig::new(B, QPB, A, QPA);
    c.mtu = MTU;
    c.send_psn = Psn::new(PSN_B);
    c.recv_psn = Psn::new(PSN_A);
    c.ack_every = 4;
    c.ack_req_every = 8;
    c
}

fn t(us: u64) -> Instant {
    Instant::from_us(us)
}

/// What a QP put on the wire, decoded.
#[derive(Debug, Clone)]
struct Out {
    op: Opcode,
    psn: Psn,
    dest_qp: u32,
    ack_req: bool,
    syndrome: Option<AckSyndrome>,
    msn: u32,
    reth: Option<RethRepr>,
    imm: Option<u32>,
    payload: Vec<u8>,
    ecn: Ecn,
}

fn drain(qp: &mut RcQueuePair, now: Instant) -> Vec<Out> {
    let mut buf = vec![0u8; qp.max_packet_len()];
    let mut v = Vec::new();
    while let Some(n) = qp.poll_transmit(now, &mut buf).map(|t| t.len) {
        let r = RoceRepr::parse_verified(&buf[..n]).expect("QP emits valid packets");
        v.push(Out {
            op: r.bth.opcode,
            psn: r.bth.psn,
            dest_qp: r.bth.dest_qp,
            ack_req: r.bth.ack_req,
            syndrome: r.ext.aeth.map(|a| a.syndrome),
            msn: r.ext.aeth.map_or(0, |a| a.msn),
            reth: r.ext.reth,
            imm: r.ext.imm,
            payload: r.payload.to_vec(),
            ecn: r.ip.ecn,
        });
        assert!(v.len() < 10_000, "runaway transmit");
    }
    v
}

fn events(qp: &mut RcQueuePair) -> Vec<Event> {
    std::iter::from_fn(|| qp.poll_event()).collect()
}

fn build(
    src: Ipv4Address,
    dst: Ipv4Address,
    ecn: Ecn,
    bth: BthRepr,
    ext: ExtHeaders,
    payload: &[u8],
) -> Vec<u8> {
    let r = RoceRepr::new(src, dst, 0, ecn, 49152, bth, ext, payload);
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b);
    b
}

/// A request packet from A to B.
fn req(op: Opcode, psn: u32, payload: &[u8], ack_req: bool, ext: ExtHeaders) -> Vec<u8> {
    let mut bth = BthRepr::new(op, QPB, Psn::new(psn));
    bth.ack_req = ack_req;
    bth.pad_count = ((4 - payload.len() % 4) % 4) as u8;
    build(A, B, Ecn::Ect0, bth, ext, payload)
}
fn psn_a(i: u32) -> u32 {
    Psn::new(PSN_A).add(i).value()
}

/// An ACK/NAK from B to A.
fn ack(psn: u32, syndrome: AckSyndrome, msn: u32) -> Vec<u8> {
    let bth = BthRepr::new(Opcode::RC_ACKNOWLEDGE, QPA, Psn::new(psn));
    build(
        B,
        A,
        Ecn::NotEct,
        bth,
        ExtHeaders {
            aeth: Some(AethRepr { syndrome, msn }),
            ..Default::default()
        },
        &[],
    )
}
const OK: AckSyndrome = AckSyndrome::Ack { credits: 31 };

fn send(wr_id: u64, len: usize) -> SendRequest {
    SendRequest {
        wr_id,
        op: SendOp::Send,
        data: (0..len)
            .map(|i| (i * 7 + wr_id as usize) as u8)
            .collect::<Vec<u8>>()
            .into(),
    }
}

fn psns(o: &[Out]) -> Vec<u32> {
    o.iter()
        .map(|x| Psn::new(x.psn.value()).distance_from(Psn::new(PSN_A)))
        .collect()
}

// ---------------------------------------------------------------- requester

#[test]
fn requester_segments_by_mtu_with_consecutive_psns() {
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.post_send(send(1, 600)).unwrap();
    a.post_send(SendRequest {
        wr_id: 2,
        op: SendOp::SendImm(0xabcd),
        data: vec![9u8; 256].into(),
    })
    .unwrap();
    a.post_send(SendRequest {
        wr_id: 3,
        op: SendOp::Send,
        data: Vec::new().into(),
    })
    .unwrap();
    a.post_send(SendRequest {
        wr_id: 4,
        op: SendOp::WriteImm {
            remote_va: 0x1000,
            rkey: 0x77,
            imm: 5,
        },
        data: vec![1u8; 513].into(),
    })
    .unwrap();
    let out = drain(&mut a, t(0));
    let ops: Vec<Opcode> = out.iter().map(|o| o.op).collect();
    assert_eq!(
        ops,
        vec![
            Opcode::RC_SEND_FIRST,
            Opcode::RC_SEND_MIDDLE,
            Opcode::RC_SEND_LAST,
            Opcode::RC_SEND_ONLY_IMM,
            Opcode::RC_SEND_ONLY,
            Opcode::RC_WRITE_FIRST,
            Opcode::RC_WRITE_MIDDLE,
            Opcode::RC_WRITE_LAST_IMM,
        ]
    );
    assert_eq!(
        psns(&out),
        (0..8).collect::<Vec<_>>(),
        "consecutive across the 2^24 wrap"
    );
    assert_eq!(
        out.iter().map(|o| o.payload.len()).collect::<Vec<_>>(),
        vec![256, 256, 88, 256, 0, 256, 256, 1]
    );
    assert_eq!(out[0].payload, send(1, 600).data.as_bytes().unwrap()[..256]);
    assert_eq!(out[3].imm, Some(0xabcd));
    assert_eq!(
        out[5].reth,
        Some(RethRepr {
            va: 0x1000,
            rkey: 0x77,
            dma_len: 513
        })
    );
    assert_eq!(out[6].reth, None);
    assert_eq!(out[7].imm, Some(5));
    // AckReq on every message's last packet, not in between.
    assert_eq!(
        out.iter().map(|o| o.ack_req).collect::<Vec<_>>(),
        vec![false, false, true, true, true, false, false, true]
    );
    assert!(out.iter().all(|o| o.dest_qp == QPB && o.ecn == Ecn::Ect0));
    assert_eq!(a.outstanding(), 8);
}

#[test]
fn requester_asks_for_ack_every_n_packets() {
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.post_send(send(1, 20 * MTU)).unwrap();
    let out = drain(&mut a, t(0));
    let asked: Vec<u32> = out
        .iter()
        .zip(psns(&out))
        .filter(|(o, _)| o.ack_req)
        .map(|(_, p)| p)
        .collect();
    assert_eq!(asked, vec![7, 15, 19]);
}

#[test]
fn requester_window_limits_outstanding_psns() {
    let mut c = cfg_a();
    c.max_outstanding = 4;
    let mut a = RcQueuePair::new(c).unwrap();
    a.post_send(send(1, 10 * MTU)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(0))), vec![0, 1, 2, 3]);
    assert!(drain(&mut a, t(1)).is_empty());
    a.handle_packet(t(2), &ack(psn_a(1), OK, 0)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(2))), vec![4, 5]);
    assert_eq!(a.outstanding(), 4);
}

#[test]
fn requester_completes_only_when_fully_acknowledged() {
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.post_send(send(1, 3 * MTU)).unwrap();
    a.post_send(send(2, 10)).unwrap();
    a.post_send(send(3, 10)).unwrap();
    drain(&mut a, t(0));
    a.handle_packet(t(5), &ack(psn_a(1), OK, 0)).unwrap();
    assert_eq!(events(&mut a), vec![]);
    // One ACK covering two messages completes both, in order.
    a.handle_packet(t(6), &ack(psn_a(3), OK, 2)).unwrap();
    assert_eq!(
        events(&mut a),
        vec![
            Event::SendComplete {
                wr_id: 1,
                result: Ok(())
            },
            Event::SendComplete {
                wr_id: 2,
                result: Ok(())
            }
        ]
    );
    a.handle_packet(t(7), &ack(psn_a(4), OK, 3)).unwrap();
    assert_eq!(
        events(&mut a),
        vec![Event::SendComplete {
            wr_id: 3,
            result: Ok(())
        }]
    );
    assert_eq!(a.outstanding(), 0);
    assert_eq!(
        a.poll_timeout(),
        None,
        "no timer armed when nothing is in flight"
    );
}

#[test]
fn requester_ignores_stale_and_ghost_acks() {
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.post_send(send(1, 2 * MTU)).unwrap();
    drain(&mut a, t(0));
    a.handle_packet(t(1), &ack(psn_a(5), OK, 9)).unwrap(); // beyond anything sent
    a.handle_packet(t(1), &ack(psn_a(0).wrapping_sub(10) & 0xffffff, OK, 0))
        .unwrap(); // long before
    assert_eq!(a.stats().rx_stale_acks, 2);
    assert_eq!(a.outstanding(), 2);
    assert!(events(&mut a).is_empty());
}

#[test]
fn requester_goes_back_n_on_sequence_nak() {
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.post_send(send(1, 6 * MTU)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(0))), vec![0, 1, 2, 3, 4, 5]);
    // Responder got 0 and 1, then a gap at 2.
    a.handle_packet(
        t(10),
        &ack(psn_a(2), AckSyndrome::Nak(NakCode::PsnSequenceError), 0),
    )
    .unwrap();
    let out = drain(&mut a, t(10));
    assert_eq!(psns(&out), vec![2, 3, 4, 5]);
    assert_eq!(a.stats().tx_retransmitted, 4);
    assert_eq!(out[0].op, Opcode::RC_SEND_MIDDLE);
    assert_eq!(
        out[0].payload,
        send(1, 6 * MTU).data.as_bytes().unwrap()[2 * MTU..3 * MTU]
    );
    assert_eq!(a.outstanding(), 4);
}

#[test]
fn requester_retransmits_on_timeout_with_backoff_then_fails() {
    let mut c = cfg_a();
    c.retransmit_timeout = Duration::from_us(100);
    c.retry_limit = 2;
    let mut a = RcQueuePair::new(c).unwrap();
    a.post_send(send(1, 2 * MTU)).unwrap();
    a.post_send(send(2, 1)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(0))), vec![0, 1, 2]);
    assert_eq!(a.poll_timeout(), Some(t(100)));
    a.handle_timeout(t(99));
    assert!(drain(&mut a, t(99)).is_empty(), "not before the deadline");
    a.handle_timeout(t(100));
    let out = drain(&mut a, t(100));
    assert_eq!(psns(&out), vec![0, 1, 2]);
    assert!(
        out[0].ack_req,
        "a retransmission after timeout asks for an ACK"
    );
    assert_eq!(a.poll_timeout(), Some(t(300)), "back-off doubles");
    a.handle_timeout(t(300));
    assert_eq!(psns(&drain(&mut a, t(300))), vec![0, 1, 2]);
    assert_eq!(a.poll_timeout(), Some(t(700)));
    a.handle_timeout(t(700));
    assert!(drain(&mut a, t(700)).is_empty());
    assert!(a.is_error());
    assert_eq!(
        events(&mut a),
        vec![
            Event::SendComplete {
                wr_id: 1,
                result: Err(WcError::RetryExceeded(2))
            },
            Event::SendComplete {
                wr_id: 2,
                result: Err(WcError::Flushed)
            },
            Event::QpError(WcError::RetryExceeded(2)),
        ]
    );
    assert_eq!(a.post_send(send(3, 1)), Err(qp::PostError::QpInError));
}

/// Slow restart (`QpConfig::slow_restart`): after a timeout one packet goes, not the
/// window; each newly acknowledged packet opens the window by one; a sequence NAK
/// halves it. Without it (the test above) the timeout resends the whole window.
#[test]
fn slow_restart_resends_one_packet_after_a_timeout_and_reopens_by_acks() {
    let mut c = cfg_a();
    c.retransmit_timeout = Duration::from_us(100);
    c.max_outstanding = 8;
    c.slow_restart = true;
    let mut a = RcQueuePair::new(c).unwrap();
    a.post_send(send(1, 12 * MTU)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(0))), (0..8).collect::<Vec<_>>());
    a.handle_timeout(t(100));
    let out = drain(&mut a, t(100));
    assert_eq!(psns(&out), vec![0], "one packet after a timeout, not eight");
    assert!(out[0].ack_req);
    // Its ACK (the originals were lost): the window opens to two, and the packet
    // that fills it asks for an ACK (the responder would wait for `ack_every`).
    a.handle_packet(t(150), &ack(psn_a(0), OK, 0)).unwrap();
    let out = drain(&mut a, t(150));
    assert_eq!(psns(&out), vec![1, 2]);
    assert_eq!(
        out.iter().map(|o| o.ack_req).collect::<Vec<_>>(),
        [false, true]
    );
    // Two more acknowledged: four in flight past una.
    a.handle_packet(t(200), &ack(psn_a(2), OK, 0)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(200))), vec![3, 4, 5, 6]);
    // A spurious timeout's originals acknowledged at once: the window opens by all
    // of them, and nothing acknowledged is sent again.
    a.handle_packet(t(250), &ack(psn_a(6), OK, 0)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(250))), vec![7, 8, 9, 10, 11]);
    // A gap at 8: the NAK halves the window (8 → 4): 8..11 go again, four of them.
    a.handle_packet(
        t(300),
        &ack(psn_a(8), AckSyndrome::Nak(NakCode::PsnSequenceError), 0),
    )
    .unwrap();
    assert_eq!(psns(&drain(&mut a, t(300))), vec![8, 9, 10, 11]);
    // Resent: 0; 1, 2; 3..6; 7 (past the go-back-N cursor); 8..11 after the NAK.
    assert_eq!(a.stats().tx_retransmitted, 1 + 2 + 4 + 1 + 4);
}

#[test]
fn slow_restart_after_a_nak_sends_no_more_than_half_the_window() {
    let mut c = cfg_a();
    c.max_outstanding = 8;
    c.slow_restart = true;
    let mut a = RcQueuePair::new(c).unwrap();
    a.post_send(send(1, 12 * MTU)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(0))), (0..8).collect::<Vec<_>>());
    a.handle_packet(
        t(10),
        &ack(psn_a(2), AckSyndrome::Nak(NakCode::PsnSequenceError), 0),
    )
    .unwrap();
    // Window 4 from una = 2: 2..5, not 2..9.
    assert_eq!(psns(&drain(&mut a, t(10))), vec![2, 3, 4, 5]);
}

#[test]
fn retry_now_forgets_the_timeouts_and_retransmits_at_once() {
    let mut c = cfg_a();
    c.retransmit_timeout = Duration::from_us(100);
    c.retry_limit = 2;
    let mut a = RcQueuePair::new(c).unwrap();
    a.retry_now(t(0));
    assert_eq!(a.poll_timeout(), None, "nothing outstanding: nothing to do");
    a.post_send(send(1, 2 * MTU)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(0))), vec![0, 1]);
    a.handle_timeout(t(100));
    drain(&mut a, t(100));
    a.handle_timeout(t(300));
    drain(&mut a, t(300));
    // Two timeouts used: the next would fail at 700. A kick at 350 goes out now...
    a.retry_now(t(350));
    assert_eq!(a.poll_timeout(), Some(t(350)));
    a.handle_timeout(t(350));
    assert_eq!(psns(&drain(&mut a, t(350))), vec![0, 1]);
    assert!(!a.is_error());
    // ...and the back-off starts over: two more timeouts before the QP fails.
    assert_eq!(a.poll_timeout(), Some(t(550)));
    a.handle_timeout(t(550));
    drain(&mut a, t(550));
    assert!(!a.is_error());
    a.handle_timeout(t(950));
    assert!(a.is_error());
}

#[test]
fn adaptive_rto_follows_the_measured_round_trip_and_skips_retransmitted_samples() {
    // A 3 ms round trip against a 1 ms floor: a fixed timeout fires before every ACK,
    // the adaptive one only until it has measured one.
    let mut c = cfg_a();
    c.retransmit_timeout = Duration::from_ms(1);
    c.adaptive_rto = true;
    let mut a = RcQueuePair::new(c.clone()).unwrap();
    a.post_send(send(1, MTU)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(0))), vec![0]);
    assert_eq!(
        a.poll_timeout(),
        Some(t(1_000)),
        "the floor before any sample"
    );
    // The first timeout resends PSN 0: its ACK is ambiguous and is not sampled.
    a.handle_timeout(t(1_000));
    assert_eq!(psns(&drain(&mut a, t(1_000))), vec![0]);
    a.handle_packet(t(3_000), &ack(psn_a(0), OK, 1)).unwrap();
    assert_eq!(
        a.srtt(),
        None,
        "Karn: no sample from a retransmitted packet"
    );
    assert_eq!(a.retransmit_timeout(), Duration::from_ms(1));
    // A packet sent once and acknowledged 3 ms later is a sample: RTO = R + 4·R/2.
    a.post_send(send(2, MTU)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(3_000))), vec![1]);
    a.handle_packet(t(6_000), &ack(psn_a(1), OK, 2)).unwrap();
    assert_eq!(a.srtt(), Some(Duration::from_ms(3)));
    assert_eq!(a.retransmit_timeout(), Duration::from_ms(9));
    // The next packet waits out a 3 ms round trip without a timeout.
    a.post_send(send(3, MTU)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(6_000))), vec![2]);
    assert_eq!(a.poll_timeout(), Some(t(15_000)));
    a.handle_timeout(t(9_000));
    assert!(drain(&mut a, t(9_000)).is_empty(), "no spurious timeout");
    a.handle_packet(t(9_000), &ack(psn_a(2), OK, 3)).unwrap();
    // RFC 6298: RTTVAR = 3/4·1.5 + 1/4·0 ms, SRTT = 3 ms, RTO = 3 + 4·1.125 ms.
    assert_eq!(a.retransmit_timeout(), Duration::from_us(7_500));
    assert_eq!(a.stats().timeouts, 1);

    // The same script with a fixed timeout: the third packet times out at 7 ms.
    c.adaptive_rto = false;
    let mut f = RcQueuePair::new(c).unwrap();
    f.post_send(send(1, MTU)).unwrap();
    drain(&mut f, t(6_000));
    assert_eq!(f.poll_timeout(), Some(t(7_000)));
    f.handle_packet(t(6_500), &ack(psn_a(0), OK, 1)).unwrap();
    assert_eq!(f.srtt(), None, "a fixed-timeout QP does not measure");
    assert_eq!(f.retransmit_timeout(), Duration::from_ms(1));
}

#[test]
fn requester_progress_resets_the_retry_count() {
    let mut c = cfg_a();
    c.retransmit_timeout = Duration::from_us(100);
    let mut a = RcQueuePair::new(c).unwrap();
    a.post_send(send(1, 3 * MTU)).unwrap();
    drain(&mut a, t(0));
    a.handle_timeout(t(100));
    drain(&mut a, t(100));
    a.handle_packet(t(150), &ack(psn_a(0), OK, 0)).unwrap();
    assert_eq!(
        a.poll_timeout(),
        Some(t(250)),
        "fresh, un-backed-off timer after progress"
    );
}

#[test]
fn requester_waits_out_rnr_nak_then_retries() {
    let mut c = cfg_a();
    c.rnr_retry_limit = 1;
    let mut a = RcQueuePair::new(c).unwrap();
    a.post_send(send(1, 10)).unwrap();
    a.post_send(send(2, 10)).unwrap();
    drain(&mut a, t(0));
    // RNR NAK for the first message, timer code 3 = 30 us.
    a.handle_packet(t(5), &ack(psn_a(0), AckSyndrome::RnrNak { timer: 3 }, 0))
        .unwrap();
    assert!(drain(&mut a, t(5)).is_empty());
    assert!(drain(&mut a, t(34)).is_empty(), "waits out the RNR timer");
    assert_eq!(a.poll_timeout(), Some(t(35)));
    a.handle_timeout(t(35));
    assert_eq!(psns(&drain(&mut a, t(35))), vec![0, 1]);
    // A second RNR NAK in a row exceeds rnr_retry_limit = 1.
    a.handle_packet(t(40), &ack(psn_a(0), AckSyndrome::RnrNak { timer: 3 }, 0))
        .unwrap();
    assert!(a.is_error());
    let ev = events(&mut a);
    assert_eq!(
        ev[0],
        Event::SendComplete {
            wr_id: 1,
            result: Err(WcError::RnrRetryExceeded)
        }
    );
}

#[test]
fn a_late_rnr_nak_does_not_leave_a_stale_deadline() {
    // Everything is acknowledged, then an RNR NAK naming the last acked PSN arrives:
    // once its wait has passed, poll_timeout must not keep returning the past instant
    // (a driver waiting on it would spin).
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.post_send(send(1, 10)).unwrap();
    drain(&mut a, t(0));
    a.handle_packet(t(5), &ack(psn_a(0), OK, 1)).unwrap();
    let _ = a.handle_packet(t(6), &ack(psn_a(0), AckSyndrome::RnrNak { timer: 3 }, 1));
    a.handle_timeout(t(100));
    assert!(
        a.poll_timeout().is_none_or(|d| d > t(100)),
        "stale deadline {:?}",
        a.poll_timeout()
    );
}

#[test]
fn requester_fails_on_remote_access_nak() {
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.post_send(SendRequest {
        wr_id: 1,
        op: SendOp::Send,
        data: vec![0u8; 10].into(),
    })
    .unwrap();
    a.post_send(SendRequest {
        wr_id: 2,
        op: SendOp::Write {
            remote_va: 0,
            rkey: 1,
        },
        data: vec![0u8; 10].into(),
    })
    .unwrap();
    a.post_send(send(3, 10)).unwrap();
    drain(&mut a, t(0));
    a.handle_packet(
        t(5),
        &ack(psn_a(1), AckSyndrome::Nak(NakCode::RemoteAccessError), 1),
    )
    .unwrap();
    assert_eq!(
        events(&mut a),
        vec![
            Event::SendComplete {
                wr_id: 1,
                result: Ok(())
            },
            Event::SendComplete {
                wr_id: 2,
                result: Err(WcError::RemoteNak(NakCode::RemoteAccessError))
            },
            Event::SendComplete {
                wr_id: 3,
                result: Err(WcError::Flushed)
            },
            Event::QpError(WcError::RemoteNak(NakCode::RemoteAccessError)),
        ]
    );
}

#[test]
fn requester_reacts_to_cnp_through_rate_controller() {
    let mut a = RcQueuePair::with_rate_controller(cfg_a(), Box::new(FixedRate::new(8_000_000_000)))
        .unwrap();
    a.post_send(send(1, 4 * MTU)).unwrap();
    // 1 byte/ns: after the first packet the next may leave only once it has serialised.
    let out = drain(&mut a, t(0));
    assert_eq!(out.len(), 1);
    let len0 = 20 + 8 + 12 + MTU + 4;
    assert_eq!(a.poll_timeout(), Some(Instant::from_ns(len0 as u64)));
    assert_eq!(drain(&mut a, Instant::from_ns(len0 as u64)).len(), 1);
    let mut bth = BthRepr::new(Opcode::CNP, QPA, Psn::new(0));
    bth.resv8a = 0x40;
    let cnp = build(
        B,
        A,
        Ecn::NotEct,
        bth,
        ExtHeaders {
            cnp_reserved: Some([0; 16]),
            ..Default::default()
        },
        &[],
    );
    a.handle_packet(t(1), &cnp).unwrap();
    assert_eq!(a.stats().rx_cnps, 1);
}

// ---------------------------------------------------------------- responder

fn responder() -> RcQueuePair {
    let mut b = RcQueuePair::new(cfg_b()).unwrap();
    for i in 0..8 {
        b.post_recv(100 + i, 64 * 1024).unwrap();
    }
    b
}

fn is_ack(o: &Out, i: u32, msn: u32) -> bool {
    o.op == Opcode::RC_ACKNOWLEDGE
        && o.psn.value() == psn_a(i)
        && o.syndrome == Some(OK)
        && o.msn == msn
}

#[test]
fn responder_coalesces_acks() {
    let mut b = responder();
    let p = [7u8; MTU];
    // 6 MIDDLE-sized packets of one 7-packet SEND: ACK after every 4 (ack_every), then on LAST.
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_FIRST,
            psn_a(0),
            &p,
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    for i in 1..6 {
        b.handle_packet(
            t(0),
            &req(
                Opcode::RC_SEND_MIDDLE,
                psn_a(i),
                &p,
                false,
                ExtHeaders::default(),
            ),
        )
        .unwrap();
        let out = drain(&mut b, t(0));
        if i == 3 {
            assert_eq!(out.len(), 1);
            assert!(is_ack(&out[0], 3, 0), "{out:?}");
        } else {
            assert!(out.is_empty(), "no ACK at {i}");
        }
    }
    // An ACK request gets an ACK at once.
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_MIDDLE,
            psn_a(6),
            &p,
            true,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    assert!(is_ack(&drain(&mut b, t(0))[0], 6, 0));
    // The last packet of a message is always acknowledged, with the new MSN.
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_LAST,
            psn_a(7),
            &p[..5],
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    let out = drain(&mut b, t(0));
    assert!(is_ack(&out[0], 7, 1), "{out:?}");
    match &events(&mut b)[..] {
        [Event::Recv {
            wr_id: 100,
            data,
            imm: None,
        }] => assert_eq!(data.len(), 7 * MTU + 5),
        e => panic!("{e:?}"),
    }
}

#[test]
fn responder_naks_once_per_gap() {
    let mut b = responder();
    let p = [1u8; MTU];
    let mid = |i| {
        req(
            Opcode::RC_SEND_MIDDLE,
            psn_a(i),
            &p,
            false,
            ExtHeaders::default(),
        )
    };
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_FIRST,
            psn_a(0),
            &p,
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    // PSN 1 lost; 2, 3, 4 arrive: exactly one NAK naming PSN 1.
    for i in 2..5 {
        b.handle_packet(t(1), &mid(i)).unwrap();
    }
    let out = drain(&mut b, t(1));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        out[0].syndrome,
        Some(AckSyndrome::Nak(NakCode::PsnSequenceError))
    );
    assert_eq!(out[0].psn.value(), psn_a(1));
    assert_eq!(b.stats().rx_out_of_order, 3);
    // Beyond the gap, a packet asking for an ACK gets the NAK again (the first may be lost).
    b.handle_packet(
        t(1),
        &req(
            Opcode::RC_SEND_MIDDLE,
            psn_a(5),
            &p,
            true,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    let out = drain(&mut b, t(1));
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].syndrome, out[0].psn.value()),
        (Some(AckSyndrome::Nak(NakCode::PsnSequenceError)), psn_a(1))
    );
    // Go-back-N: 1..4 arrive again; accepted in order, ACK every 4.
    for i in 1..5 {
        b.handle_packet(t(2), &mid(i)).unwrap();
    }
    let out = drain(&mut b, t(2));
    assert_eq!(out.len(), 1);
    assert!(is_ack(&out[0], 4, 0));
    // A new gap later gets a new NAK.
    b.handle_packet(t(3), &mid(6)).unwrap();
    b.handle_packet(t(3), &mid(7)).unwrap();
    let out = drain(&mut b, t(3));
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].syndrome, out[0].psn.value()),
        (Some(AckSyndrome::Nak(NakCode::PsnSequenceError)), psn_a(5))
    );
}

#[test]
fn responder_reacknowledges_duplicates_without_redelivery() {
    let mut b = responder();
    let m = req(
        Opcode::RC_SEND_ONLY,
        psn_a(0),
        b"hello",
        true,
        ExtHeaders::default(),
    );
    b.handle_packet(t(0), &m).unwrap();
    assert!(is_ack(&drain(&mut b, t(0))[0], 0, 1));
    assert_eq!(events(&mut b).len(), 1);
    for _ in 0..3 {
        b.handle_packet(t(1), &m).unwrap();
        let out = drain(&mut b, t(1));
        assert_eq!(out.len(), 1, "duplicate with AckReq is re-acknowledged");
        assert!(is_ack(&out[0], 0, 1));
    }
    assert!(events(&mut b).is_empty(), "never delivered twice");
    assert_eq!(b.stats().rx_duplicates, 3);
    assert_eq!(b.recv_queue_len(), 7);
    // Duplicates without AckReq: only the first of a run is acknowledged.
    let m2 = req(
        Opcode::RC_SEND_ONLY,
        psn_a(1),
        b"x",
        false,
        ExtHeaders::default(),
    );
    b.handle_packet(t(2), &m2).unwrap();
    drain(&mut b, t(2));
    let d = req(
        Opcode::RC_SEND_MIDDLE,
        psn_a(0),
        &[0; MTU],
        false,
        ExtHeaders::default(),
    );
    b.handle_packet(t(3), &d).unwrap();
    b.handle_packet(t(3), &d).unwrap();
    assert_eq!(drain(&mut b, t(3)).len(), 1);
}

#[test]
fn responder_checks_write_access() {
    let mut b = responder();
    b.register_mr(0x10_000, 1024, 0x55).unwrap();
    assert_eq!(
        b.register_mr(0, 1, 0x55),
        Err(qp::PostError::DuplicateRkey(0x55))
    );
    let reth = |va, rkey, len| ExtHeaders {
        reth: Some(RethRepr {
            va,
            rkey,
            dma_len: len,
        }),
        ..Default::default()
    };
    // Good WRITE ONLY into the middle of the region.
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_WRITE_ONLY,
            psn_a(0),
            b"abcd",
            true,
            reth(0x10_100, 0x55, 4),
        ),
    )
    .unwrap();
    assert!(is_ack(&drain(&mut b, t(0))[0], 0, 1));
    assert_eq!(&b.mr(0x55).unwrap().data[0x100..0x104], b"abcd");
    assert!(
        events(&mut b).is_empty(),
        "a WRITE without immediate completes nothing at the responder"
    );
    // Wrong rkey, then past the end: remote access error NAKs naming the PSN; nothing written.
    for (va, rkey) in [(0x10_000, 0x56), (0x10_3ff, 0x55)] {
        b.handle_packet(
            t(1),
            &req(
                Opcode::RC_WRITE_ONLY,
                psn_a(1),
                b"zzzz",
                true,
                reth(va, rkey, 4),
            ),
        )
        .unwrap();
        let out = drain(&mut b, t(1));
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].syndrome,
            Some(AckSyndrome::Nak(NakCode::RemoteAccessError))
        );
        assert_eq!(out[0].psn.value(), psn_a(1));
    }
    assert!(!b.mr(0x55).unwrap().data.contains(&b'z'));
    // A multi-packet WRITE with immediate lands and consumes a receive request.
    let data: Vec<u8> = (0..MTU + 3).map(|i| i as u8).collect();
    b.handle_packet(
        t(2),
        &req(
            Opcode::RC_WRITE_FIRST,
            psn_a(1),
            &data[..MTU],
            false,
            reth(0x10_000, 0x55, (MTU + 3) as u32),
        ),
    )
    .unwrap();
    let imm = ExtHeaders {
        imm: Some(42),
        ..Default::default()
    };
    b.handle_packet(
        t(2),
        &req(Opcode::RC_WRITE_LAST_IMM, psn_a(2), &data[MTU..], true, imm),
    )
    .unwrap();
    assert_eq!(&b.mr(0x55).unwrap().data[..MTU + 3], &data[..]);
    assert_eq!(
        events(&mut b),
        vec![Event::RecvWriteImm {
            wr_id: 100,
            len: MTU + 3,
            imm: 42
        }]
    );
}

#[test]
fn responder_rnr_naks_when_no_receive_is_posted() {
    let mut b = RcQueuePair::new(cfg_b()).unwrap();
    let p = [3u8; MTU];
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_FIRST,
            psn_a(0),
            &p,
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_MIDDLE,
            psn_a(1),
            &p,
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_LAST,
            psn_a(2),
            &p,
            true,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    let out = drain(&mut b, t(0));
    assert_eq!(
        out.len(),
        1,
        "one RNR NAK; the rest of the burst is dropped silently: {out:?}"
    );
    assert_eq!(out[0].syndrome, Some(AckSyndrome::RnrNak { timer: 1 }));
    assert_eq!(out[0].psn.value(), psn_a(0));
    b.post_recv(7, 4096).unwrap();
    b.handle_packet(
        t(20),
        &req(
            Opcode::RC_SEND_FIRST,
            psn_a(0),
            &p,
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    b.handle_packet(
        t(20),
        &req(
            Opcode::RC_SEND_MIDDLE,
            psn_a(1),
            &p,
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    b.handle_packet(
        t(20),
        &req(
            Opcode::RC_SEND_LAST,
            psn_a(2),
            &p,
            true,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    assert!(is_ack(&drain(&mut b, t(20))[0], 2, 1));
    assert!(matches!(
        &events(&mut b)[..],
        [Event::Recv { wr_id: 7, .. }]
    ));
}

#[test]
fn responder_naks_invalid_requests() {
    let mut b = responder();
    // MIDDLE without FIRST.
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_MIDDLE,
            psn_a(0),
            &[0; MTU],
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    // FIRST shorter than the MTU.
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_FIRST,
            psn_a(0),
            &[0; 10],
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    // RDMA READ is not served.
    let reth = ExtHeaders {
        reth: Some(RethRepr {
            va: 0,
            rkey: 0,
            dma_len: 8,
        }),
        ..Default::default()
    };
    b.handle_packet(
        t(0),
        &req(Opcode::RC_READ_REQUEST, psn_a(0), &[], true, reth),
    )
    .unwrap();
    let out = drain(&mut b, t(0));
    assert_eq!(out.len(), 3);
    for o in &out {
        assert_eq!(o.syndrome, Some(AckSyndrome::Nak(NakCode::InvalidRequest)));
        assert_eq!(o.psn.value(), psn_a(0));
    }
    assert_eq!(
        b.expected_psn().value(),
        psn_a(0),
        "refused packets do not advance the PSN"
    );
}

#[test]
fn responder_sends_cnp_at_most_once_per_interval() {
    let mut b = responder();
    let ce = |i: u32| {
        let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, QPB, Psn::new(psn_a(i)));
        bth.pad_count = 0;
        build(A, B, Ecn::Ce, bth, ExtHeaders::default(), &[0; 4])
    };
    let mut cnps = Vec::new();
    for (i, at) in [0u64, 10, 49, 50, 60, 120].into_iter().enumerate() {
        b.handle_packet(t(at), &ce(i as u32)).unwrap();
        for o in drain(&mut b, t(at)) {
            if o.op == Opcode::CNP {
                assert_eq!(o.dest_qp, QPA);
                cnps.push(at);
            }
        }
    }
    assert_eq!(cnps, vec![0, 50, 120]);
    assert_eq!(b.stats().rx_ecn_ce, 6);
}

#[test]
fn qp_drops_bad_icrc_wrong_qp_and_garbage_with_counts() {
    let mut b = responder();
    let mut m = req(
        Opcode::RC_SEND_ONLY,
        psn_a(0),
        b"data",
        true,
        ExtHeaders::default(),
    );
    let n = m.len();
    m[n - 6] ^= 1;
    assert_eq!(b.handle_packet(t(0), &m), Err(qp::RxDrop::BadIcrc));
    let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, 0x99, Psn::new(psn_a(0)));
    bth.ack_req = true;
    assert_eq!(
        b.handle_packet(
            t(0),
            &build(A, B, Ecn::NotEct, bth, ExtHeaders::default(), b"data")
        ),
        Err(qp::RxDrop::WrongQp(0x99))
    );
    assert!(matches!(
        b.handle_packet(t(0), &[0x45, 0, 0]),
        Err(qp::RxDrop::Malformed(_))
    ));
    let s = b.stats();
    assert_eq!(
        (s.drop_bad_icrc, s.drop_wrong_qp, s.drop_malformed),
        (1, 1, 1)
    );
    assert!(drain(&mut b, t(0)).is_empty());
    assert!(events(&mut b).is_empty());
}

/// A stranger (C) who knows the QPN and a PSN in the window still cannot
/// deliver data, acknowledge, or fail the QP with a NAK: an RC packet carries no source
/// QPN, so its source address binds it to the connection.
#[test]
fn packets_from_a_stranger_are_dropped_and_counted_whatever_they_say() {
    const C: Ipv4Address = Ipv4Address::new(10, 0, 0, 66);
    let mut b = responder();
    b.post_recv(1, 64).unwrap();
    let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, QPB, Psn::new(psn_a(0)));
    bth.ack_req = true;
    let injected = build(C, B, Ecn::NotEct, bth, ExtHeaders::default(), b"evil");
    assert_eq!(
        b.handle_packet(t(0), &injected),
        Err(qp::RxDrop::WrongSource(C))
    );
    assert!(drain(&mut b, t(0)).is_empty(), "no ACK for a stranger");
    assert!(events(&mut b).is_empty(), "nothing delivered");
    // The real sender's packet at the same PSN is still the one delivered.
    b.handle_packet(
        t(1),
        &req(
            Opcode::RC_SEND_ONLY,
            psn_a(0),
            b"good",
            true,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    assert!(matches!(&events(&mut b)[..], [Event::Recv { data, .. }] if data == b"good"));

    // The requester: a forged ACK and a fatal NAK from C change nothing.
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.post_send(send(1, 10)).unwrap();
    drain(&mut a, t(0));
    let forged = |syndrome| {
        let bth = BthRepr::new(Opcode::RC_ACKNOWLEDGE, QPA, Psn::new(psn_a(0)));
        let aeth = Some(AethRepr { syndrome, msn: 1 });
        let ext = ExtHeaders {
            aeth,
            ..Default::default()
        };
        build(C, A, Ecn::NotEct, bth, ext, &[])
    };
    for syndrome in [OK, AckSyndrome::Nak(NakCode::RemoteAccessError)] {
        assert_eq!(
            a.handle_packet(t(2), &forged(syndrome)),
            Err(qp::RxDrop::WrongSource(C))
        );
    }
    assert!(events(&mut a).is_empty(), "neither completed nor failed");
    assert!(!a.is_error());
    assert_eq!(a.outstanding(), 1);
    assert_eq!(
        (a.stats().drop_wrong_source, b.stats().drop_wrong_source),
        (2, 1)
    );
    a.handle_packet(t(3), &ack(psn_a(0), OK, 1)).unwrap();
    assert_eq!(
        events(&mut a),
        vec![Event::SendComplete {
            wr_id: 1,
            result: Ok(())
        }]
    );
}

// ---------------------------------------------------------------- selective repeat

#[test]
fn selective_repeat_resends_only_what_is_missing() {
    let mut ca = cfg_a();
    ca.retransmission = Retransmission::SelectiveRepeat;
    ca.peer_sack = true;
    let mut cb = cfg_b();
    cb.retransmission = Retransmission::SelectiveRepeat;
    cb.peer_sack = true;
    let mut a = RcQueuePair::new(ca).unwrap();
    let mut b = RcQueuePair::new(cb).unwrap();
    b.post_recv(1, 1 << 20).unwrap();
    let msg = send(9, 10 * MTU);
    a.post_send(msg.clone()).unwrap();
    let mut buf = vec![0u8; a.max_packet_len()];
    let mut sent = Vec::new();
    while let Some(n) = a.poll_transmit(t(0), &mut buf).map(|t| t.len) {
        sent.push(buf[..n].to_vec());
    }
    assert_eq!(sent.len(), 10);
    // Lose PSNs 2 and 5.
    for (i, p) in sent.iter().enumerate() {
        if i != 2 && i != 5 {
            b.handle_packet(t(1), p).unwrap();
        }
    }
    let fb: Vec<Vec<u8>> = {
        let mut v = Vec::new();
        let mut fbuf = vec![0u8; b.max_packet_len()];
        while let Some(n) = b.poll_transmit(t(1), &mut fbuf).map(|t| t.len) {
            v.push(fbuf[..n].to_vec());
        }
        v
    };
    // One NAK per gap (2 and 5), and again for the two AckReq packets beyond them (7, 9).
    assert_eq!(fb.len(), 4);
    for f in &fb {
        a.handle_packet(t(2), f).unwrap();
    }
    let re = drain(&mut a, t(2));
    assert_eq!(psns(&re), vec![2, 5], "only the holes are resent");
    // Deliver the resent packets: the message completes, once, intact.
    let mut resent = Vec::new();
    for o in &re {
        let mut ext = ExtHeaders::default();
        ext.imm = o.imm;
        resent.push(req(o.op, o.psn.value(), &o.payload, o.ack_req, ext));
    }
    for p in &resent {
        b.handle_packet(t(3), p).unwrap();
    }
    match &events(&mut b)[..] {
        [Event::Recv { wr_id: 1, data, .. }] => assert_eq!(&data[..], msg.data.as_bytes().unwrap()),
        e => panic!("{e:?}"),
    }
    for f in drain(&mut b, t(3)) {
        let a_ack = ack(f.psn.value(), f.syndrome.unwrap(), f.msn);
        a.handle_packet(t(4), &a_ack).unwrap();
    }
    assert_eq!(
        events(&mut a),
        vec![Event::SendComplete {
            wr_id: 9,
            result: Ok(())
        }]
    );
}

#[test]
fn selective_repeat_responder_serves_go_back_n_requester() {
    let mut cb = cfg_b();
    cb.retransmission = Retransmission::SelectiveRepeat; // peer_sack false: peer is go-back-N
    let mut b = RcQueuePair::new(cb).unwrap();
    b.post_recv(1, 1 << 20).unwrap();
    let p = [5u8; MTU];
    let pkt = |op, i| req(op, psn_a(i), &p, false, ExtHeaders::default());
    b.handle_packet(t(0), &pkt(Opcode::RC_SEND_FIRST, 0))
        .unwrap();
    b.handle_packet(t(0), &pkt(Opcode::RC_SEND_MIDDLE, 2))
        .unwrap();
    b.handle_packet(t(0), &pkt(Opcode::RC_SEND_LAST, 3))
        .unwrap();
    let out = drain(&mut b, t(0));
    assert_eq!(out.len(), 1);
    assert!(
        out[0].payload.is_empty(),
        "no SACK extension to a go-back-N peer"
    );
    // The go-back-N requester resends 1, 2, 3; the held 2 and 3 are not delivered twice.
    b.handle_packet(t(1), &pkt(Opcode::RC_SEND_MIDDLE, 1))
        .unwrap();
    let out = drain(&mut b, t(1));
    assert!(is_ack(out.last().unwrap(), 3, 1), "{out:?}");
    b.handle_packet(t(1), &pkt(Opcode::RC_SEND_MIDDLE, 2))
        .unwrap();
    b.handle_packet(t(1), &pkt(Opcode::RC_SEND_LAST, 3))
        .unwrap();
    match &events(&mut b)[..] {
        [Event::Recv { data, .. }] => assert_eq!(data.len(), 4 * MTU),
        e => panic!("{e:?}"),
    }
    assert_eq!(b.stats().rx_duplicates, 2);
}

#[test]
fn config_is_validated() {
    let mut c = cfg_a();
    c.mtu = 1500;
    assert_eq!(RcQueuePair::new(c).unwrap_err(), ConfigError::Mtu(1500));
    let mut c = cfg_a();
    c.retransmission = Retransmission::SelectiveRepeat;
    c.max_outstanding = 1000;
    assert_eq!(
        RcQueuePair::new(c).unwrap_err(),
        ConfigError::SackWindow(1000)
    );
}

// ---------------------------------------------------------------- modify: SQ/RQ PSN

#[test]
fn set_send_psn_renumbers_the_next_request_once_drained() {
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    assert_eq!(a.send_psn(), Psn::new(PSN_A));
    a.post_send(send(1, 2 * MTU)).unwrap();
    assert_eq!(a.send_psn(), Psn::new(psn_a(2)), "posting assigns PSNs");
    // Queued and in flight: refused, and nothing changes.
    let busy = Err(ModifyError::SendQueueBusy {
        queued: 1,
        outstanding: 0,
    });
    assert_eq!(a.set_send_psn(Psn::new(7)), busy);
    drain(&mut a, t(0));
    assert_eq!(
        a.set_send_psn(Psn::new(7)),
        Err(ModifyError::SendQueueBusy {
            queued: 1,
            outstanding: 2
        })
    );
    assert_eq!(a.send_psn(), Psn::new(psn_a(2)));
    a.handle_packet(t(1), &ack(psn_a(1), OK, 1)).unwrap();
    assert_eq!(events(&mut a).len(), 1);
    assert_eq!(a.poll_timeout(), None, "nothing in flight, no timer");

    // Drained: the next request starts at the new PSN, across the 2^24 wrap.
    a.set_send_psn(Psn::new(0xffffff)).unwrap();
    assert_eq!(a.send_psn(), Psn::new(0xffffff));
    a.post_send(send(2, 3 * MTU)).unwrap();
    let out = drain(&mut a, t(2));
    assert_eq!(
        out.iter().map(|o| o.psn.value()).collect::<Vec<_>>(),
        vec![0xffffff, 0, 1]
    );
    assert_eq!(a.outstanding(), 3);
    // A late ACK in the old numbering is stale, not applied.
    a.handle_packet(t(3), &ack(psn_a(0), OK, 1)).unwrap();
    assert_eq!(a.stats().rx_stale_acks, 1);
    assert_eq!(a.outstanding(), 3);
    a.handle_packet(t(4), &ack(1, OK, 2)).unwrap();
    assert_eq!(
        events(&mut a),
        vec![Event::SendComplete {
            wr_id: 2,
            result: Ok(())
        }]
    );
    assert_eq!(a.send_psn(), Psn::new(2));
}

#[test]
fn set_send_psn_to_the_current_value_is_a_no_op() {
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.set_send_psn(a.send_psn()).unwrap();
    a.post_send(send(1, 10)).unwrap();
    assert_eq!(psns(&drain(&mut a, t(0))), vec![0]);
}

#[test]
fn set_recv_psn_moves_the_expected_psn() {
    // 100 behind A's first PSN, so A's old numbering is ahead of the new expectation.
    const NEW: u32 = PSN_A - 100;
    let mut b = RcQueuePair::new(cfg_b()).unwrap();
    for i in 0..3 {
        b.post_recv(i, 4 * MTU).unwrap();
    }
    assert_eq!(b.expected_psn(), Psn::new(PSN_A));
    b.set_recv_psn(Psn::new(NEW)).unwrap();
    assert_eq!(b.expected_psn(), Psn::new(NEW));
    // The old numbering is now "ahead": out of order, NAKed with the new expected PSN.
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_ONLY,
            PSN_A,
            b"x",
            true,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    let out = drain(&mut b, t(0));
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].syndrome,
        Some(AckSyndrome::Nak(NakCode::PsnSequenceError))
    );
    assert_eq!(out[0].psn, Psn::new(NEW));
    assert!(events(&mut b).is_empty());
    // The new numbering is accepted.
    b.handle_packet(
        t(1),
        &req(
            Opcode::RC_SEND_ONLY,
            NEW,
            b"hello",
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    assert_eq!(
        events(&mut b),
        vec![Event::Recv {
            wr_id: 0,
            data: b"hello".to_vec(),
            imm: None
        }]
    );
    assert_eq!(b.expected_psn(), Psn::new(NEW + 1));
    let out = drain(&mut b, t(1));
    assert_eq!(out.last().unwrap().psn, Psn::new(NEW), "ACK of the new PSN");
    // Moving backwards is allowed too (verbs does not forbid it): earlier PSNs are new again.
    b.set_recv_psn(Psn::new(NEW - 100)).unwrap();
    b.handle_packet(
        t(2),
        &req(
            Opcode::RC_SEND_ONLY,
            NEW - 100,
            b"again",
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    assert_eq!(events(&mut b).len(), 1);
}

#[test]
fn set_recv_psn_is_refused_while_a_message_is_half_received() {
    let mut b = RcQueuePair::new(cfg_b()).unwrap();
    b.post_recv(1, 4 * MTU).unwrap();
    let first = req(
        Opcode::RC_SEND_FIRST,
        PSN_A,
        &[1; MTU],
        false,
        ExtHeaders::default(),
    );
    b.handle_packet(t(0), &first).unwrap();
    assert_eq!(
        b.set_recv_psn(Psn::new(9)),
        Err(ModifyError::MessageInProgress)
    );
    assert_eq!(b.expected_psn(), Psn::new(psn_a(1)), "unchanged");
    let last = req(
        Opcode::RC_SEND_LAST,
        psn_a(1),
        &[2; 10],
        true,
        ExtHeaders::default(),
    );
    b.handle_packet(t(1), &last).unwrap();
    assert_eq!(events(&mut b).len(), 1);
    b.set_recv_psn(Psn::new(9)).unwrap();
    assert_eq!(b.expected_psn(), Psn::new(9));
}

#[test]
fn set_recv_psn_drops_packets_held_out_of_order() {
    let mut c = cfg_b();
    c.retransmission = Retransmission::SelectiveRepeat;
    let mut b = RcQueuePair::new(c).unwrap();
    b.post_recv(1, MTU).unwrap();
    // PSN_A + 1 arrives before PSN_A: held.
    b.handle_packet(
        t(0),
        &req(
            Opcode::RC_SEND_ONLY,
            psn_a(1),
            b"held",
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    b.set_recv_psn(Psn::new(psn_a(0))).unwrap();
    // The missing PSN arrives: only it is delivered, the held packet was dropped.
    b.handle_packet(
        t(1),
        &req(
            Opcode::RC_SEND_ONLY,
            psn_a(0),
            b"first",
            false,
            ExtHeaders::default(),
        ),
    )
    .unwrap();
    assert_eq!(
        events(&mut b),
        vec![Event::Recv {
            wr_id: 1,
            data: b"first".to_vec(),
            imm: None
        }]
    );
    assert_eq!(b.expected_psn(), Psn::new(psn_a(1)));
}

#[test]
fn psn_modifies_are_refused_in_the_error_state() {
    let mut a = RcQueuePair::new(cfg_a()).unwrap();
    a.post_send(send(1, 10)).unwrap();
    drain(&mut a, t(0));
    a.handle_packet(
        t(1),
        &ack(psn_a(0), AckSyndrome::Nak(NakCode::RemoteAccessError), 0),
    )
    .unwrap();
    assert!(a.is_error());
    assert_eq!(a.set_send_psn(Psn::new(1)), Err(ModifyError::QpInError));
    assert_eq!(a.set_recv_psn(Psn::new(1)), Err(ModifyError::QpInError));
}
