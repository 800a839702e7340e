//! The switch's data path compiled for a kernel fast path: a Cepheus
//! group's tree at this switch (Cepheus §III-B, the MFT and its bridging rewrites) as
//! a flat list of copies, and a reference model of what a fast path does with a frame.
//!
//! The pipeline ([`FrameSwitch`]) stays the one source of decisions. A fast path takes
//! over only the case where the pipeline's decision needs no state: a group's *new*
//! data packet (the PSN right after the highest forwarded) from the group's source on
//! its ack-out port. Every path below then gets a copy (no path can have acknowledged
//! a PSN not yet sent, so the AckPSN filter passes all), bridged to its member's
//! connection or passed as is toward a switch. Everything else — retransmissions,
//! feedback, CNPs, MRP, anything malformed or unusual — stays with the pipeline.
//!
//! [`FastPathGroup::forward`] is the model: the frames it makes are the pipeline's,
//! byte for byte, made the way a fast path makes them (header fields written, the IPv4
//! checksum summed, the ICRC updated incrementally: CRC-32 is linear, so only the
//! rewritten bytes' difference enters, [`icrc::crc0`]). The kernel program of
//! `rocast_net::fast_path` is generated to do the same steps, and tests hold all three
//! to the same frames. One documented difference: a fast path does not verify the
//! ICRC (a full CRC per frame is the cost it exists to avoid); a corrupted frame keeps
//! its wrong ICRC through the update, and the member's NIC drops it instead of this
//! switch.

use super::FrameSwitch;
use crate::fabric::cepheus::{Bridge, NextHop};
use crate::wire::{
    icrc, EthernetAddress, Ipv4Address, Ipv4Packet, Opcode, Psn, BTH_LEN, ETHERNET_HEADER_LEN,
    ICRC_LEN, IPV4_HEADER_LEN, IP_PROTO_UDP, RETH_LEN, ROCEV2_UDP_PORT, UDP_HEADER_LEN,
};

/// The most copies a compiled group may have (the kernel program is unrolled to it).
pub const FAST_PATH_MAX_COPIES: usize = 16;
/// Bytes of the ICRC's input (8 bytes of 0xFF, then the IP packet) through the BTH's
/// destination QP: the fixed rewrites of a bridge and the IP ident lie in them. Every
/// RoCE packet is longer, so each change is this window's `crc0` followed by zeros.
pub const ICRC_WINDOW: usize = 8 + 36;
/// The window through the RETH (VA and R_Key rewritten for WRITE groups); only packets
/// with a RETH, which are longer still, use it.
pub const ICRC_RETH_WINDOW: usize = 8 + 52;
/// The largest IP packet a compiled group forwards (jumbo frames).
pub const FAST_PATH_MAX_IP_LEN: usize = 9216;

const ETH: usize = ETHERNET_HEADER_LEN;
const IP_IDENT: usize = 4;
const IP_SRC: usize = 12;
const IP_DST: usize = 16;
const BTH: usize = IPV4_HEADER_LEN + UDP_HEADER_LEN;
const BTH_DEST_QP: usize = BTH + 5;
const BTH_PSN: usize = BTH + 9;
const RETH: usize = BTH + BTH_LEN;
/// The shortest RoCE packet: IPv4, UDP and BTH headers and the ICRC.
pub const MIN_IP_LEN: usize = BTH + BTH_LEN + ICRC_LEN;

/// An opcode a fast path forwards: RC SEND or WRITE without an IETH (the data a
/// Cepheus group carries), read from the core's table of extended headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataOpcode {
    pub has_reth: bool,
    /// Bytes of extended headers (RETH, ImmDt) between the BTH and the payload.
    pub ext_len: usize,
}

/// [`DataOpcode`] of `op`, or None when a fast path leaves `op` to the pipeline.
pub fn data_opcode(op: u8) -> Option<DataOpcode> {
    let o = Opcode(op);
    if op > Opcode::RC_WRITE_ONLY_IMM.0 || !(o.is_send() || o.is_write()) {
        return None;
    }
    let l = o.layout()?;
    Some(DataOpcode {
        has_reth: l.has_reth,
        ext_len: if l.has_reth { RETH_LEN } else { 0 } + if l.has_imm { 4 } else { 0 },
    })
}

/// The fields of a frame that make it a group's data from a source, before any check
/// against a compiled group: plain IPv4 header, UDP to the RoCE port, a [`data_opcode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceData {
    pub group: Ipv4Address,
    pub src_ip: Ipv4Address,
    pub dest_qp: u32,
    pub psn: Psn,
    pub opcode: DataOpcode,
}

