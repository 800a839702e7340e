//! The fast path's model held to the pipeline, frame by frame, on [`sample_frames`].
//!
//! The stage: a 4-port switch; host h_p (10.77.0.(p+1)) on port p; McstID 10.77.0.200;
//! the leader h0 multicasts to h1..h3 with WRITE regions. A second stage puts h2 and
//! h3 behind a switch port (port 3), so one copy goes as is toward the next switch.

use super::*;
use crate::fabric::cepheus::VIRTUAL_QPN;
use crate::switch::OutFrame;
use crate::time::Instant;
use crate::wire::{RoceRepr, ETHERNET_HEADER_LEN};

const MCST: Ipv4Address = SAMPLE_MCST;
use super::{sample_host_ip as ip, sample_host_mac as mac, sample_switch as registered};

fn now() -> Instant {
    Instant::from_ps(1_000_000)
}

fn run(sw: &mut FrameSwitch, port: u16, frame: &[u8]) -> Vec<OutFrame> {
    sw.handle_frame(now(), port, frame);
    let mut buf = vec![0u8; frame.len().max(128)];
    let mut out = Vec::new();
    while let Some(t) = sw.poll_transmit(now(), &mut buf) {
        out.push(OutFrame {
            port: t.port,
            frame: buf[..t.len].to_vec(),
        });
    }
    out
}

/// A switch with the group registered and its first data packet (PSN 99) seen.
fn stage(switch_ports: Vec<u16>, hosts: [(u16, u16); 4]) -> FrameSwitch {
    let mut sw = registered(switch_ports, hosts);
    let first = sample_frames(mac(0), sw.port_mac(0), ip(0), MCST, VIRTUAL_QPN, 99);
    assert!(
        !run(&mut sw, 0, &first[0]).is_empty(),
        "the pipeline's own first copies"
    );
    sw
}

/// Feeds the corpus (PSNs from 100) to the pipeline and the model; returns what the
/// model deferred, by index.
fn hold_to_pipeline(mut sw: FrameSwitch) -> Vec<usize> {
    let g = sw.fast_path_group(MCST, ip(0), VIRTUAL_QPN).unwrap();
    let frames = sample_frames(mac(0), sw.port_mac(0), ip(0), MCST, VIRTUAL_QPN, 100);
    let mut high = Psn::new(99);
    let mut deferred = Vec::new();
    let last = frames.len() - 1;
    for (i, f) in frames.iter().enumerate() {
        let pipeline = run(&mut sw, 0, f);
        match g.forward(high, f) {
            FastPathVerdict::Defer => {
                deferred.push(i);
                // The daemon forwarded it: the group goes on from its PSN (re-armed).
                if let Some(d) = source_data(f).filter(|_| !pipeline.is_empty()) {
                    if d.src_ip == g.src_ip && d.dest_qp == g.group_qp {
                        high = high.max(d.psn);
                    }
                }
            }
            FastPathVerdict::Forward { psn, frames } if i == last => {
                // The corrupted frame: the pipeline drops it, the copies keep a bad
                // ICRC for the member's NIC to drop.
                assert!(pipeline.is_empty());
                assert_eq!(frames.len(), g.copies.len());
                for ((_, c), copy) in frames.iter().zip(&g.copies) {
                    // Bridged copies carry the rewritten wrong ICRC; as-is ones the
                    // original one.
                    let verified = RoceRepr::parse_verified(&c[ETHERNET_HEADER_LEN..]);
                    assert!(verified.is_err(), "{copy:?}");
                }
                high = psn;
            }
            FastPathVerdict::Forward { psn, frames } => {
                let mut want: Vec<(u16, Vec<u8>)> =
                    pipeline.into_iter().map(|o| (o.port, o.frame)).collect();
                let mut got = frames;
                want.sort();
                got.sort();
                assert_eq!(got.len(), want.len(), "frame {i}: copies");
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g.0, w.0, "frame {i}: port");
                    assert_eq!(g.1, w.1, "frame {i} to port {}: bytes", g.0);
                }
                high = psn;
            }
        }
    }
    deferred
}

