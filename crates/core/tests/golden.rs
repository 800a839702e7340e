//! Acceptance for `wire` against real Linux Soft-RoCE traffic (testdata/rxe-golden.pcap):
//! every RoCE frame parses, its ICRC verifies, and its `Repr` re-emits byte-identical.

use rocast_core::wire::pcap::{PcapReader, LINKTYPE_ETHERNET};
use rocast_core::wire::{classify_frame, FrameClass, Opcode};
use std::collections::BTreeMap;

pub fn golden() -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/rxe-golden.pcap")).expect("golden pcap")
}

#[test]
fn every_golden_frame_parses_verifies_and_reemits_identically() {
    let bytes = golden();
    let reader = PcapReader::new(&bytes).unwrap();
    assert_eq!(reader.linktype, LINKTYPE_ETHERNET);
    let mut opcodes: BTreeMap<u8, usize> = BTreeMap::new();
    let (mut total, mut roce) = (0, 0);
    for rec in reader {
        let rec = rec.unwrap();
        total += 1;
        match classify_frame(rec.data) {
            FrameClass::NotRoce => {}
            FrameClass::Malformed(e) => panic!("frame {total} malformed: {e}"),
            FrameClass::Roce { frame, icrc_ok } => {
                roce += 1;
                assert!(icrc_ok, "frame {total}: bad ICRC");
                assert!(frame.roce.bth.opcode.is_known());
                *opcodes.entry(frame.roce.bth.opcode.0).or_default() += 1;
                let mut out = vec![0u8; frame.buffer_len()];
                assert_eq!(frame.emit(&mut out), out.len());
                assert_eq!(&out[..], &rec.data[..out.len()], "frame {total} re-emits differently");
                assert!(rec.data[out.len()..].iter().all(|&b| b == 0), "only zero link padding may follow");
                assert_eq!(u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap()), frame.roce.icrc);
            }
        }
    }
    assert_eq!((total, roce), (550, 506));
    let expect: BTreeMap<u8, usize> = [
        (Opcode::RC_SEND_ONLY.0, 6),
        (Opcode::RC_WRITE_FIRST.0, 100),
        (Opcode::RC_WRITE_MIDDLE.0, 200),
        (Opcode::RC_WRITE_LAST.0, 99),
        (Opcode::RC_ACKNOWLEDGE.0, 101),
    ]
    .into_iter()
    .collect();
    assert_eq!(opcodes, expect);
}

#[test]
fn flipping_any_covered_bit_breaks_the_golden_icrc() {
    let bytes = golden();
    let rec = PcapReader::new(&bytes).unwrap().map(|r| r.unwrap()).find(|r| matches!(classify_frame(r.data), FrameClass::Roce { .. })).unwrap();
    let mut frame = rec.data.to_vec();
    // Payload byte near the end of the packet (before the ICRC).
    let n = frame.len();
    frame[n - 6] ^= 0x04;
    assert!(matches!(classify_frame(&frame), FrameClass::Roce { icrc_ok: false, .. }));
}
