//! Feeds arbitrary bytes to the UD multicast path: the NACK multicast
//! packet parser (every packet that parses must re-emit to the same bytes' meaning),
//! the protocol's sender and receiver state machines (no panic, no delivery of a
//! message that was never whole), and the rnic UD endpoint as an Ethernet frame (every
//! frame is delivered or counted as exactly one drop).
//!
//! A second receiver and sender hold a group key and are fed the
//! same packets with a source address: only packets sealed with the key (the seeds'
//! `sealed-*`, made with `make_seeds.py`'s KEY) get past their checks, and no packet,
//! sealed or not, may panic them.
//!
//! Run: `cargo +nightly fuzz run ud_multicast` from the repository root.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_core::nack_multicast::auth::GroupKey;
use rocast_core::nack_multicast::packet::Packet;
use rocast_core::nack_multicast::{
    NackMulticastReceiver, NackMulticastSender, Peer, ReceiverConfig, ReceiverEvent, SenderConfig,
};
use rocast_core::rnic::{UdConfig, UdEndpoint};
use rocast_core::time::Instant;
use rocast_core::wire::{EthernetAddress, Ipv4Address, Psn};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::parse(data) {
        let again = p.to_vec();
        assert_eq!(Packet::parse(&again).expect("re-emitted packet parses"), p);
    }
    // The same bytes, split into packets at 0xFF bytes, into one receiver and one sender.
    let mut rx = NackMulticastReceiver::new(ReceiverConfig::new(1, 4, 7));
    let mut tx = NackMulticastSender::new(SenderConfig::new(1, 64));
    let _ = tx.send(Instant::ZERO, b"fuzz");
    // The keyed pair (make_seeds.py's KEY), sources from two addresses.
    let key = GroupKey::new([0x5a; 32]);
    let _ = key.verify(data);
    let mut krc = ReceiverConfig::new(1, 4, 7);
    krc.group_key = Some(key.clone());
    krc.max_streams = 2;
    let mut krx = NackMulticastReceiver::new(krc);
    let mut ktc = SenderConfig::new(1, 64);
    ktc.group_key = Some(key);
    let mut ktx = NackMulticastSender::new(ktc);
    let _ = ktx.send(Instant::ZERO, b"fuzz");
    let mut buf = vec![0u8; krx.max_packet_len().max(ktx.max_packet_len())];
    for (i, chunk) in data.split(|&b| b == 0xFF).enumerate() {
        let now = Instant::from_us(i as u64);
        rx.handle_packet(now, chunk);
        rx.handle_timeout(now);
        while rx.poll_transmit(now, &mut buf).is_some() {}
        tx.handle_packet(now, chunk);
        tx.handle_timeout(now);
        while tx.poll_transmit(now, &mut buf).is_some() {}
        let from = Some(Peer {
            ip: Ipv4Address([10, 0, 0, 1 + (i % 2) as u8]),
            qpn: 0x100,
        });
        krx.handle_packet_from(now, from, chunk);
        krx.handle_timeout(now);
        while krx.poll_transmit(now, &mut buf).is_some() {}
        ktx.handle_packet_from(now, from, chunk);
        ktx.handle_timeout(now);
        while ktx.poll_transmit(now, &mut buf).is_some() {}
    }
    assert!(krx.streams() <= 2, "the stream cap holds");
    while let Some(e) = rx.poll_event() {
        if let ReceiverEvent::Message { data, .. } = e {
            assert!(data.len() <= u32::MAX as usize);
        }
    }
    let mut ud = UdEndpoint::new(UdConfig::new(
        Ipv4Address([10, 0, 0, 2]),
        EthernetAddress([2, 0, 0, 0, 0, 2]),
    ))
    .expect("valid config");
    ud.create_qp(0x11, 0x1111_1111, Psn::new(0)).expect("qp");
    ud.attach_multicast(0x11, Ipv4Address([239, 1, 1, 1]))
        .expect("attach");
    ud.post_recv(0x11, 1, 4096).expect("recv");
    let before = ud.counters().drops_total() + ud.counters().rx_deliveries;
    let _ = ud.handle_frame(Instant::ZERO, data);
    let after = ud.counters().drops_total() + ud.counters().rx_deliveries;
    assert!(after > before, "a frame was neither delivered nor counted");
});
