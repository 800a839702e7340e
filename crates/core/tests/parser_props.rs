//! Property tests for `wire`'s parsers: no input makes them panic, corruption is caught,
//! and whatever parses re-emits to something that parses back to the same `Repr`.

use proptest::prelude::*;
use rocast_core::wire::pcap::{PcapError, PcapReader, PcapWriter, LINKTYPE_ETHERNET};
use rocast_core::wire::{
    classify_frame, icrc, AckSyndrome, AethPacket, AethRepr, AtomicAckEthRepr, AtomicEthRepr,
    BthPacket, BthRepr, DethRepr, Ecn, EtherType, EthernetAddress, EthernetFrame, EthernetRepr,
    ExtHeaders, FrameClass, Ipv4Address, Ipv4Packet, Ipv4Repr, NakCode, Opcode, Psn, RethRepr,
    RoceFrameRepr, RoceRepr, UdpPacket, UdpRepr, BTH_LEN, CNP_RESERVED_LEN, ETHERNET_HEADER_LEN,
    ICRC_LEN, IPV4_HEADER_LEN, IP_PROTO_UDP, ROCEV2_UDP_PORT, UDP_HEADER_LEN,
};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// Helpers

/// Calls every accessor of every view that accepts `b`, and every `Repr::parse`.
fn poke_every_view(b: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(b) {
        let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload().len());
        let r = EthernetRepr::parse(&f).unwrap();
        let mut out = [0u8; ETHERNET_HEADER_LEN];
        r.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
        assert_eq!(&out[..], &b[..ETHERNET_HEADER_LEN]);
    }
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (
            p.version(),
            p.header_len(),
            p.tos(),
            p.dscp(),
            p.ecn(),
            p.total_len(),
            p.ident(),
        );
        let _ = (
            p.dont_frag(),
            p.more_frags(),
            p.frag_offset(),
            p.ttl(),
            p.protocol(),
            p.checksum(),
        );
        let _ = (
            p.src_addr(),
            p.dst_addr(),
            p.verify_checksum(),
            p.header().len(),
            p.payload().len(),
        );
        let _ = Ipv4Repr::parse(&p, true);
        if let Ok(r) = Ipv4Repr::parse(&p, false) {
            assert_eq!(r.payload_len + IPV4_HEADER_LEN, p.total_len() as usize);
        }
    }
    if let Ok(p) = UdpPacket::new_checked(b) {
        let _ = (
            p.src_port(),
            p.dst_port(),
            p.len(),
            p.is_empty(),
            p.checksum(),
            p.payload().len(),
        );
        let r = UdpRepr::parse(&p).unwrap();
        assert_eq!(r.payload_len, p.payload().len());
    }
    if let Ok(p) = BthPacket::new_checked(b) {
        let _ = (
            p.opcode(),
            p.solicited(),
            p.mig_req(),
            p.pad_count(),
            p.tver(),
            p.pkey(),
            p.resv8a(),
        );
        let _ = (
            p.fecn(),
            p.becn(),
            p.dest_qp(),
            p.ack_req(),
            p.resv7(),
            p.psn(),
        );
        let op = p.opcode();
        let _ = (
            op.name(),
            op.transport_name(),
            op.is_known(),
            op.is_send(),
            op.is_write(),
        );
        let _ = (
            op.is_first(),
            op.is_last(),
            op.has_imm(),
            format!("{op} {op:?}"),
        );
        let r = BthRepr::parse(&p).unwrap();
        let mut out = [0u8; BTH_LEN];
        r.emit(&mut out);
        assert_eq!(&out[..], &b[..BTH_LEN], "BthRepr keeps every bit");
    }
    if let Ok(p) = AethPacket::new_checked(b) {
        let _ = (p.syndrome(), p.msn());
    }
    let _ = (
        RethRepr::parse(b),
        AethRepr::parse(b),
        DethRepr::parse(b),
        AtomicEthRepr::parse(b),
    );
    let _ = (icrc::compute(b), icrc::verify(b));
}

