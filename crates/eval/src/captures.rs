//! Reading RoCEv2 captures, shared by `rocast pcap` and the Python package
//! (`rocast.pcap.read`): pcap and pcapng files of Ethernet, raw IP or Linux cooked
//! frames walked one record at a time, PEEL's shim (UDP 4793) taken off before the
//! frame is checked (its ICRC was computed without it), and each RoCE frame described
//! as a line of text or a JSON object (IBTA Vol 1 §9.2's headers, by field).

use rocast_core::wire::pcap::{PcapError, PcapStreamReader, LINKTYPE_ETHERNET, LINKTYPE_RAW};
use rocast_core::wire::peel::{strip_shim, PeelHeader, PEEL_UDP_PORT};
use rocast_core::wire::{
    classify_frame, AckSyndrome, AethRepr, Ecn, FrameClass, Ipv4Address, NakCode, Opcode,
    RoceFrameRepr, RoceRepr, ETHERNET_HEADER_LEN, ICRC_LEN, IPV4_HEADER_LEN, IP_PROTO_UDP,
    UDP_HEADER_LEN,
};
use std::fmt::Write as _;
use std::path::Path;

// ---------------------------------------------------------------------------------------
// Reading captures

const LINKTYPE_LINUX_SLL: u32 = 113;
const LINKTYPE_IPV4: u32 = 228;
const LINKTYPE_LINUX_SLL2: u32 = 276;

/// How a capture's link layer maps onto the Ethernet II frames `classify_frame` reads.
#[derive(Clone, Copy, Debug)]
pub enum Link {
    Ethernet,
    /// Raw IP (LINKTYPE_RAW 101, LINKTYPE_IPV4 228): the IP version nibble says which.
    RawIp,
    /// Linux cooked capture v1 (`tcpdump -i any`): 16-byte header, protocol at bytes 14-15.
    LinuxSll,
    /// Linux cooked capture v2: 20-byte header, protocol at bytes 0-1.
    LinuxSll2,
}

impl Link {
    pub fn from_linktype(linktype: u32) -> Option<Link> {
        match linktype {
            LINKTYPE_ETHERNET => Some(Link::Ethernet),
            LINKTYPE_RAW | LINKTYPE_IPV4 => Some(Link::RawIp),
            LINKTYPE_LINUX_SLL => Some(Link::LinuxSll),
            LINKTYPE_LINUX_SLL2 => Some(Link::LinuxSll2),
            _ => None,
        }
    }

    /// The frame as Ethernet II: `data` itself for Ethernet captures, otherwise a frame
    /// rebuilt in `scratch` (zero destination MAC, the cooked header's source address if
    /// it has one). A frame too short for its link header becomes empty (not RoCE).
    pub fn to_ethernet<'a>(self, data: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
        let (ethertype, src, body): (u16, &[u8], &[u8]) = match self {
            Link::Ethernet => return data,
            Link::RawIp => {
                let ethertype = match data.first().map(|b| b >> 4) {
                    Some(4) => 0x0800,
                    Some(6) => 0x86dd,
                    _ => 0,
                };
                (ethertype, &[], data)
            }
            Link::LinuxSll => {
                if data.len() < 16 {
                    return &[];
                }
                let alen = (u16::from_be_bytes([data[4], data[5]]) as usize).min(8);
                (
                    u16::from_be_bytes([data[14], data[15]]),
                    &data[6..6 + alen],
                    &data[16..],
                )
            }
            Link::LinuxSll2 => {
                if data.len() < 20 {
                    return &[];
                }
                let alen = (data[11] as usize).min(8);
                (
                    u16::from_be_bytes([data[0], data[1]]),
                    &data[12..12 + alen],
                    &data[20..],
                )
            }
        };
        let mut src_mac = [0u8; 6];
        let n = src.len().min(6);
        src_mac[..n].copy_from_slice(&src[..n]);
        scratch.clear();
        scratch.extend_from_slice(&[0u8; 6]);
        scratch.extend_from_slice(&src_mac);
        scratch.extend_from_slice(&ethertype.to_be_bytes());
        scratch.extend_from_slice(body);
        scratch
    }
}

/// One captured frame, as handed to a [`walk`] callback.
pub struct Frame<'a> {
    /// 1-based, as Wireshark numbers frames.
    pub number: usize,
    pub ts_ns: u64,
    pub orig_len: u32,
    /// Bytes captured (before any link-layer conversion).
    pub caplen: usize,
    /// The frame as Ethernet II; for a PEEL frame, without its shim (what the ICRC
    /// covers).
    pub eth: &'a [u8],
    /// The PEEL shim the frame carried on the wire (UDP 4793), if any.
    pub peel: Option<PeelHeader>,
}