/// [`SourceData`] of `frame`, or None for any other frame.
pub fn source_data(frame: &[u8]) -> Option<SourceData> {
    if frame.len() < ETH + MIN_IP_LEN || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[ETH..];
    if ip[0] != 0x45 || ip[9] != IP_PROTO_UDP || be16(ip, BTH - 6) != ROCEV2_UDP_PORT as usize {
        return None;
    }
    let be24 = |at: usize| u32::from_be_bytes([0, ip[at], ip[at + 1], ip[at + 2]]);
    let addr = |at: usize| Ipv4Address([ip[at], ip[at + 1], ip[at + 2], ip[at + 3]]);
    Some(SourceData {
        group: addr(IP_DST),
        src_ip: addr(IP_SRC),
        dest_qp: be24(BTH_DEST_QP),
        psn: Psn::new(be24(BTH_PSN)),
        opcode: data_opcode(ip[BTH])?,
    })
}

/// One copy the fast path makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastPathCopy {
    pub port: u16,
    pub dst_mac: EthernetAddress,
    pub src_mac: EthernetAddress,
    /// The bridging rewrite toward a member host; `None` toward a switch (the packet
    /// as it is, to the broadcast MAC).
    pub bridge: Option<Bridge>,
    /// The `crc0` over the [`ICRC_WINDOW`] of what `bridge` changes in every packet of
    /// the group (source and destination address, destination QP); the per-packet
    /// parts (IP ident, RETH) come from [`icrc_table_entry`].
    pub crc_const: u32,
}

impl FastPathCopy {
    /// [`FastPathCopy::crc_const`] for a packet from `src_ip` to group `group_mcst`'s
    /// QP `group_qp`.
    fn crc_const(
        bridge: Option<Bridge>,
        src_ip: Ipv4Address,
        group_mcst: Ipv4Address,
        group_qp: u32,
    ) -> u32 {
        let Some(b) = bridge else { return 0 };
        let mut w = [0u8; ICRC_WINDOW];
        for (k, (x, y)) in src_ip.0.iter().zip(b.mcst_id.0).enumerate() {
            w[8 + IP_SRC + k] = x ^ y;
        }
        for (k, (x, y)) in group_mcst.0.iter().zip(b.dst_ip.0).enumerate() {
            w[8 + IP_DST + k] = x ^ y;
        }
        let (q0, q1) = (group_qp.to_be_bytes(), b.dst_qp.to_be_bytes());
        for k in 0..3 {
            w[8 + BTH_DEST_QP + k] = q0[k + 1] ^ q1[k + 1];
        }
        icrc::crc0(&w)
    }
}

/// The contribution of a difference `v` in per-packet byte `slot` (see
/// [`icrc_window_positions`]) to its window's [`icrc::crc0`]: the table a fast path
/// looks those bytes up in.
pub fn icrc_table_entry(slot: usize, v: u8) -> u32 {
    let window = if slot < 2 {
        ICRC_WINDOW
    } else {
        ICRC_RETH_WINDOW
    };
    let pos = icrc_window_positions()[slot];
    icrc::multmodp(icrc::zeros_op(window - 1 - pos), icrc::crc0(&[v]))
}

/// Window positions of the bytes that change per packet, in the order of the fast
/// path's table: the IP ident (2, in [`ICRC_WINDOW`]), the RETH's VA (8) and R_Key (4)
/// (in [`ICRC_RETH_WINDOW`]).
pub fn icrc_window_positions() -> [usize; 14] {
    let mut p = [0usize; 14];
    for (k, slot) in p.iter_mut().enumerate() {
        *slot = 8 + if k < 2 { IP_IDENT + k } else { RETH + k - 2 };
    }
    p
}

/// A group's tree at this switch, as the fast path holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastPathGroup {
    pub mcst_id: Ipv4Address,
    /// Where the group's data arrives (the MFT's ack-out port).
    pub in_port: u16,
    /// The source's address and the QP it sends to: a packet with others goes to the
    /// pipeline (the fixed part of each copy's ICRC change assumes these).
    pub src_ip: Ipv4Address,
    pub group_qp: u32,
    /// Toward switches first (their copies leave before any bridging rewrite), then
    /// member hosts, each in MFT order.
    pub copies: Vec<FastPathCopy>,
}

