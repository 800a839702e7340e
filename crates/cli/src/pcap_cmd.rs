//! `rocast pcap`: verify, print and generate RoCEv2 packet captures (classic libpcap files).
//!
//! Exit status, for every subcommand: 0 when all is well; 1 when `check` finds a bad
//! ICRC or a malformed RoCE frame; 2 when the file cannot be used (unreadable, not a
//! pcap, unsupported link type, truncated or corrupt record, write failure). A damaged
//! capture is still reported up to the point where it breaks.

use clap::Subcommand;
use rocast_core::wire::pcap::{PcapWriter, LINKTYPE_ETHERNET};
use rocast_core::wire::peel::PeelHeader;
use rocast_core::wire::{
    icrc, AckSyndrome, AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Ecn,
    EtherType, EthernetAddress, EthernetRepr, ExtHeaders, FrameClass, Ipv4Address, Ipv4Repr,
    NakCode, Opcode, Psn, RethRepr, RoceFrameRepr, RoceRepr, UdpRepr, CNP_RESERVED_LEN,
    ETHERNET_HEADER_LEN, IPV4_HEADER_LEN, IP_PROTO_UDP, ROCEV2_UDP_PORT, UDP_HEADER_LEN,
};
use rocast_eval::captures::{
    describe, frame_record, icrc_covered, opcode_name, peel_str, raw_ip_addrs, walk,
};
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const EXIT_OK: u8 = 0;
/// The capture was read but holds bad ICRCs or malformed RoCE frames.
const EXIT_BAD: u8 = 1;
/// The file could not be used (or not entirely).
const EXIT_ERROR: u8 = 2;

#[derive(Debug, Subcommand)]
pub enum PcapCmd {
    /// Verify every RoCEv2 frame (headers and ICRC) and print a one-line summary.
    ///
    /// Prints `N frames, N roce, N icrc-ok, N icrc-bad` (roce = frames to UDP 4791 that
    /// parse), then `N malformed` if any frame to UDP 4791 does not parse, and `N peel`
    /// if any RoCE frame carried the PEEL shim (UDP 4793; checked without the shim, as
    /// its ICRC was computed; a shim that does not parse is malformed). Each bad or
    /// malformed frame is named on stderr (frames are numbered from 1, as in Wireshark).
    /// Exit status: 0 all good; 1 a bad ICRC or a malformed RoCE frame; 2 the file is
    /// unreadable, not a pcap, of an unsupported link type, or truncated.
    Check {
        /// Capture file (pcap or pcapng, read as a stream; link type Ethernet, raw IP or
        /// Linux cooked).
        file: PathBuf,
    },
    /// Print one line per RoCEv2 frame, tshark-style.
    ///
    /// Columns: frame number, time relative to the first frame, source → destination,
    /// opcode, destination QP, PSN, BTH/IP flags, extended headers, payload length, ICRC
    /// verdict; a PEEL frame (UDP 4793) starts with its shim, `PEEL[len= value= pod=
    /// plane= flags]`. Malformed RoCE frames get a line saying why; other traffic is
    /// skipped.
    /// Exit status: 0, or 2 if the file cannot be read (entirely).
    Dump {
        /// Capture file (pcap or pcapng).
        file: PathBuf,
        /// One JSON array of the frames instead of text, an object each: `frame`,
        /// `time_s`, `src`, `dst`, `opcode` (name) and `opcode_code`, `dest_qp`, `psn`,
        /// `flags`, the extended headers present (`deth`, `reth`, `aeth`,
        /// `atomic_eth`, `atomic_ack_eth`, `imm`, `ieth`), `payload_len`, `icrc_ok`,
        /// `peel` when shimmed; a malformed frame has `malformed` (why) instead.
        #[arg(long, conflicts_with = "jsonl")]
        json: bool,
        /// The same objects as JSON Lines: one per line, written as the frames are read
        /// (for captures too large to hold, and `| head`).
        #[arg(long)]
        jsonl: bool,
    },
    /// Write a sample capture: one valid frame of every opcode rocast models.
    ///
    /// Ethernet link type; RC, UC and UD SEND/WRITE/READ/atomic opcodes, every ACK/NAK
    /// flavour and a CNP, all built with `RoceFrameRepr::emit`. The content is
    /// deterministic, so the file can feed independent decoders (tests/python).
    Sample {
        /// Output file (overwritten).
        file: PathBuf,
        /// Also rocast's own protocols, after the RoCE frames: MRP (registrations,
        /// release, prune, allocation request and answer, an authenticated one), a
        /// RoCE frame with the PEEL shim, and a TCP stream of every group control
        /// message — what `contrib/wireshark/rocast.lua` decodes.
        #[arg(long)]
        all_protocols: bool,
    },
}

