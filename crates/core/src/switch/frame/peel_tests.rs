//! Frame-by-frame scripts for [`FrameSwitch`] as a PEEL switch (module docs, step 5).
//!
//! The stage: a UD SEND from 10.77.0.1 (MAC 02:72:63:00:00:01) to group 239.77.0.1,
//! shimmed as the source sends it. A rack switch has hosts on ports 0..3 and its
//! plane-0 uplink on port 4, members of the group on ports 1 and 2; a prefix switch
//! has racks 0..3 behind ports 0..3.

use super::tests::CollectFrames;
use super::*;
use crate::fabric::cepheus::ForwardAllCnp;
use crate::fabric::peel::tests::shim;
use crate::fabric::peel::PrefixRules;
use crate::wire::peel::{insert_shim, PeelHeader, PEEL_HEADER_LEN};
use crate::wire::{BthRepr, DethRepr, ExtHeaders, Opcode, Psn};
use proptest::prelude::*;

const GROUP: Ipv4Address = Ipv4Address::new(239, 77, 0, 1);
const SRC: Ipv4Address = Ipv4Address::new(10, 77, 0, 1);
const SRC_MAC: EthernetAddress = EthernetAddress([2, 0x72, 0x63, 0, 0, 1]);
const GROUP_MAC: EthernetAddress = EthernetAddress([1, 0, 0x5e, 77, 0, 1]);

fn now() -> Instant {
    Instant::from_ps(1_000_000)
}

fn switch(role: PeelRole) -> FrameSwitch {
    FrameSwitch::new(
        FrameSwitchConfig {
            max_groups: 4,
            switch_id: 1,
            peel: Some(role),
            group_lease: None,
            ..FrameSwitchConfig::new(5)
        },
        Box::new(ForwardAllCnp),
    )
}

fn rack() -> FrameSwitch {
    let mut sw = switch(PeelRole::Rack { uplinks: vec![4] });
    sw.add_peel_member(GROUP, 1).unwrap();
    sw.add_peel_member(GROUP, 2).unwrap();
    sw
}

fn prefix() -> FrameSwitch {
    switch(PeelRole::Prefix {
        pod: 0,
        plane: 0,
        rules: PrefixRules::for_racks(&[0, 1, 2, 3]),
    })
}

/// The original RoCEv2 frame (UDP 4791) as the source's endpoint emits it.
fn original() -> Vec<u8> {
    let bth = BthRepr::new(Opcode::UD_SEND_ONLY, 0xff_ffff, Psn::new(42));
    let ext = ExtHeaders {
        deth: Some(DethRepr {
            qkey: 0x1111_0000,
            reserved: 0,
            src_qp: 0x100,
        }),
        ..Default::default()
    };
    let r = RoceRepr::new(SRC, GROUP, 26, Ecn::Ect0, 4791, bth, ext, &[0x5a; 300]);
    let mut ip = vec![0u8; r.buffer_len()];
    r.emit(&mut ip);
    let mut f = vec![0u8; ETHERNET_HEADER_LEN];
    EthernetRepr {
        src_addr: SRC_MAC,
        dst_addr: GROUP_MAC,
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f.extend_from_slice(&ip);
    f
}

fn shimmed(h: PeelHeader) -> Vec<u8> {
    let orig = original();
    let mut f = orig[..ETHERNET_HEADER_LEN].to_vec();
    f.extend_from_slice(&insert_shim(&orig[ETHERNET_HEADER_LEN..], &h).unwrap());
    f
}

fn feed(sw: &mut FrameSwitch, port: u16, frame: &[u8]) -> Vec<OutFrame> {
    let mut out = Vec::new();
    sw.handle_frame_into(now(), port, frame, &mut out);
    out
}

/// The frame a member gets is the original, byte for byte, and its ICRC verifies.
fn assert_restored(f: &OutFrame) {
    let orig = original();
    assert_eq!(f.frame, orig, "stripping restores the exact original bytes");
    let ip = &f.frame[ETHERNET_HEADER_LEN..];
    let r = RoceRepr::parse(ip).unwrap();
    assert!(r.icrc_ok(ip), "the source's ICRC verifies after the strip");
}

#[test]
fn rack_switch_sends_a_source_rack_copy_up_unchanged_and_to_local_members_stripped() {
    let mut sw = rack();
    let f = shimmed(shim(1, 1, PeelHeader::SOURCE_RACK));
    let out = feed(&mut sw, 1, &f);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0].port, 4);
    assert_eq!(
        out[0].frame, f,
        "the copy toward the plane is the frame as it came"
    );
    assert_eq!(out[1].port, 2, "the other member, never the sender's port");
    assert_restored(&out[1]);
    // A second packet of the same cover, without SOURCE_RACK: up only.
    let out = feed(&mut sw, 1, &shimmed(shim(2, 0, 0)));
    assert_eq!(out.iter().map(|o| o.port).collect::<Vec<_>>(), vec![4]);
    let s = sw.stats();
    assert_eq!((s.peel_in, s.peel_forwarded, s.peel_delivered), (2, 2, 1));
}

