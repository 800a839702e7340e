//! MRP on the wire: arbitrary bytes as a registration, a release, a prune, an
//! allocation request and answer, a switch report and an authenticated datagram. Nothing may panic; whatever parses re-emits
//! to the same bytes; a datagram opens under the fabric key only if it was sealed with
//! it (sealing the input then opening gives the input back, and any byte of the sealed
//! datagram flipped makes it fail).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_core::control::registration::{SwitchReport, SWITCH_REPORT_LEN};
use rocast_core::wire::mrp::{MrpAllocate, MrpAllocation, MrpPrune, MrpRelease, MrpRepr};
use rocast_core::wire::mrp_auth::FabricKey;
use rocast_core::wire::Ipv4Address;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = MrpRepr::parse(data) {
        let mut b = vec![0u8; m.buffer_len()];
        assert_eq!(m.emit(&mut b), data.len());
        assert_eq!(&b[..], data);
        assert!(MrpRelease::parse(data).is_err() && MrpPrune::parse(data).is_err());
    }
    if let Ok(r) = MrpRelease::parse(data) {
        let mut b = [0u8; 8];
        r.emit(&mut b);
        assert_eq!(&b[..], data);
    }
    if let Ok(p) = MrpPrune::parse(data) {
        let mut b = vec![0u8; p.buffer_len()];
        assert_eq!(p.emit(&mut b), data.len());
        assert_eq!(&b[..], data);
    }
    if let Ok(a) = MrpAllocate::parse(data) {
        let mut b = vec![0u8; a.buffer_len()];
        assert_eq!(a.emit(&mut b), data.len());
        assert_eq!(&b[..], data);
        assert!(MrpRepr::parse(data).is_err() && MrpRelease::parse(data).is_err());
        assert!(MrpPrune::parse(data).is_err());
    }
    if let Ok(a) = MrpAllocation::parse(data) {
        let mut b = vec![0u8; a.buffer_len()];
        assert_eq!(a.emit(&mut b), data.len());
        assert_eq!(&b[..], data);
        assert!(SwitchReport::parse(data).is_err());
    }
    if let Ok(r) = SwitchReport::parse(data) {
        let mut b = [0u8; SWITCH_REPORT_LEN];
        r.emit(&mut b).unwrap();
        assert_eq!(&b[..], data);
    }
    let key = FabricKey::new([0x5a; 32]);
    let src = Ipv4Address::new(10, 77, 0, 1);
    // Arbitrary bytes do not open (a forgery would need the key).
    let _ = key.open(src, data);
    let counter = data.iter().fold(0u64, |a, &b| a.rotate_left(5) ^ b as u64);
    let sealed = key.seal(src, counter, data);
    assert_eq!(key.open(src, &sealed), Ok((data, counter)));
    if !sealed.is_empty() {
        let i = counter as usize % sealed.len();
        let mut bad = sealed.clone();
        bad[i] ^= 1 << (counter % 8);
        assert!(
            key.open(src, &bad).is_err(),
            "a flipped byte {i} still opened"
        );
    }
});
