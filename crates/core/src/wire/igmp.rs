//! IGMP (RFC 2236 v2, RFC 3376 v3) as far as a snooping switch reads and writes it
//! (RFC 4541): membership reports and leaves in, general queries out.
//!
//! A snooping switch needs only *which groups a port wants*: [`IgmpRepr::parse`]
//! turns any report into a list of [`MembershipChange`]s (join or leave per group)
//! and classifies the rest (queries; unknown types). Source lists of IGMPv3 records
//! are not kept: a record that wants any source of a group is a join, a record that
//! wants none is a leave (RFC 4541 §2.1.1 allows a switch to snoop at group
//! granularity). The checksum is verified; a short or corrupt message is an error,
//! never a panic.

use super::ipv4::ones_complement_sum;
use super::{Error, Ipv4Address, Result};

/// IP protocol number of IGMP.
pub const IP_PROTO_IGMP: u8 = 2;
/// All-systems group (general queries go there).
pub const ALL_SYSTEMS: Ipv4Address = Ipv4Address::new(224, 0, 0, 1);
/// Where IGMPv3 reports go.
pub const ALL_IGMPV3_ROUTERS: Ipv4Address = Ipv4Address::new(224, 0, 0, 22);

const TYPE_QUERY: u8 = 0x11;
const TYPE_V1_REPORT: u8 = 0x12;
const TYPE_V2_REPORT: u8 = 0x16;
const TYPE_V2_LEAVE: u8 = 0x17;
const TYPE_V3_REPORT: u8 = 0x22;

/// Length of an IGMPv3 general query (RFC 3376 §4.1, no sources).
pub const IGMPV3_QUERY_LEN: usize = 12;

/// One group a report joins or leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MembershipChange {
    pub group: Ipv4Address,
    pub join: bool,
}

/// What an IGMP message says, to a snooping switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgmpRepr {
    /// A membership query (general when `group` is unspecified).
    Query { group: Ipv4Address },
    /// Reports and leaves of any version: the groups they join or leave, in order.
    Membership(Vec<MembershipChange>),
    /// A valid message of a type a switch does not act on (e.g. DVMRP, mtrace).
    Other { msg_type: u8 },
}