/// Calls every setter of every view that accepts a copy of `b`.
fn poke_every_setter(b: &[u8]) {
    let mut v = b.to_vec();
    if let Ok(mut f) = EthernetFrame::new_checked(&mut v[..]) {
        f.set_dst_addr(EthernetAddress::BROADCAST);
        f.set_src_addr(EthernetAddress([2, 0, 0, 0, 0, 1]));
        f.set_ethertype(EtherType::Ipv4);
        let _ = f.payload_mut().len();
    }
    let mut v = b.to_vec();
    if let Ok(mut p) = Ipv4Packet::new_checked(&mut v[..]) {
        p.set_tos(0xff);
        p.set_ecn(Ecn::Ce);
        p.set_ttl(1);
        p.set_src_addr(Ipv4Address::new(1, 2, 3, 4));
        p.set_dst_addr(Ipv4Address::new(5, 6, 7, 8));
        p.fill_checksum();
        assert!(p.verify_checksum());
        let _ = p.payload_mut().len();
    }
    let mut v = b.to_vec();
    if let Ok(mut p) = UdpPacket::new_checked(&mut v[..]) {
        p.set_src_port(1);
        p.set_dst_port(ROCEV2_UDP_PORT);
        p.set_checksum(0);
    }
    let mut v = b.to_vec();
    if let Ok(mut p) = BthPacket::new_checked(&mut v[..]) {
        p.set_dest_qp(0xffff_ffff);
        p.set_psn(Psn::new(0xff_ffff));
        p.set_ack_req(true);
        assert_eq!(
            (p.dest_qp(), p.psn(), p.ack_req()),
            (0xff_ffff, Psn::new(0xff_ffff), true)
        );
    }
}

/// Emits `r`, parses it back and checks that only what `emit` recomputes (IP length,
/// ICRC) changed; and that a second emit is byte-identical.
fn check_roundtrip(r: &RoceRepr<'_>) {
    assert_eq!(
        r.udp_payload_len(),
        r.udp.payload_len,
        "parse accounts for every UDP payload byte"
    );
    let mut buf = vec![0u8; r.buffer_len()];
    assert_eq!(r.emit(&mut buf), buf.len());
    let r2 = RoceRepr::parse_verified(&buf).expect("an emitted packet parses and verifies");
    let expect = RoceRepr {
        ip: Ipv4Repr {
            payload_len: buf.len() - IPV4_HEADER_LEN,
            ..r.ip
        },
        icrc: r2.icrc,
        ..*r
    };
    assert_eq!(r2, expect);
    assert_eq!(
        r2.icrc,
        u32::from_le_bytes(buf[buf.len() - ICRC_LEN..].try_into().unwrap())
    );
    let mut again = vec![0u8; r2.buffer_len()];
    r2.emit(&mut again);
    assert_eq!(again, buf);
}

/// Classifies `frame` and, if it is RoCE, checks the round trip; returns the class.
fn classify_and_check(frame: &[u8]) -> FrameClass<'_> {
    let class = classify_frame(frame);
    if let FrameClass::Roce { frame: f, icrc_ok } = &class {
        check_roundtrip(&f.roce);
        let ip = &frame[ETHERNET_HEADER_LEN..];
        let exact = RoceRepr::parse(ip).expect("classify and parse agree");
        assert_eq!(exact, f.roce);
        assert_eq!(RoceRepr::parse_verified(ip).is_ok(), *icrc_ok);
        // A packet with a valid ICRC, no slack after the UDP datagram and zero pad bytes
        // (emit writes zeros) re-emits byte-identical.
        let f = f.roce;
        let end = IPV4_HEADER_LEN + UDP_HEADER_LEN + f.udp.payload_len;
        let pad = if f.bth.opcode.is_known() {
            f.bth.pad_count as usize
        } else {
            0
        };
        let zero_pad = ip[end - ICRC_LEN - pad..end - ICRC_LEN]
            .iter()
            .all(|&b| b == 0);
        // (`Ipv4Repr` does not keep the reserved "evil" flag bit; exclude it.)
        let plain_ip = ip[6] & 0x80 == 0;
        if *icrc_ok
            && f.ip.payload_len == UDP_HEADER_LEN + f.udp.payload_len
            && zero_pad
            && plain_ip
        {
            let mut buf = vec![0u8; f.buffer_len()];
            f.emit(&mut buf);
            assert_eq!(&buf[..], &ip[..end]);
        }
    }
    class
}