#[test]
fn rack_switch_delivers_from_above_to_members_with_the_shim_stripped() {
    let mut sw = rack();
    let out = feed(&mut sw, 4, &shimmed(shim(0, 0, 0)));
    assert_eq!(out.iter().map(|o| o.port).collect::<Vec<_>>(), vec![1, 2]);
    for o in &out {
        assert_restored(o);
        assert_eq!(
            o.frame.len() + PEEL_HEADER_LEN,
            shimmed(shim(0, 0, 0)).len()
        );
    }
    assert_eq!(sw.stats().peel_delivered, 2);
}

#[test]
fn an_over_covered_rack_discards_and_counts() {
    let mut sw = switch(PeelRole::Rack { uplinks: vec![4] });
    let out = feed(&mut sw, 4, &shimmed(shim(0, 0, PeelHeader::OVER_COVERED)));
    assert!(out.is_empty());
    assert_eq!(sw.stats().peel_dropped, 1);
    assert_eq!(sw.peel().unwrap().stats.over_covered, 1);
}

#[test]
fn prefix_switch_replicates_to_the_blocks_racks_unchanged() {
    let mut sw = prefix();
    // From rack 0's ToR (port 0): 1* = racks 2, 3.
    let f = shimmed(shim(1, 1, 0));
    let out = feed(&mut sw, 0, &f);
    assert_eq!(out.iter().map(|o| o.port).collect::<Vec<_>>(), vec![2, 3]);
    assert!(out.iter().all(|o| o.frame == f));
    // * from rack 0: every other rack, not back down to the source's.
    let out = feed(&mut sw, 0, &shimmed(shim(0, 0, 0)));
    assert_eq!(
        out.iter().map(|o| o.port).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    // A prefix longer than the 2-bit rack space: no rule, counted.
    let out = feed(&mut sw, 0, &shimmed(shim(3, 0, 0)));
    assert!(out.is_empty());
    assert_eq!(sw.peel().unwrap().stats.no_rule, 1);
    assert_eq!(sw.stats().peel_dropped, 1);
}

#[test]
fn malformed_shims_are_counted_drops() {
    let mut sw = rack();
    let good = shimmed(shim(1, 1, 0));
    let at = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;
    let mut bad_version = good.clone();
    bad_version[at] = 0x20;
    let mut bad_prefix = good.clone();
    bad_prefix[at + 1] = 1;
    bad_prefix[at + 5] = 3; // value 3 in a 1-bit prefix
    let mut bad_flags = good.clone();
    bad_flags[at] |= 0x08;
    for f in [&bad_version, &bad_prefix, &bad_flags] {
        assert!(feed(&mut sw, 0, f).is_empty());
    }
    // Cut short: the IPv4 header claims more than the frame holds.
    assert!(feed(&mut sw, 0, &good[..at + 4]).is_empty());
    let s = sw.stats();
    assert_eq!(s.peel_malformed, 3);
    assert_eq!(
        s.malformed, 1,
        "a truncated IPv4 packet is the pipeline's malformed"
    );
    assert_eq!(s.tx_frames, 0);
}

#[test]
fn without_a_peel_role_a_shimmed_frame_is_plain_ipv4() {
    let mut sw = FrameSwitch::new(
        FrameSwitchConfig {
            max_groups: 4,
            switch_id: 1,
            group_lease: None,
            ..FrameSwitchConfig::new(3)
        },
        Box::new(ForwardAllCnp),
    );
    let f = shimmed(shim(1, 1, 0));
    let out = feed(&mut sw, 0, &f);
    assert_eq!(out.iter().map(|o| o.port).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(sw.stats().flooded, 1);
    assert_eq!(sw.stats().peel_in, 0);
}

#[test]
fn members_only_at_rack_switches_and_host_ports() {
    let mut sw = rack();
    assert!(sw.add_peel_member(GROUP, 4).is_err(), "the uplink");
    assert!(sw.add_peel_member(GROUP, 5).is_err(), "no such port");
    assert!(prefix().add_peel_member(GROUP, 1).is_err());
}

proptest! {
    /// Any bytes after a valid IPv4/UDP header to port 4793, at either role and any
    /// port: no panic, and every frame out is one the switch may send.
    #[test]
    fn arbitrary_shims_and_bodies_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..64),
                                              in_port in 0u16..6, rack_role in any::<bool>()) {
        let mut sw = if rack_role { rack() } else { prefix() };
        let good = shimmed(shim(1, 1, 0));
        let at = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;
        let mut f = good[..at].to_vec();
        f.extend_from_slice(&tail);
        let _ = feed(&mut sw, in_port, &f);
        // And with a rewritten IPv4 length that matches the new body.
        let total = (f.len() - ETHERNET_HEADER_LEN) as u16;
        f[ETHERNET_HEADER_LEN + 2..ETHERNET_HEADER_LEN + 4].copy_from_slice(&total.to_be_bytes());
        f[ETHERNET_HEADER_LEN + 24..ETHERNET_HEADER_LEN + 26]
            .copy_from_slice(&(total - IPV4_HEADER_LEN as u16).to_be_bytes());
        Ipv4Packet::new_unchecked(&mut f[ETHERNET_HEADER_LEN..]).fill_checksum();
        for o in feed(&mut sw, in_port, &f) {
            prop_assert!(o.port < 5 && o.port != in_port);
        }
    }
}
