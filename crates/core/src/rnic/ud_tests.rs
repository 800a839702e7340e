//! Packet-by-packet script tests of [`UdEndpoint`] (smoltcp style): post, poll_transmit,
//! feed the frame to the other endpoint(s), expect exactly this event and these counters.

use super::*;
use crate::wire::{icrc, Ipv4Packet, ROCEV2_UDP_PORT};
use proptest::prelude::*;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

const A_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const B_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
const C_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 3);
const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const C_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 3]);
const QA: u32 = 0x100;
const QB: u32 = 0x200;
const QKEY: u32 = 0x1111_2222;
const GROUP: Ipv4Address = Ipv4Address::new(239, 1, 2, 3);
const GROUP_MAC: EthernetAddress = EthernetAddress([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]);
const GROUP2: Ipv4Address = Ipv4Address::new(239, 9, 9, 9);
const T0: Instant = Instant::ZERO;

fn host(ip: Ipv4Address, mac: EthernetAddress) -> UdEndpoint {
    UdEndpoint::new(UdConfig::new(ip, mac)).unwrap()
}
fn host_mtu(ip: Ipv4Address, mac: EthernetAddress, mtu: usize) -> UdEndpoint {
    UdEndpoint::new(UdConfig {
        mtu,
        ..UdConfig::new(ip, mac)
    })
    .unwrap()
}
/// Host A with QP `QA` starting at `psn`.
fn sender(psn: u32) -> UdEndpoint {
    let mut a = host(A_IP, A_MAC);
    a.create_qp(QA, QKEY, Psn::new(psn)).unwrap();
    a
}
/// Host B with QP `QB` and `bufs` receive buffers of 4096 bytes (wr_id 0..bufs).
fn receiver(bufs: u64) -> UdEndpoint {
    let mut b = host(B_IP, B_MAC);
    b.create_qp(QB, QKEY, Psn::new(0)).unwrap();
    for i in 0..bufs {
        b.post_recv(QB, i, 4096).unwrap();
    }
    b
}
fn to_b() -> UdAddress {
    UdAddress::unicast(B_IP, B_MAC, QB, QKEY)
}
/// The next frame the endpoint sends, as an owned buffer.
fn frame_out(ep: &mut UdEndpoint) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; ep.max_frame_len()];
    let t = ep.poll_transmit(T0, &mut buf)?;
    buf.truncate(t.len);
    Some(buf)
}
fn tx(ep: &mut UdEndpoint) -> Vec<Vec<u8>> {
    let v: Vec<_> = std::iter::from_fn(|| frame_out(ep)).collect();
    assert!(frame_out(ep).is_none());
    v
}
/// Posts one send and returns its frame.
fn send1(
    ep: &mut UdEndpoint,
    wr_id: u64,
    dest: &UdAddress,
    data: &[u8],
    imm: Option<u32>,
) -> Vec<u8> {
    ep.post_send(QA, wr_id, dest, data, imm).unwrap();
    let mut f = tx(ep);
    assert_eq!(f.len(), 1);
    f.pop().unwrap()
}
fn events(ep: &mut UdEndpoint) -> Vec<UdEvent> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}
/// The frame, which must be a RoCEv2 frame with a good ICRC.
fn parsed(frame: &[u8]) -> RoceFrameRepr<'_> {
    match classify_frame(frame) {
        FrameClass::Roce {
            frame,
            icrc_ok: true,
        } => frame,
        o => panic!("not a valid RoCEv2 frame: {o:?}"),
    }
}
fn frame_psn(frame: &[u8]) -> Psn {
    parsed(frame).roce.bth.psn
}
fn recv_psns(evs: &[UdEvent]) -> Vec<Psn> {
    evs.iter()
        .filter_map(|e| match e {
            UdEvent::Receive { psn, .. } => Some(*psn),
            _ => None,
        })
        .collect()
}
fn receive(
    qpn: u32,
    wr_id: u64,
    psn: u32,
    imm: Option<u32>,
    group: Option<Ipv4Address>,
    data: &[u8],
) -> UdEvent {
    UdEvent::Receive {
        qpn,
        wr_id,
        src_ip: A_IP,
        src_qpn: QA,
        psn: Psn::new(psn),
        imm,
        group,
        data: data.to_vec(),
    }
}
fn counters(f: impl FnOnce(&mut UdCounters)) -> UdCounters {
    let mut c = UdCounters::default();
    f(&mut c);
    c
}

/// A hand-built frame from A (MAC `A_MAC`, IP `src`): for the inputs our own sender
/// never produces.
fn build(
    src: Ipv4Address,
    dst: Ipv4Address,
    dst_mac: EthernetAddress,
    bth: BthRepr,
    ext: ExtHeaders,
    payload: &[u8],
) -> Vec<u8> {
    let mut bth = bth;
    bth.pad_count = ((4 - payload.len() % 4) % 4) as u8;
    let f = RoceFrameRepr {
        eth: EthernetRepr {
            src_addr: A_MAC,
            dst_addr: dst_mac,
            ethertype: EtherType::Ipv4,
        },
        roce: RoceRepr::new(src, dst, 0, Ecn::NotEct, 49152, bth, ext, payload),
    };
    let mut b = vec![0u8; f.buffer_len()];
    f.emit(&mut b);
    b
}
fn deth(qkey: u32, src_qp: u32) -> ExtHeaders {
    ExtHeaders {
        deth: Some(DethRepr {
            qkey,
            reserved: 0,
            src_qp,
        }),
        ..Default::default()
    }
}
/// A UD SEND_ONLY from A's QP `src_qp` at `src`, as another sender would build it.
fn ud(
    src: Ipv4Address,
    src_qp: u32,
    dst: Ipv4Address,
    dst_mac: EthernetAddress,
    dst_qp: u32,
    psn: u32,
) -> Vec<u8> {
    let bth = BthRepr::new(Opcode::UD_SEND_ONLY, dst_qp, Psn::new(psn));
    build(src, dst, dst_mac, bth, deth(QKEY, src_qp), b"ud!")
}

// ---------------------------------------------------------------- mappings

#[test]
fn multicast_mac_mapping() {
    let ip = Ipv4Address::new;
    assert_eq!(
        ipv4_multicast_mac(ip(224, 0, 0, 1)),
        Some(EthernetAddress([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01]))
    );
    assert_eq!(ipv4_multicast_mac(GROUP), Some(GROUP_MAC));
    // Only 23 bits survive: the top bit of the second octet is dropped.
    assert_eq!(
        ipv4_multicast_mac(ip(239, 255, 255, 255)),
        Some(EthernetAddress([0x01, 0x00, 0x5e, 0x7f, 0xff, 0xff]))
    );
    assert_eq!(
        ipv4_multicast_mac(ip(224, 128, 0, 1)),
        ipv4_multicast_mac(ip(225, 0, 0, 1))
    );
    for not in [
        ip(223, 255, 255, 255),
        ip(240, 0, 0, 0),
        ip(255, 255, 255, 255),
        ip(10, 0, 0, 1),
        ip(0, 0, 0, 0),
    ] {
        assert!(!not.is_multicast());
        assert_eq!(ipv4_multicast_mac(not), None, "{not}");
        assert_eq!(ipv4_multicast_gid(not), None, "{not}");
        assert_eq!(MulticastGroup::new(not), Err(UdError::NotMulticast(not)));
    }
    assert!(ip(224, 0, 0, 0).is_multicast() && ip(239, 255, 255, 255).is_multicast());
}

