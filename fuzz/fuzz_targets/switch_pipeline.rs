//! The switch pipeline (`FrameSwitch`: learning, ARP, MRP with leases, prunes and
//! authentication, group address allocation, the Cepheus engine) fed a sequence of arbitrary frames on arbitrary
//! ports, with time moving and leases expiring between them, after a valid group was
//! registered. Nothing may panic, every output is drained, and the per-group tables
//! never exceed the configured capacity.
//!
//! Input: byte 0 picks a keyed or plain switch (bit 0) and whether group addresses
//! must be allocated (bit 1); then records of
//! `port (1) | time step in µs (1) | length (2, BE) | frame`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_core::fabric::cepheus::{CnpFilterPolicy, GroupAddressSpace};
use rocast_core::switch::frame::{FrameSwitch, FrameSwitchConfig};
use rocast_core::time::{Duration, Instant};
use rocast_core::wire::mrp_auth::FabricKey;
use rocast_core::wire::{EthernetAddress, Ipv4Address};

const PORTS: u16 = 4;
const MAX_GROUPS: usize = 8;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let mut cfg = FrameSwitchConfig::new(PORTS);
    cfg.max_groups = MAX_GROUPS;
    cfg.group_space = GroupAddressSpace::parse("10.77.0.128/25").unwrap();
    cfg.group_lease = Some(Duration::from_ms(5));
    if mode & 1 == 1 {
        cfg.mrp_key = Some(FabricKey::new([0x5a; 32]));
    }
    cfg.require_allocation = mode & 2 == 2;
    cfg.allocation_lease = Duration::from_ms(10);
    let filter = CnpFilterPolicy::from_name("cepheus", Duration::from_us(50))
        .unwrap()
        .build();
    let mut sw = FrameSwitch::new(cfg, filter);
    for p in 0..PORTS {
        let ip = Ipv4Address::new(10, 77, 0, p as u8 + 1);
        let mac = EthernetAddress([2, 0x72, 0x63, 0, 0, p as u8 + 1]);
        sw.add_host(ip, p, mac).unwrap();
    }
    let mut now = Instant::from_us(1);
    let mut out = vec![0u8; 16 * 1024];
    while rest.len() >= 4 {
        let port = rest[0] as u16 % (PORTS + 1); // PORTS itself: a port that does not exist
        now += Duration::from_us(rest[1] as u64 * 64);
        let len = (u16::from_be_bytes([rest[2], rest[3]]) as usize).min(rest.len() - 4);
        let frame = &rest[4..4 + len];
        rest = &rest[4 + len..];
        sw.handle_frame(now, port, frame);
        while sw.poll_transmit(now, &mut out).is_some() {}
        assert_eq!(
            sw.pending_transmits(),
            0,
            "a frame longer than 16 KiB was made"
        );
        sw.handle_timeout(now);
        assert!(sw.cepheus().num_groups() <= MAX_GROUPS);
        assert!(sw.allocations().count() <= MAX_GROUPS);
    }
});
