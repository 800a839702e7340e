//! Feeds arbitrary bytes to `wire` as an Ethernet frame, as an IPv4 packet, as a pcap
//! file (with its own header and behind a valid one; the streaming reader must agree with
//! the in-memory one), as an MRP payload and as an IGMP message. Nothing may panic, and every
//! RoCE packet that parses must re-emit to a packet that parses back to the same `Repr`.
//!
//! Run: `cargo +nightly fuzz run parse_frame` from the repository root.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_core::wire::pcap::{PcapReader, PcapStreamReader};
use rocast_core::wire::{
    classify_frame, FrameClass, Ipv4Repr, RoceRepr, ETHERNET_HEADER_LEN, IPV4_HEADER_LEN,
};

/// A little-endian microsecond pcap header, Ethernet link type, 256 KiB snap length.
const PCAP_HEADER: [u8; 24] = [
    0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0,
];

fn roundtrip(r: &RoceRepr<'_>) {
    assert_eq!(r.udp_payload_len(), r.udp.payload_len);
    let mut buf = vec![0u8; r.buffer_len()];
    assert_eq!(r.emit(&mut buf), buf.len());
    let back = RoceRepr::parse_verified(&buf).expect("emitted packet parses and verifies");
    // `emit` recomputes the IP total length and the ICRC; everything else must survive.
    let expect = RoceRepr {
        ip: Ipv4Repr {
            payload_len: buf.len() - IPV4_HEADER_LEN,
            ..r.ip
        },
        icrc: back.icrc,
        ..*r
    };
    assert_eq!(back, expect);
    let mut again = vec![0u8; back.buffer_len()];
    back.emit(&mut again);
    assert_eq!(again, buf);
}

fn frame(data: &[u8]) {
    if let FrameClass::Roce { frame, icrc_ok } = classify_frame(data) {
        roundtrip(&frame.roce);
        let ip = &data[ETHERNET_HEADER_LEN..];
        assert_eq!(RoceRepr::parse(ip).ok(), Some(frame.roce));
        assert_eq!(RoceRepr::parse_verified(ip).is_ok(), icrc_ok);
    }
}

fn pcap(data: &[u8]) {
    if let Ok(reader) = PcapReader::new(data) {
        for rec in reader {
            match rec {
                Ok(rec) => frame(rec.data),
                Err(_) => break,
            }
        }
    }
    same_records_streamed(data);
}

/// The streaming reader (`rocast pcap`'s) yields exactly the in-memory reader's
/// records and errors on any classic pcap input; a pcapng input (only the streaming
/// reader reads it) yields records within the record limit until its first error, and
/// nothing after it.
fn same_records_streamed(data: &[u8]) {
    if data.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        if let Ok(mut r) = PcapStreamReader::new(data) {
            let mut failed = false;
            while let Some(x) = r.next_record() {
                assert!(!failed, "a record after an error");
                match x {
                    Ok(rec) => {
                        assert!(rec.data.len() <= 262_144);
                        frame(rec.data);
                    }
                    Err(e) => {
                        e.expect("no I/O error on a slice");
                        failed = true;
                    }
                }
            }
        }
        return;
    }
    let mem = PcapReader::new(data).map(|r| {
        r.map(|x| x.map(|x| (x.ts_ns, x.orig_len, x.data.to_vec())))
            .collect::<Vec<_>>()
    });
    let stream = PcapStreamReader::new(data).map(|mut r| {
        let mut v = Vec::new();
        while let Some(x) = r.next_record() {
            v.push(
                x.map(|x| (x.ts_ns, x.orig_len, x.data.to_vec()))
                    .map_err(|e| e.expect("no I/O error on a slice")),
            );
        }
        v
    });
    match (mem, stream) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!(Ok(a), b.map_err(|_| ())),
        (a, b) => panic!("{a:?} vs {:?}", b.is_ok()),
    }
}

