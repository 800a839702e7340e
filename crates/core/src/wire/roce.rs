//! A whole RoCEv2 packet: IPv4 + UDP(4791) + BTH + extended headers + payload + pad + ICRC,
//! and the classification of captured Ethernet frames.

use super::ext::ExtHeaders;
use super::{
    icrc, BthPacket, BthRepr, Ecn, Error, EtherType, EthernetFrame, EthernetRepr, Ipv4Address,
    Ipv4Packet, Ipv4Repr, Result, UdpPacket, UdpRepr, BTH_LEN, ETHERNET_HEADER_LEN,
    IPV4_HEADER_LEN, IP_PROTO_UDP, UDP_HEADER_LEN,
};

pub const ROCEV2_UDP_PORT: u16 = 4791;
pub const ICRC_LEN: usize = 4;

/// The BTH and extended headers of a CNP toward `dst_qpn` (RoCEv2 Annex A17.9.3: opcode
/// 0x81 with the BECN bit, PSN 0, 16 reserved bytes); P_Key left at its default.
pub fn cnp_headers(dst_qpn: u32) -> (BthRepr, ExtHeaders) {
    let mut bth = BthRepr::new(super::Opcode::CNP, dst_qpn, super::Psn::new(0));
    bth.resv8a = 0x40; // BECN
    let ext = ExtHeaders {
        cnp_reserved: Some([0; 16]),
        ..Default::default()
    };
    (bth, ext)
}

/// A RoCEv2 packet from the IPv4 header to the ICRC.
///
/// For opcodes rocast models, `payload` excludes the BTH pad bytes (emitted as zeros).
/// For unknown opcodes the extended headers cannot be told apart from data, so
/// `payload` is everything between the BTH and the ICRC and is re-emitted as is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceRepr<'a> {
    pub ip: Ipv4Repr,
    pub udp: UdpRepr,
    pub bth: BthRepr,
    pub ext: ExtHeaders,
    pub payload: &'a [u8],
    /// The ICRC as found by `parse` (informational; `emit` always computes a fresh one).
    pub icrc: u32,
}

impl<'a> RoceRepr<'a> {
    /// A packet with [`Ipv4Repr::rocev2`]'s header, UDP checksum 0 and destination port
    /// 4791. Lengths and the ICRC are filled in by `emit`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        src: Ipv4Address,
        dst: Ipv4Address,
        dscp: u8,
        ecn: Ecn,
        udp_src_port: u16,
        bth: BthRepr,
        ext: ExtHeaders,
        payload: &'a [u8],
    ) -> Self {
        RoceRepr {
            ip: Ipv4Repr::rocev2(src, dst, dscp, ecn, 0),
            udp: UdpRepr {
                src_port: udp_src_port,
                dst_port: ROCEV2_UDP_PORT,
                checksum: 0,
                payload_len: 0,
            },
            bth,
            ext,
            payload,
            icrc: 0,
        }
    }

    /// Parses an IPv4 RoCEv2 packet (IP header first; link padding after the IP total
    /// length is ignored). Checks the IPv4 header checksum; does not check the ICRC:
    /// see [`RoceRepr::parse_verified`].
    pub fn parse(ip_packet: &'a [u8]) -> Result<Self> {
        let ipp = Ipv4Packet::new_checked(ip_packet)?;
        let ip = Ipv4Repr::parse(&ipp, true)?;
        if ip.protocol != IP_PROTO_UDP {
            return Err(Error::Unsupported("ip protocol"));
        }
        let udpp = UdpPacket::new_checked(ipp.payload())?;
        let udp = UdpRepr::parse(&udpp)?;
        if udp.dst_port != ROCEV2_UDP_PORT {
            return Err(Error::Unsupported("udp port"));
        }
        let l4 = &ip_packet
            [IPV4_HEADER_LEN + UDP_HEADER_LEN..IPV4_HEADER_LEN + UDP_HEADER_LEN + udp.payload_len];
        if l4.len() < BTH_LEN + ICRC_LEN {
            return Err(Error::Truncated("bth"));
        }
        let bth = BthRepr::parse(&BthPacket::new_checked(l4)?)?;
        let (rest, icrc_bytes) = l4[BTH_LEN..].split_at(l4.len() - BTH_LEN - ICRC_LEN);
        let icrc = u32::from_le_bytes(icrc_bytes.try_into().unwrap());
        let (ext, payload) = match bth.opcode.layout() {
            Some(layout) => {
                let (ext, n) = ExtHeaders::parse(layout, rest)?;
                let data = &rest[n..];
                let pad = bth.pad_count as usize;
                if data.len() < pad {
                    return Err(Error::Malformed("bth pad count"));
                }
                (ext, &data[..data.len() - pad])
            }
            None => (ExtHeaders::default(), rest),
        };
        Ok(RoceRepr {
            ip,
            udp,
            bth,
            ext,
            payload,
            icrc,
        })
    }

    /// Like [`parse`](Self::parse) but also rejects a bad ICRC.
    pub fn parse_verified(ip_packet: &'a [u8]) -> Result<Self> {
        let r = Self::parse(ip_packet)?;
        if !icrc::verify(r.icrc_span(ip_packet))? {
            return Err(Error::Checksum("icrc"));
        }
        Ok(r)
    }

    /// Whether the ICRC of `ip_packet`, the packet this was parsed from, is right.
    pub fn icrc_ok(&self, ip_packet: &[u8]) -> bool {
        icrc::verify(self.icrc_span(ip_packet)).unwrap_or(false)
    }

    /// The bytes the ICRC covers and ends: IP header through ICRC (trailing Ethernet
    /// padding excluded).
    fn icrc_span<'b>(&self, ip_packet: &'b [u8]) -> &'b [u8] {
        &ip_packet[..IPV4_HEADER_LEN + UDP_HEADER_LEN + self.udp.payload_len]
    }

    fn pad_len(&self) -> usize {
        if self.bth.opcode.is_known() {
            self.bth.pad_count as usize
        } else {
            0
        }
    }

    /// Bytes from the BTH through the ICRC (the UDP payload).
    pub fn udp_payload_len(&self) -> usize {
        BTH_LEN + self.ext.buffer_len() + self.payload.len() + self.pad_len() + ICRC_LEN
    }

    pub fn buffer_len(&self) -> usize {
        IPV4_HEADER_LEN + UDP_HEADER_LEN + self.udp_payload_len()
    }

    /// Writes the packet into `buf[..buffer_len()]`: IP and UDP lengths, the IP
    /// checksum and the ICRC are computed here. Returns the length written.
    ///
    /// Panics if `buf` is shorter than `buffer_len()` (a caller bug, not bad input).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        let udp_len = self.udp_payload_len();
        Ipv4Repr {
            payload_len: UDP_HEADER_LEN + udp_len,
            ..self.ip
        }
        .emit(buf);
        UdpRepr {
            payload_len: udp_len,
            ..self.udp
        }
        .emit(&mut buf[IPV4_HEADER_LEN..]);
        let mut at = IPV4_HEADER_LEN + UDP_HEADER_LEN;
        self.bth.emit(&mut buf[at..]);
        at += BTH_LEN;
        at += self.ext.emit(&mut buf[at..]);
        buf[at..at + self.payload.len()].copy_from_slice(self.payload);
        at += self.payload.len();
        let pad = self.pad_len();
        buf[at..at + pad].fill(0);
        icrc::fill(buf).expect("emitted headers are complete");
        len
    }
}

