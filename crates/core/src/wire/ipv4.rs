//! IPv4 (RFC 791) with its header checksum, and the ECN field (RFC 3168) that DCQCN's
//! notification point reads.

use super::{be, put_be, Error, Result};
use core::fmt;

pub const IPV4_HEADER_LEN: usize = 20;
pub const IP_PROTO_UDP: u8 = 17;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ipv4Address(pub [u8; 4]);
impl Ipv4Address {
    pub const UNSPECIFIED: Ipv4Address = Ipv4Address([0; 4]);
    pub const fn new(a: u8, b: u8, c: u8, d: u8) -> Self {
        Ipv4Address([a, b, c, d])
    }
    pub const fn to_u32(self) -> u32 {
        u32::from_be_bytes(self.0)
    }
    pub const fn from_u32(v: u32) -> Self {
        Ipv4Address(v.to_be_bytes())
    }
    /// Whether the address is in 224.0.0.0/4 (IPv4 multicast).
    pub const fn is_multicast(self) -> bool {
        self.0[0] & 0xf0 == 0xe0
    }
}
impl From<std::net::Ipv4Addr> for Ipv4Address {
    fn from(a: std::net::Ipv4Addr) -> Self {
        Ipv4Address(a.octets())
    }
}
impl From<Ipv4Address> for std::net::Ipv4Addr {
    fn from(a: Ipv4Address) -> Self {
        std::net::Ipv4Addr::from(a.0)
    }
}
impl fmt::Debug for Ipv4Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
impl fmt::Display for Ipv4Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}.{}", self.0[0], self.0[1], self.0[2], self.0[3])
    }
}

/// The two ECN bits of the TOS byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Ecn {
    #[default]
    NotEct,
    Ect1,
    Ect0,
    Ce,
}
impl Ecn {
    pub const fn from_bits(b: u8) -> Ecn {
        match b & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
}

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// One's-complement sum of 16-bit words (RFC 1071), folded.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [b] = chunks.remainder() {
        sum += (*b as u32) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// A view of an IPv4 packet. `new_checked` guarantees the buffer holds the whole header
/// (options included) and at least `total_len` bytes; trailing link padding is ignored.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Ipv4Packet { buffer };
        let len = p.buffer.as_ref().len();
        if len < IPV4_HEADER_LEN {
            return Err(Error::Truncated("ipv4 header"));
        }
        if p.version() != 4 {
            return Err(Error::Malformed("ipv4 version"));
        }
        let hl = p.header_len();
        if hl < IPV4_HEADER_LEN {
            return Err(Error::Malformed("ipv4 header length"));
        }
        if len < hl {
            return Err(Error::Truncated("ipv4 options"));
        }
        let tl = p.total_len() as usize;
        if tl < hl {
            return Err(Error::Malformed("ipv4 total length"));
        }
        if len < tl {
            return Err(Error::Truncated("ipv4 packet"));
        }
        Ok(p)
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }
    pub fn header_len(&self) -> usize {
        (self.b()[field::VER_IHL] & 0x0f) as usize * 4
    }
    pub fn tos(&self) -> u8 {
        self.b()[field::TOS]
    }
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.tos())
    }
    pub fn total_len(&self) -> u16 {
        be(self.b(), field::LENGTH, 2) as u16
    }
    pub fn ident(&self) -> u16 {
        be(self.b(), field::IDENT, 2) as u16
    }
    pub fn dont_frag(&self) -> bool {
        self.b()[field::FLG_OFF] & 0x40 != 0
    }
    pub fn more_frags(&self) -> bool {
        self.b()[field::FLG_OFF] & 0x20 != 0
    }
    pub fn frag_offset(&self) -> u16 {
        (be(self.b(), field::FLG_OFF, 2) as u16 & 0x1fff) * 8
    }
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }
    pub fn checksum(&self) -> u16 {
        be(self.b(), field::CHECKSUM, 2) as u16
    }
    pub fn src_addr(&self) -> Ipv4Address {
        Ipv4Address(self.b()[field::SRC..field::SRC + 4].try_into().unwrap())
    }
    pub fn dst_addr(&self) -> Ipv4Address {
        Ipv4Address(self.b()[field::DST..field::DST + 4].try_into().unwrap())
    }
    pub fn verify_checksum(&self) -> bool {
        ones_complement_sum(&self.b()[..self.header_len()]) == 0xffff
    }
    /// The header, options included.
    pub fn header(&self) -> &[u8] {
        &self.b()[..self.header_len()]
    }
    /// The payload, up to `total_len` (link-layer padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..self.total_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    pub fn set_tos(&mut self, v: u8) {
        self.bm()[field::TOS] = v
    }
    pub fn set_ecn(&mut self, e: Ecn) {
        let t = self.tos();
        self.set_tos((t & !3) | e.bits())
    }
    pub fn set_ttl(&mut self, v: u8) {
        self.bm()[field::TTL] = v
    }
    pub fn set_src_addr(&mut self, a: Ipv4Address) {
        self.bm()[field::SRC..field::SRC + 4].copy_from_slice(&a.0)
    }
    pub fn set_dst_addr(&mut self, a: Ipv4Address) {
        self.bm()[field::DST..field::DST + 4].copy_from_slice(&a.0)
    }
    /// Recomputes the header checksum over the header as it now stands.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        put_be(self.bm(), field::CHECKSUM, 2, 0);
        let sum = !ones_complement_sum(&self.buffer.as_ref()[..hl]);
        put_be(self.bm(), field::CHECKSUM, 2, sum as u64);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), self.total_len() as usize);
        &mut self.bm()[h..t]
    }
}

