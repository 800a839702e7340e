//! MRP, Cepheus' MFT Registration Protocol (Cepheus §III-B, Fig. 5): the UDP payload a
//! group's leader sends toward the multicast ID so that every switch on the way fills
//! its multicast forwarding table and passes on the members behind each port.
//!
//! Byte layout (big-endian), in a UDP datagram to [`MRP_UDP_PORT`] addressed to the
//! McstID:
//!
//! ```text
//!  0      4      5       6       7       8
//!  +------+------+-------+-------+-------+----------------------------+
//!  |McstID| seq  | total | count | flags | count × member record      |
//!  +------+------+-------+-------+-------+----------------------------+
//!  member record: IPv4 (4) | QPN (4, top byte zero)
//!                 [ VA (8) | RKey (4) ]   when flags bit 0 (a WRITE group)
//! flags: bit 0 WRITE, bit 4 NEW (a new incarnation of the group's leader)
//! ```
//!
//! `seq` numbers the packets of one registration from 0; `total` is how many there are.
//! The 8 bytes of metadata and 8-byte records fill a 1500-byte MTU (1472 bytes of UDP
//! payload) with [`MRP_MAX_MEMBERS`] = 183 members, the paper's figure; WRITE records
//! (20 bytes) fit [`MRP_MAX_WRITE_MEMBERS`] = 73. Larger groups span several packets
//! ([`MrpRepr::split`]), at most 255.
//!
//! **Incarnations** (rocast's addition): a leader's first registration (and
//! its resends) sets flags bit 4, [`MrpRepr::new_incarnation`]; its refreshes do not.
//! A switch resets the group's per-member acknowledgement state on a new incarnation
//! (a restarted leader's PSNs are not comparable with the old one's) and keeps it on
//! a refresh, so the difference is explicit on the wire rather than guessed.
//!
//! Parsing is strict: flags bits other than bits 0 and 4, `seq >= total`, a QPN over 24 bits,
//! or a length other than exactly `8 + count × record` are errors, so a switch drops
//! and counts a malformed registration instead of half-applying it.
//!
//! rocast adds four forms on the same port, each with its own flag and refused by the
//! others' parsers: [`MrpRelease`] (bit 1), [`MrpPrune`] (bit 2), and the allocation
//! request [`MrpAllocate`] (bit 3) with its answer [`MrpAllocation`].

use super::{be, put_be, Error, Ipv4Address, Result};

/// MRP's UDP destination port. Cepheus names none; rocast takes the one after
/// RoCEv2's 4791.
pub const MRP_UDP_PORT: u16 = 4792;
pub const MRP_HEADER_LEN: usize = 8;
/// UDP payload of a 1500-byte IPv4 MTU.
pub const MRP_MAX_PAYLOAD: usize = 1500 - 20 - 8;
pub const MRP_MEMBER_LEN: usize = 8;
pub const MRP_WRITE_MEMBER_LEN: usize = 20;
pub const MRP_MAX_MEMBERS: usize = (MRP_MAX_PAYLOAD - MRP_HEADER_LEN) / MRP_MEMBER_LEN;
pub const MRP_MAX_WRITE_MEMBERS: usize = (MRP_MAX_PAYLOAD - MRP_HEADER_LEN) / MRP_WRITE_MEMBER_LEN;
const FLAG_WRITE: u8 = 1;
const FLAG_RELEASE: u8 = 2;
const FLAG_PRUNE: u8 = 4;
/// Flags bit 4: a registration of a new incarnation (module docs).
const FLAG_NEW_INCARNATION: u8 = 16;
/// Bytes of one pruned member's record (its IPv4 address).
pub const MRP_PRUNE_RECORD_LEN: usize = 4;
/// Members one prune packet can name: its count is one byte (8 + 255 × 4 bytes fit
/// one MTU).
pub const MRP_MAX_PRUNED: usize = 255;

