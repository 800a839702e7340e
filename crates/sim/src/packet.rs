//! The simulator's packet: a compact record of the header fields an `rnic` endpoint
//! emitted, plus the payload *length*. Switches only read and rewrite these fields;
//! hosts turn the record back into a [`RoceRepr`] for `RcQueuePair::handle_repr`; and a
//! capture serialises it to real bytes (Ethernet, IPv4, UDP, BTH.., zero payload, ICRC)
//! only when asked. Payload content is not modelled: simulated flows are
//! `Payload::Zeros`, so the bytes a capture writes are exactly the bytes the endpoint
//! would have put on a wire.
//!
//! Memory: 96 bytes per packet record; records live in a reusable slab.

#[cfg(test)]
use rocast_core::fabric::cepheus::Bridge;
use rocast_core::fabric::cepheus::BridgedHeaders;
use rocast_core::wire::{
    AckSyndrome, AethRepr, BthRepr, Ecn, ExtHeaders, Ipv4Address, Opcode, Psn, RethRepr, RoceRepr,
};

/// Ethernet header, FCS, preamble and inter-frame gap: what a frame costs on a link
/// beyond its IP packet.
pub const FRAME_OVERHEAD: u32 = 14 + 4 + 8 + 12;

const F_ACK_REQ: u8 = 1;
const F_RETH: u8 = 2;
const F_IMM: u8 = 4;
const F_AETH: u8 = 8;
const F_CNP: u8 = 16;
const F_SACK: u8 = 32;
const F_BECN: u8 = 64;
const F_LABEL: u8 = 128;

/// Bytes PEEL's shim adds between UDP and BTH (`wire::peel`).
pub const PEEL_SHIM_LEN: u16 = rocast_core::wire::peel::PEEL_HEADER_LEN as u16;

/// The record is laid out by hand (`repr(C)`): every field but the rarely used SACK
/// bitmap sits in its first 64 bytes. (Aligning records to 64 bytes, so that a touch
/// reads one cache line, was tried: 128 bytes a record doubled the last-level misses
/// under cachegrind, so records stay 96 bytes.)
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct SimPacket {
    pub reth_va: u64,
    pub src_ip: u32,
    pub dst_ip: u32,
    pub dest_qp: u32,
    pub psn: u32,
    pub reth_rkey: u32,
    pub reth_len: u32,
    pub imm: u32,
    pub msn: u32,
    /// IP packet length (IP header through ICRC).
    pub ip_len: u16,
    pub payload_len: u16,
    pub sport: u16,
    /// Unused (it held the arrival port, which nothing read): keeps the hand layout
    /// at 96 bytes with the SACK bitmap where the layout test pins it.
    reserved: u16,
    /// Tree multicast: the copy's label (`tree_multicast`), valid with `F_LABEL`.
    pub label: u16,
    pub opcode: u8,
    pub flags: u8,
    pub pad: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub syndrome: u8,
    /// Traffic class the fabric queues it in.
    pub class: u8,
    /// Bytes of tree-multicast header the copy carries between UDP and BTH (PEEL's
    /// shim, Orca's Bloom filter), counted in `ip_len`.
    pub header: u8,
    /// A SACK-carrying ACK's bitmap (valid with `F_SACK`), past the first cache line.
    pub sack: [u8; 32],
}

/// Class of ACK/NAK/CNP: served first, never paused, outside the shared buffer (as the
/// HPCC simulator's queue 0).
pub const CONTROL_CLASS: u8 = 7;

/// The class a data packet with this DSCP queues in: its class selector (DSCP >> 3),
/// below the control class.
pub fn traffic_class(dscp: u8) -> u8 {
    (dscp >> 3).min(CONTROL_CLASS - 1)
}

