//! The NACK multicast protocol's own packets, carried as the payload of RDMA UD SENDs
//! (one packet per UD message, so each is at most one path MTU).
//!
//! Every packet starts with the same 8 bytes: magic `0xA7`, version 2, type, flags,
//! and the sender's session id (u32, big-endian). Sequence numbers are 64-bit: a
//! stream never wraps (2^64 packets), so the 24-bit PSN wrap that the paper met in
//! Soft-RoCE (§III-A) cannot reach this layer; the UD PSN below it wraps on its own.
//!
//! ```text
//! DATA       hdr | seq u64 | msg_seq u64 | msg_len u32 | frag_offset u32 | payload
//! HEARTBEAT  hdr | next_seq u64 | low_seq u64 | next_msg u64
//! NACK       hdr | receiver u32 | count u32 | from_seq u64
//! STATUS     hdr | receiver u32 | window u32 | position u64
//! ```
//! Version 2 added the heartbeat's `next_msg` (the message sequence the sender will
//! start next), so that a receiver that lost the last messages of a burst can say how
//! many (tail loss: no later message arrives to reveal the gap).
//! `parse` accepts any byte string without panicking: a short, unknown or
//! inconsistent packet is an error the endpoints count as a drop.
//!
//! With a group key ([`super::auth`]), the flags byte has [`FLAG_AUTH`] set and the
//! packet ends with a 16-byte tag; `parse` leaves the tag out of the packet (a DATA
//! payload ends before it) and [`GroupKey::verify`](super::auth::GroupKey::verify)
//! checks it. Without a key the wire is unchanged. The stream id (`session`) is
//! random per sender start, so a restarted sender is a new stream.

use thiserror::Error;

pub const MAGIC: u8 = 0xA7;
pub const VERSION: u8 = 2;
pub const COMMON_LEN: usize = 8;
pub const DATA_HEADER_LEN: usize = COMMON_LEN + 24;
pub const HEARTBEAT_LEN: usize = COMMON_LEN + 24;
pub const NACK_LEN: usize = COMMON_LEN + 16;
pub const STATUS_LEN: usize = COMMON_LEN + 16;

/// DATA flags.
pub const FLAG_FIRST: u8 = 1;
pub const FLAG_LAST: u8 = 2;
/// A retransmission answering a NACK (counted apart by receivers).
pub const FLAG_REPAIR: u8 = 4;
/// Any type: the packet ends with an [`AUTH_TAG_LEN`]-byte tag.
pub const FLAG_AUTH: u8 = 0x80;
/// Bytes of the tag a keyed packet ends with (the wire's; `auth` makes and checks it).
pub const AUTH_TAG_LEN: usize = 16;

const TYPE_DATA: u8 = 1;
const TYPE_HEARTBEAT: u8 = 2;
const TYPE_NACK: u8 = 3;
const TYPE_STATUS: u8 = 4;

/// Why a byte string is not a packet of this protocol.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PacketError {
    /// Shorter than its type's fixed header.
    #[error("packet truncated: {len} bytes, type needs {need}")]
    Truncated { len: usize, need: usize },
    /// Not this protocol (first byte is not the magic).
    #[error("bad magic {0:#04x}")]
    BadMagic(u8),
    /// A version this implementation does not speak.
    #[error("unsupported version {0}")]
    BadVersion(u8),
    /// A type byte that names no packet.
    #[error("unknown packet type {0}")]
    UnknownType(u8),
    /// A DATA fragment that does not fit inside its message, an empty NACK range, or a
    /// heartbeat whose low edge is past its high edge.
    #[error("inconsistent packet: {0}")]
    Inconsistent(&'static str),
}

/// One DATA fragment: bytes `frag_offset..frag_offset+payload.len()` of message
/// `msg_seq`, whose whole length is `msg_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRepr<'a> {
    pub seq: u64,
    pub msg_seq: u64,
    pub msg_len: u32,
    pub frag_offset: u32,
    pub flags: u8,
    pub payload: &'a [u8],
}