/// Valid frames of several shapes, built with `RoceFrameRepr::emit`.
fn base_frames() -> Vec<Vec<u8>> {
    let data: Vec<u8> = (0..200u32).map(|i| (i * 13 + 5) as u8).collect();
    let mut specs: Vec<(Opcode, ExtHeaders, usize)> = vec![
        (Opcode::RC_SEND_ONLY, ExtHeaders::default(), 64),
        (Opcode::RC_SEND_MIDDLE, ExtHeaders::default(), 0),
        (
            Opcode::RC_SEND_LAST_IMM,
            ExtHeaders {
                imm: Some(0xabcdef01),
                ..Default::default()
            },
            7,
        ),
        (
            Opcode::RC_WRITE_ONLY,
            ExtHeaders {
                reth: Some(RethRepr {
                    va: 0x1000,
                    rkey: 9,
                    dma_len: 61,
                }),
                ..Default::default()
            },
            61,
        ),
        (
            Opcode::RC_ACKNOWLEDGE,
            ExtHeaders {
                aeth: Some(AethRepr {
                    syndrome: AckSyndrome::Nak(NakCode::RemoteAccessError),
                    msn: 5,
                }),
                ..Default::default()
            },
            0,
        ),
        (
            Opcode::RC_ATOMIC_ACKNOWLEDGE,
            ExtHeaders {
                aeth: Some(AethRepr {
                    syndrome: AckSyndrome::Ack { credits: 31 },
                    msn: 1,
                }),
                atomic_ack_eth: Some(AtomicAckEthRepr { orig_data: 77 }),
                ..Default::default()
            },
            0,
        ),
        (
            Opcode::RC_FETCH_ADD,
            ExtHeaders {
                atomic_eth: Some(AtomicEthRepr {
                    va: 8,
                    rkey: 3,
                    swap_add: 1,
                    compare: 0,
                }),
                ..Default::default()
            },
            0,
        ),
        (
            Opcode::UD_SEND_ONLY_IMM,
            ExtHeaders {
                deth: Some(DethRepr {
                    qkey: 0x1111_1111,
                    reserved: 0,
                    src_qp: 0x42,
                }),
                imm: Some(1),
                ..Default::default()
            },
            33,
        ),
        (
            Opcode::RC_SEND_ONLY_INV,
            ExtHeaders {
                ieth: Some(0x77),
                ..Default::default()
            },
            3,
        ),
        (
            Opcode::CNP,
            ExtHeaders {
                cnp_reserved: Some([0; CNP_RESERVED_LEN]),
                ..Default::default()
            },
            0,
        ),
    ];
    specs.push((Opcode(0x15), ExtHeaders::default(), 10)); // unknown opcode: opaque body
    specs
        .into_iter()
        .enumerate()
        .map(|(i, (op, ext, len))| {
            let mut bth = BthRepr::new(op, 0x12 + i as u32, Psn::new(0xff_fff0 + i as u32 * 3));
            bth.pad_count = if op.is_known() {
                ((4 - len % 4) % 4) as u8
            } else {
                0
            };
            bth.ack_req = i % 2 == 0;
            let f = RoceFrameRepr {
                eth: EthernetRepr {
                    src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
                    dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
                    ethertype: EtherType::Ipv4,
                },
                roce: RoceRepr {
                    ip: Ipv4Repr {
                        src_addr: Ipv4Address::new(10, 0, 0, 1),
                        dst_addr: Ipv4Address::new(10, 0, 0, 2),
                        dscp: 26,
                        ecn: Ecn::Ect0,
                        ident: i as u16,
                        dont_frag: true,
                        ttl: 64,
                        protocol: IP_PROTO_UDP,
                        payload_len: 0,
                    },
                    udp: UdpRepr {
                        src_port: 49152 + i as u16,
                        dst_port: ROCEV2_UDP_PORT,
                        checksum: 0,
                        payload_len: 0,
                    },
                    bth,
                    ext,
                    payload: &data[..len],
                    icrc: 0,
                },
            };
            let mut buf = vec![0u8; f.buffer_len()];
            f.emit(&mut buf);
            assert!(matches!(
                classify_frame(&buf),
                FrameClass::Roce { icrc_ok: true, .. }
            ));
            buf
        })
        .collect()
}