#[test]
fn gid_mapping() {
    let g = ipv4_gid(GROUP);
    assert_eq!(g, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3]);
    assert_eq!(std::net::Ipv6Addr::from(g).to_string(), "::ffff:239.1.2.3");
    assert_eq!(ipv4_multicast_gid(GROUP), Some(g));
    assert_eq!(
        MulticastGroup::new(GROUP),
        Ok(MulticastGroup {
            ip: GROUP,
            mac: GROUP_MAC,
            gid: g
        })
    );
    // Unicast addresses have a GID too (the GID table entry of an IPv4 port address).
    assert_eq!(ipv4_gid(A_IP)[12..], [10, 0, 0, 1]);
}

proptest! {
    #[test]
    fn prop_mappings(v in any::<u32>()) {
        let ip = Ipv4Address::from_u32(v);
        let mcast = v >> 28 == 0xe;
        prop_assert_eq!(ip.is_multicast(), mcast);
        let gid = ipv4_gid(ip);
        prop_assert_eq!(
            std::net::Ipv6Addr::from(gid).to_ipv4_mapped(),
            Some(std::net::Ipv4Addr::from(v))
        );
        match ipv4_multicast_mac(ip) {
            Some(EthernetAddress(m)) => {
                prop_assert!(mcast);
                prop_assert_eq!(&m[..3], &[0x01, 0x00, 0x5e]);
                let low23 = u32::from_be_bytes([0, m[3], m[4], m[5]]);
                prop_assert_eq!(low23, v & 0x7f_ffff);
                prop_assert_eq!(ipv4_multicast_gid(ip), Some(gid));
            }
            None => prop_assert!(!mcast),
        }
    }
}

// ---------------------------------------------------------------- unicast

/// A SEND with immediate and then one without, A → B: every header field on the wire,
/// the completion on A and the receive on B, and both endpoints' counters exactly.
#[test]
fn unicast_send_receive_with_imm() {
    let mut a = sender(100);
    let mut b = receiver(0);
    b.post_recv(QB, 7, 64).unwrap();
    assert_eq!(
        a.post_send(QA, 1, &to_b(), b"hello", Some(0xdead_beef)),
        Ok(Psn::new(100))
    );
    assert_eq!(a.send_psn(QA), Some(Psn::new(101)));
    assert!(
        events(&mut a).is_empty(),
        "a UD send completes when it is sent"
    );
    let frames = tx(&mut a);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        events(&mut a),
        vec![UdEvent::SendComplete { qpn: QA, wr_id: 1 }]
    );

    let f = parsed(&frames[0]);
    assert_eq!(frames[0].len(), 14 + 20 + 8 + 12 + 8 + 4 + 5 + 3 + 4);
    assert_eq!(
        f.eth,
        EthernetRepr {
            src_addr: A_MAC,
            dst_addr: B_MAC,
            ethertype: EtherType::Ipv4
        }
    );
    let (ip, udp, bth) = (f.roce.ip, f.roce.udp, f.roce.bth);
    assert_eq!((ip.src_addr, ip.dst_addr), (A_IP, B_IP));
    assert_eq!((ip.ttl, ip.dont_frag, ip.protocol), (64, true, 17));
    assert_eq!((ip.dscp, ip.ecn), (26, Ecn::NotEct));
    assert_eq!(
        (udp.src_port, udp.dst_port, udp.checksum),
        (49152, ROCEV2_UDP_PORT, 0)
    );
    assert_eq!(bth.opcode, Opcode::UD_SEND_ONLY_IMM);
    assert_eq!(
        (bth.dest_qp, bth.psn, bth.pkey),
        (QB, Psn::new(100), 0xffff)
    );
    assert_eq!((bth.pad_count, bth.tver, bth.ack_req), (3, 0, false));
    assert_eq!(
        f.roce.ext,
        ExtHeaders {
            deth: Some(DethRepr {
                qkey: QKEY,
                reserved: 0,
                src_qp: QA
            }),
            imm: Some(0xdead_beef),
            ..Default::default()
        }
    );
    assert_eq!(f.roce.payload, b"hello");

    assert_eq!(b.handle_frame(T0, &frames[0]), Ok(1));
    assert_eq!(
        events(&mut b),
        vec![receive(QB, 7, 100, Some(0xdead_beef), None, b"hello")]
    );
    assert_eq!(b.source_psn(A_IP, QA), Some(Psn::new(100)));
    assert!(frame_out(&mut b).is_none(), "UD sends no ACK");

    // Without immediate, empty payload.
    b.post_recv(QB, 8, 0).unwrap();
    let f2 = send1(&mut a, 2, &to_b(), &[], None);
    let p2 = parsed(&f2);
    assert_eq!(p2.roce.bth.opcode, Opcode::UD_SEND_ONLY);
    assert_eq!((p2.roce.ext.imm, p2.roce.bth.psn), (None, Psn::new(101)));
    assert_eq!(b.handle_frame(T0, &f2), Ok(1));
    assert_eq!(events(&mut b), vec![receive(QB, 8, 101, None, None, b"")]);

    assert_eq!(
        a.counters(),
        &counters(|c| {
            c.tx_packets = 2;
            c.tx_bytes = 5;
        })
    );
    assert_eq!(
        b.counters(),
        &counters(|c| {
            c.rx_packets = 2;
            c.rx_deliveries = 2;
            c.rx_bytes = 5;
        })
    );
}

/// An emitted frame checked with the wire module alone: raw header bytes, the IPv4
/// checksum, the ICRC recomputed by `wire::icrc`, and `classify_frame`.
#[test]
fn emitted_frame_verified_independently() {
    for dest in [to_b(), UdAddress::multicast(GROUP, QKEY).unwrap()] {
        let mut a = sender(0xabcdef);
        let frame = send1(&mut a, 1, &dest, b"independent check", Some(7));
        assert_eq!(&frame[0..6], &dest.mac.0);
        assert_eq!(&frame[12..14], &[0x08, 0x00]);
        let ip = &frame[14..];
        let ipp = Ipv4Packet::new_checked(ip).unwrap();
        assert!(ipp.verify_checksum());
        assert_eq!(ip[6] & 0x40, 0x40, "DF");
        assert_eq!(ip[8], 64, "TTL");
        assert_eq!(&ip[16..20], &dest.ip.0);
        assert_eq!(u16::from_be_bytes([ip[22], ip[23]]), 4791);
        assert_eq!(&ip[26..28], &[0, 0], "UDP checksum 0");
        let bth = &ip[28..];
        assert_eq!(bth[0], 0x65, "UD SEND_ONLY_WITH_IMMEDIATE");
        assert_eq!(&bth[5..8], &dest.qpn.to_be_bytes()[1..]);
        assert_eq!(&bth[9..12], &[0xab, 0xcd, 0xef]);
        assert_eq!(&bth[12..16], &QKEY.to_be_bytes(), "DETH Q_Key");
        assert_eq!(&bth[17..20], &QA.to_be_bytes()[1..], "DETH source QP");
        assert_eq!(&bth[20..24], &7u32.to_be_bytes(), "ImmDt");
        let (body, crc) = ip.split_at(ip.len() - 4);
        assert_eq!(
            icrc::compute(body).unwrap(),
            u32::from_le_bytes(crc.try_into().unwrap())
        );
        assert!(icrc::verify(ip).unwrap());
        assert!(matches!(
            classify_frame(&frame),
            FrameClass::Roce { icrc_ok: true, .. }
        ));
        let mut bad = frame.clone();
        bad[14 + 28 + 24] ^= 1; // a payload byte
        assert!(!icrc::verify(&bad[14..]).unwrap());
    }
}