/// A leader's request to free a group's tables along its tree: the 8-byte MRP header
/// with flags bit 1 set, `seq` 0, `total` 1 and no members. Cepheus leaves teardown
/// unspecified; without it a re-registered McstID would inherit the old session's
/// acknowledgement state (rocast's addition). [`MrpRepr::parse`] refuses it, so an old
/// switch drops it as unsupported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrpRelease {
    pub mcst_id: Ipv4Address,
}

impl MrpRelease {
    pub const fn buffer_len(&self) -> usize {
        MRP_HEADER_LEN
    }
    /// Parses exactly the release form; anything else is an error.
    pub fn parse(b: &[u8]) -> Result<MrpRelease> {
        if b.len() < MRP_HEADER_LEN {
            return Err(Error::Truncated("mrp header"));
        }
        if b.len() > MRP_HEADER_LEN || b[4..8] != [0, 1, 0, FLAG_RELEASE] {
            return Err(Error::Malformed("mrp release"));
        }
        Ok(MrpRelease {
            mcst_id: Ipv4Address::from_u32(be(b, 0, 4) as u32),
        })
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        put_be(b, 0, 4, self.mcst_id.to_u32() as u64);
        b[4..8].copy_from_slice(&[0, 1, 0, FLAG_RELEASE]);
        MRP_HEADER_LEN
    }
}

/// A leader's request to take members off a group's tree (rocast's addition, for
/// evicting a dead member while the others go on): the 8-byte MRP header
/// with flags bit 2 set, `seq` 0, `total` 1, `count` IPv4 addresses after it.
/// [`MrpRepr::parse`] and [`MrpRelease::parse`] refuse it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MrpPrune {
    pub mcst_id: Ipv4Address,
    /// 1..=[`MRP_MAX_PRUNED`] members.
    pub members: Vec<Ipv4Address>,
}

impl MrpPrune {
    pub fn buffer_len(&self) -> usize {
        MRP_HEADER_LEN + self.members.len() * MRP_PRUNE_RECORD_LEN
    }
    /// Parses exactly the prune form: 1..=`MRP_MAX_PRUNED` members, the length
    /// exactly that of its records.
    pub fn parse(b: &[u8]) -> Result<MrpPrune> {
        if b.len() < MRP_HEADER_LEN {
            return Err(Error::Truncated("mrp header"));
        }
        let count = b[6] as usize;
        if b[4] != 0 || b[5] != 1 || b[7] != FLAG_PRUNE || count == 0 || count > MRP_MAX_PRUNED {
            return Err(Error::Malformed("mrp prune"));
        }
        if b.len() != MRP_HEADER_LEN + count * MRP_PRUNE_RECORD_LEN {
            return Err(Error::Malformed("mrp prune length"));
        }
        let members = (0..count)
            .map(|i| Ipv4Address::from_u32(be(b, MRP_HEADER_LEN + i * 4, 4) as u32))
            .collect();
        Ok(MrpPrune {
            mcst_id: Ipv4Address::from_u32(be(b, 0, 4) as u32),
            members,
        })
    }
    /// Writes the payload into `b` (at least `buffer_len()` bytes); members past
    /// [`MRP_MAX_PRUNED`] are not written (the session never queues more).
    pub fn emit(&self, b: &mut [u8]) -> usize {
        let n = self.members.len().min(MRP_MAX_PRUNED);
        put_be(b, 0, 4, self.mcst_id.to_u32() as u64);
        b[4..8].copy_from_slice(&[0, 1, n as u8, FLAG_PRUNE]);
        for (i, ip) in self.members.iter().take(n).enumerate() {
            put_be(b, MRP_HEADER_LEN + i * 4, 4, ip.to_u32() as u64);
        }
        MRP_HEADER_LEN + n * MRP_PRUNE_RECORD_LEN
    }
}