/// A RoCE-shaped IPv4 packet with consistent IP/UDP headers around arbitrary BTH and
/// body bytes; the ICRC is correct or arbitrary.
fn roce_shaped() -> impl Strategy<Value = (Vec<u8>, bool)> {
    let known: Vec<u8> = (0..=255u8).filter(|&o| Opcode(o).is_known()).collect();
    let opcode = prop_oneof![4 => prop::sample::select(known), 1 => any::<u8>()];
    (
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            0u8..64,
            0u8..4,
            any::<u16>(),
            any::<bool>(),
            any::<u8>(),
        ),
        (any::<u16>(), any::<u16>()),
        opcode,
        any::<[u8; 11]>(),
        prop::collection::vec(any::<u8>(), 0..300),
        prop::option::of(any::<u32>()),
    )
        .prop_map(
            |(
                (src, dst, dscp, ecn, ident, df, ttl),
                (sport, csum),
                op,
                bth_rest,
                body,
                bad_icrc,
            )| {
                let udp_len = BTH_LEN + body.len() + ICRC_LEN;
                let mut p = vec![0u8; IPV4_HEADER_LEN + UDP_HEADER_LEN + udp_len];
                Ipv4Repr {
                    src_addr: Ipv4Address(src),
                    dst_addr: Ipv4Address(dst),
                    dscp,
                    ecn: Ecn::from_bits(ecn),
                    ident,
                    dont_frag: df,
                    ttl,
                    protocol: IP_PROTO_UDP,
                    payload_len: UDP_HEADER_LEN + udp_len,
                }
                .emit(&mut p);
                UdpRepr {
                    src_port: sport,
                    dst_port: ROCEV2_UDP_PORT,
                    checksum: csum,
                    payload_len: udp_len,
                }
                .emit(&mut p[IPV4_HEADER_LEN..]);
                let at = IPV4_HEADER_LEN + UDP_HEADER_LEN;
                p[at] = op;
                p[at + 1..at + BTH_LEN].copy_from_slice(&bth_rest);
                p[at + BTH_LEN..at + BTH_LEN + body.len()].copy_from_slice(&body);
                let n = p.len();
                match bad_icrc {
                    Some(c) => p[n - ICRC_LEN..].copy_from_slice(&c.to_le_bytes()),
                    None => icrc::fill(&mut p).unwrap(),
                }
                (p, bad_icrc.is_none())
            },
        )
}

fn with_ethernet(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

/// A pcap file header with one of the four magics and arbitrary snaplen/link type.
fn pcap_header() -> impl Strategy<Value = Vec<u8>> {
    (0usize..4, any::<u32>(), any::<u32>()).prop_map(|(m, snaplen, linktype)| {
        let (magic, be) = [
            (0xa1b2c3d4u32, false),
            (0xa1b23c4d, false),
            (0xa1b2c3d4, true),
            (0xa1b23c4d, true),
        ][m];
        let w = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&w(magic));
        h.extend_from_slice(&[0, 2, 0, 4][..]);
        h.extend_from_slice(&[0; 8]);
        h.extend_from_slice(&w(snaplen));
        h.extend_from_slice(&w(linktype));
        h
    })
}