/// Messages up to one path MTU go out as one packet; one byte more is refused with
/// `MessageTooLong` and consumes no PSN, for every IBTA MTU. Other MTUs are refused.
#[test]
fn mtu_refusal() {
    for mtu in [256, 512, 1024, 2048, 4096] {
        let mut a = host_mtu(A_IP, A_MAC, mtu);
        a.create_qp(QA, QKEY, Psn::new(0xff_ffff)).unwrap();
        let mut b = host_mtu(B_IP, B_MAC, mtu);
        b.create_qp(QB, QKEY, Psn::new(0)).unwrap();
        b.post_recv(QB, 1, mtu).unwrap();
        let big = vec![0xab; mtu + 1];
        assert_eq!(
            a.post_send(QA, 1, &to_b(), &big, None),
            Err(UdError::MessageTooLong { len: mtu + 1, mtu })
        );
        assert_eq!(a.send_psn(QA), Some(Psn::new(0xff_ffff)));
        assert!(frame_out(&mut a).is_none());
        assert_eq!(
            a.post_send(QA, 2, &to_b(), &big[..mtu], Some(9)),
            Ok(Psn::new(0xff_ffff))
        );
        let f = tx(&mut a);
        assert_eq!(f[0].len(), a.max_frame_len());
        assert_eq!(
            events(&mut a),
            vec![UdEvent::SendComplete { qpn: QA, wr_id: 2 }]
        );
        assert_eq!(b.handle_frame(T0, &f[0]), Ok(1));
        assert_eq!(
            events(&mut b),
            vec![receive(QB, 1, 0xff_ffff, Some(9), None, &big[..mtu])]
        );
    }
    for bad in [0, 255, 1000, 1500, 8192, 9000] {
        assert_eq!(
            UdEndpoint::new(UdConfig {
                mtu: bad,
                ..UdConfig::new(A_IP, A_MAC)
            })
            .unwrap_err(),
            UdError::Mtu(bad)
        );
    }
}

// ---------------------------------------------------------------- Q_Key

/// A packet whose Q_Key differs from the QP's is dropped and counted; the receive
/// buffer stays posted for the next good packet.
#[test]
fn qkey_mismatch_dropped() {
    let mut a = sender(0);
    let mut b = receiver(0);
    b.post_recv(QB, 5, 64).unwrap();
    let wrong = UdAddress {
        qkey: QKEY ^ 1,
        ..to_b()
    };
    let f = send1(&mut a, 1, &wrong, b"x", None);
    assert_eq!(parsed(&f).roce.ext.deth.unwrap().qkey, QKEY ^ 1);
    assert_eq!(b.handle_frame(T0, &f), Ok(0));
    assert!(events(&mut b).is_empty());
    assert_eq!(b.recv_queue_len(QB), Some(1));
    assert_eq!(
        b.counters(),
        &counters(|c| {
            c.rx_packets = 1;
            c.drop_qkey_mismatch = 1;
        })
    );
    let f = send1(&mut a, 2, &to_b(), b"y", None);
    assert_eq!(b.handle_frame(T0, &f), Ok(1));
    assert_eq!(events(&mut b), vec![receive(QB, 5, 1, None, None, b"y")]);
    assert_eq!(b.counters().psn_gaps, 0);
}

/// IBTA: a send Q_Key with the high bit set is replaced by the sending QP's Q_Key.
#[test]
fn qkey_high_bit_uses_own_qkey() {
    let mut a = host(A_IP, A_MAC);
    a.create_qp(QA, 0x42, Psn::new(0)).unwrap();
    a.create_qp(QA + 1, 0x8000_0001, Psn::new(0)).unwrap(); // a controlled Q_Key
    let mut b = receiver(0);
    b.post_recv(QB, 1, 64).unwrap();
    let cases = [
        (QA, QKEY_USE_OWN | 0x1234, 0x42),
        (QA, 0xffff_ffff, 0x42),
        (QA, 0x7fff_ffff, 0x7fff_ffff),
        (QA, QKEY, QKEY),
        (QA + 1, QKEY_USE_OWN, 0x8000_0001),
    ];
    for (i, &(qpn, posted, wire)) in cases.iter().enumerate() {
        let dest = UdAddress {
            qkey: posted,
            ..to_b()
        };
        a.post_send(qpn, i as u64, &dest, b"k", None).unwrap();
        let f = tx(&mut a);
        assert_eq!(parsed(&f[0]).roce.ext.deth.unwrap().qkey, wire, "case {i}");
    }
    // B's QP has Q_Key QKEY: only the frame carrying QKEY is accepted. B with Q_Key
    // 0x42 accepts the high-bit sends.
    let mut b42 = host(B_IP, B_MAC);
    b42.create_qp(QB, 0x42, Psn::new(0)).unwrap();
    b42.post_recv(QB, 1, 64).unwrap();
    let f = send1(
        &mut a,
        9,
        &UdAddress {
            qkey: QKEY_USE_OWN,
            ..to_b()
        },
        b"z",
        None,
    );
    assert_eq!(b42.handle_frame(T0, &f), Ok(1));
    assert_eq!(b.handle_frame(T0, &f), Ok(0));
    assert_eq!(b.counters().drop_qkey_mismatch, 1);
}

// ---------------------------------------------------------------- multicast

/// One multicast frame reaches every attached QP of a host, in ascending QPN order, and
/// no QP that is not attached.
#[test]
fn multicast_to_three_qps_on_one_host() {
    let mut a = sender(500);
    let mut b = host(B_IP, B_MAC);
    for q in 0x201..=0x204 {
        b.create_qp(q, QKEY, Psn::new(0)).unwrap();
        b.post_recv(q, q as u64, 64).unwrap();
    }
    for q in [0x203, 0x201, 0x202] {
        assert_eq!(
            b.attach_multicast(q, GROUP),
            Ok(MulticastGroup {
                ip: GROUP,
                mac: GROUP_MAC,
                gid: ipv4_gid(GROUP)
            })
        );
    }
    assert_eq!(
        b.attached_qps(GROUP).collect::<Vec<_>>(),
        [0x201, 0x202, 0x203]
    );
    let dest = UdAddress::multicast(GROUP, QKEY).unwrap();
    assert_eq!((dest.mac, dest.qpn), (GROUP_MAC, MULTICAST_QPN));
    let f = send1(&mut a, 1, &dest, b"to all", None);
    let p = parsed(&f);
    assert_eq!(p.eth.dst_addr, GROUP_MAC);
    assert_eq!(p.roce.ip.dst_addr, GROUP);
    assert_eq!(p.roce.bth.dest_qp, 0xff_ffff);
    assert_eq!(b.handle_frame(T0, &f), Ok(3));
    let g = Some(GROUP);
    assert_eq!(
        events(&mut b),
        vec![
            receive(0x201, 0x201, 500, None, g, b"to all"),
            receive(0x202, 0x202, 500, None, g, b"to all"),
            receive(0x203, 0x203, 500, None, g, b"to all"),
        ]
    );
    assert_eq!(b.recv_queue_len(0x204), Some(1));
    assert_eq!(
        b.counters(),
        &counters(|c| {
            c.rx_packets = 1;
            c.rx_multicast_packets = 1;
            c.rx_deliveries = 3;
            c.rx_bytes = 18;
        })
    );
    assert_eq!(
        a.counters(),
        &counters(|c| {
            c.tx_packets = 1;
            c.tx_multicast_packets = 1;
            c.tx_bytes = 6;
        })
    );
}