/// What the fast path does with a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FastPathVerdict {
    /// Not the group's new data: the pipeline decides.
    Defer,
    /// The copies, with the PSN that becomes the group's highest.
    Forward {
        psn: Psn,
        frames: Vec<(u16, Vec<u8>)>,
    },
}

/// Why a group cannot be compiled now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotCompiled {
    NoGroup,
    /// The MFT has no ack-out port on the tree (the source's side is not known).
    NoSource,
    /// A member host's MAC is not known on its port.
    UnknownMac,
    TooManyCopies,
}

impl FrameSwitch {
    /// Compiles group `mcst_id`'s tree for a fast path, for data from `src_ip` to QP
    /// `group_qp` (the source's packets).
    pub fn fast_path_group(
        &self,
        mcst_id: Ipv4Address,
        src_ip: Ipv4Address,
        group_qp: u32,
    ) -> Result<FastPathGroup, NotCompiled> {
        let g = self.cepheus().group(mcst_id).ok_or(NotCompiled::NoGroup)?;
        let in_port = g
            .ack_out_port
            .filter(|&p| g.entry(p).is_some())
            .ok_or(NotCompiled::NoSource)?;
        // Only the registered source's data is the group's (the pipeline drops the
        // rest): a kernel program for another sender would forward what it refuses.
        if self
            .group_source(mcst_id)
            .is_some_and(|source| source != (src_ip, in_port))
        {
            return Err(NotCompiled::NoSource);
        }
        let mut to_switches = Vec::new();
        let mut to_hosts = Vec::new();
        for e in g.entries().iter().filter(|e| e.port != in_port) {
            let src_mac = self.port_mac(e.port);
            match e.next_hop {
                NextHop::Switch => to_switches.push(FastPathCopy {
                    port: e.port,
                    dst_mac: EthernetAddress::BROADCAST,
                    src_mac,
                    bridge: None,
                    crc_const: 0,
                }),
                NextHop::Host { ip, qpn, region } => {
                    let dst_mac = self
                        .peek_next_hop_mac(e.port, ip)
                        .ok_or(NotCompiled::UnknownMac)?;
                    let bridge = Some(Bridge {
                        mcst_id,
                        dst_ip: ip,
                        dst_qp: qpn,
                        region,
                    });
                    to_hosts.push(FastPathCopy {
                        port: e.port,
                        dst_mac,
                        src_mac,
                        bridge,
                        crc_const: FastPathCopy::crc_const(bridge, src_ip, mcst_id, group_qp),
                    });
                }
            }
        }
        to_switches.extend(to_hosts);
        if to_switches.len() > FAST_PATH_MAX_COPIES {
            return Err(NotCompiled::TooManyCopies);
        }
        Ok(FastPathGroup {
            mcst_id,
            in_port,
            src_ip,
            group_qp,
            copies: to_switches,
        })
    }
}

fn be16(b: &[u8], at: usize) -> usize {
    u16::from_be_bytes([b[at], b[at + 1]]) as usize
}

/// The checks that make a frame the group's fast-path data (the kernel program makes
/// the same ones): returns (PSN, whether it has a RETH).
fn classify(g: &FastPathGroup, high_psn: Psn, frame: &[u8]) -> Option<(Psn, bool)> {
    let d = source_data(frame)?;
    let ip = &frame[ETH..];
    let total = be16(ip, 2);
    // Exact lengths, no fragment (only DF may be set), the compiled source and QP.
    if d.group != g.mcst_id
        || total != frame.len() - ETH
        || total > FAST_PATH_MAX_IP_LEN
        || be16(ip, BTH - 4) != total - IPV4_HEADER_LEN
        || (ip[6] & 0xbf) != 0
        || ip[7] != 0
        || d.src_ip != g.src_ip
        || d.dest_qp != g.group_qp
    {
        return None;
    }
    let pad = ((ip[BTH + 1] >> 4) & 3) as usize;
    if total < MIN_IP_LEN + d.opcode.ext_len + pad {
        return None;
    }
    // Pad bytes as the pipeline re-emits them (zeros).
    if ip[total - ICRC_LEN - pad..total - ICRC_LEN]
        .iter()
        .any(|&b| b != 0)
    {
        return None;
    }
    // The next PSN after the highest forwarded, and nothing further ahead: a frame
    // further ahead means frames between are still with the daemon (or lost before
    // this switch), and forwarding it would overtake them.
    if d.psn.distance_from(high_psn) != 1 {
        return None;
    }
    Some((d.psn, d.opcode.has_reth))
}