#[test]
fn the_model_makes_the_pipelines_frames_and_defers_the_rest() {
    let hosts = [(0, 0), (1, 1), (2, 2), (3, 3)];
    let deferred = hold_to_pipeline(stage(Vec::new(), hosts));
    // The retransmission, another source, another QP, the read request, non-zero pad
    // bytes, link padding, the IP option and the fragment (by their corpus index).
    assert_eq!(deferred, vec![18, 19, 20, 21, 22, 23, 24, 26]);
}

#[test]
fn a_copy_toward_a_switch_is_the_packet_as_is() {
    let hosts = [(0, 0), (1, 1), (2, 3), (3, 3)];
    let sw = stage(vec![3], hosts);
    let g = sw.fast_path_group(MCST, ip(0), VIRTUAL_QPN).unwrap();
    assert_eq!(
        g.copies
            .iter()
            .map(|c| (c.port, c.bridge.is_some()))
            .collect::<Vec<_>>(),
        vec![(3, false), (1, true)],
        "switches first"
    );
    assert_eq!(hold_to_pipeline(sw), vec![18, 19, 20, 21, 22, 23, 24, 26]);
}

#[test]
fn a_registered_group_compiles_to_its_copies() {
    let hosts = [(0, 0), (1, 1), (2, 2), (3, 3)];
    let sw = registered(Vec::new(), hosts);
    assert_eq!(
        sw.fast_path_group(Ipv4Address::new(10, 77, 0, 201), ip(0), VIRTUAL_QPN),
        Err(NotCompiled::NoGroup)
    );
    // The leader's registration arrived on port 0: that is the source's side.
    let g = sw.fast_path_group(MCST, ip(0), VIRTUAL_QPN).unwrap();
    assert_eq!(g.in_port, 0);
    assert_eq!(
        g.copies
            .iter()
            .map(|c| (c.port, c.dst_mac))
            .collect::<Vec<_>>(),
        vec![(1, mac(1)), (2, mac(2)), (3, mac(3))]
    );
}

#[test]
fn the_window_table_predicts_the_icrc() {
    // A byte difference at a window position, then zeros to the window's end.
    for (slot, &pos) in icrc_window_positions().iter().enumerate() {
        let mut w = vec![
            0u8;
            if slot < 2 {
                ICRC_WINDOW
            } else {
                ICRC_RETH_WINDOW
            }
        ];
        w[pos] = 0xa5;
        assert_eq!(icrc_table_entry(slot, 0xa5), icrc::crc0(&w), "slot {slot}");
    }
}

#[test]
fn data_further_ahead_than_the_next_psn_stays_with_the_pipeline() {
    // PSN 101 while 100 is still with the daemon: forwarding it would overtake 100.
    let sw = stage(Vec::new(), [(0, 0), (1, 1), (2, 2), (3, 3)]);
    let g = sw.fast_path_group(MCST, ip(0), VIRTUAL_QPN).unwrap();
    let frames = sample_frames(mac(0), sw.port_mac(0), ip(0), MCST, VIRTUAL_QPN, 101);
    assert_eq!(g.forward(Psn::new(99), &frames[0]), FastPathVerdict::Defer);
    assert!(matches!(
        g.forward(Psn::new(100), &frames[0]),
        FastPathVerdict::Forward { psn, .. } if psn == Psn::new(101)
    ));
    // Across the wrap of the 24-bit PSN.
    let wrap = sample_frames(mac(0), sw.port_mac(0), ip(0), MCST, VIRTUAL_QPN, 0);
    assert!(matches!(
        g.forward(Psn::new(0xff_ffff), &wrap[0]),
        FastPathVerdict::Forward { .. }
    ));
    assert_eq!(
        g.forward(Psn::new(0xff_fffe), &wrap[0]),
        FastPathVerdict::Defer
    );
}