/// A broadcast-select fabric: every frame is fed to every host. B has two QPs in the
/// group, C one (plus one with another Q_Key), A none; a second group only C joined.
#[test]
fn multicast_to_two_hosts() {
    let mut a = sender(0xff_fffe);
    let mut b = host(B_IP, B_MAC);
    let mut c = host(C_IP, C_MAC);
    for q in [0x201, 0x202] {
        b.create_qp(q, QKEY, Psn::new(0)).unwrap();
        b.attach_multicast(q, GROUP).unwrap();
    }
    c.create_qp(0x301, QKEY, Psn::new(0)).unwrap();
    c.create_qp(0x302, QKEY + 1, Psn::new(0)).unwrap();
    c.attach_multicast(0x301, GROUP).unwrap();
    c.attach_multicast(0x302, GROUP).unwrap();
    c.attach_multicast(0x301, GROUP2).unwrap();
    for ep in [&mut b, &mut c] {
        for q in [0x201, 0x202, 0x301, 0x302] {
            let _ = ep.post_recv(q, 0, 64);
            let _ = ep.post_recv(q, 1, 64);
            let _ = ep.post_recv(q, 2, 64);
        }
    }
    let g1 = UdAddress::multicast(GROUP, QKEY).unwrap();
    let g2 = UdAddress::multicast(GROUP2, QKEY).unwrap();
    let frames: Vec<Vec<u8>> = [(&g1, b"m0"), (&g2, b"m1"), (&g1, b"m2")]
        .into_iter()
        .enumerate()
        .map(|(i, (d, m))| send1(&mut a, i as u64, d, m, None))
        .collect();
    let psns: Vec<Psn> = frames.iter().map(|f| frame_psn(f)).collect();
    assert_eq!(
        psns,
        [Psn::new(0xff_fffe), Psn::new(0xff_ffff), Psn::new(0)]
    );
    let mut got = [vec![], vec![], vec![]];
    for f in &frames {
        got[0].push(a.handle_frame(T0, f));
        got[1].push(b.handle_frame(T0, f));
        got[2].push(c.handle_frame(T0, f));
    }
    assert_eq!(
        got[0],
        [
            Err(UdDrop::UnknownGroup(GROUP)),
            Err(UdDrop::UnknownGroup(GROUP2)),
            Err(UdDrop::UnknownGroup(GROUP))
        ]
    );
    assert_eq!(got[1], [Ok(2), Err(UdDrop::UnknownGroup(GROUP2)), Ok(2)]);
    assert_eq!(got[2], [Ok(1), Ok(1), Ok(1)]);
    let g = Some(GROUP);
    assert_eq!(
        events(&mut b),
        vec![
            receive(0x201, 0, 0xff_fffe, None, g, b"m0"),
            receive(0x202, 0, 0xff_fffe, None, g, b"m0"),
            receive(0x201, 1, 0, None, g, b"m2"),
            receive(0x202, 1, 0, None, g, b"m2"),
        ]
    );
    assert_eq!(
        events(&mut c),
        vec![
            receive(0x301, 0, 0xff_fffe, None, g, b"m0"),
            receive(0x301, 1, 0xff_ffff, None, Some(GROUP2), b"m1"),
            receive(0x301, 2, 0, None, g, b"m2"),
        ]
    );
    assert_eq!(
        b.counters(),
        &counters(|k| {
            k.rx_packets = 2;
            k.rx_multicast_packets = 2;
            k.rx_deliveries = 4;
            k.rx_bytes = 8;
            k.drop_unknown_group = 1;
        })
    );
    assert_eq!(
        c.counters(),
        &counters(|k| {
            k.rx_packets = 3;
            k.rx_multicast_packets = 3;
            k.rx_deliveries = 3;
            k.rx_bytes = 6;
            k.drop_qkey_mismatch = 2;
        })
    );
    assert_eq!(a.counters().drop_unknown_group, 3);
    // Every host saw every PSN of A's QP, across the wrap, without a gap — B included,
    // although it never joined GROUP2.
    for ep in [&a, &b, &c] {
        assert_eq!(ep.source_psn(A_IP, QA), Some(Psn::new(0)));
        assert_eq!(ep.counters().psn_gaps, 0);
    }
}

/// Detach stops delivery to that QP; when the last QP leaves, the group is forgotten
/// and its packets are counted drops. Double attach/detach are refused.
#[test]
fn detach_stops_delivery() {
    let mut a = sender(0);
    let mut b = host(B_IP, B_MAC);
    for q in [0x201, 0x202] {
        b.create_qp(q, QKEY, Psn::new(0)).unwrap();
        for w in 0..4 {
            b.post_recv(q, w, 64).unwrap();
        }
        b.attach_multicast(q, GROUP).unwrap();
    }
    assert_eq!(
        b.attach_multicast(0x201, GROUP),
        Err(UdError::AlreadyAttached {
            qpn: 0x201,
            group: GROUP
        })
    );
    let dest = UdAddress::multicast(GROUP, QKEY).unwrap();
    let mut step = |b: &mut UdEndpoint, i: u64| {
        let f = send1(&mut a, i, &dest, b"d", None);
        let r = b.handle_frame(T0, &f);
        let qps: Vec<u32> = events(b)
            .into_iter()
            .map(|e| match e {
                UdEvent::Receive { qpn, .. } => qpn,
                o => panic!("{o:?}"),
            })
            .collect();
        (r, qps)
    };
    assert_eq!(step(&mut b, 0), (Ok(2), vec![0x201, 0x202]));
    b.detach_multicast(0x201, GROUP).unwrap();
    assert_eq!(step(&mut b, 1), (Ok(1), vec![0x202]));
    b.detach_multicast(0x202, GROUP).unwrap();
    assert_eq!(b.attached_qps(GROUP).count(), 0);
    assert_eq!(step(&mut b, 2), (Err(UdDrop::UnknownGroup(GROUP)), vec![]));
    assert_eq!(b.counters().drop_unknown_group, 1);
    assert_eq!(
        b.detach_multicast(0x202, GROUP),
        Err(UdError::NotAttached {
            qpn: 0x202,
            group: GROUP
        })
    );
    assert_eq!(
        b.detach_multicast(0x999, GROUP),
        Err(UdError::NoSuchQp(0x999))
    );
    assert_eq!(
        b.detach_multicast(0x202, B_IP),
        Err(UdError::NotMulticast(B_IP))
    );
    // Re-attach resumes delivery; destroying the QP detaches it.
    b.attach_multicast(0x202, GROUP).unwrap();
    assert_eq!(step(&mut b, 3), (Ok(1), vec![0x202]));
    b.destroy_qp(0x202).unwrap();
    assert_eq!(b.attached_qps(GROUP).count(), 0);
    assert_eq!(step(&mut b, 4), (Err(UdDrop::UnknownGroup(GROUP)), vec![]));
    assert_eq!(b.destroy_qp(0x202), Err(UdError::NoSuchQp(0x202)));
    assert_eq!(b.counters().drop_unknown_group, 2);
    assert_eq!(b.counters().psn_gaps, 0);
}