impl Frame<'_> {
    /// A hint for malformed frames that were cut short by the capture's snap length.
    pub fn snap_note(&self) -> String {
        if self.orig_len as usize > self.caplen {
            format!(
                " (only {} of its {} bytes were captured)",
                self.caplen, self.orig_len
            )
        } else {
            String::new()
        }
    }
}

/// Reads `path` as a pcap capture and calls `f` on every frame, in order, until `f`
/// returns false. `Err` means the file could not be read at all (`f` was never called);
/// `Ok(Some(msg))` that reading stopped at a damaged record after the frames already
/// passed to `f`; `Ok(None)` that every record was read.
pub fn walk(
    path: &Path,
    mut f: impl FnMut(&Frame<'_>, FrameClass<'_>) -> bool,
) -> Result<Option<String>, String> {
    let name = path.display();
    // Streamed: one record in memory at a time, whatever the file's size.
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = PcapStreamReader::new(std::io::BufReader::new(file)).map_err(|e| match e {
        Err(e) => format!("cannot read {name}: {e}"),
        Ok(PcapError::BadMagic(m)) => {
            format!("{name} is not a pcap file (nor pcapng: magic {m:#010x})")
        }
        Ok(PcapError::TruncatedHeader) => {
            format!("{name} is not a pcap file: {size} bytes, shorter than the 24-byte file header")
        }
        Ok(e) => format!("{name}: {e}"),
    })?;
    let link = Link::from_linktype(reader.linktype).ok_or_else(|| {
        format!(
            "{name}: unsupported link type {} (supported: 1 Ethernet, 101/228 raw IP, 113/276 Linux cooked)",
            reader.linktype
        )
    })?;
    let mut scratch = Vec::new();
    let mut unshimmed = Vec::new();
    let mut i = 0;
    while let Some(rec) = reader.next_record() {
        match rec {
            Ok(rec) => {
                let eth = link.to_ethernet(rec.data, &mut scratch);
                let (eth, peel, class) = match unshim(eth, &mut unshimmed) {
                    Peel::No => (eth, None, classify_frame(eth)),
                    Peel::Bad(e) => (eth, None, FrameClass::Malformed(e)),
                    Peel::Shim(h) => (&unshimmed[..], Some(h), classify_frame(&unshimmed)),
                };
                let frame = Frame {
                    number: i + 1,
                    ts_ns: rec.ts_ns,
                    orig_len: rec.orig_len,
                    caplen: rec.data.len(),
                    eth,
                    peel,
                };
                if !f(&frame, class) {
                    break;
                }
                i += 1;
            }
            Err(Err(e)) => return Ok(Some(format!("{name}: read error after {i} frames: {e}"))),
            Err(Ok(PcapError::TruncatedRecord { index, offset })) => {
                return Ok(Some(format!(
                    "{name}: capture truncated: frame {} (record at byte offset {offset}) is incomplete; \
                     {index} complete frames were read",
                    index + 1
                )))
            }
            Err(Ok(PcapError::OversizedRecord { index, len, snaplen })) => {
                return Ok(Some(format!(
                    "{name}: capture corrupt: frame {} claims {len} bytes (snap length {snaplen}); \
                     {index} complete frames were read",
                    index + 1
                )))
            }
            Err(Ok(e)) => return Ok(Some(format!("{name}: {e}"))),
        }
    }
    Ok(None)
}

/// What [`unshim`] found.
enum Peel {
    /// Not an IPv4/UDP frame to [`PEEL_UDP_PORT`].
    No,
    /// To UDP 4793, but the framing or the shim does not parse.
    Bad(rocast_core::wire::Error),
    /// A PEEL frame: its shim; the frame without it is in the scratch buffer.
    Shim(PeelHeader),
}

/// A frame to UDP [`PEEL_UDP_PORT`] carries the PEEL shim between UDP and BTH, and its
/// ICRC was computed without it (`rocast_core::wire::peel`): strip it into `out` so
/// the frame checks and prints as the RoCEv2 frame a member receives.
fn unshim(eth: &[u8], out: &mut Vec<u8>) -> Peel {
    let udp_at = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN;
    let is_peel = eth.len() >= udp_at + 4
        && eth[12..14] == [0x08, 0x00]
        && eth[ETHERNET_HEADER_LEN] == 0x45
        && eth[ETHERNET_HEADER_LEN + 9] == IP_PROTO_UDP
        && u16::from_be_bytes([eth[udp_at + 2], eth[udp_at + 3]]) == PEEL_UDP_PORT;
    if !is_peel {
        return Peel::No;
    }
    match strip_shim(&eth[ETHERNET_HEADER_LEN..]) {
        Ok((h, ip)) => {
            out.clear();
            out.extend_from_slice(&eth[..ETHERNET_HEADER_LEN]);
            out.extend_from_slice(&ip);
            Peel::Shim(h)
        }
        Err(e) => Peel::Bad(e),
    }
}