impl SimPacket {
    pub fn from_repr(r: &RoceRepr<'_>) -> Self {
        let mut flags = 0;
        if r.bth.ack_req {
            flags |= F_ACK_REQ;
        }
        if r.bth.resv8a & 0x40 != 0 {
            flags |= F_BECN;
        }
        let (mut va, mut rkey, mut dlen) = (0, 0, 0);
        if let Some(reth) = r.ext.reth {
            flags |= F_RETH;
            (va, rkey, dlen) = (reth.va, reth.rkey, reth.dma_len);
        }
        let mut imm = 0;
        if let Some(i) = r.ext.imm {
            flags |= F_IMM;
            imm = i;
        }
        let (mut msn, mut syndrome) = (0, 0);
        if let Some(a) = r.ext.aeth {
            flags |= F_AETH;
            msn = a.msn;
            syndrome = a.syndrome.to_byte();
        }
        if r.ext.cnp_reserved.is_some() {
            flags |= F_CNP;
        }
        let mut sack = [0u8; 32];
        let control = r.bth.opcode == Opcode::CNP || r.ext.aeth.is_some();
        if control && r.payload.len() == 32 {
            flags |= F_SACK;
            sack.copy_from_slice(r.payload);
        }
        SimPacket {
            src_ip: r.ip.src_addr.to_u32(),
            dst_ip: r.ip.dst_addr.to_u32(),
            dest_qp: r.bth.dest_qp,
            psn: r.bth.psn.value(),
            reth_va: va,
            reth_rkey: rkey,
            reth_len: dlen,
            imm,
            msn,
            ip_len: r.buffer_len() as u16,
            payload_len: r.payload.len() as u16,
            sport: r.udp.src_port,
            reserved: 0,
            opcode: r.bth.opcode.0,
            flags,
            pad: r.bth.pad_count,
            dscp: r.ip.dscp,
            ecn: r.ip.ecn.bits(),
            syndrome,
            class: if control {
                CONTROL_CLASS
            } else {
                traffic_class(r.ip.dscp)
            },
            label: 0,
            header: 0,
            sack,
        }
    }

    /// The tree-multicast label this copy carries, if any.
    pub fn label(&self) -> Option<u16> {
        (self.flags & F_LABEL != 0).then_some(self.label)
    }

    /// Labels the copy; `header` is the bytes the label's header occupies on the wire
    /// (PEEL's 8-byte shim, Orca's Bloom filter, 0 for none; `ip_len` follows).
    pub fn set_label(&mut self, label: u16, header: u8) {
        self.set_header(header);
        self.flags |= F_LABEL;
        self.label = label;
    }

    /// Removes the label and any header (at the member's NIC).
    pub fn clear_label(&mut self) {
        self.set_header(0);
        self.flags &= !F_LABEL;
        self.label = 0;
    }

    fn set_header(&mut self, bytes: u8) {
        self.ip_len = self.ip_len - self.header as u16 + bytes as u16;
        self.header = bytes;
    }

    /// An ACK, NAK or CNP.
    pub fn flags_feedback(&self) -> bool {
        self.flags & (F_AETH | F_CNP) != 0
    }

    /// A data packet with payload bytes (not an ACK, NAK or CNP).
    pub fn is_data(&self) -> bool {
        self.flags & (F_AETH | F_CNP) == 0 && self.payload_len > 0
    }

    /// Bytes the frame occupies on a link.
    #[inline]
    pub fn wire_len(&self) -> u32 {
        self.ip_len as u32 + FRAME_OVERHEAD
    }
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.ecn)
    }
    pub fn set_ce(&mut self) {
        self.ecn = Ecn::Ce.bits();
    }

    /// The packet as the endpoint's parsed view (payload: zeros, or the SACK bitmap).
    pub fn to_repr(&self) -> RoceRepr<'_> {
        let mut bth = BthRepr::new(Opcode(self.opcode), self.dest_qp, Psn::new(self.psn));
        bth.ack_req = self.flags & F_ACK_REQ != 0;
        bth.pad_count = self.pad;
        if self.flags & F_BECN != 0 {
            bth.resv8a = 0x40;
        }
        let mut ext = ExtHeaders::default();
        if self.flags & F_RETH != 0 {
            ext.reth = Some(RethRepr {
                va: self.reth_va,
                rkey: self.reth_rkey,
                dma_len: self.reth_len,
            });
        }
        if self.flags & F_IMM != 0 {
            ext.imm = Some(self.imm);
        }
        if self.flags & F_AETH != 0 {
            ext.aeth = Some(AethRepr {
                syndrome: AckSyndrome::from_byte(self.syndrome),
                msn: self.msn,
            });
        }
        if self.flags & F_CNP != 0 {
            ext.cnp_reserved = Some([0; 16]);
        }
        let payload: &[u8] = if self.flags & F_SACK != 0 {
            &self.sack
        } else {
            rocast_core::rnic::zero_bytes(self.payload_len as usize)
        };
        let mut r = RoceRepr::new(
            Ipv4Address::from_u32(self.src_ip),
            Ipv4Address::from_u32(self.dst_ip),
            self.dscp,
            self.ecn(),
            self.sport,
            bth,
            ext,
            payload,
        );
        r.bth.pkey = 0xffff;
        r
    }

    /// The full Ethernet frame (for captures): `buf` is cleared and filled.
    pub fn write_frame(&self, src_mac: [u8; 6], dst_mac: [u8; 6], buf: &mut Vec<u8>) {
        let repr = self.to_repr();
        buf.clear();
        buf.extend_from_slice(&dst_mac);
        buf.extend_from_slice(&src_mac);
        buf.extend_from_slice(&0x0800u16.to_be_bytes());
        let start = buf.len();
        buf.resize(start + repr.buffer_len(), 0);
        repr.emit(&mut buf[start..]);
    }
}