/// Attach takes only 224.0.0.0/4; bad QPNs and addresses that mix unicast and
/// multicast are refused, and a refused verb changes nothing.
#[test]
fn attach_refuses_non_multicast_and_bad_verbs() {
    let mut b = receiver(0);
    let before = b.memory_bytes();
    for ip in [
        B_IP,
        Ipv4Address::new(223, 255, 255, 255),
        Ipv4Address::new(240, 0, 0, 0),
        Ipv4Address::new(255, 255, 255, 255),
        Ipv4Address::new(127, 0, 0, 1),
        Ipv4Address::UNSPECIFIED,
    ] {
        assert_eq!(b.attach_multicast(QB, ip), Err(UdError::NotMulticast(ip)));
        assert_eq!(
            UdAddress::multicast(ip, QKEY),
            Err(UdError::NotMulticast(ip))
        );
    }
    assert_eq!(b.memory_bytes(), before);
    assert_eq!(
        b.attach_multicast(0x999, GROUP),
        Err(UdError::NoSuchQp(0x999))
    );
    assert_eq!(b.attached_qps(GROUP).count(), 0);
    for edge in [
        Ipv4Address::new(224, 0, 0, 0),
        Ipv4Address::new(239, 255, 255, 255),
    ] {
        assert!(b.attach_multicast(QB, edge).is_ok());
    }

    for q in [0, 1, MULTICAST_QPN, 0x100_0000] {
        assert_eq!(
            b.create_qp(q, QKEY, Psn::new(0)),
            Err(UdError::InvalidQpn(q))
        );
    }
    assert_eq!(
        b.create_qp(QB, QKEY, Psn::new(0)),
        Err(UdError::QpExists(QB))
    );
    assert_eq!(b.post_recv(0x999, 0, 1), Err(UdError::NoSuchQp(0x999)));

    let mut a = sender(0);
    assert_eq!(
        a.post_send(0x999, 0, &to_b(), b"", None),
        Err(UdError::NoSuchQp(0x999))
    );
    let mc = UdAddress::multicast(GROUP, QKEY).unwrap();
    for bad in [
        UdAddress { mac: B_MAC, ..mc },
        UdAddress { qpn: QB, ..mc },
        UdAddress {
            qpn: MULTICAST_QPN,
            ..to_b()
        },
        UdAddress {
            qpn: 0x100_0000,
            ..to_b()
        },
    ] {
        assert_eq!(
            a.post_send(QA, 0, &bad, b"", None),
            Err(UdError::BadDestination(bad))
        );
    }
    assert_eq!(a.send_psn(QA), Some(Psn::new(0)));
    assert!(frame_out(&mut a).is_none());
}

// ---------------------------------------------------------------- receive buffers

/// No receive buffer: UD drops silently, but counted; a later buffer takes the next one.
#[test]
fn no_recv_buffer_counted() {
    let mut a = sender(0);
    let mut b = receiver(0);
    let f = send1(&mut a, 1, &to_b(), b"lost", None);
    assert_eq!(b.handle_frame(T0, &f), Ok(0));
    assert!(events(&mut b).is_empty());
    assert_eq!(
        b.counters(),
        &counters(|c| {
            c.rx_packets = 1;
            c.drop_no_recv_buffer = 1;
        })
    );
    b.post_recv(QB, 3, 64).unwrap();
    let f = send1(&mut a, 2, &to_b(), b"kept", None);
    assert_eq!(b.handle_frame(T0, &f), Ok(1));
    assert_eq!(events(&mut b), vec![receive(QB, 3, 1, None, None, b"kept")]);
}

/// A message larger than the posted buffer consumes it with a local length error;
/// an exact fit is delivered.
#[test]
fn payload_larger_than_buffer() {
    let mut a = sender(0);
    let mut b = receiver(0);
    b.post_recv(QB, 9, 4).unwrap();
    b.post_recv(QB, 10, 4).unwrap();
    let f = send1(&mut a, 1, &to_b(), b"12345", None);
    assert_eq!(b.handle_frame(T0, &f), Ok(0));
    assert_eq!(
        events(&mut b),
        vec![UdEvent::RecvError {
            qpn: QB,
            wr_id: 9,
            error: WcError::LocalLength
        }]
    );
    assert_eq!(b.recv_queue_len(QB), Some(1));
    let f = send1(&mut a, 2, &to_b(), b"1234", None);
    assert_eq!(b.handle_frame(T0, &f), Ok(1));
    assert_eq!(
        events(&mut b),
        vec![receive(QB, 10, 1, None, None, b"1234")]
    );
    assert_eq!(
        b.counters(),
        &counters(|c| {
            c.rx_packets = 2;
            c.rx_deliveries = 1;
            c.rx_bytes = 4;
            c.drop_too_long = 1;
        })
    );
}

// ---------------------------------------------------------------- bad input

/// Every frame-level drop reason, each with exactly its own counter.
#[test]
fn frame_level_drops_each_counted() {
    let mut b = receiver(100);
    let mut expect = UdCounters::default();
    let e = &mut expect;
    fn check(
        b: &mut UdEndpoint,
        expect: &mut UdCounters,
        f: &[u8],
        want: Result<usize, UdDrop>,
        bump: fn(&mut UdCounters),
    ) {
        assert_eq!(b.handle_frame(T0, f), want);
        bump(expect);
        assert_eq!(b.counters(), expect, "after {want:?}");
        events(b);
    }
    let mut psn = 0;
    let mut next = || {
        psn += 1;
        psn
    };
    let good = ud(A_IP, QA, B_IP, B_MAC, QB, next());
    check(&mut b, e, &good, Ok(1), |c| {
        c.rx_packets += 1;
        c.rx_deliveries += 1;
        c.rx_bytes += 3;
    });

    // Not RoCE: ARP, IPv6, UDP to another port, too short for Ethernet.
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    check(&mut b, e, &arp, Err(UdDrop::NotRoce), |c| {
        c.drop_not_roce += 1
    });
    let mut v6 = good.clone();
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    check(&mut b, e, &v6, Err(UdDrop::NotRoce), |c| {
        c.drop_not_roce += 1
    });
    let mut port = good.clone();
    port[14 + 23] = 0xb8; // 4792
    check(&mut b, e, &port, Err(UdDrop::NotRoce), |c| {
        c.drop_not_roce += 1
    });
    check(&mut b, e, &good[..10], Err(UdDrop::NotRoce), |c| {
        c.drop_not_roce += 1
    });

    // Malformed: bad IPv4 checksum, TVer 1, a UD opcode without its DETH.
    let mut ipsum = good.clone();
    ipsum[14 + 4] ^= 0x55;
    check(
        &mut b,
        e,
        &ipsum,
        Err(UdDrop::Malformed(crate::wire::Error::Checksum("ipv4"))),
        |c| c.drop_malformed += 1,
    );
    let mut bth = BthRepr::new(Opcode::UD_SEND_ONLY, QB, Psn::new(next()));
    bth.tver = 1;
    let tver = build(A_IP, B_IP, B_MAC, bth, deth(QKEY, QA), b"v");
    check(
        &mut b,
        e,
        &tver,
        Err(UdDrop::Malformed(crate::wire::Error::Unsupported(
            "bth tver",
        ))),
        |c| c.drop_malformed += 1,
    );
    let bth = BthRepr::new(Opcode::UD_SEND_ONLY, QB, Psn::new(next()));
    let no_deth = build(A_IP, B_IP, B_MAC, bth, ExtHeaders::default(), b"");
    check(
        &mut b,
        e,
        &no_deth,
        Err(UdDrop::Malformed(crate::wire::Error::Truncated("deth"))),
        |c| c.drop_malformed += 1,
    );

    // Bad ICRC: a payload bit flipped.
    let mut icrc_bad = ud(A_IP, QA, B_IP, B_MAC, QB, next());
    let n = icrc_bad.len();
    icrc_bad[n - 6] ^= 1;
    check(&mut b, e, &icrc_bad, Err(UdDrop::BadIcrc), |c| {
        c.drop_bad_icrc += 1
    });

    // Not for us: another host's IP, another host's MAC, a group MAC that is not the
    // destination group's.
    let f = ud(A_IP, QA, C_IP, B_MAC, QB, next());
    check(&mut b, e, &f, Err(UdDrop::NotForUs), |c| {
        c.drop_not_for_us += 1
    });
    let f = ud(A_IP, QA, B_IP, C_MAC, QB, next());
    check(&mut b, e, &f, Err(UdDrop::NotForUs), |c| {
        c.drop_not_for_us += 1
    });
    let f = ud(
        A_IP,
        QA,
        GROUP,
        ipv4_multicast_mac(GROUP2).unwrap(),
        MULTICAST_QPN,
        next(),
    );
    check(&mut b, e, &f, Err(UdDrop::NotForUs), |c| {
        c.drop_not_for_us += 1
    });

    // Wrong transport: RC SEND_ONLY, UC SEND_ONLY, a CNP, an unknown UD opcode.
    for op in [
        Opcode::RC_SEND_ONLY,
        Opcode(0x24),
        Opcode::CNP,
        Opcode(0x7f),
    ] {
        let ext = if op == Opcode::CNP {
            ExtHeaders {
                cnp_reserved: Some([0; 16]),
                ..Default::default()
            }
        } else {
            ExtHeaders::default()
        };
        let f = build(
            A_IP,
            B_IP,
            B_MAC,
            BthRepr::new(op, QB, Psn::new(next())),
            ext,
            &[],
        );
        assert_eq!(b.handle_frame(T0, &f), Err(UdDrop::WrongTransport(op)));
        e.drop_wrong_transport += 1;
        assert_eq!(b.counters(), &*e);
    }

    // P_Key: another partition is dropped; a limited member of ours is accepted.
    let mut bth = BthRepr::new(Opcode::UD_SEND_ONLY, QB, Psn::new(next()));
    bth.pkey = 0x8001;
    let f = build(A_IP, B_IP, B_MAC, bth, deth(QKEY, QA), b"p");
    check(&mut b, e, &f, Err(UdDrop::PkeyMismatch(0x8001)), |c| {
        c.drop_pkey_mismatch += 1
    });
    let mut bth = BthRepr::new(Opcode::UD_SEND_ONLY, QB, Psn::new(next()));
    bth.pkey = 0x7fff;
    let f = build(A_IP, B_IP, B_MAC, bth, deth(QKEY, QA), b"p");
    check(&mut b, e, &f, Ok(1), |c| {
        c.rx_packets += 1;
        c.rx_deliveries += 1;
        c.rx_bytes += 1;
        // PSNs are recorded only for frames that got past the header checks: the
        // eleven dropped since the first frame show as one gap.
        c.psn_gaps += 1;
        c.psn_gap_packets += 11;
    });

    // QPN 0xFFFFFF to a unicast IP; a group IP with a unicast QPN.
    let f = ud(A_IP, QA, B_IP, B_MAC, MULTICAST_QPN, next());
    check(
        &mut b,
        e,
        &f,
        Err(UdDrop::MulticastMismatch {
            qpn: MULTICAST_QPN,
            ip: B_IP,
        }),
        |c| c.drop_multicast_mismatch += 1,
    );
    let f = ud(A_IP, QA, GROUP, GROUP_MAC, QB, next());
    check(
        &mut b,
        e,
        &f,
        Err(UdDrop::MulticastMismatch { qpn: QB, ip: GROUP }),
        |c| c.drop_multicast_mismatch += 1,
    );

    // Unknown QPN; a group no QP joined.
    let p = next();
    let f = ud(A_IP, QA, B_IP, B_MAC, 0x999, p);
    check(&mut b, e, &f, Err(UdDrop::UnknownQpn(0x999)), |c| {
        c.drop_unknown_qpn += 1;
        c.psn_gaps += 1;
        c.psn_gap_packets += 2; // the two multicast mismatches
    });
    let f = ud(A_IP, QA, GROUP, GROUP_MAC, MULTICAST_QPN, next());
    check(&mut b, e, &f, Err(UdDrop::UnknownGroup(GROUP)), |c| {
        c.drop_unknown_group += 1
    });
    assert!(frame_out(&mut b).is_none());
    assert_eq!(b.source_psn(A_IP, QA), Some(Psn::new(p + 1)));
}