impl IgmpRepr {
    /// Parses an IGMP message (the IPv4 payload), checksum verified.
    pub fn parse(b: &[u8]) -> Result<IgmpRepr> {
        if b.len() < 8 {
            return Err(Error::Truncated("IGMP"));
        }
        if ones_complement_sum(b) != 0xffff {
            return Err(Error::Checksum("IGMP"));
        }
        let addr = |at: usize| Ipv4Address([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        match b[0] {
            TYPE_QUERY => Ok(IgmpRepr::Query { group: addr(4) }),
            TYPE_V1_REPORT | TYPE_V2_REPORT | TYPE_V2_LEAVE => {
                let group = addr(4);
                if !group.is_multicast() {
                    return Err(Error::Malformed("IGMP"));
                }
                Ok(IgmpRepr::Membership(vec![MembershipChange {
                    group,
                    join: b[0] != TYPE_V2_LEAVE,
                }]))
            }
            TYPE_V3_REPORT => {
                let records = u16::from_be_bytes([b[6], b[7]]) as usize;
                let mut at = 8;
                let mut changes = Vec::with_capacity(records.min(64));
                for _ in 0..records {
                    if b.len() < at + 8 {
                        return Err(Error::Truncated("IGMP"));
                    }
                    let (kind, aux_words) = (b[at], b[at + 1] as usize);
                    let sources = u16::from_be_bytes([b[at + 2], b[at + 3]]) as usize;
                    let group = addr(at + 4);
                    let len = 8 + 4 * sources + 4 * aux_words;
                    if b.len() < at + len {
                        return Err(Error::Truncated("IGMP"));
                    }
                    if !group.is_multicast() {
                        return Err(Error::Malformed("IGMP"));
                    }
                    // RFC 3376 §4.2.12: 1 MODE_IS_INCLUDE, 2 MODE_IS_EXCLUDE,
                    // 3 CHANGE_TO_INCLUDE, 4 CHANGE_TO_EXCLUDE, 5 ALLOW, 6 BLOCK.
                    let join = match kind {
                        2 | 4 => Some(true),
                        1 | 3 => Some(sources > 0),
                        5 => (sources > 0).then_some(true),
                        // BLOCK takes sources away from a mode the switch does not
                        // track; the group's membership stands.
                        6 => None,
                        _ => return Err(Error::Malformed("IGMP")),
                    };
                    if let Some(join) = join {
                        changes.push(MembershipChange { group, join });
                    }
                    at += len;
                }
                Ok(IgmpRepr::Membership(changes))
            }
            t => Ok(IgmpRepr::Other { msg_type: t }),
        }
    }

    /// An IGMPv3 general query (RFC 3376 §4.1): max response time `max_resp_ds`
    /// tenths of a second (< 128, the unscaled range), robustness `qrv`, query
    /// interval `qqic_s` seconds (< 128).
    pub fn emit_general_query(max_resp_ds: u8, qrv: u8, qqic_s: u8) -> [u8; IGMPV3_QUERY_LEN] {
        let mut q = [0u8; IGMPV3_QUERY_LEN];
        q[0] = TYPE_QUERY;
        q[1] = max_resp_ds.min(127);
        q[8] = qrv.min(7);
        q[9] = qqic_s.min(127);
        let c = !ones_complement_sum(&q);
        q[2..4].copy_from_slice(&c.to_be_bytes());
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_checksum(mut m: Vec<u8>) -> Vec<u8> {
        m[2] = 0;
        m[3] = 0;
        let c = !ones_complement_sum(&m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        m
    }

    fn g(d: u8) -> Ipv4Address {
        Ipv4Address::new(239, 1, 1, d)
    }

    #[test]
    fn v2_report_and_leave() {
        let r = with_checksum(vec![0x16, 0, 0, 0, 239, 1, 1, 7]);
        assert_eq!(
            IgmpRepr::parse(&r),
            Ok(IgmpRepr::Membership(vec![MembershipChange {
                group: g(7),
                join: true
            }]))
        );
        let l = with_checksum(vec![0x17, 0, 0, 0, 239, 1, 1, 7]);
        assert_eq!(
            IgmpRepr::parse(&l),
            Ok(IgmpRepr::Membership(vec![MembershipChange {
                group: g(7),
                join: false
            }]))
        );
    }

    /// The report Linux sends for `IP_ADD_MEMBERSHIP` (one CHANGE_TO_EXCLUDE record, no
    /// sources) and for the drop (CHANGE_TO_INCLUDE, no sources), plus records with
    /// sources and aux data that must be stepped over.
    #[test]
    fn v3_records_join_and_leave_by_mode() {
        let mut m = vec![0x22, 0, 0, 0, 0, 0, 0, 5];
        m.extend([4, 0, 0, 0, 239, 1, 1, 1]); // TO_EX {} : join
        m.extend([3, 0, 0, 0, 239, 1, 1, 2]); // TO_IN {} : leave
        m.extend([
            1, 1, 0, 1, 239, 1, 1, 3, 10, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd,
        ]); // IS_IN {s}, aux
        m.extend([6, 0, 0, 1, 239, 1, 1, 4, 10, 0, 0, 1]); // BLOCK: no change
        m.extend([5, 0, 0, 0, 239, 1, 1, 5]); // ALLOW {}: nothing allowed
        let m = with_checksum(m);
        assert_eq!(
            IgmpRepr::parse(&m),
            Ok(IgmpRepr::Membership(vec![
                MembershipChange {
                    group: g(1),
                    join: true
                },
                MembershipChange {
                    group: g(2),
                    join: false
                },
                MembershipChange {
                    group: g(3),
                    join: true
                },
            ]))
        );
    }

    #[test]
    fn bad_messages_are_errors() {
        let r = with_checksum(vec![0x16, 0, 0, 0, 239, 1, 1, 7]);
        let mut bad = r.clone();
        bad[7] ^= 1;
        assert_eq!(IgmpRepr::parse(&bad), Err(Error::Checksum("IGMP")));
        assert_eq!(IgmpRepr::parse(&r[..7]), Err(Error::Truncated("IGMP")));
        // A report for a unicast address.
        let u = with_checksum(vec![0x16, 0, 0, 0, 10, 1, 1, 7]);
        assert_eq!(IgmpRepr::parse(&u), Err(Error::Malformed("IGMP")));
        // A v3 report claiming more records than it carries, and one whose record
        // claims more sources than fit.
        let short = with_checksum(vec![0x22, 0, 0, 0, 0, 0, 0, 2, 4, 0, 0, 0, 239, 1, 1, 1]);
        assert_eq!(IgmpRepr::parse(&short), Err(Error::Truncated("IGMP")));
        let over = with_checksum(vec![0x22, 0, 0, 0, 0, 0, 0, 1, 4, 0, 0, 9, 239, 1, 1, 1]);
        assert_eq!(IgmpRepr::parse(&over), Err(Error::Truncated("IGMP")));
        let kind = with_checksum(vec![0x22, 0, 0, 0, 0, 0, 0, 1, 9, 0, 0, 0, 239, 1, 1, 1]);
        assert_eq!(IgmpRepr::parse(&kind), Err(Error::Malformed("IGMP")));
    }

    #[test]
    fn the_general_query_parses_back() {
        let q = IgmpRepr::emit_general_query(100, 2, 125);
        assert_eq!(ones_complement_sum(&q), 0xffff);
        assert_eq!(
            IgmpRepr::parse(&q),
            Ok(IgmpRepr::Query {
                group: Ipv4Address::UNSPECIFIED
            })
        );
        assert_eq!((q[1], q[8], q[9]), (100, 2, 125));
    }
}