/// Flags bit 3: a request for a group address ([`MrpAllocate`]).
const FLAG_ALLOCATE: u8 = 8;
/// Bytes of an [`MrpAllocate`] request: the 8-byte header, a nonce (8) and the
/// lease asked for in milliseconds (4).
pub const MRP_ALLOCATE_LEN: usize = MRP_HEADER_LEN + 12;
/// Bytes of an [`MrpAllocation`] answer.
pub const MRP_ALLOCATION_LEN: usize = 20;
const ALLOCATION_MAGIC: [u8; 4] = *b"RCAL";

/// A controller's request for a group address (rocast's addition: group
/// addresses are allocated, not claimed): the MRP header with McstID 0.0.0.0,
/// `seq` 0, `total` 1, `count` 0 and flags bit 3, then a nonce that the answer
/// echoes and the lease asked for. Sent to any address of the switch's group space
/// (the switch answers ARP for all of them). The other MRP parsers refuse it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrpAllocate {
    pub nonce: u64,
    /// Milliseconds; the switch grants at most its own limit.
    pub lease_ms: u32,
}

impl MrpAllocate {
    pub const fn buffer_len(&self) -> usize {
        MRP_ALLOCATE_LEN
    }
    /// Parses exactly the allocation request.
    pub fn parse(b: &[u8]) -> Result<MrpAllocate> {
        if b.len() < MRP_HEADER_LEN {
            return Err(Error::Truncated("mrp header"));
        }
        if b.len() != MRP_ALLOCATE_LEN || b[..8] != [0, 0, 0, 0, 0, 1, 0, FLAG_ALLOCATE] {
            return Err(Error::Malformed("mrp allocate"));
        }
        Ok(MrpAllocate {
            nonce: be(b, 8, 8),
            lease_ms: be(b, 16, 4) as u32,
        })
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        b[..8].copy_from_slice(&[0, 0, 0, 0, 0, 1, 0, FLAG_ALLOCATE]);
        put_be(b, 8, 8, self.nonce);
        put_be(b, 16, 4, self.lease_ms as u64);
        MRP_ALLOCATE_LEN
    }
}

/// A switch's answer to an [`MrpAllocate`]: the group address now held for the
/// requester (its address and arrival port) until the lease runs out, each accepted
/// registration of the group by it renewing the lease. 20 bytes, sent from the
/// allocated address to the requester's MRP port: `"RCAL" | McstID (4) | nonce (8) |
/// lease ms (4)`. A switch with no address left answers a `SwitchReport` with
/// `TableFull` and McstID 0.0.0.0 instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrpAllocation {
    pub mcst_id: Ipv4Address,
    pub nonce: u64,
    pub lease_ms: u32,
}

impl MrpAllocation {
    pub const fn buffer_len(&self) -> usize {
        MRP_ALLOCATION_LEN
    }
    pub fn parse(b: &[u8]) -> Result<MrpAllocation> {
        if b.len() < MRP_ALLOCATION_LEN {
            return Err(Error::Truncated("mrp allocation"));
        }
        if b.len() != MRP_ALLOCATION_LEN || b[..4] != ALLOCATION_MAGIC {
            return Err(Error::Malformed("mrp allocation"));
        }
        Ok(MrpAllocation {
            mcst_id: Ipv4Address::from_u32(be(b, 4, 4) as u32),
            nonce: be(b, 8, 8),
            lease_ms: be(b, 16, 4) as u32,
        })
    }
    /// Whether this answers a request with `nonce`, sent (as the switch sends it) from
    /// the address it allocates. (That the address is in the group space asked of is
    /// the caller's check: `wire` does not know the spaces.)
    pub fn answers(&self, nonce: u64, from: Ipv4Address) -> bool {
        self.nonce == nonce && self.mcst_id == from
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        b[..4].copy_from_slice(&ALLOCATION_MAGIC);
        put_be(b, 4, 4, self.mcst_id.to_u32() as u64);
        put_be(b, 8, 8, self.nonce);
        put_be(b, 16, 4, self.lease_ms as u64);
        MRP_ALLOCATION_LEN
    }
}