pub fn run(cmd: PcapCmd) -> ExitCode {
    let code = match cmd {
        PcapCmd::Check { file } => check(&file),
        PcapCmd::Dump { file, json, jsonl } => dump(
            &file,
            if json {
                DumpFormat::Json
            } else if jsonl {
                DumpFormat::JsonLines
            } else {
                DumpFormat::Text
            },
        ),
        PcapCmd::Sample {
            file,
            all_protocols,
        } => sample(&file, all_protocols),
    };
    ExitCode::from(code)
}

/// Writes an error line to stderr. Never panics (unlike `eprintln!` on a closed stderr).
fn report(msg: impl std::fmt::Display) {
    let _ = writeln!(io::stderr().lock(), "rocast: {msg}");
}

// ---------------------------------------------------------------------------------------
// check

#[derive(Debug, Default)]
struct Counts {
    frames: usize,
    roce: usize,
    icrc_ok: usize,
    icrc_bad: usize,
    malformed: usize,
    peel: usize,
}

fn check(path: &Path) -> u8 {
    let mut n = Counts::default();
    let stderr = io::stderr();
    let mut err = stderr.lock();
    let walked = walk(path, |fr, class| {
        n.frames += 1;
        match class {
            FrameClass::NotRoce => {}
            FrameClass::Malformed(e) => {
                n.malformed += 1;
                let _ = writeln!(
                    err,
                    "frame {}: malformed RoCE frame: {e}{}",
                    fr.number,
                    fr.snap_note()
                );
            }
            FrameClass::Roce { frame, icrc_ok } => {
                n.roce += 1;
                n.peel += usize::from(fr.peel.is_some());
                if icrc_ok {
                    n.icrc_ok += 1;
                } else {
                    n.icrc_bad += 1;
                    let computed = icrc_covered(fr.eth, &frame.roce)
                        .and_then(|b| icrc::compute(b).ok())
                        .map_or_else(|| "?".to_string(), |c| format!("{c:#010x}"));
                    let b = &frame.roce.bth;
                    let _ = writeln!(
                        err,
                        "frame {}: bad ICRC: {} QP=0x{:06x} PSN={} carries {:#010x}, computed {computed}",
                        fr.number,
                        opcode_name(b.opcode),
                        b.dest_qp,
                        b.psn,
                        frame.roce.icrc,
                    );
                }
            }
        }
        true
    });
    drop(err);
    let trailer = match walked {
        Err(msg) => {
            report(format_args!("error: {msg}"));
            return EXIT_ERROR;
        }
        Ok(t) => t,
    };
    let mut summary = format!(
        "{} frames, {} roce, {} icrc-ok, {} icrc-bad\n",
        n.frames, n.roce, n.icrc_ok, n.icrc_bad
    );
    if n.malformed > 0 {
        let _ = writeln!(summary, "{} malformed", n.malformed);
    }
    if n.peel > 0 {
        let _ = writeln!(summary, "{} peel", n.peel);
    }
    let _ = io::stdout().lock().write_all(summary.as_bytes());
    if let Some(msg) = trailer {
        report(format_args!("error: {msg}"));
        return EXIT_ERROR;
    }
    if n.icrc_bad > 0 || n.malformed > 0 {
        EXIT_BAD
    } else {
        EXIT_OK
    }
}

// ---------------------------------------------------------------------------------------
// dump

/// How `pcap dump` writes the frames.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DumpFormat {
    Text,
    /// One array (`--json`).
    Json,
    /// One object per line (`--jsonl`).
    JsonLines,
}

