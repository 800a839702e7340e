//! `verbs/rocast_proto.h` against `rocast_core::wire::group_control`: the C programs
//! (`rocast-verbs-lead`, `rocast-verbs-member`) and the Rust runtime talk on the same
//! control channel, so their constants and bytes must agree.
//!
//! - every numeric `#define` in the header equals its Rust definition, every Rust
//!   definition is in the header, and a define this test does not know is an error
//!   (nothing in the header escapes the check);
//! - `verbs/proto_check.c`, compiled against the header with the system C compiler
//!   (`$CC`, else `cc`; a missing compiler fails the test), emits each message with
//!   the C helpers: the bytes equal Rust's and decode to the same messages; and it
//!   parses Rust's frames, including malformed ones, to the same fields and the same
//!   refusals.

use rocast_core::wire::group_control::{
    field, parse_frame, Announce, BufferResult, Close, Confirmation, Done, Evicted, Join, Message,
    MessageType, Overlay, Params, Resume, StreamDecoder, ANNOUNCE_LEN, CLOSE_LEN, CONFIRMATION_LEN,
    DONE_LEN, EVICTED_LEN, FRAME_HEADER_LEN, GROUP_CONTROL_PORT, GROUP_CONTROL_VERSION,
    INVITATION_LEN, JOIN_LEN, MAX_BODY_LEN, PARAMS_LEN, READY_LEN, RESULT_LEN, RESUME_LEN,
};
use rocast_core::wire::mrp::MRP_UDP_PORT;
use rocast_core::wire::{Error, Ipv4Address};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The C parsers' return codes, which `proto_check parse` prints.
const C_PARSE_MALFORMED: i64 = -1;
const C_PARSE_VERSION: i64 = -2;

fn verbs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../verbs")
}

/// Every constant the header must define, with the Rust value it must have.
fn expected_defines() -> BTreeMap<&'static str, i64> {
    let t = |ty: MessageType| ty as u8 as i64;
    let u = |v: usize| v as i64;
    BTreeMap::from([
        ("CONTROL_PORT", GROUP_CONTROL_PORT as i64),
        ("MRP_PORT", MRP_UDP_PORT as i64),
        ("ROCAST_GROUP_CONTROL_VERSION", GROUP_CONTROL_VERSION as i64),
        ("ROCAST_FRAME_HEADER_LEN", u(FRAME_HEADER_LEN)),
        ("ROCAST_MAX_BODY_LEN", u(MAX_BODY_LEN)),
        ("ROCAST_MSG_PARAMS", t(MessageType::Params)),
        ("ROCAST_MSG_JOIN", t(MessageType::Join)),
        ("ROCAST_MSG_CONFIRM", t(MessageType::Confirm)),
        ("ROCAST_MSG_DONE", t(MessageType::Done)),
        ("ROCAST_MSG_RESULT", t(MessageType::Result)),
        ("ROCAST_MSG_OVERLAY", t(MessageType::Overlay)),
        ("ROCAST_MSG_READY", t(MessageType::Ready)),
        ("ROCAST_MSG_ANNOUNCE", t(MessageType::Announce)),
        ("ROCAST_MSG_CLOSE", t(MessageType::Close)),
        ("ROCAST_MSG_EVICTED", t(MessageType::Evicted)),
        ("ROCAST_MSG_INVITATION", t(MessageType::Invitation)),
        ("ROCAST_MSG_RESUME", t(MessageType::Resume)),
        ("ROCAST_PARAMS_LEN", u(PARAMS_LEN)),
        ("ROCAST_PARAMS_VERSION", u(field::params::VERSION)),
        ("ROCAST_PARAMS_OP", u(field::params::OP)),
        ("ROCAST_PARAMS_CAPACITY", u(field::params::CAPACITY.start)),
        (
            "ROCAST_PARAMS_MESSAGE_BYTES",
            u(field::params::MESSAGE_BYTES.start),
        ),
        ("ROCAST_PARAMS_START_PSN", u(field::params::START_PSN.start)),
        ("ROCAST_JOIN_LEN", u(JOIN_LEN)),
        ("ROCAST_JOIN_VERSION", u(field::join::VERSION)),
        ("ROCAST_JOIN_IP", u(field::join::IP.start)),
        ("ROCAST_JOIN_QPN", u(field::join::QPN.start)),
        ("ROCAST_JOIN_VA", u(field::join::VA.start)),
        ("ROCAST_JOIN_RKEY", u(field::join::RKEY.start)),
        ("ROCAST_CONFIRM_LEN", u(CONFIRMATION_LEN)),
        ("ROCAST_CONFIRM_MCST_ID", u(field::confirm::MCST_ID.start)),
        ("ROCAST_CONFIRM_IP", u(field::confirm::IP.start)),
        ("ROCAST_CONFIRM_QPN", u(field::confirm::QPN.start)),
        ("ROCAST_DONE_LEN", u(DONE_LEN)),
        ("ROCAST_DONE_SEQ", u(field::done::SEQ.start)),
        ("ROCAST_RESULT_LEN", u(RESULT_LEN)),
        ("ROCAST_RESULT_OK", u(field::result::OK)),
        ("ROCAST_SHA256_LEN", u(field::result::SHA256.len())),
        ("ROCAST_RESULT_SHA256", u(field::result::SHA256.start)),
        ("ROCAST_RESULT_HELD_NS", u(field::result::HELD_NS.start)),
        ("ROCAST_READY_LEN", u(READY_LEN)),
        ("ROCAST_ANNOUNCE_LEN", u(ANNOUNCE_LEN)),
        ("ROCAST_ANNOUNCE_SEQ", u(field::announce::SEQ.start)),
        ("ROCAST_ANNOUNCE_BYTES", u(field::announce::BYTES.start)),
        ("ROCAST_ANNOUNCE_SHA256", u(field::announce::SHA256.start)),
        ("ROCAST_CLOSE_LEN", u(CLOSE_LEN)),
        ("ROCAST_CLOSE_OK", u(field::close::OK)),
        ("ROCAST_EVICTED_LEN", u(EVICTED_LEN)),
        ("ROCAST_EVICTED_IP", u(field::evicted::IP.start)),
        ("ROCAST_INVITATION_LEN", u(INVITATION_LEN)),
        ("ROCAST_INVITATION_TOKEN", u(field::invitation::TOKEN.start)),
        ("ROCAST_RESUME_LEN", u(RESUME_LEN)),
        ("ROCAST_RESUME_SEQ", u(field::resume::SEQ.start)),
        ("ROCAST_RESUME_OFFSET", u(field::resume::OFFSET.start)),
        ("ROCAST_PARSE_MALFORMED", C_PARSE_MALFORMED),
        ("ROCAST_PARSE_VERSION", C_PARSE_VERSION),
    ])
}

