//! RoCEv2 wire formats: every header rocast touches, as zero-copy views and `Repr`s.
//!
//! The layout follows smoltcp's `wire` module: each header has a
//! `Packet<T: AsRef<[u8]>>` view whose `new_checked` validates lengths once, after
//! which no accessor can panic, and a `Repr` with `parse`, `emit` and `buffer_len`.
//! `wire` knows bytes, not behaviour.
//!
//! Specification: InfiniBand Architecture Specification vol. 1 rel. 1.4, ch. 9 (BTH and
//! extended transport headers), and Annex A17 "RoCEv2" (UDP port 4791, the ICRC rule,
//! the CNP). The exact ICRC rule used here is the one in `shared/testdata/README.md`.

pub mod arp;
mod bth;
mod ethernet;
mod ext;
pub mod group_control;
pub mod group_space;
pub mod icrc;
pub mod igmp;
mod ipv4;
pub mod mrp;
pub mod mrp_auth;
pub mod pcap;
pub mod peel;
mod psn;
mod roce;
mod udp;

pub use bth::{BthPacket, BthRepr, Opcode, BTH_LEN};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, ETHERNET_HEADER_LEN};
pub use ext::{
    AckSyndrome, AethPacket, AethRepr, AtomicAckEthRepr, AtomicEthRepr, DethRepr, ExtHeaders,
    NakCode, RethRepr, AETH_LEN, ATOMIC_ACK_ETH_LEN, ATOMIC_ETH_LEN, CNP_RESERVED_LEN, DETH_LEN,
    IETH_LEN, IMMDT_LEN, RETH_LEN,
};
pub use group_space::{GroupAddressSpace, GroupSpaceError, GroupSpaceParseError};
pub use ipv4::{
    ones_complement_sum, Ecn, Ipv4Address, Ipv4Packet, Ipv4Repr, IPV4_HEADER_LEN, IP_PROTO_UDP,
};
pub use psn::Psn;
pub use roce::{
    classify_frame, cnp_headers, FrameClass, RoceFrameRepr, RoceRepr, ICRC_LEN, ROCEV2_UDP_PORT,
};
pub use udp::{UdpPacket, UdpRepr, UDP_HEADER_LEN};

/// Why a buffer could not be parsed as the requested header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer ends before the header (or the length it declares) does.
    #[error("truncated {0}")]
    Truncated(&'static str),
    /// A field holds a value the format forbids (bad version, length smaller than the header...).
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// A checksum or CRC does not match.
    #[error("bad {0} checksum")]
    Checksum(&'static str),
    /// Well formed but not something this parser handles (e.g. IPv4 options in a `Repr`).
    #[error("unsupported {0}")]
    Unsupported(&'static str),
}

pub type Result<T> = core::result::Result<T, Error>;

/// Reads a big-endian integer of `N` bytes at `at`. Callers have checked the length.
#[inline]
pub(crate) fn be(buf: &[u8], at: usize, n: usize) -> u64 {
    buf[at..at + n]
        .iter()
        .fold(0u64, |acc, &b| (acc << 8) | b as u64)
}

/// Writes the low `n` bytes of `v` big-endian at `at`.
#[inline]
pub(crate) fn put_be(buf: &mut [u8], at: usize, n: usize, v: u64) {
    for i in 0..n {
        buf[at + i] = (v >> (8 * (n - 1 - i))) as u8;
    }
}
