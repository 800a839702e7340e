//! Differential target for the C group-control helpers (`verbs/rocast_proto.h`, used by
//! rocast-verbs-lead and rocast-verbs-member): the same bytes go through the C framer
//! (`ctl_recv` on a stream socket, in pieces of a size the input picks) and through
//! Rust's `StreamDecoder`. Both must cut the same frames (type, length, body) and stop
//! at the same point, and the C parser must accept exactly the bodies Rust accepts
//! (refusing a wrong version as a version error). Nothing may crash or hang.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_core::wire::group_control::{
    parse_frame_header, Message, MessageType, FRAME_HEADER_LEN, MAX_BODY_LEN,
};
use rocast_core::wire::Error;

extern "C" {
    fn rocast_shim_parse(ty: u8, b: *const u8, len: u16) -> i32;
    fn rocast_shim_frames(
        data: *const u8,
        n: usize,
        step: usize,
        tys: *mut u8,
        lens: *mut u16,
        bodies: *mut u8,
        max: i32,
        end: *mut i32,
    ) -> i32;
}

const MAX_FRAMES: usize = 64;

fuzz_target!(|data: &[u8]| {
    let (step, stream) = match data.split_first() {
        Some((s, rest)) => ((*s as usize % 64) + 1, rest),
        None => (1, data),
    };
    // Rust: whole frames from the front until one does not decode or the bytes end.
    let mut rust_frames = Vec::new();
    let mut at = 0;
    while stream.len() - at >= FRAME_HEADER_LEN {
        let Ok((_, len)) = parse_frame_header(&stream[at..]) else {
            break;
        };
        let end = at + FRAME_HEADER_LEN + len;
        if end > stream.len() {
            break;
        }
        rust_frames.push((stream[at], stream[at + FRAME_HEADER_LEN..end].to_vec()));
        at = end;
    }
    let mut tys = [0u8; MAX_FRAMES];
    let mut lens = [0u16; MAX_FRAMES];
    let mut bodies = vec![0u8; MAX_FRAMES * MAX_BODY_LEN];
    let mut end = 0i32;
    // SAFETY: the buffers hold MAX_FRAMES entries (bodies MAX_BODY_LEN each, the C
    // side's ROCAST_MAX_BODY_LEN, checked equal by crates/core/tests/c_header.rs).
    let n = unsafe {
        rocast_shim_frames(
            stream.as_ptr(),
            stream.len(),
            step,
            tys.as_mut_ptr(),
            lens.as_mut_ptr(),
            bodies.as_mut_ptr(),
            MAX_FRAMES as i32,
            &mut end,
        )
    };
    assert!(n >= 0, "socketpair failed");
    assert_eq!(
        n as usize,
        rust_frames.len(),
        "C and Rust cut a different number of frames"
    );
    assert_eq!(end, -1, "the C framer ends at EOF or a framing error");
    for (i, (ty, body)) in rust_frames.iter().enumerate().take(MAX_FRAMES) {
        assert_eq!(tys[i], *ty, "frame {i} type");
        assert_eq!(lens[i] as usize, body.len(), "frame {i} length");
        assert_eq!(
            &bodies[i * MAX_BODY_LEN..i * MAX_BODY_LEN + body.len()],
            &body[..]
        );
    }
    // Parsers: every frame's body, and the raw input as a body of each type.
    let mut cases: Vec<(u8, &[u8])> = rust_frames.iter().map(|(t, b)| (*t, &b[..])).collect();
    for t in MessageType::ALL {
        cases.push((t as u8, &stream[..stream.len().min(MAX_BODY_LEN)]));
    }
    for (ty, body) in cases {
        let Some(t) = MessageType::from_code(ty) else {
            continue;
        };
        // SAFETY: `body` is a live slice of `len` bytes.
        let c = unsafe { rocast_shim_parse(ty, body.as_ptr(), body.len() as u16) };
        if c == 1 {
            continue; // Overlay and Ready: the C side only recognises them.
        }
        match Message::parse(t, body) {
            Ok(_) => assert_eq!(c, 0, "C refused a {} Rust accepts", t.name()),
            Err(Error::Unsupported(_)) => assert_eq!(c, -2, "{}: a version error", t.name()),
            Err(_) => assert_eq!(c, -1, "C accepted a {} Rust refuses", t.name()),
        }
    }
});