/// `#define NAME VALUE` lines with a value (trailing comments dropped). A value that is
/// not an integer literal (optionally in parentheses) is an error.
fn header_defines(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("#define") else {
            continue;
        };
        let rest = rest.split("/*").next().unwrap_or("");
        let mut words = rest.split_whitespace();
        let Some(name) = words.next() else { continue };
        let value: String = words.collect();
        if value.is_empty() {
            continue; // the include guard
        }
        let v = value.trim_start_matches('(').trim_end_matches(')');
        let parsed = if let Some(hex) = v.strip_prefix("0x") {
            i64::from_str_radix(hex, 16)
        } else {
            v.parse::<i64>()
        };
        let n = parsed.unwrap_or_else(|_| {
            panic!("#define {name} {value}: not an integer literal, so this test cannot check it")
        });
        assert!(
            out.insert(name.to_string(), n).is_none(),
            "{name} defined twice"
        );
    }
    out
}

#[test]
fn every_header_constant_equals_its_rust_definition() {
    let path = verbs_dir().join("rocast_proto.h");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let have = header_defines(&text);
    let want = expected_defines();
    for (name, value) in &want {
        assert_eq!(
            have.get(*name),
            Some(value),
            "{name} in verbs/rocast_proto.h (None: missing)"
        );
    }
    for name in have.keys() {
        assert!(
            want.contains_key(name.as_str()),
            "verbs/rocast_proto.h defines {name}, which this test does not check: add it here"
        );
    }
}

#[test]
fn the_define_reader_refuses_what_it_cannot_check() {
    let ok = header_defines(
        "#ifndef X\n#define X\n#define A 3 /* c */\n#define B (-2)\n#define C 0x1f\n",
    );
    assert_eq!(ok.len(), 3);
    assert_eq!((ok["A"], ok["B"], ok["C"]), (3, -2, 31));
    assert!(std::panic::catch_unwind(|| header_defines("#define D (1 << 4)\n")).is_err());
}

/// Compiles `verbs/proto_check.c` against the header, once per test process (the
/// tests run in parallel, and running a binary another test is rewriting fails with
/// "text file busy"); panics when it cannot.
fn proto_check() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(compile_proto_check).clone()
}