/// Every prefix of a valid frame, the frame with Ethernet padding, random bytes and
/// random mutations of a valid frame: no panic, and each frame is either delivered or
/// counted as exactly one drop.
#[test]
fn truncated_and_garbage_frames_never_panic() {
    let mut a = sender(0xff_fff0);
    let mut b = receiver(0);
    let dest = to_b();
    let valid = send1(&mut a, 0, &dest, &[0x5a; 37], Some(1));
    for n in 0..valid.len() {
        let before = b.counters().clone();
        let r = b.handle_frame(T0, &valid[..n]);
        // Below Ethernet + IPv4 + the UDP ports, nothing says "RoCE"; past that the
        // frame is RoCE but cut short.
        if n < 14 + 20 + 4 {
            assert_eq!(r, Err(UdDrop::NotRoce), "prefix {n}");
        } else {
            assert!(matches!(r, Err(UdDrop::Malformed(_))), "prefix {n}: {r:?}");
        }
        assert_eq!(b.counters().drops_total(), before.drops_total() + 1);
        assert_eq!(b.counters().rx_packets, 0);
        assert!(b.poll_event().is_none());
    }
    b.post_recv(QB, 0, 64).unwrap();
    assert_eq!(b.handle_frame(T0, &valid), Ok(1));
    let mut padded = valid.clone();
    padded.extend_from_slice(&[0; 20]);
    b.post_recv(QB, 1, 64).unwrap();
    assert_eq!(
        b.handle_frame(T0, &padded),
        Ok(1),
        "link padding is ignored"
    );
    assert_eq!(recv_psns(&events(&mut b)), [Psn::new(0xff_fff0); 2]);
    assert_eq!(b.counters().psn_duplicates, 1);

    let mut rng = ChaCha8Rng::seed_from_u64(0xbad_f00d);
    let mut delivered = 0;
    for i in 0..3000 {
        let f: Vec<u8> = match i % 3 {
            0 => {
                let mut f = vec![0u8; (rng.next_u32() % 160) as usize];
                rng.fill_bytes(&mut f);
                if rng.next_u32() % 2 == 0 && f.len() > 14 {
                    f[12..14].copy_from_slice(&[0x08, 0x00]); // reach the IPv4 parser
                }
                f
            }
            1 => {
                let mut f = valid.clone();
                for _ in 0..1 + rng.next_u32() % 3 {
                    let at = rng.next_u32() as usize % f.len();
                    f[at] = rng.next_u32() as u8;
                }
                f
            }
            _ => {
                let mut f = valid[..rng.next_u32() as usize % valid.len()].to_vec();
                let mut tail = vec![0u8; (rng.next_u32() % 64) as usize];
                rng.fill_bytes(&mut tail);
                f.extend_from_slice(&tail);
                f
            }
        };
        if b.recv_queue_len(QB) == Some(0) {
            b.post_recv(QB, 100, 4096).unwrap();
        }
        let before = b.counters().clone();
        match b.handle_frame(T0, &f) {
            Ok(1) => {
                delivered += 1;
                assert_eq!(b.counters().rx_deliveries, before.rx_deliveries + 1);
                assert_eq!(b.counters().drops_total(), before.drops_total());
                assert!(matches!(b.poll_event(), Some(UdEvent::Receive { .. })));
            }
            Ok(n) => {
                assert_eq!(n, 0);
                assert_eq!(b.counters().drops_total(), before.drops_total() + 1);
                events(&mut b);
            }
            Err(_) => assert_eq!(b.counters().drops_total(), before.drops_total() + 1),
        }
        assert!(b.poll_event().is_none());
        assert!(frame_out(&mut b).is_none());
    }
    // Mutations of bytes the ICRC leaves out (e.g. FECN/BECN) still deliver.
    assert!(delivered > 0);
}

// ---------------------------------------------------------------- PSN wrap