/// Iterates a reader to the end, checking its contract.
fn drain_pcap(bytes: &[u8]) -> Option<(usize, Option<PcapError>)> {
    let mut r = PcapReader::new(bytes).ok()?;
    let (lo, hi) = (
        bytes.as_ptr() as usize,
        bytes.as_ptr() as usize + bytes.len(),
    );
    let mut n = 0;
    let mut err = None;
    for rec in &mut r {
        match rec {
            Ok(rec) => {
                n += 1;
                let p = rec.data.as_ptr() as usize;
                assert!(p >= lo + 24 + 16 && p + rec.data.len() <= hi);
                assert!(n * 16 <= bytes.len() - 24);
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    assert!(r.next().is_none(), "a reader stays finished");
    Some((n, err))
}

// ---------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..2000)) {
        classify_and_check(&b);
        let _ = RoceRepr::parse(&b);
        let _ = RoceRepr::parse_verified(&b);
        // Also from the offsets where each header would start in a frame.
        for off in [0, ETHERNET_HEADER_LEN, ETHERNET_HEADER_LEN + IPV4_HEADER_LEN, 42, 54] {
            if let Some(s) = b.get(off..) {
                poke_every_view(s);
                poke_every_setter(s);
                if let Ok(r) = RoceRepr::parse(s) {
                    check_roundtrip(&r);
                }
            }
        }
    }

    #[test]
    fn arbitrary_ipv4_then_udp_4791_never_panics(
        head in prop::collection::vec(any::<u8>(), 20..60),
        tail in prop::collection::vec(any::<u8>(), 0..200),
        len_hint in any::<u16>(),
    ) {
        // IPv4 version nibble, protocol UDP and port 4791 set so the deeper paths run.
        let mut ip = head;
        ip[0] = 0x40 | (ip[0] & 0x0f);
        ip[9] = IP_PROTO_UDP;
        ip.extend_from_slice(&tail);
        let ihl = ((ip[0] & 0x0f) as usize * 4).max(20);
        if ip.len() >= ihl + 4 {
            ip[ihl + 2..ihl + 4].copy_from_slice(&ROCEV2_UDP_PORT.to_be_bytes());
        }
        if len_hint % 2 == 0 && ip.len() >= (ip[0] & 0x0f) as usize * 4 {
            let total = ip.len() as u16;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            Ipv4Packet::new_unchecked(&mut ip[..]).fill_checksum();
        }
        let frame = with_ethernet(&ip);
        match classify_and_check(&frame) {
            // Only when the port sits where the fallback check does not look (options) or is absent.
            FrameClass::NotRoce => prop_assert!(ip.len() < IPV4_HEADER_LEN + 4 || ihl > IPV4_HEADER_LEN),
            FrameClass::Malformed(_) | FrameClass::Roce { .. } => {}
        }
        poke_every_view(&ip);
        let _ = RoceRepr::parse_verified(&ip);
    }

    #[test]
    fn roce_shaped_packets_parse_and_roundtrip((ip, good_icrc) in roce_shaped()) {
        let frame = with_ethernet(&ip);
        match classify_and_check(&frame) {
            FrameClass::NotRoce => prop_assert!(false, "UDP 4791 over IPv4 is RoCE"),
            FrameClass::Malformed(e) => {
                // Only a known opcode whose headers and pad do not fit can fail here.
                let op = Opcode(ip[IPV4_HEADER_LEN + UDP_HEADER_LEN]);
                prop_assert!(op.is_known(), "unknown opcodes always parse, got {e}");
            }
            FrameClass::Roce { frame: f, icrc_ok } => {
                prop_assert_eq!(icrc_ok, good_icrc || icrc::verify(&ip).unwrap());
                prop_assert_eq!(f.roce.buffer_len(), ip.len());
            }
        }
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        which in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..8),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let frames = base_frames();
        let mut f = which.get(&frames).clone();
        for (at, x) in &flips {
            let i = at.index(f.len());
            f[i] ^= x;
        }
        if let Some(c) = cut {
            let n = c.index(f.len() + 1);
            f.truncate(n);
        }
        classify_and_check(&f);
        poke_every_view(&f);
        poke_every_view(&f[ETHERNET_HEADER_LEN.min(f.len())..]);
    }

    /// CRC-32 catches every single-byte change, so one corrupted byte is never accepted
    /// unless it is a byte the ICRC deliberately leaves out.
    #[test]
    fn single_byte_corruption_is_detected(
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        x in 1u8..=255,
    ) {
        let frames = base_frames();
        let mut f = which.get(&frames).clone();
        let i = at.index(f.len());
        f[i] ^= x;
        let ip_off = i.checked_sub(ETHERNET_HEADER_LEN);
        // MACs; UDP checksum; BTH byte 4 (FECN/BECN/reserved).
        let uncovered = i < 12 || matches!(ip_off, Some(26 | 27 | 32));
        let class = classify_and_check(&f);
        if uncovered {
            prop_assert!(matches!(class, FrameClass::Roce { icrc_ok: true, .. }), "byte {}: {:?}", i, class);
        } else {
            prop_assert!(!matches!(class, FrameClass::Roce { icrc_ok: true, .. }), "byte {}: {:?}", i, class);
        }
    }

    #[test]
    fn truncated_frames_are_never_roce(which in any::<prop::sample::Index>(), cut in any::<prop::sample::Index>()) {
        let frames = base_frames();
        let f = which.get(&frames);
        let n = cut.index(f.len());
        let is_roce = matches!(classify_frame(&f[..n]), FrameClass::Roce { .. });
        prop_assert!(!is_roce, "cut at {}", n);
    }

    #[test]
    fn pcap_reader_on_arbitrary_bytes(b in prop::collection::vec(any::<u8>(), 0..2000)) {
        if let Some((_, err)) = drain_pcap(&b) {
            prop_assert!(!matches!(err, Some(PcapError::BadMagic(_) | PcapError::TruncatedHeader)));
        }
    }

    #[test]
    fn pcap_reader_on_valid_header_and_arbitrary_records(
        h in pcap_header(),
        tail in prop::collection::vec(any::<u8>(), 0..2000),
    ) {
        let mut b = h;
        b.extend_from_slice(&tail);
        let (n, err) = drain_pcap(&b).expect("valid header");
        prop_assert!(n * 16 <= tail.len());
        prop_assert!(tail.is_empty() || n > 0 || err.is_some());
    }

    /// A written capture cut anywhere reads back as exactly the records before the cut.
    #[test]
    fn pcap_truncation_reads_the_complete_prefix(
        lens in prop::collection::vec(0usize..300, 0..12),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
        let mut ends = Vec::new();
        let mut at = 24;
        for (i, &len) in lens.iter().enumerate() {
            let data: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8).collect();
            w.write_record(i as u64 * 1_000_000_007, &data).unwrap();
            at += 16 + len;
            ends.push(at);
        }
        let bytes = w.into_inner();
        let n = 24 + cut.index(bytes.len() - 24 + 1);
        let (got, err) = drain_pcap(&bytes[..n]).unwrap();
        let complete = ends.iter().filter(|&&e| e <= n).count();
        prop_assert_eq!(got, complete);
        let at_boundary = n == 24 || ends.contains(&n);
        prop_assert_eq!(err.is_none(), at_boundary, "{:?}", err);
        if let Some(e) = err {
            prop_assert!(
                matches!(e, PcapError::TruncatedRecord { index, .. } if index == complete),
                "unexpected {:?}",
                e
            );
        }
        for (i, rec) in PcapReader::new(&bytes[..n]).unwrap().take(complete).enumerate() {
            let rec = rec.unwrap();
            prop_assert_eq!(rec.data.len(), lens[i]);
            prop_assert_eq!(rec.ts_ns, i as u64 * 1_000_000_007);
        }
    }
}

