//! Connection bridging (Cepheus §III-B.2, Fig. 4) and the feedback packets a Cepheus
//! switch emits (§III-D).
//!
//! Every member's QP is connected to a *virtual* remote, (McstID, [`VIRTUAL_QPN`]). The switch
//! next to a receiver turns the group's packet into one for that receiver's own
//! connection: dstIP and dstQP become the receiver's; srcIP becomes the McstID, so the
//! receiver's ACK/NAK/CNP come back addressed to the McstID and find the group's MFT;
//! for RDMA WRITE the RETH of a message's first packet is pointed at the receiver's
//! memory region. The IPv4 checksum and the ICRC cover all of these fields, so both are
//! recomputed ([`Bridge::rewrite_ip_packet`] does it on bytes; [`Bridge::apply`] on a
//! parsed packet whose `emit` recomputes them).
//!
//! In the other direction, the switch next to the source rewrites the aggregated
//! feedback so that it looks like an ordinary ACK from the source's virtual remote:
//! srcIP McstID, dstIP and dstQP the source's own ([`FeedbackPacket`]).

use crate::wire::{
    AckSyndrome, AethRepr, BthRepr, Ecn, Error, ExtHeaders, Ipv4Address, Opcode, Psn, RoceRepr,
};

/// The QPN of every member's virtual remote.
///
/// Cepheus §III-A: "the dstIP and dstQP is set as McstID and a reserved value of 0x1".
/// On the wire that is the GSI QP: QP0 and QP1 are the IBA's special QPs (the SMI's
/// and the GSI's, which only carry management datagrams), and Wireshark and every
/// RoCE stack read a packet to QP1 as a MAD, so a capture of a group's data decoded
/// as management traffic. rocast takes 0x100 instead: an ordinary QPN (neither 0, 1
/// nor the multicast QPN 0xFFFFFF), the same role. Nothing else changes: the switch
/// rewrites it to each receiver's QPN (§III-B.2), and the UDP source port that ECMP
/// hashes comes from the sender's own QPN.
pub const VIRTUAL_QPN: u32 = 0x100;

/// The header fields a [`Bridge`] rewrites, on whatever form a driver holds a packet in:
/// a parsed [`RoceRepr`] (the frame pipeline) or the simulator's compact packet record.
/// The rewrite rules live once, in [`Bridge::apply`]; a form only says where its fields
/// are.
pub trait BridgedHeaders {
    fn set_src_ip(&mut self, ip: Ipv4Address);
    fn set_dst_ip(&mut self, ip: Ipv4Address);
    /// Sets the IPv4 ident to 0 (a form that does not carry the ident ignores it).
    fn clear_ident(&mut self);
    fn set_dest_qp(&mut self, qpn: u32);
    /// The RETH's (VA, RKey), when the packet has one.
    fn reth_mut(&mut self) -> Option<(&mut u64, &mut u32)>;
}

impl BridgedHeaders for RoceRepr<'_> {
    fn set_src_ip(&mut self, ip: Ipv4Address) {
        self.ip.src_addr = ip;
    }
    fn set_dst_ip(&mut self, ip: Ipv4Address) {
        self.ip.dst_addr = ip;
    }
    fn clear_ident(&mut self) {
        self.ip.ident = 0;
    }
    fn set_dest_qp(&mut self, qpn: u32) {
        self.bth.dest_qp = qpn;
    }
    fn reth_mut(&mut self) -> Option<(&mut u64, &mut u32)> {
        self.ext.reth.as_mut().map(|r| (&mut r.va, &mut r.rkey))
    }
}

/// The header rewrite that bridges the group's packet to one member's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bridge {
    /// The McstID, which becomes the packet's source address.
    pub mcst_id: Ipv4Address,
    pub dst_ip: Ipv4Address,
    pub dst_qp: u32,
    /// The member's memory region, for WRITE groups.
    pub region: Option<(u64, u32)>,
}

impl Bridge {
    /// Rewrites a parsed packet. The sender addresses the virtual remote's region at
    /// VA 0, so a RETH's VA is an offset into the group's buffer and becomes the same
    /// offset into the member's region.
    ///
    /// The copy carries IPv4 ident 0: the ICRC covers the ident, which a receiver on a
    /// kernel UDP socket cannot see (it rebuilds the header with ident 0), and rxe
    /// numbers its DF packets; for a DF datagram the ident means nothing (RFC 6864),
    /// so with 0 every kind of receiver can verify the copy.
    pub fn apply(&self, p: &mut impl BridgedHeaders) {
        p.set_src_ip(self.mcst_id);
        p.set_dst_ip(self.dst_ip);
        p.clear_ident();
        p.set_dest_qp(self.dst_qp);
        if let Some((va, rkey)) = self.region {
            if let Some((reth_va, reth_rkey)) = p.reth_mut() {
                *reth_va = va.wrapping_add(*reth_va);
                *reth_rkey = rkey;
            }
        }
    }