/// (a) A QP starting at 0xFFFFF0 crosses the wrap: every PSN on the wire is exact, the
/// receiver sees them all and counts no gap, for unicast and multicast.
#[test]
fn psn_wrap_exact_on_wire() {
    for multicast in [false, true] {
        let mut a = sender(0xff_fff0);
        let mut b = receiver(40);
        let dest = if multicast {
            b.attach_multicast(QB, GROUP).unwrap();
            UdAddress::multicast(GROUP, QKEY).unwrap()
        } else {
            to_b()
        };
        for i in 0..40u32 {
            let want = (0xff_fff0 + i) % (1 << 24);
            assert_eq!(
                a.post_send(QA, i as u64, &dest, &i.to_be_bytes(), None),
                Ok(Psn::new(want))
            );
        }
        let frames = tx(&mut a);
        assert_eq!(frames.len(), 40);
        for (i, f) in frames.iter().enumerate() {
            let want = (0xff_fff0 + i as u32) % (1 << 24);
            let bth = &f[14 + 28..];
            assert_eq!(
                &bth[9..12],
                &want.to_be_bytes()[1..],
                "raw PSN of packet {i}"
            );
            assert_eq!(frame_psn(f), Psn::new(want));
            assert_eq!(b.handle_frame(T0, f), Ok(1));
        }
        assert_eq!(a.send_psn(QA), Some(Psn::new(0x18)));
        let evs = events(&mut b);
        let want: Vec<Psn> = (0..40u32).map(|i| Psn::new(0xff_fff0).add(i)).collect();
        assert_eq!(recv_psns(&evs), want);
        assert_eq!(b.source_psn(A_IP, QA), Some(Psn::new(0x17)));
        let c = b.counters();
        assert_eq!(
            (c.psn_gaps, c.psn_gap_packets, c.psn_duplicates, c.psn_late),
            (0, 0, 0, 0)
        );
        assert_eq!(c.rx_deliveries, 40);
    }
}

/// (b) Hundreds of wrap crossings from seeded random start PSNs just below 0xFFFFFF.
/// Each round two fresh senders (same QPN on two hosts, so only the source IP tells
/// them apart) interleave randomly towards one long-lived receiver, and each loses one
/// packet; a quarter of the losses are exactly PSN 0xFFFFFF and a quarter exactly PSN 0.
/// Every loss must be counted as exactly one gap of one PSN, nothing else.
#[test]
fn psn_wrap_random_crossings_one_loss_each() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x0002_5eed);
    let mut b = host(B_IP, B_MAC);
    b.create_qp(QB, QKEY, Psn::new(0)).unwrap();
    b.attach_multicast(QB, GROUP).unwrap();
    let mut crossings = 0u64;
    let mut delivered = 0u64;
    const ROUNDS: u64 = 200;
    for round in 0..ROUNDS {
        let src_qpn = 0x1000 + round as u32; // fresh sources each round
        let dest = if round % 2 == 0 {
            to_b()
        } else {
            UdAddress::multicast(GROUP, QKEY).unwrap()
        };
        let mut streams = Vec::new();
        for (k, ip) in [A_IP, C_IP].into_iter().enumerate() {
            let before = 2 + rng.next_u32() % 63; // PSNs before 0
            let after = 2 + rng.next_u32() % 63; // PSNs from 0 on
            let start = Psn::new(0).sub(before);
            let n = before + after;
            let lost = match (round as usize + k) % 4 {
                0 => before - 1,                   // PSN 0xFFFFFF
                1 => before,                       // PSN 0
                _ => 1 + rng.next_u32() % (n - 2), // neither first nor last
            };
            let mut a = UdEndpoint::new(UdConfig::new(ip, A_MAC)).unwrap();
            a.create_qp(src_qpn, QKEY, start).unwrap();
            let mut frames = VecDeque::new();
            for i in 0..n {
                a.post_send(src_qpn, i as u64, &dest, &[k as u8], None)
                    .unwrap();
                let f = frame_out(&mut a).unwrap();
                assert_eq!(frame_psn(&f), start.add(i));
                if i != lost {
                    frames.push_back((start.add(i), f));
                }
            }
            assert_eq!(a.send_psn(src_qpn), Some(Psn::new(after)));
            assert!(
                start.value() > Psn::new(after - 1).value(),
                "crosses the wrap"
            );
            crossings += 1;
            streams.push((ip, start.add(lost), frames));
        }
        let before = b.counters().clone();
        let mut seen: [Vec<Psn>; 2] = [vec![], vec![]];
        while streams.iter().any(|s| !s.2.is_empty()) {
            let k = rng.next_u32() as usize % 2;
            let Some((psn, f)) = streams[k].2.pop_front() else {
                continue;
            };
            b.post_recv(QB, delivered, 8).unwrap();
            assert_eq!(b.handle_frame(T0, &f), Ok(1));
            delivered += 1;
            match b.poll_event() {
                Some(UdEvent::Receive {
                    src_ip,
                    src_qpn: q,
                    psn: p,
                    data,
                    ..
                }) => {
                    assert_eq!(
                        (src_ip, q, p, data),
                        (streams[k].0, src_qpn, psn, vec![k as u8])
                    );
                }
                o => panic!("{o:?}"),
            }
            seen[k].push(psn);
        }
        let c = b.counters();
        assert_eq!(
            c.psn_gaps - before.psn_gaps,
            2,
            "round {round}: one gap per stream"
        );
        assert_eq!(
            c.psn_gap_packets - before.psn_gap_packets,
            2,
            "round {round}"
        );
        for (k, s) in streams.iter().enumerate() {
            assert!(!seen[k].contains(&s.1));
            assert_eq!(b.source_psn(s.0, src_qpn), seen[k].last().copied());
        }
    }
    let c = b.counters();
    assert!(crossings >= 400);
    assert_eq!((c.psn_gaps, c.psn_gap_packets), (crossings, crossings));
    assert_eq!((c.psn_duplicates, c.psn_late, c.psn_untracked), (0, 0, 0));
    assert_eq!(c.rx_deliveries, delivered);
    assert_eq!(c.drops_total(), 0);
}

/// Gap, duplicate and late packets around the wrap, hand-built, and per-source
/// independence. UD delivers all of them: the PSN record is accounting, not ordering.
#[test]
fn psn_gap_duplicate_late_across_wrap() {
    let mut b = receiver(32);
    let feed = |b: &mut UdEndpoint, ip: Ipv4Address, qp: u32, psn: u32| {
        assert_eq!(b.handle_frame(T0, &ud(ip, qp, B_IP, B_MAC, QB, psn)), Ok(1));
        let c = b.counters();
        (c.psn_gaps, c.psn_gap_packets, c.psn_duplicates, c.psn_late)
    };
    assert_eq!(feed(&mut b, A_IP, QA, 0xff_fffd), (0, 0, 0, 0)); // first: no reference
    assert_eq!(feed(&mut b, A_IP, QA, 0xff_fffe), (0, 0, 0, 0));
    assert_eq!(feed(&mut b, A_IP, QA, 0x00_0002), (1, 3, 0, 0)); // FFFFFF, 0, 1 missing
    assert_eq!(feed(&mut b, A_IP, QA, 0x00_0001), (1, 3, 0, 1)); // late
    assert_eq!(feed(&mut b, A_IP, QA, 0x00_0002), (1, 3, 1, 1)); // duplicate
    assert_eq!(feed(&mut b, A_IP, QA, 0xff_ffff), (1, 3, 1, 2)); // late, across the wrap
    assert_eq!(feed(&mut b, A_IP, QA, 0x00_0003), (1, 3, 1, 2));
    assert_eq!(b.source_psn(A_IP, QA), Some(Psn::new(3)));
    // Other sources have their own records: same IP other QPN, other IP same QPN.
    assert_eq!(feed(&mut b, A_IP, QA + 1, 0x10), (1, 3, 1, 2));
    assert_eq!(feed(&mut b, C_IP, QA, 0xff_ffff), (1, 3, 1, 2));
    assert_eq!(feed(&mut b, C_IP, QA, 0), (1, 3, 1, 2));
    assert_eq!(feed(&mut b, A_IP, QA + 1, 0x11), (1, 3, 1, 2));
    assert_eq!(feed(&mut b, A_IP, QA, 0x00_0005), (2, 4, 1, 2));
    assert_eq!(b.source_psn(A_IP, QA + 1), Some(Psn::new(0x11)));
    assert_eq!(b.source_psn(C_IP, QA), Some(Psn::new(0)));
    assert_eq!(b.counters().rx_deliveries, 12);
}