/// The shim as `dump` prints it: `PEEL[len=2 value=0b01 pod=0 plane=0 SR]`.
pub fn peel_str(h: &PeelHeader) -> String {
    let mut s = format!(
        "PEEL[len={} value={:#b} pod={} plane={}",
        h.prefix_len, h.prefix_value, h.pod, h.plane
    );
    for (bit, name) in [
        (PeelHeader::CORE_REPLICATE, " CORE"),
        (PeelHeader::OVER_COVERED, " OVER"),
        (PeelHeader::SOURCE_RACK, " SRC-RACK"),
    ] {
        if h.flags & bit != 0 {
            s.push_str(name);
        }
    }
    s.push(']');
    s
}

/// The bytes from the IPv4 header up to (not including) the ICRC of a parsed frame.
pub fn icrc_covered<'a>(eth: &'a [u8], roce: &RoceRepr<'_>) -> Option<&'a [u8]> {
    let end = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN + roce.udp.payload_len;
    eth.get(ETHERNET_HEADER_LEN..end.checked_sub(ICRC_LEN)?)
}

/// One frame of `pcap dump --json`/`--jsonl` and `rocast.pcap.read`: [`frame_json`]
/// with `time_s`, seconds since `base_ns` (the first frame's time).
pub fn frame_record(
    fr: &Frame<'_>,
    class: &FrameClass<'_>,
    base_ns: u64,
) -> Option<serde_json::Value> {
    let mut j = frame_json(fr, class)?;
    j["time_s"] = serde_json::Value::from((fr.ts_ns as i128 - base_ns as i128) as f64 / 1e9);
    Some(j)
}

/// One frame's fields (None: not RoCE).
fn frame_json(fr: &Frame<'_>, class: &FrameClass<'_>) -> Option<serde_json::Value> {
    use serde_json::json;
    let mut j = match class {
        FrameClass::NotRoce => return None,
        FrameClass::Malformed(e) => {
            let (src, dst) = raw_ip_addrs(fr.eth);
            json!({"src": src.to_string(), "dst": dst.to_string(), "malformed": format!("{e}{}", fr.snap_note())})
        }
        FrameClass::Roce { frame, icrc_ok } => {
            let r = &frame.roce;
            let b = &r.bth;
            let flags = frame_flags(r);
            let e = &r.ext;
            let mut j = json!({
                "src": r.ip.src_addr.to_string(),
                "dst": r.ip.dst_addr.to_string(),
                "opcode": opcode_name(b.opcode),
                "opcode_code": b.opcode.0,
                "dest_qp": b.dest_qp,
                "psn": b.psn.value(),
                "flags": flags,
                "payload_len": r.payload.len(),
                "icrc_ok": icrc_ok,
            });
            if let Some(d) = e.deth {
                j["deth"] = json!({"qkey": d.qkey, "src_qp": d.src_qp});
            }
            if let Some(x) = e.reth {
                j["reth"] = json!({"va": x.va, "rkey": x.rkey, "dma_len": x.dma_len});
            }
            if let Some(a) = e.aeth {
                j["aeth"] = json!({"syndrome": aeth_str(&a), "msn": a.msn});
            }
            if let Some(a) = e.atomic_eth {
                j["atomic_eth"] = json!({"va": a.va, "rkey": a.rkey, "swap_add": a.swap_add, "compare": a.compare});
            }
            if let Some(a) = e.atomic_ack_eth {
                j["atomic_ack_eth"] = json!({"orig_data": a.orig_data});
            }
            if let Some(i) = e.imm {
                j["imm"] = json!(i);
            }
            if let Some(i) = e.ieth {
                j["ieth"] = json!(i);
            }
            if let Some(h) = &fr.peel {
                j["peel"] = json!({"prefix_len": h.prefix_len, "prefix_value": h.prefix_value,
                    "pod": h.pod, "plane": h.plane, "flags": h.flags});
            }
            j
        }
    };
    j["frame"] = json!(fr.number);
    Some(j)
}

/// Source and destination IPv4 addresses of a frame that may not parse.
pub fn raw_ip_addrs(eth: &[u8]) -> (String, String) {
    match eth.get(ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + IPV4_HEADER_LEN) {
        Some(ip) => (
            Ipv4Address(ip[12..16].try_into().unwrap()).to_string(),
            Ipv4Address(ip[16..20].try_into().unwrap()).to_string(),
        ),
        None => ("?".into(), "?".into()),
    }
}

