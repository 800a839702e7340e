//! rocast's PEEL shim header (PEEL §3.2): the (prefix value, prefix length) a packet
//! carries so a prefix-tier switch picks one of its static power-of-two rules.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-------+-------+---------------+-------------------------------+
//! |version| flags | prefix length |              pod              |
//! +-------+-------+---------------+-------------------------------+
//! |         prefix value          |             plane             |
//! +-------------------------------+-------------------------------+
//! ```
//! Eight bytes, network order. Version 1. Flags: bit 0 `CORE_REPLICATE` (a
//! programmable core should replicate this packet per the group's installed rules, §3.3),
//! bit 1 `OVER_COVERED` (the block includes racks without members, which discard),
//! bit 2 `SOURCE_RACK` (the source's own rack switch also delivers this copy to its
//! local members on the way up; a sender sets it on exactly one copy of each packet,
//! since the source's rack is served on the way up and never by a prefix — the
//! real-packet form of the simulator's explicit local hops).
//! `pod` selects the destination pod (the core's ordinary per-pod route), `plane` the
//! prefix-tier switch of that pod the packet climbs to (the layer-peeling tree chose it;
//! under failures not every aggregation switch or spine reaches every rack), and the
//! prefix selects the rule there. Prefix length ≤ 16, value < 2^length.
//!
//! **Where it sits**: between the UDP header and the BTH, with the UDP destination
//! port changed from 4791 to [`PEEL_UDP_PORT`] so nothing mistakes the shim for a BTH.
//! The last switch before the receivers strips it and restores port 4791. Why there:
//! - The ICRC covers the IP total length, the UDP length and port, and everything from
//!   the BTH on, but the sender computes it over the packet *without* the shim; since
//!   stripping restores exactly those bytes, the receiver's ICRC check passes and no
//!   switch has to recompute an ICRC (commodity ASICs cannot).
//! - IP addresses stay the group's, so ECMP hashing and ACLs are unchanged, and the
//!   fixed offset after UDP is within the parse depth of commodity switch pipelines.
//! - An IP option or an outer encapsulation would cost more bytes (≥ 8 for an option
//!   with its padding, 36+ for VXLAN) and is slow-pathed on many switches.
//!
//! The IPv4 header checksum changes with the total length and is recomputed at insert
//! and strip; the UDP checksum stays zero, as RoCEv2 sends it.

use super::{Error, Ipv4Packet, IPV4_HEADER_LEN, ROCEV2_UDP_PORT, UDP_HEADER_LEN};

/// UDP destination port of a RoCEv2 packet carrying the PEEL shim.
pub const PEEL_UDP_PORT: u16 = 4793;
pub const PEEL_HEADER_LEN: usize = 8;
pub const PEEL_VERSION: u8 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PeelHeader {
    /// Bit 0: core replicates; bit 1: over-covered; bit 2: source rack delivers.
    pub flags: u8,
    pub prefix_len: u8,
    pub pod: u16,
    pub prefix_value: u16,
    pub plane: u16,
}

impl PeelHeader {
    pub const CORE_REPLICATE: u8 = 1;
    pub const OVER_COVERED: u8 = 2;
    pub const SOURCE_RACK: u8 = 4;

    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        if buf.len() < PEEL_HEADER_LEN {
            return Err(Error::Truncated("peel header"));
        }
        if buf[0] >> 4 != PEEL_VERSION {
            return Err(Error::Unsupported("peel version"));
        }
        let h = PeelHeader {
            flags: buf[0] & 0x0f,
            prefix_len: buf[1],
            pod: u16::from_be_bytes([buf[2], buf[3]]),
            prefix_value: u16::from_be_bytes([buf[4], buf[5]]),
            plane: u16::from_be_bytes([buf[6], buf[7]]),
        };
        if h.flags & !(Self::CORE_REPLICATE | Self::OVER_COVERED | Self::SOURCE_RACK) != 0 {
            return Err(Error::Malformed("peel flags"));
        }
        if h.prefix_len > 16 || (h.prefix_value as u32) >> h.prefix_len != 0 {
            return Err(Error::Malformed("peel prefix"));
        }
        Ok(h)
    }

    /// Writes the header into `buf[..8]`. Panics if `buf` is shorter (a caller bug).
    pub fn emit(&self, buf: &mut [u8]) {
        buf[0] = (PEEL_VERSION << 4) | (self.flags & 0x0f);
        buf[1] = self.prefix_len;
        buf[2..4].copy_from_slice(&self.pod.to_be_bytes());
        buf[4..6].copy_from_slice(&self.prefix_value.to_be_bytes());
        buf[6..8].copy_from_slice(&self.plane.to_be_bytes());
    }
}