impl FastPathGroup {
    /// What the fast path does with `frame`, given the highest PSN forwarded so far.
    pub fn forward(&self, high_psn: Psn, frame: &[u8]) -> FastPathVerdict {
        let Some((psn, reth)) = classify(self, high_psn, frame) else {
            return FastPathVerdict::Defer;
        };
        let total = frame.len() - ETH;
        // The zeros after each window, to the ICRC, as operators (one per packet).
        let zeros = 8 + total - ICRC_LEN - ICRC_WINDOW;
        let op = icrc::zeros_op(zeros);
        // A packet with a RETH is long enough for the longer window.
        let op_reth = reth.then(|| icrc::zeros_op(zeros + ICRC_WINDOW - ICRC_RETH_WINDOW));
        let orig_icrc = u32::from_le_bytes(frame[frame.len() - 4..].try_into().unwrap());
        let ip0 = &frame[ETH..];
        // The IP ident becomes 0 on every bridged copy.
        let ident = icrc_table_entry(0, ip0[IP_IDENT]) ^ icrc_table_entry(1, ip0[IP_IDENT + 1]);
        let mut frames = Vec::with_capacity(self.copies.len());
        for c in &self.copies {
            let mut f = frame.to_vec();
            f[0..6].copy_from_slice(&c.dst_mac.0);
            f[6..12].copy_from_slice(&c.src_mac.0);
            if let Some(b) = c.bridge {
                let ip = &mut f[ETH..];
                ip[IP_IDENT..IP_IDENT + 2].fill(0);
                ip[IP_SRC..IP_SRC + 4].copy_from_slice(&b.mcst_id.0);
                ip[IP_DST..IP_DST + 4].copy_from_slice(&b.dst_ip.0);
                ip[BTH_DEST_QP..BTH_DEST_QP + 3].copy_from_slice(&b.dst_qp.to_be_bytes()[1..]);
                let mut delta = icrc::multmodp(op, c.crc_const ^ ident);
                if let (Some(op_reth), Some((va, rkey))) = (op_reth, b.region) {
                    let old: [u8; 12] = ip[RETH..RETH + 12].try_into().unwrap();
                    let new_va = va.wrapping_add(u64::from_be_bytes(old[..8].try_into().unwrap()));
                    ip[RETH..RETH + 8].copy_from_slice(&new_va.to_be_bytes());
                    ip[RETH + 8..RETH + 12].copy_from_slice(&rkey.to_be_bytes());
                    let reth: u32 = (0..12)
                        .map(|k| icrc_table_entry(2 + k, old[k] ^ ip[RETH + k]))
                        .fold(0, |a, b| a ^ b);
                    delta ^= icrc::multmodp(op_reth, reth);
                }
                Ipv4Packet::new_unchecked(&mut ip[..IPV4_HEADER_LEN]).fill_checksum();
                let n = f.len();
                f[n - 4..].copy_from_slice(&(orig_icrc ^ delta).to_le_bytes());
            }
            frames.push((c.port, f));
        }
        FastPathVerdict::Forward { psn, frames }
    }
}

/// The McstID of [`sample_switch`]'s group.
pub const SAMPLE_MCST: Ipv4Address = Ipv4Address::new(10, 77, 0, 200);

/// Host h_p of [`sample_switch`]: 10.77.0.(p+1).
pub fn sample_host_ip(p: u16) -> Ipv4Address {
    Ipv4Address::new(10, 77, 0, p as u8 + 1)
}

/// Host h_p's MAC: 02:72:63:00:00:(p+1).
pub fn sample_host_mac(p: u16) -> EthernetAddress {
    EthernetAddress([2, 0x72, 0x63, 0, 0, p as u8 + 1])
}