/// The simulator's host addressing, as the HPCC simulator's: host `id` is
/// 11.(id/256).(id%256).1. Past 65,535 hosts the id carries on into the first octet
/// (host 65,536 is 12.0.0.1), up to [`MAX_SIM_HOSTS`].
pub fn host_ip(id: u32) -> u32 {
    debug_assert!(id < MAX_SIM_HOSTS);
    0x0b00_0001 + (id << 8)
}
/// The host id of a simulator address (the inverse of [`host_ip`]).
pub fn host_of_ip(ip: u32) -> u32 {
    ip.wrapping_sub(0x0b00_0001) >> 8
}
/// The most hosts the addressing of [`host_ip`] numbers (addresses up to
/// 255.255.255.1): about 16 million.
pub const MAX_SIM_HOSTS: u32 = ((u32::MAX - 0x0b00_0001) >> 8) + 1;

/// Cepheus connection bridging on the record's fields: the core's one rewrite
/// ([`Bridge::apply`](rocast_core::fabric::cepheus::Bridge::apply)) sees where the record keeps them. In place, because it runs for
/// every copy a switch makes. The record carries no IPv4 ident.
impl BridgedHeaders for SimPacket {
    #[inline]
    fn set_src_ip(&mut self, ip: Ipv4Address) {
        self.src_ip = ip.to_u32();
    }
    #[inline]
    fn set_dst_ip(&mut self, ip: Ipv4Address) {
        self.dst_ip = ip.to_u32();
    }
    #[inline]
    fn clear_ident(&mut self) {}
    #[inline]
    fn set_dest_qp(&mut self, qpn: u32) {
        self.dest_qp = qpn;
    }
    #[inline]
    fn reth_mut(&mut self) -> Option<(&mut u64, &mut u32)> {
        (self.flags & F_RETH != 0).then_some((&mut self.reth_va, &mut self.reth_rkey))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocast_core::wire::Ecn;

    #[test]
    fn host_addresses_number_past_65536_hosts() {
        // HPCC's numbering below 65,536; the id carries on into the first octet above.
        assert_eq!(host_ip(0), 0x0b00_0001);
        assert_eq!(host_ip(257), 0x0b01_0101);
        assert_eq!(host_ip(65_536), 0x0c00_0001);
        for id in [
            0,
            1,
            255,
            256,
            65_535,
            65_536,
            70_000,
            1 << 20,
            MAX_SIM_HOSTS - 1,
        ] {
            assert_eq!(host_of_ip(host_ip(id)), id, "host {id}");
        }
        assert_eq!(host_ip(MAX_SIM_HOSTS - 1), 0xff_ff_ff_01);
    }

    #[test]
    fn every_field_but_the_sack_bitmap_is_in_the_first_cache_line() {
        assert_eq!(std::mem::size_of::<SimPacket>(), 96);
        assert!(std::mem::offset_of!(SimPacket, header) < 64);
        assert!(std::mem::offset_of!(SimPacket, label) < 64);
        assert!(std::mem::offset_of!(SimPacket, sack) >= 58);
    }

    /// The bridge on a record equals the bridge on the parsed packet, with and
    /// without a RETH: the record maps the rewritten fields where `to_repr` reads them.
    #[test]
    fn record_bridge_agrees_with_the_core_rewrite() {
        let b = Bridge {
            mcst_id: Ipv4Address::new(239, 1, 0, 1),
            dst_ip: Ipv4Address::from_u32(host_ip(7)),
            dst_qp: 0x77,
            region: Some((0x1000, 9)),
        };
        for (op, reth) in [
            (Opcode::RC_WRITE_FIRST, true),
            (Opcode::RC_WRITE_MIDDLE, false),
        ] {
            let mut ext = ExtHeaders::default();
            if reth {
                ext.reth = Some(RethRepr {
                    va: 0x40,
                    rkey: 0,
                    dma_len: 4096,
                });
            }
            let bth = BthRepr::new(op, 1, Psn::new(5));
            let r = RoceRepr::new(
                Ipv4Address::from_u32(host_ip(0)),
                b.mcst_id,
                26,
                Ecn::Ect0,
                49152,
                bth,
                ext,
                &[0; 64],
            );
            let mut rec = SimPacket::from_repr(&r);
            b.apply(&mut rec);
            let mut want = r;
            b.apply(&mut want);
            let got = rec.to_repr();
            assert_eq!(
                (got.ip.src_addr, got.ip.dst_addr),
                (want.ip.src_addr, want.ip.dst_addr)
            );
            assert_eq!(got.bth.dest_qp, want.bth.dest_qp);
            assert_eq!(got.ext.reth, want.ext.reth);
        }
    }
}