fn dump(path: &Path, format: DumpFormat) -> u8 {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut first_ts: Option<u64> = None;
    let mut write_err: Option<io::Error> = None;
    let mut objects = 0u64;
    if format == DumpFormat::Json {
        write_err = out.write_all(b"[").err();
    }
    let walked = walk(path, |fr, class| {
        if write_err.is_some() {
            return false;
        }
        let base = *first_ts.get_or_insert(fr.ts_ns);
        if format != DumpFormat::Text {
            let Some(j) = frame_record(fr, &class, base) else {
                return true;
            };
            let line = match format {
                DumpFormat::Json if objects > 0 => format!(",\n{j}"),
                DumpFormat::Json => format!("\n{j}"),
                _ => j.to_string() + "\n",
            };
            objects += 1;
            return match out.write_all(line.as_bytes()) {
                Ok(()) => true,
                Err(e) => {
                    write_err = Some(e);
                    false
                }
            };
        }
        let what = match class {
            FrameClass::NotRoce => return true,
            FrameClass::Malformed(e) => {
                let (src, dst) = raw_ip_addrs(fr.eth);
                format!("{src} → {dst} MALFORMED: {e}{}", fr.snap_note())
            }
            FrameClass::Roce { frame, icrc_ok } => match &fr.peel {
                Some(h) => format!("{} {}", peel_str(h), describe(&frame, icrc_ok)),
                None => describe(&frame, icrc_ok),
            },
        };
        let line = format!("{:>5} {:>11} {what}\n", fr.number, rel_time(fr.ts_ns, base));
        match out.write_all(line.as_bytes()) {
            Ok(()) => true,
            Err(e) => {
                write_err = Some(e);
                false
            }
        }
    });
    if write_err.is_none() && format == DumpFormat::Json {
        write_err = out.write_all(b"\n]\n").err();
    }
    if write_err.is_none() {
        write_err = out.flush().err();
    }
    match write_err {
        // `rocast pcap dump x | head`: the reader has seen what it wanted.
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => return EXIT_OK,
        Some(e) => {
            report(format_args!("error: writing output: {e}"));
            return EXIT_ERROR;
        }
        None => {}
    }
    match walked {
        Ok(None) => EXIT_OK,
        Ok(Some(msg)) | Err(msg) => {
            report(format_args!("error: {msg}"));
            EXIT_ERROR
        }
    }
}

/// `ts - base` in seconds with 6 decimals (negative if the capture goes back in time).
fn rel_time(ts_ns: u64, base_ns: u64) -> String {
    let d = ts_ns as i128 - base_ns as i128;
    let sign = if d < 0 { "-" } else { "" };
    let a = d.unsigned_abs();
    format!(
        "{sign}{}.{:06}",
        a / 1_000_000_000,
        (a % 1_000_000_000) / 1000
    )
}

// ---------------------------------------------------------------------------------------
// sample

fn sample(path: &Path, all_protocols: bool) -> u8 {
    let mut frames = sample_frames();
    if all_protocols {
        frames.extend(protocol_frames());
    }
    let write = || -> io::Result<()> {
        let file = std::fs::File::create(path)?;
        let mut w = PcapWriter::new(BufWriter::new(file), LINKTYPE_ETHERNET)?;
        for (i, f) in frames.iter().enumerate() {
            w.write_record(SAMPLE_T0_NS + i as u64 * 10_000, f)?;
        }
        w.into_inner()
            .into_inner()
            .map_err(|e| e.into_error())?
            .sync_all()
    };
    match write() {
        Ok(()) => {
            let _ = writeln!(
                io::stdout().lock(),
                "wrote {} frames to {}",
                frames.len(),
                path.display()
            );
            EXIT_OK
        }
        Err(e) => {
            report(format_args!("error: cannot write {}: {e}", path.display()));
            EXIT_ERROR
        }
    }
}