/// A RoCEv2 packet in an Ethernet II frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceFrameRepr<'a> {
    pub eth: EthernetRepr,
    pub roce: RoceRepr<'a>,
}
impl<'a> RoceFrameRepr<'a> {
    pub fn buffer_len(&self) -> usize {
        ETHERNET_HEADER_LEN + self.roce.buffer_len()
    }
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        self.eth.emit(&mut EthernetFrame::new_unchecked(
            &mut buf[..ETHERNET_HEADER_LEN],
        ));
        ETHERNET_HEADER_LEN + self.roce.emit(&mut buf[ETHERNET_HEADER_LEN..])
    }
}

/// What an Ethernet frame from a capture turned out to be.
#[derive(Debug)]
pub enum FrameClass<'a> {
    /// Not IPv4, or IPv4 but not UDP to port 4791: not our business.
    NotRoce,
    /// Addressed to UDP 4791 but does not parse (truncated, bad lengths, bad IP checksum).
    Malformed(Error),
    /// A RoCEv2 packet; `icrc_ok` says whether its ICRC verified. Unknown opcodes land here too.
    Roce {
        frame: RoceFrameRepr<'a>,
        icrc_ok: bool,
    },
}

/// Classifies one captured Ethernet frame. Never panics.
pub fn classify_frame(frame: &[u8]) -> FrameClass<'_> {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return FrameClass::NotRoce;
    };
    if eth.ethertype() != EtherType::Ipv4 {
        return FrameClass::NotRoce;
    }
    let ip_bytes = &frame[ETHERNET_HEADER_LEN..];
    // Decide "is this for RoCE" on the headers alone, then parse strictly.
    match Ipv4Packet::new_checked(ip_bytes) {
        Ok(ip) => {
            if ip.protocol() != IP_PROTO_UDP {
                return FrameClass::NotRoce;
            }
            match UdpPacket::new_checked(ip.payload()) {
                Ok(u) if u.dst_port() != ROCEV2_UDP_PORT => return FrameClass::NotRoce,
                Ok(_) => {}
                Err(e) => return FrameClass::Malformed(e),
            }
        }
        Err(e) => {
            // Truncated or broken IPv4: it is RoCE if the fixed headers we can see say so.
            let is_roce = ip_bytes.len() >= IPV4_HEADER_LEN + 4
                && ip_bytes[9] == IP_PROTO_UDP
                && u16::from_be_bytes([
                    ip_bytes[IPV4_HEADER_LEN + 2],
                    ip_bytes[IPV4_HEADER_LEN + 3],
                ]) == ROCEV2_UDP_PORT;
            return if is_roce {
                FrameClass::Malformed(e)
            } else {
                FrameClass::NotRoce
            };
        }
    }
    let eth_repr = EthernetRepr::parse(&eth).expect("infallible");
    match RoceRepr::parse(ip_bytes) {
        Ok(roce) => {
            let icrc_ok = roce.icrc_ok(ip_bytes);
            FrameClass::Roce {
                frame: RoceFrameRepr {
                    eth: eth_repr,
                    roce,
                },
                icrc_ok,
            }
        }
        Err(e) => FrameClass::Malformed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{AckSyndrome, AethRepr, Opcode, Psn, RethRepr};

    fn sample<'a>(payload: &'a [u8], opcode: Opcode) -> RoceRepr<'a> {
        let mut bth = BthRepr::new(opcode, 0x11, Psn::new(0xfffffe));
        bth.pad_count = ((4 - payload.len() % 4) % 4) as u8;
        let mut ext = ExtHeaders::default();
        if opcode == Opcode::RC_WRITE_ONLY {
            ext.reth = Some(RethRepr {
                va: 0x1000,
                rkey: 7,
                dma_len: payload.len() as u32,
            });
        }
        if opcode == Opcode::RC_ACKNOWLEDGE {
            ext.aeth = Some(AethRepr {
                syndrome: AckSyndrome::Ack { credits: 31 },
                msn: 3,
            });
        }
        let (a, b) = (Ipv4Address::new(10, 0, 0, 1), Ipv4Address::new(10, 0, 0, 2));
        RoceRepr::new(a, b, 26, Ecn::Ect0, 49152, bth, ext, payload)
    }

    #[test]
    fn test_emit_parse_roundtrip() {
        for op in [
            Opcode::RC_SEND_ONLY,
            Opcode::RC_WRITE_ONLY,
            Opcode::RC_ACKNOWLEDGE,
        ] {
            for len in [0usize, 1, 3, 4, 7, 1024] {
                let data: Vec<u8> = (0..len as u32).map(|i| i as u8).collect();
                let data = if op == Opcode::RC_ACKNOWLEDGE {
                    &[][..]
                } else {
                    &data[..]
                };
                let r = sample(data, op);
                let mut buf = vec![0u8; r.buffer_len()];
                assert_eq!(r.emit(&mut buf), buf.len());
                let p = RoceRepr::parse_verified(&buf).unwrap();
                assert_eq!(p.payload, data);
                assert_eq!(p.ext, r.ext);
                assert_eq!(p.bth, r.bth);
                assert_eq!(p.ip.payload_len, buf.len() - 20);
                let mut again = vec![0u8; p.buffer_len()];
                p.emit(&mut again);
                assert_eq!(again, buf);
            }
        }
    }

    #[test]
    fn test_bad_icrc_detected() {
        let r = sample(b"hello world!", Opcode::RC_SEND_ONLY);
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf);
        buf[45] ^= 0x80;
        assert_eq!(
            RoceRepr::parse_verified(&buf).unwrap_err(),
            Error::Checksum("icrc")
        );
        assert!(RoceRepr::parse(&buf).is_ok());
    }

    #[test]
    fn test_unknown_opcode_kept_verbatim() {
        let body = [1u8, 2, 3, 4, 5, 6];
        let r = sample(&body, Opcode(0x15));
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf);
        let mut frame = vec![0u8; 14];
        frame[12] = 0x08;
        frame.extend_from_slice(&buf);
        match classify_frame(&frame) {
            FrameClass::Roce { frame: f, icrc_ok } => {
                assert!(icrc_ok);
                assert_eq!(f.roce.payload, &body);
                assert!(!f.roce.bth.opcode.is_known());
            }
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn test_classify_truncated_and_other() {
        let r = sample(&[0u8; 64], Opcode::RC_SEND_ONLY);
        let mut frame = vec![0u8; 14 + r.buffer_len()];
        frame[12] = 0x08;
        r.emit(&mut frame[14..]);
        assert!(matches!(
            classify_frame(&frame),
            FrameClass::Roce { icrc_ok: true, .. }
        ));
        assert!(matches!(
            classify_frame(&frame[..80]),
            FrameClass::Malformed(Error::Truncated(_))
        ));
        assert!(matches!(classify_frame(&frame[..20]), FrameClass::NotRoce));
        frame[14 + 23] = 0x99; // UDP dst port 4761 -> not RoCE
        assert!(matches!(classify_frame(&frame), FrameClass::NotRoce));
    }
}