impl DataRepr<'_> {
    pub fn is_first(&self) -> bool {
        self.flags & FLAG_FIRST != 0
    }
    pub fn is_last(&self) -> bool {
        self.flags & FLAG_LAST != 0
    }
    pub fn is_repair(&self) -> bool {
        self.flags & FLAG_REPAIR != 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketRepr<'a> {
    Data(DataRepr<'a>),
    /// The sender's high edge (the next sequence it will use) and low edge (the oldest
    /// sequence it can still repair): tail-loss detection and explicit loss reports;
    /// and the message it starts next on the wire (`next_msg ≤ next_seq`), so that lost
    /// messages at the end of a burst are counted too.
    Heartbeat {
        next_seq: u64,
        low_seq: u64,
        next_msg: u64,
    },
    /// Receiver `receiver` misses `count` sequences starting at `from_seq`.
    Nack {
        receiver: u32,
        from_seq: u64,
        count: u32,
    },
    /// Receiver `receiver` has consumed every sequence below `position` and can buffer
    /// `window` more packets: flow-control feedback and liveness.
    Status {
        receiver: u32,
        position: u64,
        window: u32,
    },
}

/// A whole packet: which stream it belongs to and what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    pub session: u32,
    pub repr: PacketRepr<'a>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Sequence numbers (and message numbers) are below 2^63: a sender at 10^9 packets a
/// second needs 292 years to reach it, and the receiver's arithmetic on sequences
/// (`next_seq + 1`, a position plus a window) then never overflows. A packet naming
/// a sequence at or past it is malformed (the fuzz target reached an overflow with
/// edges near 2^64).
pub const MAX_SEQ: u64 = 1 << 63;

impl<'a> Packet<'a> {
    /// Whether `b` is a packet only a sender sends (DATA or a heartbeat): how a
    /// receiver learns where its STATUS goes from the first such packet's source.
    pub fn is_from_sender(b: &[u8]) -> bool {
        Packet::parse(b)
            .is_ok_and(|p| matches!(p.repr, PacketRepr::Data(_) | PacketRepr::Heartbeat { .. }))
    }

    pub fn parse(b: &'a [u8]) -> Result<Packet<'a>, PacketError> {
        if b.len() < COMMON_LEN {
            return Err(PacketError::Truncated {
                len: b.len(),
                need: COMMON_LEN,
            });
        }
        if b[0] != MAGIC {
            return Err(PacketError::BadMagic(b[0]));
        }
        if b[1] != VERSION {
            return Err(PacketError::BadVersion(b[1]));
        }
        let (ty, flags, session) = (b[2], b[3] & !FLAG_AUTH, u32_at(b, 4));
        let need = match ty {
            TYPE_DATA => DATA_HEADER_LEN,
            TYPE_HEARTBEAT => HEARTBEAT_LEN,
            TYPE_NACK => NACK_LEN,
            TYPE_STATUS => STATUS_LEN,
            t => return Err(PacketError::UnknownType(t)),
        };
        // A keyed packet's tag is not part of the packet (`auth` checks it).
        let tag = if b[3] & FLAG_AUTH != 0 {
            AUTH_TAG_LEN
        } else {
            0
        };
        if b.len() < need + tag {
            return Err(PacketError::Truncated {
                len: b.len(),
                need: need + tag,
            });
        }
        let b = &b[..b.len() - tag];
        let repr = match ty {
            TYPE_DATA => {
                let d = DataRepr {
                    seq: u64_at(b, 8),
                    msg_seq: u64_at(b, 16),
                    msg_len: u32_at(b, 24),
                    frag_offset: u32_at(b, 28),
                    flags,
                    payload: &b[DATA_HEADER_LEN..],
                };
                if d.seq >= MAX_SEQ || d.msg_seq >= MAX_SEQ {
                    return Err(PacketError::Inconsistent("sequence at or past 2^63"));
                }
                let end = d.frag_offset as u64 + d.payload.len() as u64;
                if end > d.msg_len as u64 {
                    return Err(PacketError::Inconsistent("fragment ends past its message"));
                }
                if d.is_first() != (d.frag_offset == 0) {
                    return Err(PacketError::Inconsistent("FIRST flag and offset disagree"));
                }
                if d.is_last() != (end == d.msg_len as u64) {
                    return Err(PacketError::Inconsistent(
                        "LAST flag and message end disagree",
                    ));
                }
                if d.payload.is_empty() && d.msg_len != 0 {
                    return Err(PacketError::Inconsistent(
                        "empty fragment of a non-empty message",
                    ));
                }
                PacketRepr::Data(d)
            }
            TYPE_HEARTBEAT => {
                let (next_seq, low_seq, next_msg) = (u64_at(b, 8), u64_at(b, 16), u64_at(b, 24));
                if next_seq >= MAX_SEQ {
                    return Err(PacketError::Inconsistent("sequence at or past 2^63"));
                }
                if low_seq > next_seq {
                    return Err(PacketError::Inconsistent(
                        "heartbeat low edge above high edge",
                    ));
                }
                if next_msg > next_seq {
                    // Every message takes at least one sequence.
                    return Err(PacketError::Inconsistent(
                        "heartbeat counts more messages than sequences",
                    ));
                }
                PacketRepr::Heartbeat {
                    next_seq,
                    low_seq,
                    next_msg,
                }
            }
            TYPE_NACK => {
                let (receiver, count, from_seq) = (u32_at(b, 8), u32_at(b, 12), u64_at(b, 16));
                if count == 0
                    || from_seq
                        .checked_add(count as u64)
                        .is_none_or(|e| e > MAX_SEQ)
                {
                    return Err(PacketError::Inconsistent("empty or overflowing NACK range"));
                }
                PacketRepr::Nack {
                    receiver,
                    from_seq,
                    count,
                }
            }
            _ => {
                let position = u64_at(b, 16);
                if position >= MAX_SEQ {
                    return Err(PacketError::Inconsistent("sequence at or past 2^63"));
                }
                PacketRepr::Status {
                    receiver: u32_at(b, 8),
                    window: u32_at(b, 12),
                    position,
                }
            }
        };
        Ok(Packet { session, repr })
    }

    pub fn buffer_len(&self) -> usize {
        match self.repr {
            PacketRepr::Data(d) => DATA_HEADER_LEN + d.payload.len(),
            PacketRepr::Heartbeat { .. } => HEARTBEAT_LEN,
            PacketRepr::Nack { .. } => NACK_LEN,
            PacketRepr::Status { .. } => STATUS_LEN,
        }
    }

    /// Appends the packet's bytes to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let (ty, flags) = match self.repr {
            PacketRepr::Data(d) => (TYPE_DATA, d.flags),
            PacketRepr::Heartbeat { .. } => (TYPE_HEARTBEAT, 0),
            PacketRepr::Nack { .. } => (TYPE_NACK, 0),
            PacketRepr::Status { .. } => (TYPE_STATUS, 0),
        };
        out.reserve(self.buffer_len());
        out.extend_from_slice(&[MAGIC, VERSION, ty, flags]);
        out.extend_from_slice(&self.session.to_be_bytes());
        match self.repr {
            PacketRepr::Data(d) => {
                out.extend_from_slice(&d.seq.to_be_bytes());
                out.extend_from_slice(&d.msg_seq.to_be_bytes());
                out.extend_from_slice(&d.msg_len.to_be_bytes());
                out.extend_from_slice(&d.frag_offset.to_be_bytes());
                out.extend_from_slice(d.payload);
            }
            PacketRepr::Heartbeat {
                next_seq,
                low_seq,
                next_msg,
            } => {
                out.extend_from_slice(&next_seq.to_be_bytes());
                out.extend_from_slice(&low_seq.to_be_bytes());
                out.extend_from_slice(&next_msg.to_be_bytes());
            }
            PacketRepr::Nack {
                receiver,
                from_seq,
                count,
            } => {
                out.extend_from_slice(&receiver.to_be_bytes());
                out.extend_from_slice(&count.to_be_bytes());
                out.extend_from_slice(&from_seq.to_be_bytes());
            }
            PacketRepr::Status {
                receiver,
                position,
                window,
            } => {
                out.extend_from_slice(&receiver.to_be_bytes());
                out.extend_from_slice(&window.to_be_bytes());
                out.extend_from_slice(&position.to_be_bytes());
            }
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.buffer_len());
        self.emit(&mut v);
        v
    }
}

