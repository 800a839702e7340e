//! The block of IPv4 addresses a fabric hands out as group addresses (Cepheus §III-B's
//! McstIDs): the switches' tables, the hosts' member agents and the control plane's
//! registrations all speak it, so it lives with the wire formats, below `control` and
//! `fabric` alike.

use crate::wire::Ipv4Address;

/// A block that cannot be a group address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}/{1} is not a usable group address block")]
pub struct GroupSpaceError(pub Ipv4Address, pub u8);

/// Text [`GroupAddressSpace::parse`] cannot read as a group address space.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupSpaceParseError {
    #[error("group space {0:?}: expected a.b.c.d/len")]
    Syntax(String),
    #[error("group space {0:?}: bad address")]
    BadAddress(String),
    #[error("group space {0:?}: bad prefix length")]
    BadPrefixLength(String),
    #[error(transparent)]
    Unusable(#[from] GroupSpaceError),
}

/// The block of addresses a switch (and the hosts' member agents) take as McstIDs.
///
/// Cepheus draws McstIDs from IPv4 multicast, and the simulator does. A kernel RoCE
/// or UDP stack cannot receive them, though: a bridged copy carries the McstID as its
/// *source* address so that the receiver's feedback returns to the group, and Linux
/// drops any packet with a multicast source as a martian before UDP (or rxe) sees it.
/// The real-time runtime therefore uses a unicast block the switch owns (it answers
/// ARP for those addresses), e.g. `10.77.0.128/25`; everything else about the group
/// is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupAddressSpace {
    base: u32,
    prefix_len: u8,
}

impl GroupAddressSpace {
    /// 224.0.0.0/4.
    pub const MULTICAST: GroupAddressSpace = GroupAddressSpace {
        base: 0xe000_0000,
        prefix_len: 4,
    };

    /// The block `base/prefix_len`. Errors when the length is not 1..=32, when `base`
    /// has bits below the prefix, or when the block holds 0.0.0.0 or 255.255.255.255.
    pub fn new(base: Ipv4Address, prefix_len: u8) -> Result<Self, GroupSpaceError> {
        let bad = || GroupSpaceError(base, prefix_len);
        if !(1..=32).contains(&prefix_len) {
            return Err(bad());
        }
        let s = GroupAddressSpace {
            base: base.to_u32(),
            prefix_len,
        };
        if s.base & !s.mask() != 0
            || s.contains(Ipv4Address::UNSPECIFIED)
            || s.contains(Ipv4Address::new(255, 255, 255, 255))
        {
            return Err(bad());
        }
        Ok(s)
    }

    /// Parses `a.b.c.d/len`.
    pub fn parse(text: &str) -> Result<Self, GroupSpaceParseError> {
        let (ip, len) = text
            .split_once('/')
            .ok_or_else(|| GroupSpaceParseError::Syntax(text.to_string()))?;
        let ip: std::net::Ipv4Addr = ip
            .parse()
            .map_err(|_| GroupSpaceParseError::BadAddress(text.to_string()))?;
        let len: u8 = len
            .parse()
            .map_err(|_| GroupSpaceParseError::BadPrefixLength(text.to_string()))?;
        Ok(Self::new(Ipv4Address(ip.octets()), len)?)
    }

    fn mask(&self) -> u32 {
        u32::MAX << (32 - self.prefix_len as u32)
    }

    pub fn contains(&self, ip: Ipv4Address) -> bool {
        ip.to_u32() & self.mask() == self.base
    }

    /// How many addresses the block holds (a table needs no more groups than that).
    pub fn size(&self) -> u64 {
        1u64 << (32 - self.prefix_len as u32)
    }

    /// The block's `i`-th address (0-based), if it has one.
    pub fn nth(&self, i: u64) -> Option<Ipv4Address> {
        (i < self.size()).then(|| Ipv4Address::from_u32(self.base.wrapping_add(i as u32)))
    }
}

impl Default for GroupAddressSpace {
    fn default() -> Self {
        Self::MULTICAST
    }
}

impl std::fmt::Display for GroupAddressSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}",
            Ipv4Address::from_u32(self.base),
            self.prefix_len
        )
    }
}