/// An Ethernet frame around `ip_packet`, A → B or B → A.
fn ether(reply: bool, ip_packet: &[u8]) -> Vec<u8> {
    let (src, dst) = if reply {
        (SAMPLE_MAC_B, SAMPLE_MAC_A)
    } else {
        (SAMPLE_MAC_A, SAMPLE_MAC_B)
    };
    let mut f = vec![0u8; ETHERNET_HEADER_LEN + ip_packet.len()];
    f[0..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[ETHERNET_HEADER_LEN..].copy_from_slice(ip_packet);
    f
}

/// An IPv4/TCP segment (PSH+ACK, checksums right) carrying `payload`.
fn tcp_segment(
    src: (Ipv4Address, u16),
    dst: (Ipv4Address, u16),
    seq: u32,
    ack: u32,
    payload: &[u8],
) -> Vec<u8> {
    const TCP_LEN: usize = 20;
    let mut b = vec![0u8; IPV4_HEADER_LEN + TCP_LEN + payload.len()];
    Ipv4Repr {
        src_addr: src.0,
        dst_addr: dst.0,
        dscp: 0,
        ecn: Ecn::NotEct,
        ident: 0,
        dont_frag: true,
        ttl: 64,
        protocol: 6,
        payload_len: TCP_LEN + payload.len(),
    }
    .emit(&mut b);
    let t = &mut b[IPV4_HEADER_LEN..];
    t[0..2].copy_from_slice(&src.1.to_be_bytes());
    t[2..4].copy_from_slice(&dst.1.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x18; // PSH, ACK
    t[14..16].copy_from_slice(&65535u16.to_be_bytes());
    t[TCP_LEN..].copy_from_slice(payload);
    // The checksum over the pseudo-header and the segment.
    let mut pseudo = Vec::with_capacity(12 + t.len());
    pseudo.extend_from_slice(&src.0 .0);
    pseudo.extend_from_slice(&dst.0 .0);
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(t.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(t);
    let sum = !rocast_core::wire::ones_complement_sum(&pseudo);
    t[16..18].copy_from_slice(&sum.to_be_bytes());
    b
}

/// The frames `pcap sample --all-protocols` adds: rocast's MRP (UDP 4792), a PEEL
/// frame (UDP 4793) and a group control TCP stream (port 4793), all built by the
/// core's emitters. Deterministic.
pub(crate) fn protocol_frames() -> Vec<Vec<u8>> {
    use rocast_core::switch::frame::FrameSwitch;
    use rocast_core::wire::group_control::{
        Announce, BufferResult, Close, Confirmation, Done, Evicted, Holding, Join, Message,
        Overlay, Params, Resume, GROUP_CONTROL_PORT,
    };
    use rocast_core::wire::mrp::{
        MrpAllocate, MrpAllocation, MrpMember, MrpPrune, MrpRelease, MrpRepr, MRP_UDP_PORT,
    };
    use rocast_core::wire::mrp_auth::FabricKey;
    let group = Ipv4Address::new(10, 77, 0, 200);
    let c = Ipv4Address::new(10, 0, 0, 3);
    let mrp = |reply: bool, from: Ipv4Address, to: Ipv4Address, body: Vec<u8>| {
        ether(
            reply,
            &FrameSwitch::udp_packet(from, to, MRP_UDP_PORT, &body),
        )
    };
    let emit = |len: usize, f: &dyn Fn(&mut [u8]) -> usize| {
        let mut b = vec![0u8; len];
        let n = f(&mut b);
        b.truncate(n);
        b
    };
    let mut out = Vec::new();
    // Registrations: SEND (two members), WRITE (one member with its region), and the
    // SEND one sealed with a fabric key.
    let send = MrpRepr {
        mcst_id: group,
        seq: 0,
        total: 1,
        write: false,
        new_incarnation: true,
        members: vec![
            MrpMember {
                ip: SAMPLE_IP_B,
                qpn: 0x12,
                region: None,
            },
            MrpMember {
                ip: c,
                qpn: 0x13,
                region: None,
            },
        ],
    };
    let write = MrpRepr {
        write: true,
        members: vec![MrpMember {
            ip: SAMPLE_IP_B,
            qpn: 0x12,
            region: Some((0x7f00_0000_1000, 0xabcd)),
        }],
        ..send.clone()
    };
    let send_body = emit(send.buffer_len(), &|b| send.emit(b));
    let key = FabricKey::new([7; 32]);
    let prune = MrpPrune {
        mcst_id: group,
        members: vec![c],
    };
    let release = MrpRelease { mcst_id: group };
    let req = MrpAllocate {
        nonce: 0x0123_4567_89ab_cdef,
        lease_ms: 600_000,
    };
    let ans = MrpAllocation {
        mcst_id: group,
        nonce: req.nonce,
        lease_ms: 300_000,
    };
    // Leader to group: the registrations (one sealed with a fabric key), prune,
    // release, the allocation request; then the switch's answer.
    for body in [
        send_body.clone(),
        emit(write.buffer_len(), &|b| write.emit(b)),
        key.seal(SAMPLE_IP_A, 42, &send_body),
        emit(prune.buffer_len(), &|b| prune.emit(b)),
        emit(release.buffer_len(), &|b| release.emit(b)),
        emit(req.buffer_len(), &|b| req.emit(b)),
    ] {
        out.push(mrp(false, SAMPLE_IP_A, group, body));
    }
    out.push(mrp(
        true,
        group,
        SAMPLE_IP_A,
        emit(ans.buffer_len(), &|b| ans.emit(b)),
    ));
    // PEEL: the sample's WRITE_ONLY (its IP packet) with the shim inserted.
    let write_only = sample_frames()
        .into_iter()
        .find(|f| f.get(ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN) == Some(&0x0a))
        .expect("the sample has an RC WRITE_ONLY");
    let shim = PeelHeader {
        flags: PeelHeader::CORE_REPLICATE | PeelHeader::SOURCE_RACK,
        prefix_len: 3,
        pod: 2,
        prefix_value: 5,
        plane: 1,
    };
    if let Ok(p) = rocast_core::wire::peel::insert_shim(&write_only[ETHERNET_HEADER_LEN..], &shim) {
        out.push(ether(false, &p));
    }
    // Group control: a leader (A, port 4793) and a member (B); every message once, in a
    // plausible order; the last segment carries two frames.
    let msgs: Vec<(bool, Vec<Message>)> = vec![
        (true, vec![Message::Invitation([0x5a; 16])]),
        (
            false,
            vec![Message::Params(Params {
                write: true,
                capacity: 1 << 20,
                message_bytes: 4096,
                start_psn: 0x5e_ed42,
            })],
        ),
        (
            true,
            vec![Message::Join(Join {
                ip: SAMPLE_IP_B,
                qpn: 0x12,
                va: 0x7f00_0000_1000,
                rkey: 0xabcd,
            })],
        ),
        (
            false,
            vec![Message::Overlay(Overlay {
                scheme: 3,
                block_bytes: 1 << 20,
                rate_mbps: 1000,
                window: 1,
                roster: vec![SAMPLE_IP_A, SAMPLE_IP_B, c],
            })],
        ),
        (true, vec![Message::Ready]),
        (
            true,
            vec![Message::Confirm(Confirmation {
                mcst_id: group,
                ip: SAMPLE_IP_B,
                qpn: 0x12,
            })],
        ),
        (
            false,
            vec![Message::Announce(Announce {
                seq: 1,
                bytes: 65536,
                sha256: [0xca; 32],
            })],
        ),
        (
            false,
            vec![Message::Resume(Resume {
                seq: 1,
                offset: 32768,
            })],
        ),
        (
            true,
            vec![Message::Holding(Holding {
                seq: 1,
                bytes: 40960,
            })],
        ),
        (false, vec![Message::Done(Done { seq: 1 })]),
        (
            true,
            vec![Message::Result(BufferResult {
                ok: true,
                sha256: [0xca; 32],
                held_ns: 123_456_789,
            })],
        ),
        (
            false,
            vec![
                Message::Evicted(Evicted { ip: c }),
                Message::Close(Close { ok: true }),
            ],
        ),
    ];
    let (leader, member) = ((SAMPLE_IP_A, GROUP_CONTROL_PORT), (SAMPLE_IP_B, 40_000u16));
    let (mut lseq, mut mseq) = (1_000u32, 5_000u32);
    for (from_member, ms) in msgs {
        let mut payload = Vec::new();
        for m in ms {
            payload.extend(m.to_frame().expect("valid messages"));
        }
        let seg = if from_member {
            let s = tcp_segment(member, leader, mseq, lseq, &payload);
            mseq += payload.len() as u32;
            s
        } else {
            let s = tcp_segment(leader, member, lseq, mseq, &payload);
            lseq += payload.len() as u32;
            s
        };
        out.push(ether(from_member, &seg));
    }
    out
}

/// 2023-11-14 22:13:20 UTC; frames follow 10 us apart.
const SAMPLE_T0_NS: u64 = 1_700_000_000_000_000_000;

/// One frame of the sample capture, before emission.
struct SamplePkt {
    opcode: Opcode,
    psn: u32,
    payload_len: usize,
    ext: ExtHeaders,
    solicited: bool,
    ecn: Ecn,
    /// Responder → requester (ACKs, read responses, CNPs).
    reply: bool,
}

impl SamplePkt {
    fn new(opcode: Opcode, psn: u32, payload_len: usize) -> Self {
        SamplePkt {
            opcode,
            psn,
            payload_len,
            ext: ExtHeaders::default(),
            solicited: false,
            ecn: Ecn::Ect0,
            reply: false,
        }
    }
    fn ext(mut self, f: impl FnOnce(&mut ExtHeaders)) -> Self {
        f(&mut self.ext);
        self
    }
    fn reply(mut self) -> Self {
        self.reply = true;
        self
    }
}

const SAMPLE_MAC_A: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0a]);
const SAMPLE_MAC_B: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0b]);
const SAMPLE_IP_A: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const SAMPLE_IP_B: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
/// The requester's QP (on A) and the responder's RC and UC QPs (on B).
const SAMPLE_QP_A: u32 = 0x000011;
const SAMPLE_QP_B_RC: u32 = 0x000012;
const SAMPLE_QP_B_UC: u32 = 0x000020;
const SAMPLE_QP_B_UD: u32 = 0x000101;