fn compile_proto_check() -> PathBuf {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("proto_check");
    let src = verbs_dir().join("proto_check.c");
    let status = Command::new(&cc)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-D_GNU_SOURCE",
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?} ({e}): this test needs one"));
    assert!(status.success(), "{cc} failed on {src:?}");
    out
}

fn run(bin: &Path, mode: &str, stdin: &[u8]) -> Vec<u8> {
    let mut child = Command::new(bin)
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run proto_check");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "proto_check {mode}: {:?}", out.status);
    out.stdout
}

const MEMBER: Ipv4Address = Ipv4Address([10, 0, 0, 7]);
const GROUP: Ipv4Address = Ipv4Address([10, 77, 0, 200]);

/// The messages `proto_check emit` writes, with the same values.
fn c_messages() -> Vec<Message> {
    vec![
        Message::Params(Params {
            write: true,
            capacity: 0x0102_0304_0506_0708,
            message_bytes: 0x0a0b_0c0d,
            start_psn: 0xab_cdef,
        }),
        Message::Join(Join {
            ip: MEMBER,
            qpn: 0x12_3456,
            va: 0x1000_0000,
            rkey: 0x5a5a,
        }),
        Message::Confirm(Confirmation {
            mcst_id: GROUP,
            ip: MEMBER,
            qpn: 0x107,
        }),
        Message::Done(Done { seq: 0x0102_0304 }),
        Message::Result(BufferResult {
            ok: true,
            sha256: std::array::from_fn(|i| i as u8),
            held_ns: 0x1122_3344_5566_7788,
        }),
        Message::Ready,
        Message::Announce(Announce {
            seq: 1,
            bytes: 70_000,
            sha256: [0xa5; 32],
        }),
        Message::Close(Close { ok: false }),
        Message::Evicted(Evicted { ip: MEMBER }),
        Message::Invitation([7; 16]),
        Message::Resume(Resume {
            seq: 2,
            offset: 0x0102_0304_0506,
        }),
    ]
}

#[test]
fn c_helpers_emit_the_bytes_rust_emits() {
    let bin = proto_check();
    let from_c = run(&bin, "emit", &[]);
    let want = c_messages();
    let from_rust: Vec<u8> = want.iter().flat_map(|m| m.to_frame().unwrap()).collect();
    assert_eq!(from_c, from_rust);
    assert_eq!(StreamDecoder::new().feed_all(&from_c), Ok(want));
}

#[test]
fn c_sha256_is_rusts_at_every_padding_boundary() {
    let bin = proto_check();
    // Lengths around the 55/56 and 64-byte padding edges, and a multi-block buffer.
    for len in [
        0usize, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 70_001,
    ] {
        let data = rocast_core::payload::message_data(5, len as u32, len);
        let c = String::from_utf8(run(&bin, "sha256", &data)).unwrap();
        let rust = rocast_core::payload::hex(&rocast_core::payload::sha256(&data));
        assert_eq!(c.trim(), rust, "{len} bytes");
    }
}

/// The line `proto_check parse` prints for a message.
fn c_line(m: &Message) -> String {
    match m {
        Message::Params(p) => format!(
            "params {} {} {} {}",
            p.write as u8, p.capacity, p.message_bytes, p.start_psn
        ),
        Message::Join(j) => format!("join {} {} {} {}", j.ip, j.qpn, j.va, j.rkey),
        Message::Confirm(c) => format!("confirm {} {} {}", c.mcst_id, c.ip, c.qpn),
        Message::Done(d) => format!("done {}", d.seq),
        Message::Result(r) => format!(
            "result {} {} {}",
            r.ok as u8,
            rocast_core::payload::hex(&r.sha256),
            r.held_ns
        ),
        Message::Overlay(o) => format!("overlay {}", o.buffer_len()),
        Message::Ready => "ready 0".into(),
        Message::Announce(a) => format!(
            "announce {} {} {}",
            a.seq,
            a.bytes,
            rocast_core::payload::hex(&a.sha256)
        ),
        Message::Close(c) => format!("close {}", c.ok as u8),
        Message::Evicted(e) => format!("evicted {}", e.ip),
        Message::Resume(r) => format!("resume {} {}", r.seq, r.offset),
        Message::Invitation(t) => {
            let hex: String = t.iter().map(|b| format!("{b:02x}")).collect();
            format!("invitation {hex}")
        }
    }
}

fn frame(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut f = vec![ty];
    f.extend_from_slice(&(body.len() as u16).to_be_bytes());
    f.extend_from_slice(body);
    f
}