/// Sets the REPAIR flag of an emitted DATA packet in place (a retransmission reuses the
/// stored bytes).
pub fn mark_repair(data_packet: &mut [u8]) {
    if data_packet.len() >= COMMON_LEN && data_packet[2] == TYPE_DATA {
        data_packet[3] |= FLAG_REPAIR;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_kinds() -> Vec<Packet<'static>> {
        vec![
            Packet {
                session: 7,
                repr: PacketRepr::Data(DataRepr {
                    seq: (1 << 63) - 3,
                    msg_seq: 9,
                    msg_len: 5,
                    frag_offset: 0,
                    flags: FLAG_FIRST | FLAG_LAST,
                    payload: b"hello",
                }),
            },
            Packet {
                session: 1,
                repr: PacketRepr::Heartbeat {
                    next_seq: 100,
                    low_seq: 40,
                    next_msg: 30,
                },
            },
            Packet {
                session: 2,
                repr: PacketRepr::Nack {
                    receiver: 3,
                    from_seq: 17,
                    count: 4,
                },
            },
            Packet {
                session: 3,
                repr: PacketRepr::Status {
                    receiver: 4,
                    position: 99,
                    window: 256,
                },
            },
        ]
    }

    #[test]
    fn emit_then_parse_round_trips_every_type() {
        for p in all_kinds() {
            let b = p.to_vec();
            assert_eq!(b.len(), p.buffer_len());
            assert_eq!(Packet::parse(&b).unwrap(), p);
        }
    }

    #[test]
    fn data_layout_is_pinned() {
        let b = all_kinds()[0].to_vec();
        assert_eq!(&b[..8], &[0xA7, 2, 1, 3, 0, 0, 0, 7]);
        assert_eq!(&b[8..16], &((1u64 << 63) - 3).to_be_bytes());
        assert_eq!(&b[24..28], &5u32.to_be_bytes());
        assert_eq!(&b[32..], b"hello");
    }

    #[test]
    fn every_prefix_and_corruption_is_an_error_not_a_panic() {
        for p in all_kinds() {
            let b = p.to_vec();
            let fixed = b.len()
                - if matches!(p.repr, PacketRepr::Data(_)) {
                    5
                } else {
                    0
                };
            for n in 0..fixed {
                assert!(Packet::parse(&b[..n]).is_err(), "prefix {n} of {p:?}");
            }
            for i in 0..b.len() {
                for bit in 0..8 {
                    let mut c = b.clone();
                    c[i] ^= 1 << bit;
                    let _ = Packet::parse(&c);
                }
            }
        }
        assert_eq!(Packet::parse(&[0x00; 40]), Err(PacketError::BadMagic(0)));
        assert_eq!(
            Packet::parse(&[0xA7, 1, 1, 0, 0, 0, 0, 0]),
            Err(PacketError::BadVersion(1))
        );
        assert_eq!(
            Packet::parse(&[0xA7, 2, 9, 0, 0, 0, 0, 0]),
            Err(PacketError::UnknownType(9))
        );
    }

    #[test]
    fn inconsistent_fragments_and_ranges_are_refused() {
        let frag = |offset: u32, len: u32, flags: u8, payload: &'static [u8]| {
            Packet {
                session: 1,
                repr: PacketRepr::Data(DataRepr {
                    seq: 0,
                    msg_seq: 0,
                    msg_len: len,
                    frag_offset: offset,
                    flags,
                    payload,
                }),
            }
            .to_vec()
        };
        assert!(Packet::parse(&frag(0, 3, FLAG_FIRST | FLAG_LAST, b"abcd")).is_err());
        assert!(Packet::parse(&frag(1, 4, FLAG_FIRST, b"abc")).is_err());
        assert!(Packet::parse(&frag(0, 4, FLAG_FIRST, b"abcd")).is_err());
        assert!(Packet::parse(&frag(0, 8, FLAG_FIRST, b"abcd")).is_ok());
        assert!(Packet::parse(&frag(4, 8, FLAG_LAST, b"abcd")).is_ok());
        assert!(Packet::parse(&frag(0, 0, FLAG_FIRST | FLAG_LAST, b"")).is_ok());
        let nack0 = Packet {
            session: 1,
            repr: PacketRepr::Nack {
                receiver: 1,
                from_seq: 5,
                count: 0,
            },
        }
        .to_vec();
        assert!(Packet::parse(&nack0).is_err());
        let hb = Packet {
            session: 1,
            repr: PacketRepr::Heartbeat {
                next_seq: 5,
                low_seq: 6,
                next_msg: 0,
            },
        }
        .to_vec();
        assert!(Packet::parse(&hb).is_err());
    }

    #[test]
    fn mark_repair_sets_only_the_flag() {
        let mut b = all_kinds()[0].to_vec();
        mark_repair(&mut b);
        let Ok(Packet {
            repr: PacketRepr::Data(d),
            ..
        }) = Packet::parse(&b)
        else {
            panic!()
        };
        assert!(d.is_repair() && d.is_first() && d.is_last());
    }
}