pub fn opcode_name(op: Opcode) -> String {
    if op.is_known() {
        op.to_string()
    } else {
        format!("{} UNKNOWN(0x{:02x})", op.transport_name(), op.0)
    }
}

fn aeth_str(a: &AethRepr) -> String {
    let syndrome = match a.syndrome {
        AckSyndrome::Ack { credits } => format!("ACK credits={credits}"),
        AckSyndrome::RnrNak { timer } => format!("RNR NAK timer={timer}"),
        AckSyndrome::Nak(NakCode::Reserved(code)) => format!("NAK reserved code={code}"),
        AckSyndrome::Nak(code) => format!("NAK {}", code.name()),
        AckSyndrome::Reserved(b) => format!("reserved syndrome=0x{b:02x}"),
    };
    format!("AETH({syndrome} msn={})", a.msn)
}

/// The BTH and IP flags a frame has set, in dump order (text and JSON alike).
fn frame_flags(r: &RoceRepr<'_>) -> Vec<&'static str> {
    let b = &r.bth;
    [
        (b.ack_req, "AckReq"),
        (b.solicited, "SE"),
        (b.mig_req, "MigReq"),
        (b.resv8a & 0x80 != 0, "FECN"),
        (b.becn(), "BECN"),
        (r.ip.ecn == Ecn::Ce, "ECN-CE"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect()
}

/// One dump line (without frame number and time) for a parsed RoCE frame.
pub fn describe(frame: &RoceFrameRepr<'_>, icrc_ok: bool) -> String {
    let r = &frame.roce;
    let b = &r.bth;
    let mut s = format!(
        "{} → {} {} QP=0x{:06x} PSN={}",
        r.ip.src_addr,
        r.ip.dst_addr,
        opcode_name(b.opcode),
        b.dest_qp,
        b.psn
    );
    for name in frame_flags(r) {
        s.push(' ');
        s.push_str(name);
    }
    let e = &r.ext;
    if let Some(d) = e.deth {
        let _ = write!(s, " DETH(qkey=0x{:08x} srcQP=0x{:06x})", d.qkey, d.src_qp);
    }
    if let Some(x) = e.reth {
        let _ = write!(
            s,
            " RETH(va=0x{:x} rkey=0x{:x} len={})",
            x.va, x.rkey, x.dma_len
        );
    }
    if let Some(a) = e.atomic_eth {
        if b.opcode.0 & 0x1f == Opcode::RC_FETCH_ADD.0 {
            let _ = write!(
                s,
                " AtomicETH(va=0x{:x} rkey=0x{:x} add=0x{:x})",
                a.va, a.rkey, a.swap_add
            );
        } else {
            let _ = write!(
                s,
                " AtomicETH(va=0x{:x} rkey=0x{:x} swap=0x{:x} compare=0x{:x})",
                a.va, a.rkey, a.swap_add, a.compare
            );
        }
    }
    if let Some(a) = e.aeth {
        s.push(' ');
        s.push_str(&aeth_str(&a));
    }
    if let Some(a) = e.atomic_ack_eth {
        let _ = write!(s, " AtomicAckETH(orig=0x{:x})", a.orig_data);
    }
    if let Some(i) = e.imm {
        let _ = write!(s, " ImmDt=0x{i:08x}");
    }
    if let Some(i) = e.ieth {
        let _ = write!(s, " IETH(rkey=0x{i:08x})");
    }
    if let Some(c) = e.cnp_reserved {
        if c.iter().any(|&x| x != 0) {
            s.push_str(" CNP(reserved bytes nonzero)");
        }
    }
    let _ = write!(
        s,
        " len={} ICRC {}",
        r.payload.len(),
        if icrc_ok { "ok" } else { "BAD" }
    );
    s
}

/// Every RoCE frame of `path` (and every malformed one) as [`frame_json`]'s objects,
/// with `time_s` from the first frame, in capture order. `Err` names the file and why
/// it could not be read, or where it broke (a damaged capture is an error, not a
/// shorter answer). Memory: the objects of every RoCE frame (about 0.5 KB each).
pub fn read_frames_json(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    let mut first_ts: Option<u64> = None;
    let mut frames = Vec::new();
    let walked = walk(path, |fr, class| {
        let base = *first_ts.get_or_insert(fr.ts_ns);
        frames.extend(frame_record(fr, &class, base));
        true
    })?;
    match walked {
        None => Ok(frames),
        Some(msg) => Err(msg),
    }
}