/// One receiver's connection, as the controller gathered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MrpMember {
    pub ip: Ipv4Address,
    /// The receiver's QPN (24 bits).
    pub qpn: u32,
    /// The receiver's memory region for RDMA WRITE groups: (VA, RKey).
    pub region: Option<(u64, u32)>,
}

/// One MRP packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MrpRepr {
    pub mcst_id: Ipv4Address,
    pub seq: u8,
    pub total: u8,
    /// Members carry (VA, RKey): all of them, or none.
    pub write: bool,
    /// A new incarnation of the group's leader (its first registration), not a
    /// refresh: switches start the group's acknowledgement state afresh.
    pub new_incarnation: bool,
    pub members: Vec<MrpMember>,
}

impl MrpRepr {
    fn record_len(write: bool) -> usize {
        if write {
            MRP_WRITE_MEMBER_LEN
        } else {
            MRP_MEMBER_LEN
        }
    }

    /// Members one packet can carry.
    pub fn capacity(write: bool) -> usize {
        Self::capacity_within(write, MRP_MAX_PAYLOAD)
    }

    /// Members one packet of at most `payload_limit` bytes can carry (a sender that
    /// appends an authentication trailer leaves room for it).
    pub fn capacity_within(write: bool, payload_limit: usize) -> usize {
        payload_limit
            .saturating_sub(MRP_HEADER_LEN)
            .min(MRP_MAX_PAYLOAD - MRP_HEADER_LEN)
            / Self::record_len(write)
    }

    /// Parses an MRP UDP payload.
    pub fn parse(b: &[u8]) -> Result<MrpRepr> {
        if b.len() < MRP_HEADER_LEN {
            return Err(Error::Truncated("mrp header"));
        }
        let (seq, total, count, flags) = (b[4], b[5], b[6] as usize, b[7]);
        if flags & !(FLAG_WRITE | FLAG_NEW_INCARNATION) != 0 {
            return Err(Error::Unsupported("mrp flags"));
        }
        if total == 0 || seq >= total {
            return Err(Error::Malformed("mrp seq/total"));
        }
        let write = flags & FLAG_WRITE != 0;
        if count > Self::capacity(write) {
            return Err(Error::Malformed("mrp member count"));
        }
        let rec = Self::record_len(write);
        let want = MRP_HEADER_LEN + count * rec;
        if b.len() < want {
            return Err(Error::Truncated("mrp members"));
        }
        if b.len() > want {
            return Err(Error::Malformed("mrp length"));
        }
        let mut members = Vec::with_capacity(count);
        for i in 0..count {
            let at = MRP_HEADER_LEN + i * rec;
            let qpn = be(b, at + 4, 4) as u32;
            if qpn > 0xff_ffff {
                return Err(Error::Malformed("mrp qpn"));
            }
            members.push(MrpMember {
                ip: Ipv4Address::from_u32(be(b, at, 4) as u32),
                qpn,
                region: write.then(|| (be(b, at + 8, 8), be(b, at + 16, 4) as u32)),
            });
        }
        Ok(MrpRepr {
            mcst_id: Ipv4Address::from_u32(be(b, 0, 4) as u32),
            seq,
            total,
            write,
            new_incarnation: flags & FLAG_NEW_INCARNATION != 0,
            members,
        })
    }

    pub fn buffer_len(&self) -> usize {
        MRP_HEADER_LEN + self.members.len() * Self::record_len(self.write)
    }