/// The frames of `rocast pcap sample`: every opcode rocast models (RC, UC, UD, CNP),
/// every AETH flavour, odd payload lengths (so pad counts 0-3 all occur), a PSN wrap,
/// an ECN-CE mark. Deterministic.
pub(crate) fn sample_frames() -> Vec<Vec<u8>> {
    let mut pkts = Vec::new();
    let rkey = 0x0000_1234;
    let va = 0x7f00_1234_5000u64;
    // SEND and WRITE, RC (0x00-0x0b) then UC (0x20-0x2b). PSNs cross the 24-bit wrap.
    for transport in [0x00u8, 0x20] {
        let mut psn = if transport == 0 { 0xff_fff8 } else { 0x00_0500 };
        for op in 0x00..=0x0bu8 {
            let opcode = Opcode(transport | op);
            let payload_len = match op {
                0x00 | 0x01 | 0x06 | 0x07 => 256,
                0x05 => 0,
                _ => 13 + op as usize,
            };
            let mut p = SamplePkt::new(opcode, psn, payload_len);
            if matches!(op, 0x06 | 0x0a | 0x0b) {
                let dma_len = if op == 0x06 {
                    256 * 2 + 21
                } else {
                    payload_len as u32
                };
                p.ext.reth = Some(RethRepr {
                    va: va + op as u64 * 0x1000,
                    rkey,
                    dma_len,
                });
            }
            if matches!(op, 0x03 | 0x05 | 0x09 | 0x0b) {
                p.ext.imm = Some(0xdead_0000 | (transport as u32) << 8 | op as u32);
            }
            p.solicited = matches!(op, 0x04 | 0x05);
            if op == 0x07 {
                p.ecn = Ecn::Ce; // a congested WRITE_MIDDLE
            }
            pkts.push(p);
            psn = (psn + 1) & 0xff_ffff;
        }
    }
    let ieth = |i: u32| move |e: &mut ExtHeaders| e.ieth = Some(i);
    pkts.push(SamplePkt::new(Opcode::RC_SEND_LAST_INV, 0x000010, 5).ext(ieth(0x0000_abcd)));
    pkts.push(SamplePkt::new(Opcode::RC_SEND_ONLY_INV, 0x000011, 7).ext(ieth(0x0000_abce)));

    // RDMA READ: request and the four response kinds (responses carry the AETH except MIDDLE).
    let ack = |credits: u8, msn: u32| AethRepr {
        syndrome: AckSyndrome::Ack { credits },
        msn,
    };
    let read_va = 0x0000_5555_0000_0000u64;
    pkts.push(
        SamplePkt::new(Opcode::RC_READ_REQUEST, 0x000100, 0).ext(|e| {
            e.reth = Some(RethRepr {
                va: read_va,
                rkey: 0x77,
                dma_len: 256 * 2 + 88,
            })
        }),
    );
    pkts.push(
        SamplePkt::new(Opcode::RC_READ_RESPONSE_FIRST, 0x000100, 256)
            .reply()
            .ext(|e| e.aeth = Some(ack(31, 7))),
    );
    pkts.push(SamplePkt::new(Opcode::RC_READ_RESPONSE_MIDDLE, 0x000101, 256).reply());
    pkts.push(
        SamplePkt::new(Opcode::RC_READ_RESPONSE_LAST, 0x000102, 88)
            .reply()
            .ext(|e| e.aeth = Some(ack(31, 8))),
    );
    pkts.push(
        SamplePkt::new(Opcode::RC_READ_RESPONSE_ONLY, 0x000103, 21)
            .reply()
            .ext(|e| e.aeth = Some(ack(31, 9))),
    );

    // Atomics and their acknowledgement.
    let atomic = |swap_add: u64, compare: u64| {
        move |e: &mut ExtHeaders| {
            e.atomic_eth = Some(AtomicEthRepr {
                va: 0x0000_6666_0000_0008,
                rkey: 0x88,
                swap_add,
                compare,
            })
        }
    };
    pkts.push(
        SamplePkt::new(Opcode::RC_COMPARE_SWAP, 0x000200, 0)
            .ext(atomic(0x1111_2222_3333_4444, 0x42)),
    );
    pkts.push(SamplePkt::new(Opcode::RC_FETCH_ADD, 0x000201, 0).ext(atomic(1, 0)));
    pkts.push(
        SamplePkt::new(Opcode::RC_ATOMIC_ACKNOWLEDGE, 0x000201, 0)
            .reply()
            .ext(|e| {
                e.aeth = Some(ack(31, 11));
                e.atomic_ack_eth = Some(AtomicAckEthRepr {
                    orig_data: 0x0000_0000_0000_0042,
                });
            }),
    );

    // ACKNOWLEDGE: ACK (credits invalid, and a real count), RNR NAK, every NAK code.
    let mut syndromes = vec![
        AckSyndrome::Ack {
            credits: AckSyndrome::CREDITS_INVALID,
        },
        AckSyndrome::Ack { credits: 8 },
        AckSyndrome::RnrNak { timer: 14 },
    ];
    syndromes.extend((0..=4).map(|c| AckSyndrome::Nak(NakCode::from_code(c))));
    for (i, syndrome) in syndromes.into_iter().enumerate() {
        let msn = 12 + i as u32;
        pkts.push(
            SamplePkt::new(Opcode::RC_ACKNOWLEDGE, 0x000300 + i as u32, 0)
                .reply()
                .ext(|e| e.aeth = Some(AethRepr { syndrome, msn })),
        );
    }

    // UD SEND_ONLY with and without immediate data.
    let deth = DethRepr {
        qkey: 0x1111_1111,
        reserved: 0,
        src_qp: 0x000100,
    };
    pkts.push(SamplePkt::new(Opcode::UD_SEND_ONLY, 0x000400, 50).ext(|e| e.deth = Some(deth)));
    pkts.push(
        SamplePkt::new(Opcode::UD_SEND_ONLY_IMM, 0x000401, 17).ext(|e| {
            e.deth = Some(deth);
            e.imm = Some(0x0102_0304);
        }),
    );

    // CNP: from the notification point (B) back to the sender's QP, BECN set, PSN 0.
    pkts.push(
        SamplePkt::new(Opcode::CNP, 0, 0)
            .reply()
            .ext(|e| e.cnp_reserved = Some([0; CNP_RESERVED_LEN])),
    );

    let payload_src: Vec<u8> = (0..256u32)
        .map(|i| (i.wrapping_mul(37) ^ 0x5a) as u8)
        .collect();
    pkts.iter()
        .enumerate()
        .map(|(i, p)| {
            let (src_mac, dst_mac, src_ip, dst_ip, src_port) = if p.reply {
                (SAMPLE_MAC_B, SAMPLE_MAC_A, SAMPLE_IP_B, SAMPLE_IP_A, 49153)
            } else {
                (SAMPLE_MAC_A, SAMPLE_MAC_B, SAMPLE_IP_A, SAMPLE_IP_B, 49152)
            };
            let dest_qp = match p.opcode.transport() {
                _ if p.reply => SAMPLE_QP_A,
                1 => SAMPLE_QP_B_UC,
                3 => SAMPLE_QP_B_UD,
                _ => SAMPLE_QP_B_RC,
            };
            let mut bth = BthRepr::new(p.opcode, dest_qp, Psn::new(p.psn));
            bth.pad_count = ((4 - p.payload_len % 4) % 4) as u8;
            bth.solicited = p.solicited;
            bth.ack_req = !p.reply && p.opcode.transport() == 0 && p.opcode.is_last()
                || matches!(
                    p.opcode,
                    Opcode::RC_READ_REQUEST | Opcode::RC_COMPARE_SWAP | Opcode::RC_FETCH_ADD
                );
            let is_cnp = p.opcode == Opcode::CNP;
            if is_cnp {
                bth.resv8a = 0x40; // BECN
            }
            let payload = &payload_src[(i * 7) % 64..][..p.payload_len.min(256 - (i * 7) % 64)];
            let payload: Vec<u8> = payload
                .iter()
                .copied()
                .cycle()
                .take(p.payload_len)
                .collect();
            let frame = RoceFrameRepr {
                eth: EthernetRepr {
                    src_addr: src_mac,
                    dst_addr: dst_mac,
                    ethertype: EtherType::Ipv4,
                },
                roce: RoceRepr {
                    ip: Ipv4Repr {
                        src_addr: src_ip,
                        dst_addr: dst_ip,
                        dscp: if is_cnp { 48 } else { 26 },
                        ecn: if is_cnp { Ecn::NotEct } else { p.ecn },
                        ident: 0x1000 + i as u16,
                        dont_frag: true,
                        ttl: 64,
                        protocol: IP_PROTO_UDP,
                        payload_len: 0,
                    },
                    udp: UdpRepr {
                        src_port,
                        dst_port: ROCEV2_UDP_PORT,
                        checksum: 0,
                        payload_len: 0,
                    },
                    bth,
                    ext: p.ext,
                    payload: &payload,
                    icrc: 0,
                },
            };
            let mut buf = vec![0u8; frame.buffer_len()];
            let n = frame.emit(&mut buf);
            buf.truncate(n);
            buf
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocast_core::wire::classify_frame;
    use rocast_eval::captures::Link;

    #[test]
    fn rel_time_formats() {
        assert_eq!(rel_time(5, 5), "0.000000");
        assert_eq!(rel_time(1_234_567_891, 0), "1.234567");
        assert_eq!(rel_time(0, 2_000_001_000), "-2.000001");
    }

    #[test]
    fn sample_frames_cover_every_known_opcode_and_verify() {
        let frames = sample_frames();
        let mut seen = std::collections::BTreeSet::new();
        for f in &frames {
            match classify_frame(f) {
                FrameClass::Roce {
                    frame,
                    icrc_ok: true,
                } => {
                    assert!(frame.roce.bth.opcode.is_known());
                    seen.insert(frame.roce.bth.opcode.0);
                }
                other => panic!("{other:?}"),
            }
        }
        let known: std::collections::BTreeSet<u8> =
            (0..=255u8).filter(|&o| Opcode(o).is_known()).collect();
        assert_eq!(seen, known);
        assert_eq!(sample_frames(), frames, "deterministic");
    }

    #[test]
    fn cooked_and_raw_links_become_ethernet() {
        let eth = &sample_frames()[4];
        let ip = &eth[ETHERNET_HEADER_LEN..];
        let mut scratch = Vec::new();
        let f = Link::RawIp.to_ethernet(ip, &mut scratch).to_vec();
        assert!(matches!(
            classify_frame(&f),
            FrameClass::Roce { icrc_ok: true, .. }
        ));
        let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 0x0a, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(ip);
        let f = Link::LinuxSll.to_ethernet(&sll, &mut scratch).to_vec();
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 0x0a]);
        assert!(matches!(
            classify_frame(&f),
            FrameClass::Roce { icrc_ok: true, .. }
        ));
        let mut sll2 = vec![
            0x08, 0x00, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 2, 0, 0, 0, 0, 0x0a, 0, 0,
        ];
        sll2.extend_from_slice(ip);
        let f = Link::LinuxSll2.to_ethernet(&sll2, &mut scratch).to_vec();
        assert!(matches!(
            classify_frame(&f),
            FrameClass::Roce { icrc_ok: true, .. }
        ));
        for short in [&sll[..5], &sll2[..19], &[][..]] {
            for link in [Link::RawIp, Link::LinuxSll, Link::LinuxSll2] {
                let f = link.to_ethernet(short, &mut scratch).to_vec();
                assert!(matches!(classify_frame(&f), FrameClass::NotRoce));
            }
        }
    }
}