#[test]
fn base_frames_roundtrip_exactly() {
    for f in base_frames() {
        assert!(matches!(
            classify_and_check(&f),
            FrameClass::Roce { icrc_ok: true, .. }
        ));
    }
}

// ---------------------------------------------------------------------------------------
// MRP (Cepheus' MFT registration payload)

proptest! {
    #![proptest_config(config(2000))]

    /// Arbitrary bytes never panic the MRP parser; whatever parses re-emits to the
    /// same bytes (the format has no slack).
    #[test]
    fn mrp_parse_never_panics_and_round_trips(b in proptest::collection::vec(any::<u8>(), 0..400)) {
        use rocast_core::wire::mrp::MrpRepr;
        if let Ok(r) = MrpRepr::parse(&b) {
            let mut out = vec![0u8; r.buffer_len()];
            prop_assert_eq!(r.emit(&mut out), b.len());
            prop_assert_eq!(out, b);
        }
    }

    /// Valid headers with mutated member bytes: still no panic.
    #[test]
    fn mrp_mutated_registrations(count in 0u8..20, write in any::<bool>(), seed in any::<u64>(), flip in 0usize..500) {
        use rocast_core::wire::mrp::MrpRepr;
        let rec = if write { 20 } else { 8 };
        let mut b = vec![239, 0, 0, 1, 0, 1, count, write as u8];
        let mut x = seed;
        for _ in 0..count as usize * rec {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            b.push((x >> 56) as u8);
        }
        if !b.is_empty() {
            let i = flip % b.len();
            b[i] ^= 0x5a;
        }
        let _ = MrpRepr::parse(&b);
    }
}