    /// Writes the payload into `b` (at least `buffer_len()` bytes); returns its length.
    /// A member without a region in a WRITE packet is written with VA 0, RKey 0.
    pub fn emit(&self, b: &mut [u8]) -> usize {
        put_be(b, 0, 4, self.mcst_id.to_u32() as u64);
        b[4] = self.seq;
        b[5] = self.total;
        b[6] = self.members.len() as u8;
        b[7] = if self.write { FLAG_WRITE } else { 0 }
            | if self.new_incarnation {
                FLAG_NEW_INCARNATION
            } else {
                0
            };
        let rec = Self::record_len(self.write);
        for (i, m) in self.members.iter().enumerate() {
            let at = MRP_HEADER_LEN + i * rec;
            put_be(b, at, 4, m.ip.to_u32() as u64);
            put_be(b, at + 4, 4, (m.qpn & 0xff_ffff) as u64);
            if self.write {
                let (va, rkey) = m.region.unwrap_or((0, 0));
                put_be(b, at + 8, 8, va);
                put_be(b, at + 16, 4, rkey as u64);
            }
        }
        self.buffer_len()
    }

    /// The packets that register `members` for `mcst_id`: as few as the MTU allows,
    /// numbered `seq` 0..total. A WRITE group is one whose members all carry a
    /// region.
    pub fn split(mcst_id: Ipv4Address, members: &[MrpMember]) -> Result<Vec<MrpRepr>> {
        Self::split_within(mcst_id, members, MRP_MAX_PAYLOAD)
    }

