//! Feeds arbitrary bytes to the group control channel's stream decoder (in pieces cut
//! where the input says) and to every message parser. Nothing may panic, the decoder
//! may never hold more than one frame, and every message that parses must emit to a
//! frame that parses back to the same message and re-emits to the same bytes.
//!
//! Run: `cargo +nightly fuzz run group_control` from the repository root.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_core::wire::group_control::{
    parse_frame, Message, MessageType, StreamDecoder, FRAME_HEADER_LEN, MAX_BODY_LEN,
};

fn round_trip(m: &Message) {
    let frame = m.to_frame().expect("a parsed message emits");
    assert_eq!(frame.len(), m.buffer_len());
    let (back, n) = parse_frame(&frame).expect("an emitted frame parses");
    assert_eq!(n, frame.len());
    assert_eq!(&back, m);
    assert_eq!(back.to_frame().unwrap(), frame);
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the read size, so frames straddle reads in every way.
    let (step, stream) = match data.split_first() {
        Some((s, rest)) => ((*s as usize % 64) + 1, rest),
        None => (1, data),
    };
    let mut decoder = StreamDecoder::new();
    let mut whole = Vec::new();
    'reads: for read in stream.chunks(step) {
        let mut input = read;
        while !input.is_empty() {
            match decoder.feed(input) {
                Ok((n, m)) => {
                    assert!(n > 0 && n <= input.len());
                    assert!(decoder.buffered() <= FRAME_HEADER_LEN + MAX_BODY_LEN);
                    input = &input[n..];
                    if let Some(m) = m {
                        round_trip(&m);
                        whole.push(m);
                    }
                }
                Err(e) => {
                    // A failed decoder stays failed.
                    assert_eq!(decoder.feed(&[7, 0, 0]).err(), Some(e));
                    break 'reads;
                }
            }
        }
    }
    // The stream decoded in one piece gives the same messages as far as it got.
    let mut at = 0;
    for m in &whole {
        let (again, n) = parse_frame(&stream[at..]).expect("decoded before");
        assert_eq!(&again, m);
        at += n;
    }
    // Every parser on the raw bytes: what parses re-emits to exactly these bytes.
    for ty in MessageType::ALL {
        if let Ok(m) = Message::parse(ty, stream) {
            round_trip(&m);
            assert_eq!(&m.to_frame().unwrap()[FRAME_HEADER_LEN..], stream);
        }
    }
});