#[test]
fn psn_step_edges() {
    let p = Psn::new;
    assert_eq!(psn_step(p(0xff_ffff), p(0)), PsnStep::Next);
    assert_eq!(psn_step(p(0xff_fffe), p(1)), PsnStep::Gap { missing: 2 });
    assert_eq!(psn_step(p(0), p(0)), PsnStep::Duplicate);
    assert_eq!(psn_step(p(0), p(0xff_ffff)), PsnStep::Late { behind: 1 });
    // Half the space ahead is still a gap; one more is behind.
    assert_eq!(
        psn_step(p(5), p(5).add(1 << 23)),
        PsnStep::Gap {
            missing: (1 << 23) - 1
        }
    );
    assert_eq!(
        psn_step(p(5), p(5).add((1 << 23) + 1)),
        PsnStep::Late {
            behind: (1 << 23) - 1
        }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// (c) The gap arithmetic: a step of k ahead is Next (k = 1) or a gap of k - 1,
    /// anywhere in the space, wrap included.
    #[test]
    fn prop_psn_step_ahead(
        last in prop_oneof![0xff_ff00u32..1 << 24, 0u32..1 << 24],
        k in 1u32..=1 << 23,
    ) {
        let l = Psn::new(last);
        let want = if k == 1 { PsnStep::Next } else { PsnStep::Gap { missing: k - 1 } };
        prop_assert_eq!(psn_step(l, l.add(k)), want);
    }

    #[test]
    fn prop_psn_step_behind(last in prop_oneof![0u32..0x100, 0u32..1 << 24], k in 1u32..1 << 23) {
        let l = Psn::new(last);
        prop_assert_eq!(psn_step(l, l.sub(k)), PsnStep::Late { behind: k });
        prop_assert_eq!(psn_step(l, l), PsnStep::Duplicate);
    }

    /// Through the endpoint: a sender starting anywhere near the wrap, some packets
    /// lost. The receiver's gaps are the runs of losses between the first and last
    /// packet it got, and its gap PSNs the losses in that span.
    #[test]
    fn prop_endpoint_counts_loss_runs(
        start in prop_oneof![0xff_ff00u32..1 << 24, 0u32..1 << 24],
        keep in proptest::collection::vec(proptest::bool::weighted(0.7), 2..200),
    ) {
        let mut a = sender(start);
        let mut b = receiver(0);
        for (i, &k) in keep.iter().enumerate() {
            a.post_send(QA, i as u64, &to_b(), b"", None).unwrap();
            let f = frame_out(&mut a).unwrap();
            if k {
                b.post_recv(QB, i as u64, 0).unwrap();
                prop_assert_eq!(b.handle_frame(T0, &f), Ok(1));
            }
        }
        let (first, last) = match (keep.iter().position(|&k| k), keep.iter().rposition(|&k| k)) {
            (Some(f), Some(l)) => (f, l),
            _ => return Ok(()),
        };
        let span = &keep[first..=last];
        let lost = span.iter().filter(|&&k| !k).count() as u64;
        let runs = span.windows(2).filter(|w| w[0] && !w[1]).count() as u64;
        let c = b.counters();
        prop_assert_eq!((c.psn_gaps, c.psn_gap_packets), (runs, lost));
        prop_assert_eq!((c.psn_duplicates, c.psn_late), (0, 0));
        prop_assert_eq!(b.source_psn(A_IP, QA), Some(Psn::new(start).add(last as u32)));
    }
}

// ---------------------------------------------------------------- memory

/// The memory figures: exact per-item deltas, and the source table's bound.
#[test]
fn memory_figures() {
    #[cfg(target_pointer_width = "64")]
    assert_eq!(
        (
            UdEndpoint::QP_BYTES,
            UdEndpoint::RECV_WQE_BYTES,
            UdEndpoint::GROUP_BYTES,
            UdEndpoint::ATTACHMENT_BYTES,
            UdEndpoint::SOURCE_BYTES
        ),
        (48, 16, 32, 4, 12)
    );
    let mut b = host(B_IP, B_MAC);
    let m0 = b.memory_bytes();
    assert_eq!(m0, std::mem::size_of::<UdEndpoint>());
    b.create_qp(0x201, QKEY, Psn::new(0)).unwrap();
    b.create_qp(0x202, QKEY, Psn::new(0)).unwrap();
    assert_eq!(b.memory_bytes(), m0 + 2 * UdEndpoint::QP_BYTES);
    let m1 = b.memory_bytes();
    b.attach_multicast(0x201, GROUP).unwrap();
    assert_eq!(
        b.memory_bytes(),
        m1 + UdEndpoint::GROUP_BYTES + UdEndpoint::ATTACHMENT_BYTES
    );
    b.attach_multicast(0x202, GROUP).unwrap();
    assert_eq!(
        b.memory_bytes(),
        m1 + UdEndpoint::GROUP_BYTES + 2 * UdEndpoint::ATTACHMENT_BYTES
    );
    b.attach_multicast(0x202, GROUP2).unwrap();
    b.detach_multicast(0x202, GROUP2).unwrap();
    assert_eq!(
        b.memory_bytes(),
        m1 + UdEndpoint::GROUP_BYTES + 2 * UdEndpoint::ATTACHMENT_BYTES
    );
    let m2 = b.memory_bytes();
    b.post_recv(0x201, 0, 8).unwrap();
    let grown = b.memory_bytes() - m2;
    assert!(grown >= UdEndpoint::RECV_WQE_BYTES);
    assert_eq!(grown % UdEndpoint::RECV_WQE_BYTES, 0);

    // One source, events drained: a second source adds exactly one record.
    let mut a = sender(0);
    let f = send1(
        &mut a,
        0,
        &UdAddress::multicast(GROUP, QKEY).unwrap(),
        b"",
        None,
    );
    b.handle_frame(T0, &f).unwrap();
    events(&mut b);
    let m3 = b.memory_bytes();
    b.post_recv(0x201, 1, 8).unwrap();
    let mut c = host(C_IP, C_MAC);
    c.create_qp(QA, QKEY, Psn::new(0)).unwrap();
    c.post_send(
        QA,
        0,
        &UdAddress::multicast(GROUP, QKEY).unwrap(),
        b"",
        None,
    )
    .unwrap();
    b.handle_frame(T0, &frame_out(&mut c).unwrap()).unwrap();
    events(&mut b);
    assert_eq!(b.memory_bytes(), m3 + UdEndpoint::SOURCE_BYTES);

    // The source table stops at max_tracked_sources; the rest is delivered, not tracked.
    let mut small = UdEndpoint::new(UdConfig {
        max_tracked_sources: 3,
        ..UdConfig::new(B_IP, B_MAC)
    })
    .unwrap();
    small.create_qp(QB, QKEY, Psn::new(0)).unwrap();
    for q in 0..5 {
        small.post_recv(QB, q, 8).unwrap();
        assert_eq!(
            small.handle_frame(T0, &ud(A_IP, 0x10 + q as u32, B_IP, B_MAC, QB, 7)),
            Ok(1)
        );
    }
    events(&mut small);
    assert_eq!(small.counters().psn_untracked, 2);
    assert_eq!(small.source_psn(A_IP, 0x12), Some(Psn::new(7)));
    assert_eq!(small.source_psn(A_IP, 0x13), None);
}