    /// [`split`](Self::split) into packets of at most `payload_limit` bytes.
    pub fn split_within(
        mcst_id: Ipv4Address,
        members: &[MrpMember],
        payload_limit: usize,
    ) -> Result<Vec<MrpRepr>> {
        if members.is_empty() {
            return Err(Error::Malformed("mrp: a group needs members"));
        }
        let write = members[0].region.is_some();
        if members.iter().any(|m| m.region.is_some() != write) {
            return Err(Error::Malformed(
                "mrp: some members have a region and some not",
            ));
        }
        if members.iter().any(|m| m.qpn > 0xff_ffff) {
            return Err(Error::Malformed("mrp qpn"));
        }
        let per_packet = Self::capacity_within(write, payload_limit);
        if per_packet == 0 {
            return Err(Error::Malformed("mrp: no room for a member record"));
        }
        let chunks: Vec<&[MrpMember]> = members.chunks(per_packet).collect();
        let total =
            u8::try_from(chunks.len()).map_err(|_| Error::Unsupported("mrp: over 255 packets"))?;
        Ok(chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| MrpRepr {
                mcst_id,
                seq: i as u8,
                total,
                write,
                new_incarnation: false,
                members: c.to_vec(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_request_and_answer_round_trip_and_nothing_else_parses_as_them() {
        let req = MrpAllocate {
            nonce: 0x0102_0304_0506_0708,
            lease_ms: 60_000,
        };
        let mut b = [0u8; MRP_ALLOCATE_LEN];
        assert_eq!(req.emit(&mut b), MRP_ALLOCATE_LEN);
        assert_eq!(MrpAllocate::parse(&b), Ok(req));
        assert!(MrpRepr::parse(&b).is_err());
        assert!(MrpRelease::parse(&b).is_err());
        assert!(MrpPrune::parse(&b).is_err());
        assert!(MrpAllocate::parse(&b[..MRP_ALLOCATE_LEN - 1]).is_err());
        let mut bad = b;
        bad[3] = 1; // a McstID in a request: malformed
        assert!(MrpAllocate::parse(&bad).is_err());
        let rel = MrpRelease {
            mcst_id: Ipv4Address::UNSPECIFIED,
        };
        let mut rb = [0u8; 8];
        rel.emit(&mut rb);
        assert!(MrpAllocate::parse(&rb).is_err());

        let ans = MrpAllocation {
            mcst_id: Ipv4Address::new(10, 77, 0, 129),
            nonce: req.nonce,
            lease_ms: 30_000,
        };
        let mut a = [0u8; MRP_ALLOCATION_LEN];
        assert_eq!(ans.emit(&mut a), MRP_ALLOCATION_LEN);
        assert_eq!(MrpAllocation::parse(&a), Ok(ans));
        assert!(MrpAllocation::parse(&a[..19]).is_err());
        a[0] = b'X';
        assert!(MrpAllocation::parse(&a).is_err());
    }

    #[test]
    fn release_round_trips_and_is_not_a_registration() {
        let r = MrpRelease {
            mcst_id: Ipv4Address::new(10, 77, 0, 200),
        };
        let mut b = [0u8; 8];
        assert_eq!(r.emit(&mut b), 8);
        assert_eq!(MrpRelease::parse(&b), Ok(r));
        assert!(
            MrpRepr::parse(&b).is_err(),
            "a registration parser refuses it"
        );
        assert!(MrpRelease::parse(&b[..7]).is_err());
        let mut longer = b.to_vec();
        longer.push(0);
        assert!(MrpRelease::parse(&longer).is_err());
        for i in 4..8 {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert!(MrpRelease::parse(&bad).is_err(), "byte {i}");
        }
    }

    #[test]
    fn prune_round_trips_and_is_neither_a_registration_nor_a_release() {
        let p = MrpPrune {
            mcst_id: Ipv4Address::new(10, 77, 0, 200),
            members: vec![Ipv4Address::new(10, 0, 0, 3), Ipv4Address::new(10, 0, 0, 9)],
        };
        let mut b = vec![0u8; p.buffer_len()];
        assert_eq!(p.emit(&mut b), 16);
        assert_eq!(MrpPrune::parse(&b), Ok(p.clone()));
        assert!(MrpRepr::parse(&b).is_err());
        assert!(MrpRelease::parse(&b).is_err());
        assert!(MrpPrune::parse(&b[..15]).is_err(), "a cut record");
        let mut longer = b.clone();
        longer.extend([0; 4]);
        assert!(
            MrpPrune::parse(&longer).is_err(),
            "more bytes than count says"
        );
        for i in 4..8 {
            let mut bad = b.clone();
            bad[i] ^= 0x10;
            assert!(MrpPrune::parse(&bad).is_err(), "byte {i}");
        }
        let mut empty = b[..8].to_vec();
        empty[6] = 0;
        assert!(MrpPrune::parse(&empty).is_err(), "a prune names someone");
        let all = MrpPrune {
            mcst_id: p.mcst_id,
            members: (0..MRP_MAX_PRUNED as u32)
                .map(Ipv4Address::from_u32)
                .collect(),
        };
        assert!(all.buffer_len() <= MRP_MAX_PAYLOAD);
        let mut b = vec![0u8; all.buffer_len()];
        all.emit(&mut b);
        assert_eq!(MrpPrune::parse(&b).unwrap().members.len(), MRP_MAX_PRUNED);
    }

    fn member(i: u32, write: bool) -> MrpMember {
        MrpMember {
            ip: Ipv4Address::from_u32(0x0b00_0001 + i),
            qpn: 0x100 + i,
            region: write.then(|| (0x7f00_0000_0000 + i as u64 * 4096, 0x1000 + i)),
        }
    }

    #[test]
    fn the_papers_183_members_fill_a_1500_byte_mtu() {
        assert_eq!(MRP_MAX_MEMBERS, 183);
        assert_eq!(MRP_MAX_WRITE_MEMBERS, 73);
        let members: Vec<_> = (0..183).map(|i| member(i, false)).collect();
        let p = MrpRepr::split(Ipv4Address::new(239, 1, 2, 3), &members).unwrap();
        assert_eq!(p.len(), 1);
        assert!(p[0].buffer_len() <= MRP_MAX_PAYLOAD);
        assert_eq!(p[0].buffer_len(), 8 + 183 * 8);
    }

    #[test]
    fn larger_groups_span_packets_and_round_trip() {
        for (n, write, packets) in [(184u32, false, 2usize), (1000, false, 6), (200, true, 3)] {
            let members: Vec<_> = (0..n).map(|i| member(i, write)).collect();
            let ps = MrpRepr::split(Ipv4Address::new(239, 0, 0, 9), &members).unwrap();
            assert_eq!(ps.len(), packets);
            let mut back = Vec::new();
            for (i, p) in ps.iter().enumerate() {
                assert_eq!((p.seq as usize, p.total as usize), (i, packets));
                let mut buf = vec![0u8; p.buffer_len()];
                assert_eq!(p.emit(&mut buf), buf.len());
                assert!(buf.len() <= MRP_MAX_PAYLOAD);
                let q = MrpRepr::parse(&buf).unwrap();
                assert_eq!(&q, p);
                back.extend(q.members);
            }
            assert_eq!(back, members);
        }
    }

    #[test]
    fn emit_layout_is_the_documented_one() {
        let p = MrpRepr {
            mcst_id: Ipv4Address::new(239, 1, 2, 3),
            seq: 1,
            total: 2,
            write: true,
            new_incarnation: false,
            members: vec![member(0, true)],
        };
        let mut b = vec![0u8; p.buffer_len()];
        p.emit(&mut b);
        assert_eq!(
            b,
            [
                239, 1, 2, 3, 1, 2, 1, 1, // metadata
                11, 0, 0, 1, 0, 0, 1, 0, // IP, QPN
                0, 0, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0x10, 0 // VA, RKey
            ]
        );
    }

    #[test]
    fn malformed_registrations_are_errors() {
        let good = {
            let p = &MrpRepr::split(
                Ipv4Address::new(239, 0, 0, 1),
                &[member(0, false), member(1, false)],
            )
            .unwrap()[0];
            let mut b = vec![0u8; p.buffer_len()];
            p.emit(&mut b);
            b
        };
        assert!(MrpRepr::parse(&good).is_ok());
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            f(&mut b);
            MrpRepr::parse(&b)
        };
        assert_eq!(bad(&|b| b.truncate(5)), Err(Error::Truncated("mrp header")));
        assert_eq!(bad(&|b| b[7] = 2), Err(Error::Unsupported("mrp flags")));
        assert_eq!(bad(&|b| b[7] = 0x20), Err(Error::Unsupported("mrp flags")));
        // Bit 4 is a new incarnation, not an error, and round-trips.
        let fresh = bad(&|b| b[7] = 0x10).unwrap();
        assert!(fresh.new_incarnation && !fresh.write);
        let mut b = vec![0u8; fresh.buffer_len()];
        fresh.emit(&mut b);
        assert_eq!(b[7], 0x10);
        assert!(!MrpRepr::parse(&good).unwrap().new_incarnation);
        assert_eq!(bad(&|b| b[4] = 1), Err(Error::Malformed("mrp seq/total")));
        assert_eq!(bad(&|b| b[5] = 0), Err(Error::Malformed("mrp seq/total")));
        assert_eq!(bad(&|b| b[6] = 3), Err(Error::Truncated("mrp members")));
        assert_eq!(bad(&|b| b.push(0)), Err(Error::Malformed("mrp length")));
        assert_eq!(bad(&|b| b[12] = 1), Err(Error::Malformed("mrp qpn")));
        assert_eq!(
            bad(&|b| b[6] = 200),
            Err(Error::Malformed("mrp member count"))
        );
        assert!(MrpRepr::split(Ipv4Address::new(239, 0, 0, 1), &[]).is_err());
        assert!(MrpRepr::split(
            Ipv4Address::new(239, 0, 0, 1),
            &[member(0, false), member(1, true)]
        )
        .is_err());
        let huge: Vec<_> = (0..256 * 183).map(|i| member(i, false)).collect();
        assert!(MrpRepr::split(Ipv4Address::new(239, 0, 0, 1), &huge).is_err());
    }
}