/// A high-level IPv4 header without options (RoCEv2 senders do not use them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src_addr: Ipv4Address,
    pub dst_addr: Ipv4Address,
    pub dscp: u8,
    pub ecn: Ecn,
    pub ident: u16,
    pub dont_frag: bool,
    pub ttl: u8,
    pub protocol: u8,
    pub payload_len: usize,
}

impl Ipv4Repr {
    /// The IPv4 header rocast puts on RoCEv2 packets: UDP, identification 0 with DF set,
    /// TTL 64. That is what Linux writes for an unconnected UDP socket's DF datagrams
    /// (and what rxe sends), so an ICRC computed over it is the one on the wire.
    pub const fn rocev2(
        src_addr: Ipv4Address,
        dst_addr: Ipv4Address,
        dscp: u8,
        ecn: Ecn,
        payload_len: usize,
    ) -> Self {
        Ipv4Repr {
            src_addr,
            dst_addr,
            dscp,
            ecn,
            ident: 0,
            dont_frag: true,
            ttl: 64,
            protocol: IP_PROTO_UDP,
            payload_len,
        }
    }

    /// Parses an unfragmented header without options; `verify_checksum` rejects a bad one.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>, verify_checksum: bool) -> Result<Self> {
        if p.header_len() != IPV4_HEADER_LEN {
            return Err(Error::Unsupported("ipv4 options"));
        }
        if p.more_frags() || p.frag_offset() != 0 {
            return Err(Error::Unsupported("ipv4 fragment"));
        }
        if verify_checksum && !p.verify_checksum() {
            return Err(Error::Checksum("ipv4"));
        }
        Ok(Ipv4Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            ttl: p.ttl(),
            protocol: p.protocol(),
            payload_len: p.total_len() as usize - IPV4_HEADER_LEN,
        })
    }
    pub const fn buffer_len(&self) -> usize {
        IPV4_HEADER_LEN
    }
    /// Writes the header (checksum included) into the first 20 bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        let b = &mut buf[..IPV4_HEADER_LEN];
        b[0] = 0x45;
        b[1] = (self.dscp << 2) | self.ecn.bits();
        put_be(b, 2, 2, (IPV4_HEADER_LEN + self.payload_len) as u64);
        put_be(b, 4, 2, self.ident as u64);
        put_be(b, 6, 2, if self.dont_frag { 0x4000 } else { 0 });
        b[8] = self.ttl;
        b[9] = self.protocol;
        put_be(b, 10, 2, 0);
        b[12..16].copy_from_slice(&self.src_addr.0);
        b[16..20].copy_from_slice(&self.dst_addr.0);
        let sum = !ones_complement_sum(b);
        put_be(b, 10, 2, sum as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // From rxe-golden.pcap frame 3 (10.99.0.2 -> 10.99.0.1, SEND_ONLY).
    static HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x6c, 0x03, 0x78, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 99, 0, 2, 10,
        99, 0, 1,
    ];

    fn with_checksum() -> [u8; 20] {
        let mut h = HDR;
        let s = !ones_complement_sum(&h);
        h[10..12].copy_from_slice(&s.to_be_bytes());
        h
    }

    #[test]
    fn test_parse_emit() {
        let mut pkt = vec![0u8; 0x6c];
        pkt[..20].copy_from_slice(&with_checksum());
        let p = Ipv4Packet::new_checked(&pkt[..]).unwrap();
        assert!(p.verify_checksum());
        let r = Ipv4Repr::parse(&p, true).unwrap();
        assert_eq!(r.src_addr, Ipv4Address::new(10, 99, 0, 2));
        assert_eq!(r.payload_len, 0x6c - 20);
        assert!(r.dont_frag);
        let mut out = [0u8; 20];
        r.emit(&mut out);
        assert_eq!(out, with_checksum());
    }
    #[test]
    fn test_bad_checksum_and_lengths() {
        let mut pkt = vec![0u8; 0x6c];
        pkt[..20].copy_from_slice(&HDR);
        pkt[10] = 0x12;
        let p = Ipv4Packet::new_checked(&pkt[..]).unwrap();
        assert_eq!(
            Ipv4Repr::parse(&p, true).unwrap_err(),
            Error::Checksum("ipv4")
        );
        assert_eq!(
            Ipv4Packet::new_checked(&pkt[..50]).unwrap_err(),
            Error::Truncated("ipv4 packet")
        );
        pkt[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&pkt[..]).unwrap_err(),
            Error::Malformed("ipv4 header length")
        );
        pkt[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&pkt[..]).unwrap_err(),
            Error::Malformed("ipv4 version")
        );
    }
    #[test]
    fn test_ecn() {
        let mut h = with_checksum();
        let mut p = Ipv4Packet::new_unchecked(&mut h[..]);
        p.set_ecn(Ecn::Ce);
        p.fill_checksum();
        assert_eq!(p.ecn(), Ecn::Ce);
        assert!(p.verify_checksum());
    }
}