/// The stage [`sample_frames`] is sent on: a 4-port switch with hosts h0..h3 pinned
/// on the ports `hosts` gives ((host, port) pairs), `switch_ports` facing switches,
/// and the group [`SAMPLE_MCST`] h0 → h1..h3 registered by h0 over MRP, each member
/// with a WRITE region; no data yet.
pub fn sample_switch(switch_ports: Vec<u16>, hosts: [(u16, u16); 4]) -> FrameSwitch {
    use crate::control::registration::GroupSpec;
    use crate::fabric::cepheus::{ForwardAllCnp, GroupAddressSpace};
    use crate::switch::FrameSwitchConfig;
    use crate::time::Instant;
    use crate::wire::mrp::{MrpMember, MRP_UDP_PORT};
    use crate::wire::{EtherType, EthernetFrame, EthernetRepr, ETHERNET_HEADER_LEN};
    let (ip, mac) = (sample_host_ip, sample_host_mac);
    const MCST: Ipv4Address = SAMPLE_MCST;
    let now = || Instant::from_ps(1_000_000);
    let mut sw = FrameSwitch::new(
        FrameSwitchConfig {
            switch_id: 9,
            group_lease: None,
            switch_ports,
            ..FrameSwitchConfig::new(4)
        },
        Box::new(ForwardAllCnp),
    );
    for (h, port) in hosts {
        sw.add_host(ip(h), port, mac(h)).unwrap();
    }
    let member = |p: u16| MrpMember {
        ip: ip(p),
        qpn: 0x100 + p as u32,
        region: Some((0x7f00_0000_0000 + 0x10_0000 * p as u64, 0x5500 + p as u32)),
    };
    let space = GroupAddressSpace::parse("10.77.0.128/25").unwrap();
    let spec = GroupSpec::in_space(space, MCST, member(0), (1..4).map(member).collect()).unwrap();
    for m in spec.mrp_packets() {
        let mut body = vec![0u8; m.buffer_len()];
        m.emit(&mut body);
        let ipb = FrameSwitch::udp_packet(ip(0), MCST, MRP_UDP_PORT, &body);
        let mut f = vec![0u8; ETHERNET_HEADER_LEN + ipb.len()];
        EthernetRepr {
            src_addr: mac(0),
            dst_addr: sw.port_mac(0),
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        f[ETHERNET_HEADER_LEN..].copy_from_slice(&ipb);
        sw.handle_frame(now(), 0, &f);
        let mut buf = vec![0u8; 2048];
        while sw.poll_transmit(now(), &mut buf).is_some() {}
    }
    sw
}

/// A recorded-style corpus of a source's frames to group `mcst` (PSNs from
/// `first_psn`), for holding a fast path to the pipeline: every RC SEND and WRITE
/// opcode, pads, immediates, RETHs, payloads from 0 bytes to a 4 KB MTU, a non-zero IP
/// ident and UDP checksum, ECN marks; and the frames a fast path must leave to the
/// pipeline: a retransmission, another source, another QP, non-zero pad bytes, link
/// padding, an IP option, a fragment, a read request. The last frame is new data with
/// a corrupted ICRC (see the module docs).
pub fn sample_frames(
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src_ip: Ipv4Address,
    mcst: Ipv4Address,
    group_qp: u32,
    first_psn: u32,
) -> Vec<Vec<u8>> {
    use crate::wire::{
        BthRepr, Ecn, EtherType, EthernetFrame, EthernetRepr, ExtHeaders, Opcode, RethRepr,
        RoceRepr, ETHERNET_HEADER_LEN,
    };
    let payload: Vec<u8> = (0..4096u32).map(|i| (i * 31 + 7) as u8).collect();
    let frame_of = |r: &RoceRepr<'_>| {
        let mut f = vec![0u8; ETHERNET_HEADER_LEN + r.buffer_len()];
        EthernetRepr {
            src_addr: src_mac,
            dst_addr: dst_mac,
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        r.emit(&mut f[ETHERNET_HEADER_LEN..]);
        f
    };
    let mut psn = first_psn;
    let mut out = Vec::new();
    let data = |psn: u32, op: Opcode, len: usize, pad: u8, tweak: &dyn Fn(&mut RoceRepr<'_>)| {
        let mut bth = BthRepr::new(op, group_qp, Psn::new(psn));
        bth.pad_count = pad;
        bth.ack_req = op.0.is_multiple_of(2);
        let mut ext = ExtHeaders::default();
        if matches!(op.0, 0x06 | 0x0a | 0x0b) {
            ext.reth = Some(RethRepr {
                va: 0x1000 * psn as u64 + 0xfff0_0000_0000,
                rkey: 0xaabb_0000 | psn,
                dma_len: 8192,
            });
        }
        if matches!(op.0, 0x03 | 0x05 | 0x09 | 0x0b) {
            ext.imm = Some(0xdead_0000 | psn);
        }
        let mut r = RoceRepr::new(
            src_ip,
            mcst,
            26,
            Ecn::Ect0,
            49152,
            bth,
            ext,
            &payload[..len],
        );
        tweak(&mut r);
        frame_of(&r)
    };
    let next = |p: &mut u32| {
        let v = *p;
        *p = (v + 1) & 0xff_ffff;
        v
    };
    let none = |_: &mut RoceRepr<'_>| {};
    for (op, len, pad) in [
        (Opcode::RC_SEND_FIRST, 4096, 0),
        (Opcode::RC_SEND_MIDDLE, 1024, 0),
        (Opcode::RC_SEND_LAST, 61, 3),
        (Opcode::RC_SEND_ONLY, 0, 0),
        (Opcode::RC_SEND_ONLY_IMM, 2, 2),
        (Opcode::RC_SEND_FIRST, 1024, 0),
        (Opcode::RC_SEND_LAST_IMM, 511, 1),
        (Opcode::RC_WRITE_FIRST, 4096, 0),
        (Opcode::RC_WRITE_MIDDLE, 4096, 0),
        (Opcode::RC_WRITE_LAST, 100, 0),
        (Opcode::RC_WRITE_ONLY, 64, 0),
        (Opcode::RC_WRITE_ONLY_IMM, 1, 3),
        (Opcode::RC_WRITE_FIRST, 256, 0),
        (Opcode::RC_WRITE_LAST_IMM, 256, 0),
    ] {
        out.push(data(next(&mut psn), op, len, pad, &none));
    }
    // Fields the rewrite must handle or keep: an IP ident, a UDP checksum, CE.
    out.push(data(next(&mut psn), Opcode::RC_SEND_ONLY, 300, 0, &|r| {
        r.ip.ident = 0xbeef
    }));
    out.push(data(next(&mut psn), Opcode::RC_WRITE_ONLY, 300, 0, &|r| {
        r.ip.ident = 0x0100
    }));
    out.push(data(next(&mut psn), Opcode::RC_SEND_ONLY, 300, 0, &|r| {
        r.udp.checksum = 0x1234
    }));
    out.push(data(next(&mut psn), Opcode::RC_SEND_ONLY, 300, 0, &|r| {
        r.ip.ecn = Ecn::Ce
    }));
    // For the pipeline: a retransmission (the PSN of the first frame again) ...
    out.push(data(first_psn, Opcode::RC_SEND_FIRST, 4096, 0, &none));
    // ... another source, another QP, a read request (frames the pipeline drops, or
    // not of the source's stream, carry the next PSN without taking it: the stream
    // the fast path sees stays in sequence) ...
    out.push(data(psn, Opcode::RC_SEND_ONLY, 64, 0, &|r| {
        r.ip.src_addr = Ipv4Address::new(198, 51, 100, 9)
    }));
    out.push(data(psn, Opcode::RC_SEND_ONLY, 64, 0, &|r| {
        r.bth.dest_qp = group_qp ^ 0x40
    }));
    out.push(data(psn, Opcode::RC_READ_REQUEST, 0, 0, &|r| {
        r.ext.reth = Some(RethRepr {
            va: 0,
            rkey: 1,
            dma_len: 64,
        })
    }));
    // ... non-zero pad bytes, link padding, an IP option, a fragment.
    let mut f = data(next(&mut psn), Opcode::RC_SEND_ONLY, 61, 3, &none);
    let n = f.len();
    f[n - 5] = 0xee;
    crate::wire::icrc::fill(&mut f[ETHERNET_HEADER_LEN..]).unwrap();
    out.push(f);
    let mut f = data(next(&mut psn), Opcode::RC_SEND_ONLY, 8, 0, &none);
    f.extend_from_slice(&[0u8; 6]);
    out.push(f);
    let mut f = data(psn, Opcode::RC_SEND_ONLY, 64, 0, &none);
    f[ETHERNET_HEADER_LEN] = 0x46;
    f.splice(
        ETHERNET_HEADER_LEN + 20..ETHERNET_HEADER_LEN + 20,
        [1u8, 1, 1, 0],
    );
    let total = (f.len() - ETHERNET_HEADER_LEN) as u16;
    f[ETHERNET_HEADER_LEN + 2..ETHERNET_HEADER_LEN + 4].copy_from_slice(&total.to_be_bytes());
    out.push(f);
    out.push(data(next(&mut psn), Opcode::RC_SEND_ONLY, 64, 0, &|r| {
        r.ip.dont_frag = false
    }));
    let mut f = data(psn, Opcode::RC_SEND_ONLY, 64, 0, &none);
    f[ETHERNET_HEADER_LEN + 6] |= 0x20; // MF
    out.push(f);
    // New data with a corrupted ICRC.
    let mut f = data(next(&mut psn), Opcode::RC_SEND_ONLY, 128, 0, &none);
    let n = f.len();
    f[n - 1] ^= 0x5a;
    out.push(f);
    out
}

#[cfg(test)]
mod tests;