    /// Rewrites a RoCEv2 IP packet in place and recomputes its IPv4 checksum and ICRC.
    /// The packet is parsed strictly and its ICRC verified first: a malformed or
    /// corrupted one is an error and is left untouched (a switch that recomputed the
    /// ICRC of a corrupted packet would launder it).
    pub fn rewrite_ip_packet(&self, ip_packet: &mut [u8]) -> Result<(), Error> {
        // Copy out what the rewrite keeps, so the buffer can be written back.
        let (ip, udp, bth, ext, icrc, payload) = {
            let r = RoceRepr::parse_verified(ip_packet)?;
            (r.ip, r.udp, r.bth, r.ext, r.icrc, r.payload.to_vec())
        };
        let mut repr = RoceRepr {
            ip,
            udp,
            bth,
            ext,
            payload: &payload,
            icrc,
        };
        if repr.buffer_len() != ip_packet.len() {
            return Err(Error::Malformed("roce packet length"));
        }
        self.apply(&mut repr);
        repr.emit(ip_packet);
        Ok(())
    }
}

/// What kind of feedback a switch emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedbackKind {
    /// An ACKNOWLEDGE with this AETH (an ACK, or a NAK).
    Ack { syndrome: AckSyndrome, msn: u32 },
    /// A congestion notification.
    Cnp,
}

impl FeedbackKind {
    /// A plain ACK (credits "invalid", as RoCE endpoints send them).
    pub fn ack(msn: u32) -> Self {
        FeedbackKind::Ack {
            syndrome: AckSyndrome::Ack {
                credits: AckSyndrome::CREDITS_INVALID,
            },
            msn,
        }
    }
}

/// A feedback packet a Cepheus switch sends toward the source: a forwarded CNP, an
/// aggregated ACK or NAK, or one rewritten at the source's switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedbackPacket {
    pub kind: FeedbackKind,
    pub psn: Psn,
    pub src_ip: Ipv4Address,
    pub dst_ip: Ipv4Address,
    pub dst_qp: u32,
}

/// The header fields a feedback packet copies from the packet that caused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedbackHeader {
    pub pkey: u16,
    pub dscp: u8,
    pub udp_src_port: u16,
}

impl FeedbackHeader {
    pub fn of(p: &RoceRepr<'_>) -> Self {
        FeedbackHeader {
            pkey: p.bth.pkey,
            dscp: p.ip.dscp,
            udp_src_port: p.udp.src_port,
        }
    }
}

impl FeedbackPacket {
    /// The packet as a parsed RoCE packet, taking the UDP source port, DSCP and P_Key
    /// from `template` (the feedback or data packet that caused it). An ACK carries no
    /// SACK bitmap: one receiver's bitmap says nothing about the others.
    pub fn repr(&self, template: &RoceRepr<'_>) -> RoceRepr<'static> {
        self.repr_with(FeedbackHeader::of(template))
    }

    /// [`repr`](Self::repr) with the copied fields given: a CNP the switch releases
    /// later is built on the header of the CNP it held.
    pub fn repr_with(&self, header: FeedbackHeader) -> RoceRepr<'static> {
        let (opcode, psn) = match self.kind {
            FeedbackKind::Ack { .. } => (Opcode::RC_ACKNOWLEDGE, self.psn),
            FeedbackKind::Cnp => (Opcode::CNP, Psn::new(0)),
        };
        let mut bth = BthRepr::new(opcode, self.dst_qp, psn);
        bth.pkey = header.pkey;
        let mut ext = ExtHeaders::default();
        match self.kind {
            FeedbackKind::Ack { syndrome, msn } => ext.aeth = Some(AethRepr { syndrome, msn }),
            FeedbackKind::Cnp => {
                bth.resv8a = 0x40; // BECN
                ext.cnp_reserved = Some([0; 16]);
            }
        }
        RoceRepr::new(
            self.src_ip,
            self.dst_ip,
            header.dscp,
            Ecn::NotEct,
            header.udp_src_port,
            bth,
            ext,
            &[],
        )
    }
}