fuzz_target!(|data: &[u8]| {
    frame(data);
    if let Ok(r) = RoceRepr::parse(data) {
        roundtrip(&r);
    }
    let _ = RoceRepr::parse_verified(data);
    if let Ok(m) = rocast_core::wire::mrp::MrpRepr::parse(data) {
        let mut out = vec![0u8; m.buffer_len()];
        m.emit(&mut out);
        assert_eq!(out, data);
    }
    // The PEEL shim: a stripped shim re-inserts to the same bytes, and an inserted one
    // strips back to the original (the IPv4 checksum, recomputed, may differ only in
    // its one's-complement encoding of zero, so it is left out of the comparison).
    {
        use rocast_core::wire::peel::*;
        let same =
            |a: &[u8], b: &[u8]| a.len() == b.len() && a[..10] == b[..10] && a[12..] == b[12..];
        let total = || u16::from_be_bytes([data[2], data[3]]) as usize;
        if let Ok((h, inner)) = strip_shim(data) {
            let again = insert_shim(&inner, &h).expect("a stripped packet takes its shim back");
            assert!(same(&again, &data[..total()]));
        }
        if let Ok(with) = insert_shim(data, &PeelHeader::default()) {
            let (_, back) = strip_shim(&with).expect("an inserted shim strips");
            assert!(same(&back, &data[..total()]));
        }
        let _ = PeelHeader::parse(data);
    }
    // IGMP: any bytes parse or fail cleanly; a parsed membership report names only
    // multicast groups, and the general query the switch emits parses back.
    if let Ok(rocast_core::wire::igmp::IgmpRepr::Membership(changes)) =
        rocast_core::wire::igmp::IgmpRepr::parse(data)
    {
        assert!(changes.iter().all(|c| c.group.is_multicast()));
    }
    if let [a, b, c, ..] = *data {
        let q = rocast_core::wire::igmp::IgmpRepr::emit_general_query(a, b, c);
        assert!(matches!(
            rocast_core::wire::igmp::IgmpRepr::parse(&q),
            Ok(rocast_core::wire::igmp::IgmpRepr::Query { .. })
        ));
    }
    if let Ok(c) = rocast_core::control::Confirmation::parse(data) {
        let mut out = vec![0u8; c.buffer_len()];
        c.emit(&mut out).expect("a parsed confirmation emits");
        assert_eq!(out, data);
    }
    // A Cepheus switch takes any RoCE packet on any port without panicking, and a
    // bridge rewrite of any packet either fails cleanly or yields a verified one.
    if let Ok(r) = RoceRepr::parse(data) {
        use rocast_core::fabric::cepheus::*;
        let mcst = rocast_core::wire::Ipv4Address::new(239, 0, 0, 1);
        let mut sw = CepheusSwitch::new(
            4,
            4,
            Box::new(CounterCnpFilter::new(rocast_core::time::Duration::from_us(
                10,
            ))),
        );
        sw.set_path(mcst, 0, NextHop::Switch, true).unwrap();
        sw.set_path(mcst, 1, NextHop::Switch, false).unwrap();
        let mut r2 = r;
        r2.ip.dst_addr = mcst;
        for port in 0..5 {
            let now = rocast_core::time::Instant::from_ps(port as u64);
            sw.handle_packet(now, port, &r2);
            while sw.poll_transmit(now).is_some() {}
        }
        let b = Bridge {
            mcst_id: mcst,
            dst_ip: r.ip.src_addr,
            dst_qp: 7,
            region: Some((1, 2)),
        };
        let mut copy = data.to_vec();
        if b.rewrite_ip_packet(&mut copy).is_ok() {
            assert!(RoceRepr::parse_verified(&copy).is_ok());
        }
    }
    // The whole switch pipeline takes any frame on any port (and a port it does not
    // have) without panicking, and everything it emits fits a buffer of the input's
    // size or is counted.
    {
        use rocast_core::fabric::cepheus::{CnpFilterPolicy, GroupAddressSpace};
        use rocast_core::switch::{FrameSwitch, FrameSwitchConfig};
        let mut sw = FrameSwitch::new(
            FrameSwitchConfig {
                max_groups: 4,
                group_space: GroupAddressSpace::default(),
                switch_id: 1,
                mac: rocast_core::wire::EthernetAddress([2, 0, 0, 0, 0, 0]),
                group_lease: None,
                allocation_lease: rocast_core::time::Duration::from_ms(1_000),
                ..FrameSwitchConfig::new(4)
            },
            CnpFilterPolicy::ForwardAll.build(),
        );
        let mut buf = vec![0u8; data.len().max(64)];
        for port in 0..5u16 {
            let now = rocast_core::time::Instant::from_ps(port as u64);
            sw.handle_frame(now, port, data);
            while sw.poll_transmit(now, &mut buf).is_some() {}
        }
        assert_eq!(sw.stats().rx_frames, 5);
    }
    pcap(data);
    let mut with_header = PCAP_HEADER.to_vec();
    with_header.extend_from_slice(data);
    pcap(&with_header);
});