#[test]
fn c_parsers_read_rust_frames_and_refuse_what_rust_refuses() {
    let bin = proto_check();
    let mut stream = Vec::new();
    let mut want = Vec::new();
    let mut messages = c_messages();
    messages.push(Message::Overlay(Overlay {
        scheme: 3,
        block_bytes: 16384,
        rate_mbps: 0,
        window: 2,
        roster: vec![Ipv4Address([10, 0, 0, 1]), MEMBER],
    }));
    for m in &messages {
        stream.extend(m.to_frame().unwrap());
        want.push(c_line(m));
    }
    // Malformed bodies in well-formed frames: (frame, Rust's error, C's line).
    let old_params = frame(1, &[1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0]);
    let mut high_qpn = Message::Join(Join {
        ip: MEMBER,
        qpn: 1,
        va: 0,
        rkey: 0,
    })
    .to_frame()
    .unwrap();
    high_qpn[FRAME_HEADER_LEN + field::join::QPN.start] = 1;
    // Version 2's Params (CRC-32 verdicts, no start PSN): refused by version.
    let v2_params = frame(1, &[2, 1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0]);
    let mut high_psn = Message::Params(Params {
        write: false,
        capacity: 1,
        message_bytes: 1,
        start_psn: 0,
    })
    .to_frame()
    .unwrap();
    high_psn[FRAME_HEADER_LEN + field::params::START_PSN.start] = 1;
    let bad = [
        (
            old_params,
            Error::Unsupported("group control version"),
            format!("params error {C_PARSE_VERSION}"),
        ),
        (
            v2_params,
            Error::Unsupported("group control version"),
            format!("params error {C_PARSE_VERSION}"),
        ),
        (
            high_psn,
            Error::Malformed("params start psn"),
            format!("params error {C_PARSE_MALFORMED}"),
        ),
        (
            high_qpn,
            Error::Malformed("join qpn"),
            format!("join error {C_PARSE_MALFORMED}"),
        ),
        (
            frame(5, &[2; RESULT_LEN]),
            Error::Malformed("result ok"),
            format!("result error {C_PARSE_MALFORMED}"),
        ),
        (
            frame(4, &[0; 3]),
            Error::Truncated("done"),
            format!("done error {C_PARSE_MALFORMED}"),
        ),
        (
            frame(10, &[2]),
            Error::Malformed("close ok"),
            format!("close error {C_PARSE_MALFORMED}"),
        ),
        // The reserved type 8 ends the stream on both sides.
        (
            frame(8, &[]),
            Error::Unsupported("group control message type"),
            "frame error".into(),
        ),
    ];
    for (f, rust_error, c_line) in bad {
        assert_eq!(parse_frame(&f).map(|(m, _)| m), Err(rust_error), "{c_line}");
        stream.extend(f);
        want.push(c_line);
    }
    let out = String::from_utf8(run(&bin, "parse", &stream)).unwrap();
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
}

/// Issue 24: the C programs' framed reader (`ctl_recv`) over a real socket: whole
/// frames come out, a frame cut off by EOF ends the stream instead of waiting for
/// bytes that can never arrive, and a length over the type's limit is refused.
#[test]
fn c_stream_reader_ends_at_eof_mid_frame() {
    let bin = proto_check();
    let frame = |ty: MessageType, body: &[u8]| {
        let mut f = vec![ty as u8, (body.len() >> 8) as u8, body.len() as u8];
        f.extend_from_slice(body);
        f
    };
    let done = frame(MessageType::Done, &[0, 0, 0, 7]);
    let close = frame(MessageType::Close, &[1]);
    let lines = |input: &[u8]| String::from_utf8(run(&bin, "stream", input)).unwrap();
    // Two whole frames, then EOF.
    let mut two = done.clone();
    two.extend_from_slice(&close);
    assert_eq!(
        lines(&two),
        format!(
            "frame {} 4\nframe {} 1\nend\n",
            MessageType::Done as u8,
            MessageType::Close as u8
        )
    );
    // A whole frame, then half of one: the half is never reported, the stream ends.
    let mut cut = done.clone();
    cut.extend_from_slice(&close[..2]);
    assert_eq!(
        lines(&cut),
        format!("frame {} 4\nend\n", MessageType::Done as u8)
    );
    // EOF inside the header, and an empty stream.
    assert_eq!(lines(&done[..2]), "end\n");
    assert_eq!(lines(&[]), "end\n");
    // An overlay frame claiming more than MAX_BODY_LEN: refused at its header.
    let big = [MessageType::Overlay as u8, 0xff, 0xfd];
    assert_eq!(lines(&big), "end\n");
}