const UDP_AT: usize = IPV4_HEADER_LEN;
const SHIM_AT: usize = IPV4_HEADER_LEN + UDP_HEADER_LEN;

fn udp_port(p: &[u8]) -> u16 {
    u16::from_be_bytes([p[UDP_AT + 2], p[UDP_AT + 3]])
}

/// Checks the IPv4 and UDP framing of `ip_packet` (20-byte IPv4 header, UDP, the
/// lengths agree with the buffer); returns the IP total length.
fn check_udp(ip_packet: &[u8]) -> Result<usize, Error> {
    let ip = Ipv4Packet::new_checked(ip_packet)?;
    if ip.header_len() != IPV4_HEADER_LEN || ip.protocol() != super::IP_PROTO_UDP {
        return Err(Error::Unsupported("ip header"));
    }
    if !ip.verify_checksum() {
        return Err(Error::Checksum("ipv4"));
    }
    let total = ip.total_len() as usize;
    if total < SHIM_AT {
        return Err(Error::Truncated("udp"));
    }
    let udp_len = u16::from_be_bytes([ip_packet[UDP_AT + 4], ip_packet[UDP_AT + 5]]) as usize;
    if udp_len != total - IPV4_HEADER_LEN {
        return Err(Error::Malformed("udp length"));
    }
    Ok(total)
}

/// Rewrites lengths, port and the IPv4 checksum after the shim was added or removed.
fn fix_lengths(p: &mut [u8], total: usize, port: u16) {
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[UDP_AT + 2..UDP_AT + 4].copy_from_slice(&port.to_be_bytes());
    p[UDP_AT + 4..UDP_AT + 6].copy_from_slice(&((total - IPV4_HEADER_LEN) as u16).to_be_bytes());
    let mut ip = Ipv4Packet::new_checked(&mut p[..total]).expect("length checked");
    ip.fill_checksum();
}

/// The RoCEv2 packet `ip_packet` (IPv4 header onward, UDP port 4791) with the shim
/// inserted after UDP. The ICRC is left as it is: see the module docs.
pub fn insert_shim(ip_packet: &[u8], header: &PeelHeader) -> Result<Vec<u8>, Error> {
    let total = check_udp(ip_packet)?;
    if udp_port(ip_packet) != ROCEV2_UDP_PORT {
        return Err(Error::Unsupported("udp port"));
    }
    if total + PEEL_HEADER_LEN > u16::MAX as usize {
        return Err(Error::Malformed("packet too long for the shim"));
    }
    let mut out = Vec::with_capacity(total + PEEL_HEADER_LEN);
    out.extend_from_slice(&ip_packet[..SHIM_AT]);
    out.extend_from_slice(&[0; PEEL_HEADER_LEN]);
    header.emit(&mut out[SHIM_AT..]);
    out.extend_from_slice(&ip_packet[SHIM_AT..total]);
    fix_lengths(&mut out, total + PEEL_HEADER_LEN, PEEL_UDP_PORT);
    Ok(out)
}

/// The shim of a packet sent to [`PEEL_UDP_PORT`], and the packet's IP total length.
fn parse_shim(ip_packet: &[u8]) -> Result<(PeelHeader, usize), Error> {
    let total = check_udp(ip_packet)?;
    if udp_port(ip_packet) != PEEL_UDP_PORT {
        return Err(Error::Unsupported("udp port"));
    }
    if total < SHIM_AT + PEEL_HEADER_LEN {
        return Err(Error::Truncated("peel header"));
    }
    Ok((PeelHeader::parse(&ip_packet[SHIM_AT..])?, total))
}

/// Reads the shim of a packet sent to [`PEEL_UDP_PORT`] without changing it.
pub fn read_shim(ip_packet: &[u8]) -> Result<PeelHeader, Error> {
    parse_shim(ip_packet).map(|(h, _)| h)
}

/// Removes the shim: the header and the original RoCEv2 packet, byte for byte.
pub fn strip_shim(ip_packet: &[u8]) -> Result<(PeelHeader, Vec<u8>), Error> {
    let (header, total) = parse_shim(ip_packet)?;
    let mut out = Vec::with_capacity(total - PEEL_HEADER_LEN);
    out.extend_from_slice(&ip_packet[..SHIM_AT]);
    out.extend_from_slice(&ip_packet[SHIM_AT + PEEL_HEADER_LEN..total]);
    fix_lengths(&mut out, total - PEEL_HEADER_LEN, ROCEV2_UDP_PORT);
    Ok((header, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{BthRepr, Ecn, ExtHeaders, Ipv4Address, Opcode, Psn, RethRepr, RoceRepr};
    use proptest::prelude::*;

    fn packet() -> Vec<u8> {
        let bth = BthRepr::new(Opcode::RC_WRITE_ONLY, 1, Psn::new(77));
        let ext = ExtHeaders {
            reth: Some(RethRepr {
                va: 0x1000,
                rkey: 9,
                dma_len: 100,
            }),
            ..Default::default()
        };
        let r = RoceRepr::new(
            Ipv4Address::new(10, 0, 0, 1),
            Ipv4Address::new(239, 1, 2, 3),
            26,
            Ecn::Ect0,
            49152,
            bth,
            ext,
            &[0xab; 100],
        );
        let mut buf = vec![0; r.buffer_len()];
        r.emit(&mut buf);
        buf
    }

    #[test]
    fn insert_then_strip_restores_the_packet_and_its_icrc() {
        let orig = packet();
        let h = PeelHeader {
            flags: PeelHeader::OVER_COVERED,
            prefix_len: 2,
            pod: 513,
            prefix_value: 0b01,
            plane: 3,
        };
        let shimmed = insert_shim(&orig, &h).unwrap();
        assert_eq!(shimmed.len(), orig.len() + PEEL_HEADER_LEN);
        assert!(RoceRepr::parse(&shimmed).is_err(), "not port 4791 any more");
        assert_eq!(read_shim(&shimmed).unwrap(), h);
        let (back, stripped) = strip_shim(&shimmed).unwrap();
        assert_eq!(back, h);
        assert_eq!(stripped, orig);
        RoceRepr::parse_verified(&stripped).unwrap();
    }

    #[test]
    fn bad_shims_are_errors() {
        let orig = packet();
        assert!(strip_shim(&orig).is_err(), "no shim on 4791");
        let h = PeelHeader::default();
        let mut s = insert_shim(&orig, &h).unwrap();
        s[SHIM_AT] = 0x20;
        assert_eq!(read_shim(&s), Err(Error::Unsupported("peel version")));
        let mut s = insert_shim(&orig, &h).unwrap();
        s[SHIM_AT + 1] = 1;
        s[SHIM_AT + 5] = 2; // value 2 does not fit a 1-bit prefix
        assert_eq!(read_shim(&s), Err(Error::Malformed("peel prefix")));
        assert!(insert_shim(&orig[..30], &h).is_err());
    }

    proptest! {
        /// Arbitrary bytes never panic the shim parsers.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = read_shim(&bytes);
            let _ = strip_shim(&bytes);
            let _ = insert_shim(&bytes, &PeelHeader::default());
            let _ = PeelHeader::parse(&bytes);
        }
    }
}
