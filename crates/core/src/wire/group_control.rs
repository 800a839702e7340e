//! The group control channel: every message a multicast group's leader and its members
//! exchange over TCP (`rocast_net::mcast`, and the C programs in `verbs/`), and the
//! framing that carries them on the stream. This module owns those bytes; what the
//! messages mean to a group (when each is sent, what a member does with it) is the
//! drivers' business.
//!
//! # Framing
//!
//! ```text
//!  0      1               3
//!  +------+---------------+------------------+
//!  | type | length (BE16) | body (length)    |
//!  +------+---------------+------------------+
//! ```
//!
//! `type` is a [`MessageType`] code; `length` counts the body only. A frame whose
//! type is unknown, or whose length exceeds what that type can carry (at most
//! [`MAX_BODY_LEN`], an `Overlay` of 256 ranks), is an error as soon as its three
//! header bytes arrive, so [`StreamDecoder`] never buffers more than
//! `FRAME_HEADER_LEN + MAX_BODY_LEN` bytes. There is no resynchronisation: after an
//! error the stream is out of step and the connection must be closed.
//!
//! # Version
//!
//! [`GROUP_CONTROL_VERSION`] is the first body byte of the two handshake messages,
//! `Params` (leader → member, the first frame a member receives) and `Join`
//! (member → leader, the first frame a leader receives). Each side checks the other's
//! before it commits resources (the member opens its QP and WRITE region only after
//! `Params`, the leader registers the group with the switches only after every `Join`).
//! The version is in the handshake bodies rather than in every frame header because it
//! is a property of the connection, not of a frame, and because the 3-byte header is
//! then the same as every earlier peer's: an older peer's first frame still decodes and
//! fails with "unsupported group control version" instead of desynchronising the
//! stream. The version is 4. Version 1 is the unversioned layout before 2, whose
//! `Params` began with the op byte (0 or 1), so an old leader's `Params` reads as
//! version 0 or 1 and is refused. Version 3 carries the leader's random start
//! PSN in `Params` and a SHA-256 of the buffer in `Announce` and `Result` where 2 had a
//! CRC-32: a CRC is no verdict against a stranger who injects data, since injected bytes
//! can be chosen to keep it (CRC-32 is linear), while a SHA-256 match cannot be forged.
//! Version 4 adds `Holding`, a member's account of the part of a buffer it
//! holds when the safeguard moves that buffer to the overlay mid-transfer, so the
//! overlay resends only what some member lacks. A version-2 or -3 peer's `Params` or
//! `Join` is refused with the version error.
//!
//! # Messages
//!
//! All integers big-endian; "ok" and "op" bytes are exactly 0 or 1.
//!
//! | type | name      | direction | body bytes | fields (offset: size)                                  |
//! |-----:|-----------|-----------|-----------:|--------------------------------------------------------|
//! |  1   | `Params`  | L → M     | 18         | 0:1 version, 1:1 op (0 SEND, 1 WRITE), 2:8 capacity (largest buffer), 10:4 message bytes, 14:4 start PSN (24 bits) of the leader's data |
//! |  2   | `Join`    | M → L     | 21         | 0:1 version, 1:4 member IPv4, 5:4 QPN (24 bits), 9:8 VA, 17:4 RKey |
//! |  3   | `Confirm` | M → L     | 12         | a [`Confirmation`]: 0:4 McstID, 4:4 member IPv4, 8:4 QPN (24 bits) |
//! |  4   | `Done`    | L → M     | 4          | 0:4 buffer sequence (a WRITE buffer is all in the member's region) |
//! |  5   | `Result`  | M → L     | 41         | 0:1 ok, 1:32 SHA-256 of what the member holds, 33:8 when it held all of it (CLOCK_MONOTONIC ns) |
//! |  6   | `Overlay` | L → M     | 10 + 4·n   | 0:1 scheme code, 1:4 block bytes, 5:4 pacing Mbit/s (0: none), 9:1 window (≥ 1), 10:4·n roster (IPv4, rank order, leader first; 1 ≤ n ≤ 256) |
//! |  7   | `Ready`   | M → L     | 0          | after `Overlay`: its overlay connections are up; after `Announce`: its receives are posted |
//! |  8   | —         |           |            | reserved: an early `Go` (leader → member) that no peer ever sent; refused as unknown |
//! |  9   | `Announce`| L → M     | 44         | 0:4 buffer sequence (from 1), 4:8 bytes, 12:32 SHA-256 of the buffer |
//! | 10   | `Close`   | L → M     | 1          | 0:1 ok: the group ends, successfully or not             |
//! | 11   | `Evicted` | L → M     | 4          | 0:4 member IPv4: the leader evicted that member (its connection broke); the group goes on without it |
//! | 12   | `Invitation` | M → L  | 16         | 0:16 the member's invitation token (`control::invitation`), before its `Join` |
//! | 13   | `Resume`  | L → M     | 12         | 0:4 buffer sequence, 4:8 offset: the safeguard moved buffer `seq` to the overlay mid-transfer; every member holds its bytes below `offset` from the switch, the overlay carries the rest |
//! | 14   | `Holding` | M → L     | 12         | 0:4 buffer sequence, 4:8 bytes: after `Overlay` mid-buffer, before its `Ready`: the member holds buffer `seq`'s bytes below this from the switch (it may hold more than every member acknowledged), so the leader resumes from the lowest holding and the driver can skip members that hold a part |
//!
//! The scheme code of `Overlay` is `rocast_core::overlay::Scheme::code`; this module
//! carries it as a byte and leaves its meaning to the overlay.
//!
//! The C programs (`verbs/`) run the group session through `crates/ffi`, so this
//! module is the channel's only codec; `verbs/rocast_proto.h` repeats the port and the
//! invitation and digest lengths, checked by `crates/core/tests/c_header.rs`.

use super::{be, put_be, Error, Ipv4Address, Result};

/// The leader's default TCP port for the channel (after RoCEv2's 4791 and MRP's 4792;
/// PEEL's 4793 is UDP).
pub const GROUP_CONTROL_PORT: u16 = 4793;
/// The version this build speaks (see the module docs for why it is 4).
pub const GROUP_CONTROL_VERSION: u8 = 4;
/// `type (1) | length (2)`.
pub const FRAME_HEADER_LEN: usize = 3;

pub const PARAMS_LEN: usize = 18;
pub const JOIN_LEN: usize = 21;
pub const CONFIRMATION_LEN: usize = 12;
pub const DONE_LEN: usize = 4;
pub const RESULT_LEN: usize = 41;
/// `Overlay` without its roster.
pub const OVERLAY_HEADER_LEN: usize = 10;
/// Ranks an `Overlay` roster holds at most (rank numbers are one byte in the overlay's
/// QPNs).
pub const OVERLAY_MAX_RANKS: usize = 256;
pub const OVERLAY_MAX_LEN: usize = OVERLAY_HEADER_LEN + 4 * OVERLAY_MAX_RANKS;
pub const READY_LEN: usize = 0;
pub const ANNOUNCE_LEN: usize = 44;
pub const CLOSE_LEN: usize = 1;
pub const EVICTED_LEN: usize = 4;
pub const INVITATION_LEN: usize = 16;
pub const RESUME_LEN: usize = 12;
pub const HOLDING_LEN: usize = 12;
/// The longest body of any message: the decoder refuses a frame that declares more.
pub const MAX_BODY_LEN: usize = OVERLAY_MAX_LEN;

/// The largest QPN (24 bits).
const QPN_MAX: u32 = 0xff_ffff;

/// Byte offsets and ranges of every field, per message body (frame offsets for the
/// header). Public so tests and tools can name a field instead of repeating offsets.
pub mod field {
    pub type Field = core::ops::Range<usize>;

    pub mod frame {
        use super::Field;
        pub const TYPE: usize = 0;
        pub const LENGTH: Field = 1..3;
        pub const BODY: usize = 3;
    }
    pub mod params {
        use super::Field;
        pub const VERSION: usize = 0;
        pub const OP: usize = 1;
        pub const CAPACITY: Field = 2..10;
        pub const MESSAGE_BYTES: Field = 10..14;
        pub const START_PSN: Field = 14..18;
    }
    pub mod join {
        use super::Field;
        pub const VERSION: usize = 0;
        pub const IP: Field = 1..5;
        pub const QPN: Field = 5..9;
        pub const VA: Field = 9..17;
        pub const RKEY: Field = 17..21;
    }
    pub mod confirm {
        use super::Field;
        pub const MCST_ID: Field = 0..4;
        pub const IP: Field = 4..8;
        pub const QPN: Field = 8..12;
    }
    pub mod done {
        use super::Field;
        pub const SEQ: Field = 0..4;
    }
    pub mod result {
        use super::Field;
        pub const OK: usize = 0;
        pub const SHA256: Field = 1..33;
        pub const HELD_NS: Field = 33..41;
    }
    pub mod overlay {
        use super::Field;
        pub const SCHEME: usize = 0;
        pub const BLOCK_BYTES: Field = 1..5;
        pub const RATE_MBPS: Field = 5..9;
        pub const WINDOW: usize = 9;
        pub const ROSTER: usize = 10;
    }
    pub mod announce {
        use super::Field;
        pub const SEQ: Field = 0..4;
        pub const BYTES: Field = 4..12;
        pub const SHA256: Field = 12..44;
    }
    pub mod close {
        pub const OK: usize = 0;
    }
    pub mod evicted {
        use super::Field;
        pub const IP: Field = 0..4;
    }
    pub mod invitation {
        use super::Field;
        pub const TOKEN: Field = 0..16;
    }
    pub mod resume {
        use super::Field;
        pub const SEQ: Field = 0..4;
        pub const OFFSET: Field = 4..12;
    }
    pub mod holding {
        use super::Field;
        pub const SEQ: Field = 0..4;
        pub const BYTES: Field = 4..12;
    }
}

/// A frame's type code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MessageType {
    Params = 1,
    Join = 2,
    Confirm = 3,
    Done = 4,
    Result = 5,
    Overlay = 6,
    Ready = 7,
    Announce = 9,
    Close = 10,
    Evicted = 11,
    Invitation = 12,
    Resume = 13,
    Holding = 14,
}

impl MessageType {
    pub const ALL: [MessageType; 13] = [
        MessageType::Params,
        MessageType::Join,
        MessageType::Confirm,
        MessageType::Done,
        MessageType::Result,
        MessageType::Overlay,
        MessageType::Ready,
        MessageType::Announce,
        MessageType::Close,
        MessageType::Evicted,
        MessageType::Invitation,
        MessageType::Resume,
        MessageType::Holding,
    ];

    /// The type with this code; None for an unknown (or the reserved 8).
    pub fn from_code(code: u8) -> Option<MessageType> {
        MessageType::ALL.into_iter().find(|t| *t as u8 == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            MessageType::Params => "Params",
            MessageType::Join => "Join",
            MessageType::Confirm => "Confirm",
            MessageType::Done => "Done",
            MessageType::Result => "Result",
            MessageType::Overlay => "Overlay",
            MessageType::Ready => "Ready",
            MessageType::Announce => "Announce",
            MessageType::Close => "Close",
            MessageType::Evicted => "Evicted",
            MessageType::Invitation => "Invitation",
            MessageType::Resume => "Resume",
            MessageType::Holding => "Holding",
        }
    }

    /// The longest body this type may carry (every type but `Overlay` has exactly one
    /// length). Checked on the frame header, before the body is buffered.
    pub fn max_body_len(self) -> usize {
        match self {
            MessageType::Params => PARAMS_LEN,
            MessageType::Join => JOIN_LEN,
            MessageType::Confirm => CONFIRMATION_LEN,
            MessageType::Done => DONE_LEN,
            MessageType::Result => RESULT_LEN,
            MessageType::Overlay => OVERLAY_MAX_LEN,
            MessageType::Ready => READY_LEN,
            MessageType::Announce => ANNOUNCE_LEN,
            MessageType::Close => CLOSE_LEN,
            MessageType::Evicted => EVICTED_LEN,
            MessageType::Invitation => INVITATION_LEN,
            MessageType::Resume => RESUME_LEN,
            MessageType::Holding => HOLDING_LEN,
        }
    }
}

/// Checks a body is exactly `want` bytes: shorter is truncated, longer malformed (the
/// channel frames messages; extra bytes mean a different protocol).
fn exact(b: &[u8], want: usize, what: &'static str, too_long: &'static str) -> Result<()> {
    match b.len() {
        n if n < want => Err(Error::Truncated(what)),
        n if n > want => Err(Error::Malformed(too_long)),
        _ => Ok(()),
    }
}

fn flag(byte: u8, what: &'static str) -> Result<bool> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Error::Malformed(what)),
    }
}

/// Checks the handshake version byte, before anything else of the body: an older or
/// newer peer's layout may differ in length too, and the version is the clear error.
fn version(b: &[u8], what: &'static str) -> Result<()> {
    match b.first() {
        None => Err(Error::Truncated(what)),
        Some(&GROUP_CONTROL_VERSION) => Ok(()),
        Some(_) => Err(Error::Unsupported("group control version")),
    }
}

fn digest(b: &[u8], r: field::Field) -> [u8; 32] {
    let mut d = [0u8; 32];
    d.copy_from_slice(&b[r]);
    d
}

/// A 24-bit PSN field: a value over 24 bits is malformed.
fn psn24(b: &[u8], r: field::Field, what: &'static str) -> Result<u32> {
    let v = be(b, r.start, 4) as u32;
    if v > QPN_MAX {
        return Err(Error::Malformed(what));
    }
    Ok(v)
}

fn ip(b: &[u8], r: field::Field) -> Ipv4Address {
    Ipv4Address::from_u32(be(b, r.start, 4) as u32)
}

/// Leader → member, the first frame: how the group sends, so the member can open its
/// QP and size its receive buffers or WRITE region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// RDMA WRITE (true) or SEND (false).
    pub write: bool,
    /// The largest buffer one send may carry.
    pub capacity: u64,
    /// Each buffer is cut into messages of at most this many bytes.
    pub message_bytes: u32,
    /// The PSN of the leader's first data packet (24 bits, drawn at random per leader):
    /// the member's QP expects it, so a stranger must guess it as well as the QPN.
    pub start_psn: u32,
}

impl Params {
    pub const fn buffer_len(&self) -> usize {
        PARAMS_LEN
    }
    pub fn parse(b: &[u8]) -> Result<Params> {
        use field::params::*;
        version(b, "params")?;
        exact(b, PARAMS_LEN, "params", "params length")?;
        Ok(Params {
            write: flag(b[OP], "params op")?,
            capacity: be(b, CAPACITY.start, 8),
            message_bytes: be(b, MESSAGE_BYTES.start, 4) as u32,
            start_psn: psn24(b, START_PSN, "params start psn")?,
        })
    }
    /// Writes the body into `b` (at least `buffer_len()` bytes); returns its length.
    pub fn emit(&self, b: &mut [u8]) -> usize {
        use field::params::*;
        b[VERSION] = GROUP_CONTROL_VERSION;
        b[OP] = self.write as u8;
        put_be(b, CAPACITY.start, 8, self.capacity);
        put_be(b, MESSAGE_BYTES.start, 4, self.message_bytes as u64);
        put_be(b, START_PSN.start, 4, (self.start_psn & QPN_MAX) as u64);
        PARAMS_LEN
    }
}

/// Member → leader, the answer to `Params`: the member's connection to the group, as
/// its MRP record will carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Join {
    pub ip: Ipv4Address,
    /// 24 bits.
    pub qpn: u32,
    /// The member's WRITE region (meaningful for a WRITE group only).
    pub va: u64,
    pub rkey: u32,
}

impl Join {
    pub const fn buffer_len(&self) -> usize {
        JOIN_LEN
    }
    pub fn parse(b: &[u8]) -> Result<Join> {
        use field::join::*;
        version(b, "join")?;
        exact(b, JOIN_LEN, "join", "join length")?;
        let qpn = be(b, QPN.start, 4) as u32;
        if qpn > QPN_MAX {
            return Err(Error::Malformed("join qpn"));
        }
        Ok(Join {
            ip: ip(b, IP),
            qpn,
            va: be(b, VA.start, 8),
            rkey: be(b, RKEY.start, 4) as u32,
        })
    }
    /// Writes the body into `b` (at least `buffer_len()` bytes); returns its length.
    /// Errors, writing nothing, if the QPN does not fit 24 bits.
    pub fn emit(&self, b: &mut [u8]) -> Result<usize> {
        use field::join::*;
        if self.qpn > QPN_MAX {
            return Err(Error::Malformed("join qpn"));
        }
        b[VERSION] = GROUP_CONTROL_VERSION;
        put_be(b, IP.start, 4, self.ip.to_u32() as u64);
        put_be(b, QPN.start, 4, self.qpn as u64);
        put_be(b, VA.start, 8, self.va);
        put_be(b, RKEY.start, 4, self.rkey as u64);
        Ok(JOIN_LEN)
    }
}

/// Member → leader (`Confirm`): a member found its own record in an MRP packet for the
/// group (Cepheus §III-C step 3).
///
/// The QPN is the one the MRP record carried, so the controller also learns that the
/// record arrived intact through every switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Confirmation {
    pub mcst_id: Ipv4Address,
    pub ip: Ipv4Address,
    /// 24 bits.
    pub qpn: u32,
}

impl Confirmation {
    pub const fn buffer_len(&self) -> usize {
        CONFIRMATION_LEN
    }

    /// Writes the 12 bytes into `buf`; returns 12. Errors, writing nothing, if `buf` is
    /// shorter or the QPN does not fit 24 bits.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        use field::confirm::*;
        if self.qpn > QPN_MAX {
            return Err(Error::Malformed("confirmation qpn"));
        }
        let Some(out) = buf.get_mut(..CONFIRMATION_LEN) else {
            return Err(Error::Truncated("confirmation buffer"));
        };
        out[MCST_ID].copy_from_slice(&self.mcst_id.0);
        out[IP].copy_from_slice(&self.ip.0);
        out[QPN].copy_from_slice(&self.qpn.to_be_bytes());
        Ok(CONFIRMATION_LEN)
    }

    /// Parses exactly 12 bytes. A shorter or longer message, or a QPN over 24 bits, is
    /// an error.
    pub fn parse(b: &[u8]) -> Result<Confirmation> {
        use field::confirm::*;
        exact(b, CONFIRMATION_LEN, "confirmation", "confirmation length")?;
        let qpn = be(b, QPN.start, 4) as u32;
        if qpn > QPN_MAX {
            return Err(Error::Malformed("confirmation qpn"));
        }
        Ok(Confirmation {
            mcst_id: ip(b, MCST_ID),
            ip: ip(b, IP),
            qpn,
        })
    }
}

/// Leader → member, WRITE groups only: every message of buffer `seq` has been
/// acknowledged, so the member's region holds it (a WRITE completes nothing at the
/// responder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    pub seq: u32,
}

impl Done {
    pub const fn buffer_len(&self) -> usize {
        DONE_LEN
    }
    pub fn parse(b: &[u8]) -> Result<Done> {
        exact(b, DONE_LEN, "done", "done length")?;
        Ok(Done {
            seq: be(b, field::done::SEQ.start, 4) as u32,
        })
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        put_be(b, field::done::SEQ.start, 4, self.seq as u64);
        DONE_LEN
    }
}

/// Member → leader (`Result`): the member's verdict on the buffer it was last
/// announced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferResult {
    /// The member's SHA-256 equals the one announced.
    pub ok: bool,
    /// SHA-256 of the bytes the member holds.
    pub sha256: [u8; 32],
    /// CLOCK_MONOTONIC ns when it held the whole buffer: one clock for every process on
    /// a machine, so the leader can measure latency to members on the same host.
    pub held_ns: u64,
}

impl BufferResult {
    pub const fn buffer_len(&self) -> usize {
        RESULT_LEN
    }
    pub fn parse(b: &[u8]) -> Result<BufferResult> {
        use field::result::*;
        exact(b, RESULT_LEN, "result", "result length")?;
        Ok(BufferResult {
            ok: flag(b[OK], "result ok")?,
            sha256: digest(b, SHA256),
            held_ns: be(b, HELD_NS.start, 8),
        })
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        use field::result::*;
        b[OK] = self.ok as u8;
        b[SHA256].copy_from_slice(&self.sha256);
        put_be(b, HELD_NS.start, 8, self.held_ns);
        RESULT_LEN
    }
}

/// Leader → member: the group's data goes through an overlay broadcast (forced, or the
/// switch refused the group), with this schedule and roster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlay {
    /// `overlay::Scheme::code` of the schedule.
    pub scheme: u8,
    /// Block size of the schedule, ≥ 1.
    pub block_bytes: u32,
    /// Pacing rate per connection; 0 for none.
    pub rate_mbps: u32,
    /// Sends a rank keeps in flight, ≥ 1.
    pub window: u8,
    /// Every rank's IPv4 address in rank order, the leader first; 1..=256 entries.
    pub roster: Vec<Ipv4Address>,
}

impl Overlay {
    pub fn buffer_len(&self) -> usize {
        OVERLAY_HEADER_LEN + 4 * self.roster.len()
    }
    pub fn parse(b: &[u8]) -> Result<Overlay> {
        use field::overlay::*;
        if b.len() < OVERLAY_HEADER_LEN + 4 {
            return Err(Error::Truncated("overlay"));
        }
        let roster_len = b.len() - ROSTER;
        if !roster_len.is_multiple_of(4) {
            return Err(Error::Truncated("overlay roster"));
        }
        if roster_len / 4 > OVERLAY_MAX_RANKS {
            return Err(Error::Malformed("overlay roster over 256 ranks"));
        }
        let o = Overlay {
            scheme: b[SCHEME],
            block_bytes: be(b, BLOCK_BYTES.start, 4) as u32,
            rate_mbps: be(b, RATE_MBPS.start, 4) as u32,
            window: b[WINDOW],
            roster: b[ROSTER..]
                .chunks_exact(4)
                .map(|c| Ipv4Address([c[0], c[1], c[2], c[3]]))
                .collect(),
        };
        if o.block_bytes == 0 {
            return Err(Error::Malformed("overlay block bytes"));
        }
        if o.window == 0 {
            return Err(Error::Malformed("overlay window"));
        }
        Ok(o)
    }
    /// Writes the body into `b` (at least `buffer_len()` bytes); returns its length.
    /// Errors, writing nothing, for a roster of 0 or over 256 ranks, a zero block size
    /// or a zero window: what `parse` would refuse.
    pub fn emit(&self, b: &mut [u8]) -> Result<usize> {
        use field::overlay::*;
        if self.roster.is_empty() || self.roster.len() > OVERLAY_MAX_RANKS {
            return Err(Error::Malformed("overlay roster size"));
        }
        if self.block_bytes == 0 || self.window == 0 {
            return Err(Error::Malformed("overlay block bytes or window"));
        }
        b[SCHEME] = self.scheme;
        put_be(b, BLOCK_BYTES.start, 4, self.block_bytes as u64);
        put_be(b, RATE_MBPS.start, 4, self.rate_mbps as u64);
        b[WINDOW] = self.window;
        for (i, a) in self.roster.iter().enumerate() {
            b[ROSTER + 4 * i..ROSTER + 4 * i + 4].copy_from_slice(&a.0);
        }
        Ok(self.buffer_len())
    }
}

/// Leader → member: the next buffer. The member posts its receives (SEND) or readies
/// its region (WRITE) and answers `Ready`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announce {
    /// Buffers of a group are numbered from 1.
    pub seq: u32,
    pub bytes: u64,
    /// SHA-256 of the buffer: what each member's bytes must hash to.
    pub sha256: [u8; 32],
}

impl Announce {
    pub const fn buffer_len(&self) -> usize {
        ANNOUNCE_LEN
    }
    pub fn parse(b: &[u8]) -> Result<Announce> {
        use field::announce::*;
        exact(b, ANNOUNCE_LEN, "announce", "announce length")?;
        Ok(Announce {
            seq: be(b, SEQ.start, 4) as u32,
            bytes: be(b, BYTES.start, 8),
            sha256: digest(b, SHA256),
        })
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        use field::announce::*;
        put_be(b, SEQ.start, 4, self.seq as u64);
        put_be(b, BYTES.start, 8, self.bytes);
        b[SHA256].copy_from_slice(&self.sha256);
        ANNOUNCE_LEN
    }
}

/// Leader → member: the group is over; `ok` when every member reported every buffer
/// intact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Close {
    pub ok: bool,
}

impl Close {
    pub const fn buffer_len(&self) -> usize {
        CLOSE_LEN
    }
    pub fn parse(b: &[u8]) -> Result<Close> {
        exact(b, CLOSE_LEN, "close", "close length")?;
        Ok(Close {
            ok: flag(b[field::close::OK], "close ok")?,
        })
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        b[field::close::OK] = self.ok as u8;
        CLOSE_LEN
    }
}

/// Leader → member: the leader evicted member `ip` (its control connection broke, so
/// it is taken off the switch's tree); the group goes on with the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub ip: Ipv4Address,
}

impl Evicted {
    pub const fn buffer_len(&self) -> usize {
        EVICTED_LEN
    }
    pub fn parse(b: &[u8]) -> Result<Evicted> {
        exact(b, EVICTED_LEN, "evicted", "evicted length")?;
        Ok(Evicted {
            ip: ip(b, field::evicted::IP),
        })
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        put_be(b, field::evicted::IP.start, 4, self.ip.to_u32() as u64);
        EVICTED_LEN
    }
}

/// Leader → member: buffer `seq` goes on through the overlay from byte `offset` (the
/// safeguard's mid-transfer fallback); the switch delivered everything below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resume {
    pub seq: u32,
    pub offset: u64,
}

impl Resume {
    pub const fn buffer_len(&self) -> usize {
        RESUME_LEN
    }
    pub fn parse(b: &[u8]) -> Result<Resume> {
        exact(b, RESUME_LEN, "resume", "resume length")?;
        Ok(Resume {
            seq: be(b, field::resume::SEQ.start, 4) as u32,
            offset: be(b, field::resume::OFFSET.start, 8),
        })
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        put_be(b, field::resume::SEQ.start, 4, self.seq as u64);
        put_be(b, field::resume::OFFSET.start, 8, self.offset);
        RESUME_LEN
    }
}

/// Member → leader, after `Overlay` mid-buffer: it holds buffer `seq`'s first `bytes`
/// bytes (what its QP completed, in order, before the switch path was cut).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holding {
    pub seq: u32,
    pub bytes: u64,
}

impl Holding {
    pub const fn buffer_len(&self) -> usize {
        HOLDING_LEN
    }
    pub fn parse(b: &[u8]) -> Result<Holding> {
        exact(b, HOLDING_LEN, "holding", "holding length")?;
        Ok(Holding {
            seq: be(b, field::holding::SEQ.start, 4) as u32,
            bytes: be(b, field::holding::BYTES.start, 8),
        })
    }
    pub fn emit(&self, b: &mut [u8]) -> usize {
        put_be(b, field::holding::SEQ.start, 4, self.seq as u64);
        put_be(b, field::holding::BYTES.start, 8, self.bytes);
        HOLDING_LEN
    }
}

/// Any control message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Params(Params),
    Join(Join),
    Confirm(Confirmation),
    Done(Done),
    Result(BufferResult),
    Overlay(Overlay),
    Ready,
    Announce(Announce),
    Close(Close),
    Evicted(Evicted),
    /// Member → leader: its invitation token.
    Invitation([u8; INVITATION_LEN]),
    Resume(Resume),
    Holding(Holding),
}

impl Message {
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::Params(_) => MessageType::Params,
            Message::Join(_) => MessageType::Join,
            Message::Confirm(_) => MessageType::Confirm,
            Message::Done(_) => MessageType::Done,
            Message::Result(_) => MessageType::Result,
            Message::Overlay(_) => MessageType::Overlay,
            Message::Ready => MessageType::Ready,
            Message::Announce(_) => MessageType::Announce,
            Message::Close(_) => MessageType::Close,
            Message::Evicted(_) => MessageType::Evicted,
            Message::Invitation(_) => MessageType::Invitation,
            Message::Resume(_) => MessageType::Resume,
            Message::Holding(_) => MessageType::Holding,
        }
    }

    /// Parses the body of a frame of type `ty`.
    pub fn parse(ty: MessageType, body: &[u8]) -> Result<Message> {
        Ok(match ty {
            MessageType::Params => Message::Params(Params::parse(body)?),
            MessageType::Join => Message::Join(Join::parse(body)?),
            MessageType::Confirm => Message::Confirm(Confirmation::parse(body)?),
            MessageType::Done => Message::Done(Done::parse(body)?),
            MessageType::Result => Message::Result(BufferResult::parse(body)?),
            MessageType::Overlay => Message::Overlay(Overlay::parse(body)?),
            MessageType::Ready => {
                exact(body, READY_LEN, "ready", "ready length")?;
                Message::Ready
            }
            MessageType::Announce => Message::Announce(Announce::parse(body)?),
            MessageType::Close => Message::Close(Close::parse(body)?),
            MessageType::Evicted => Message::Evicted(Evicted::parse(body)?),
            MessageType::Invitation => {
                exact(body, INVITATION_LEN, "invitation", "invitation length")?;
                let mut t = [0u8; INVITATION_LEN];
                t.copy_from_slice(body);
                Message::Invitation(t)
            }
            MessageType::Resume => Message::Resume(Resume::parse(body)?),
            MessageType::Holding => Message::Holding(Holding::parse(body)?),
        })
    }

    /// Bytes of the body.
    pub fn body_len(&self) -> usize {
        match self {
            Message::Params(m) => m.buffer_len(),
            Message::Join(m) => m.buffer_len(),
            Message::Confirm(m) => m.buffer_len(),
            Message::Done(m) => m.buffer_len(),
            Message::Result(m) => m.buffer_len(),
            Message::Overlay(m) => m.buffer_len(),
            Message::Ready => READY_LEN,
            Message::Announce(m) => m.buffer_len(),
            Message::Close(m) => m.buffer_len(),
            Message::Evicted(m) => m.buffer_len(),
            Message::Invitation(_) => INVITATION_LEN,
            Message::Resume(m) => m.buffer_len(),
            Message::Holding(m) => m.buffer_len(),
        }
    }

    /// Bytes of the whole frame.
    pub fn buffer_len(&self) -> usize {
        FRAME_HEADER_LEN + self.body_len()
    }

    /// Writes the whole frame (header and body) into `b` (at least `buffer_len()`
    /// bytes); returns its length. Errors for a message its parser would refuse (a
    /// QPN over 24 bits, a bad roster).
    pub fn emit(&self, b: &mut [u8]) -> Result<usize> {
        let len = self.body_len();
        let body = &mut b[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len];
        match self {
            Message::Params(m) => {
                m.emit(body);
            }
            Message::Join(m) => {
                m.emit(body)?;
            }
            Message::Confirm(m) => {
                m.emit(body)?;
            }
            Message::Done(m) => {
                m.emit(body);
            }
            Message::Result(m) => {
                m.emit(body);
            }
            Message::Overlay(m) => {
                m.emit(body)?;
            }
            Message::Ready => {}
            Message::Announce(m) => {
                m.emit(body);
            }
            Message::Close(m) => {
                m.emit(body);
            }
            Message::Evicted(m) => {
                m.emit(body);
            }
            Message::Invitation(t) => body.copy_from_slice(t),
            Message::Resume(m) => {
                m.emit(body);
            }
            Message::Holding(m) => {
                m.emit(body);
            }
        }
        b[field::frame::TYPE] = self.message_type() as u8;
        put_be(b, field::frame::LENGTH.start, 2, len as u64);
        Ok(FRAME_HEADER_LEN + len)
    }

    /// The whole frame as a new vector.
    pub fn to_frame(&self) -> Result<Vec<u8>> {
        let mut b = vec![0u8; self.buffer_len()];
        self.emit(&mut b)?;
        Ok(b)
    }
}

/// The type and body length a frame header declares, checked: a known type, and a
/// length that type can carry.
pub fn parse_frame_header(h: &[u8]) -> Result<(MessageType, usize)> {
    if h.len() < FRAME_HEADER_LEN {
        return Err(Error::Truncated("group control frame header"));
    }
    let ty = MessageType::from_code(h[field::frame::TYPE])
        .ok_or(Error::Unsupported("group control message type"))?;
    let len = be(h, field::frame::LENGTH.start, 2) as usize;
    if len > ty.max_body_len() {
        return Err(Error::Malformed("group control frame length"));
    }
    Ok((ty, len))
}

/// Parses one whole frame at the start of `b`: the message and the frame's length.
pub fn parse_frame(b: &[u8]) -> Result<(Message, usize)> {
    let (ty, len) = parse_frame_header(b)?;
    let end = FRAME_HEADER_LEN + len;
    let body = b
        .get(FRAME_HEADER_LEN..end)
        .ok_or(Error::Truncated("group control frame body"))?;
    Ok((Message::parse(ty, body)?, end))
}

/// Cuts a byte stream into messages. Bytes go in as they arrive, in pieces of any
/// size; a message comes out once its whole frame is in. The decoder holds at most
/// one frame (`FRAME_HEADER_LEN + MAX_BODY_LEN` bytes): [`feed`](Self::feed) takes
/// input only up to the end of the next frame. After an error every call returns it
/// again: the stream has lost its framing.
#[derive(Clone, Debug, Default)]
pub struct StreamDecoder {
    buf: Vec<u8>,
    failed: Option<Error>,
}

impl StreamDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes bytes from the front of `input` until a frame is complete or `input` is
    /// used up. Returns how many bytes it took and the message if one completed; the
    /// caller feeds the rest again.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Message>)> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let r = self.feed_inner(input);
        if let Err(e) = r {
            self.failed = Some(e);
            self.buf.clear();
        }
        r
    }

    fn feed_inner(&mut self, input: &[u8]) -> Result<(usize, Option<Message>)> {
        let mut taken = 0;
        if self.buf.len() < FRAME_HEADER_LEN {
            let n = (FRAME_HEADER_LEN - self.buf.len()).min(input.len());
            self.buf.extend_from_slice(&input[..n]);
            taken = n;
            if self.buf.len() < FRAME_HEADER_LEN {
                return Ok((taken, None));
            }
        }
        // Checked on every call, but only the first check after the header completes
        // can fail: the header bytes do not change after that.
        let (ty, len) = parse_frame_header(&self.buf)?;
        let want = FRAME_HEADER_LEN + len - self.buf.len();
        let n = want.min(input.len() - taken);
        self.buf.extend_from_slice(&input[taken..taken + n]);
        taken += n;
        if self.buf.len() < FRAME_HEADER_LEN + len {
            return Ok((taken, None));
        }
        let msg = Message::parse(ty, &self.buf[FRAME_HEADER_LEN..])?;
        self.buf.clear();
        Ok((taken, Some(msg)))
    }

    /// Feeds all of `input`; returns every message it completed, in order, or the first
    /// error.
    pub fn feed_all(&mut self, mut input: &[u8]) -> Result<Vec<Message>> {
        let mut out = Vec::new();
        while !input.is_empty() {
            let (n, m) = self.feed(input)?;
            input = &input[n..];
            out.extend(m);
        }
        Ok(out)
    }

    /// Bytes of an incomplete frame held (0 between frames: a peer that closes the
    /// stream now closed it cleanly).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn a(s: [u8; 4]) -> Ipv4Address {
        Ipv4Address(s)
    }

    /// One of each message, with the frame bytes it must produce: the layout pinned,
    /// so a change to any offset, length or code fails here (and in the C test).
    fn pinned() -> Vec<(Message, Vec<u8>)> {
        vec![
            (
                Message::Params(Params {
                    write: true,
                    capacity: 0x0102_0304_0506_0708,
                    message_bytes: 0x0a0b_0c0d,
                    start_psn: 0xab_cdef,
                }),
                vec![
                    1, 0, 18, 4, 1, 1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0xab, 0xcd,
                    0xef,
                ],
            ),
            (
                Message::Join(Join {
                    ip: a([10, 0, 0, 7]),
                    qpn: 0x12_3456,
                    va: 0x1000_0000,
                    rkey: 0x5a5a,
                }),
                vec![
                    2, 0, 21, 4, 10, 0, 0, 7, 0, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0,
                    0x5a, 0x5a,
                ],
            ),
            (
                Message::Confirm(Confirmation {
                    mcst_id: a([10, 77, 0, 200]),
                    ip: a([10, 0, 0, 7]),
                    qpn: 0x107,
                }),
                vec![3, 0, 12, 10, 77, 0, 200, 10, 0, 0, 7, 0, 0, 1, 7],
            ),
            (
                Message::Done(Done { seq: 0x0102_0304 }),
                vec![4, 0, 4, 1, 2, 3, 4],
            ),
            (
                Message::Result(BufferResult {
                    ok: true,
                    sha256: std::array::from_fn(|i| i as u8),
                    held_ns: 0x1122_3344_5566_7788,
                }),
                [5, 0, 41, 1]
                    .into_iter()
                    .chain(0..32)
                    .chain([0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])
                    .collect(),
            ),
            (
                Message::Overlay(Overlay {
                    scheme: 3,
                    block_bytes: 16384,
                    rate_mbps: 1000,
                    window: 2,
                    roster: vec![a([10, 0, 0, 1]), a([10, 0, 0, 2])],
                }),
                vec![
                    6, 0, 18, 3, 0, 0, 0x40, 0, 0, 0, 0x03, 0xe8, 2, 10, 0, 0, 1, 10, 0, 0, 2,
                ],
            ),
            (Message::Ready, vec![7, 0, 0]),
            (
                Message::Announce(Announce {
                    seq: 1,
                    bytes: 70_000,
                    sha256: [0xa5; 32],
                }),
                [9, 0, 44, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0x11, 0x70]
                    .into_iter()
                    .chain([0xa5; 32])
                    .collect(),
            ),
            (Message::Close(Close { ok: false }), vec![10, 0, 1, 0]),
            (
                Message::Evicted(Evicted {
                    ip: Ipv4Address::new(10, 0, 0, 7),
                }),
                vec![11, 0, 4, 10, 0, 0, 7],
            ),
            (
                Message::Invitation([7; 16]),
                [vec![12, 0, 16], vec![7; 16]].concat(),
            ),
            (
                Message::Resume(Resume {
                    seq: 2,
                    offset: 0x0102_0304_0506,
                }),
                vec![13, 0, 12, 0, 0, 0, 2, 0, 0, 1, 2, 3, 4, 5, 6],
            ),
            (
                Message::Holding(Holding {
                    seq: 3,
                    bytes: 0x0a0b_0c0d,
                }),
                vec![14, 0, 12, 0, 0, 0, 3, 0, 0, 0, 0, 0x0a, 0x0b, 0x0c, 0x0d],
            ),
        ]
    }

    #[test]
    fn every_message_emits_its_pinned_bytes_and_parses_back() {
        let cases = pinned();
        let types: Vec<MessageType> = cases.iter().map(|(m, _)| m.message_type()).collect();
        assert_eq!(types, MessageType::ALL, "one pinned case per message type");
        for (m, bytes) in cases {
            assert_eq!(m.to_frame().unwrap(), bytes, "{m:?}");
            assert_eq!(m.buffer_len(), bytes.len());
            assert_eq!(parse_frame(&bytes), Ok((m.clone(), bytes.len())));
        }
    }

    #[test]
    fn every_truncation_of_every_frame_is_rejected() {
        for (m, bytes) in pinned() {
            for cut in 0..bytes.len() {
                assert!(
                    matches!(parse_frame(&bytes[..cut]), Err(Error::Truncated(_))),
                    "{m:?} cut at {cut}"
                );
                // The body alone, shortened, with the header's length still saying the
                // full size: the decoder waits, and the body parser refuses it.
                // (A roster cut after a whole address is a shorter, valid roster.)
                let whole_roster = m.message_type() == MessageType::Overlay
                    && cut >= FRAME_HEADER_LEN + OVERLAY_HEADER_LEN + 4
                    && (cut - FRAME_HEADER_LEN - OVERLAY_HEADER_LEN).is_multiple_of(4);
                if cut >= FRAME_HEADER_LEN && !whole_roster {
                    let body = &bytes[FRAME_HEADER_LEN..cut];
                    assert!(
                        Message::parse(m.message_type(), body).is_err(),
                        "{m:?} body cut at {cut}"
                    );
                }
            }
            let mut d = StreamDecoder::new();
            assert_eq!(d.feed_all(&bytes[..bytes.len() - 1]), Ok(vec![]));
            assert_eq!(d.buffered(), bytes.len() - 1);
        }
    }

    #[test]
    fn a_longer_body_than_its_type_carries_is_refused_at_the_header() {
        for (m, bytes) in pinned() {
            let ty = m.message_type();
            let mut long = bytes.clone();
            long[1..3].copy_from_slice(&((ty.max_body_len() + 1) as u16).to_be_bytes());
            let mut d = StreamDecoder::new();
            // Only the header goes in: the error comes before any body is buffered.
            assert_eq!(
                d.feed(&long[..3]),
                Err(Error::Malformed("group control frame length")),
                "{ty:?}"
            );
            // Fixed-size bodies with one byte more are refused by their parser too.
            if ty != MessageType::Overlay {
                let mut body = bytes[3..].to_vec();
                body.push(0);
                assert!(Message::parse(ty, &body).is_err(), "{ty:?}");
            }
        }
        let mut d = StreamDecoder::new();
        assert!(d.feed(&[6, 0xff, 0xff]).is_err(), "64 KiB Overlay");
    }

    #[test]
    fn unknown_and_reserved_types_are_errors_and_the_decoder_stays_failed() {
        for code in [0u8, 8, 15, 255] {
            let mut d = StreamDecoder::new();
            assert_eq!(
                d.feed(&[code, 0, 0]),
                Err(Error::Unsupported("group control message type")),
                "type {code}"
            );
            // A valid frame afterwards does not revive it: framing is lost.
            assert!(d.feed(&[7, 0, 0]).is_err());
            assert_eq!(d.buffered(), 0);
        }
    }

    #[test]
    fn the_handshake_checks_the_version_first() {
        // An unversioned (version 1 layout) Params: op, capacity, message bytes.
        let old = [1u8, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0];
        assert_eq!(
            Params::parse(&old),
            Err(Error::Unsupported("group control version"))
        );
        let mut old_send = old;
        old_send[0] = 0;
        assert_eq!(
            Params::parse(&old_send),
            Err(Error::Unsupported("group control version"))
        );
        let (_, mut join) = pinned().swap_remove(1);
        join[3] = GROUP_CONTROL_VERSION + 1;
        assert_eq!(
            parse_frame(&join),
            Err(Error::Unsupported("group control version"))
        );
    }

    #[test]
    fn out_of_range_fields_are_refused() {
        let frames = pinned();
        let set = |i: usize, at: usize, v: u8| {
            let mut b = frames[i].1.clone();
            b[FRAME_HEADER_LEN + at] = v;
            parse_frame(&b)
        };
        assert_eq!(
            set(0, field::params::OP, 2),
            Err(Error::Malformed("params op"))
        );
        assert_eq!(
            set(1, field::join::QPN.start, 1),
            Err(Error::Malformed("join qpn"))
        );
        assert_eq!(
            set(2, field::confirm::QPN.start, 1),
            Err(Error::Malformed("confirmation qpn"))
        );
        assert_eq!(
            set(4, field::result::OK, 2),
            Err(Error::Malformed("result ok"))
        );
        assert_eq!(
            set(5, field::overlay::WINDOW, 0),
            Err(Error::Malformed("overlay window"))
        );
        assert_eq!(
            set(8, field::close::OK, 7),
            Err(Error::Malformed("close ok"))
        );
        let mut zero_block = frames[5].1.clone();
        zero_block[FRAME_HEADER_LEN + 1..FRAME_HEADER_LEN + 5].fill(0);
        assert_eq!(
            parse_frame(&zero_block),
            Err(Error::Malformed("overlay block bytes"))
        );
        // A roster with a partial address, and an empty roster.
        assert!(Overlay::parse(&frames[5].1[3..20]).is_err());
        assert!(Overlay::parse(&frames[5].1[3..13]).is_err());
        // Emitting what parse refuses is an error, not a panic or a bad frame.
        let bad_join = Message::Join(Join {
            ip: a([1, 2, 3, 4]),
            qpn: 1 << 24,
            va: 0,
            rkey: 0,
        });
        assert!(bad_join.to_frame().is_err());
        let empty = Message::Overlay(Overlay {
            scheme: 0,
            block_bytes: 1,
            rate_mbps: 0,
            window: 1,
            roster: vec![],
        });
        assert!(empty.to_frame().is_err());
    }

    #[test]
    fn the_largest_overlay_fits_and_one_more_rank_does_not() {
        let mut o = Overlay {
            scheme: 1,
            block_bytes: 1,
            rate_mbps: 0,
            window: 1,
            roster: (0..256u32)
                .map(|i| Ipv4Address::from_u32(0x0a00_0000 + i))
                .collect(),
        };
        let f = Message::Overlay(o.clone()).to_frame().unwrap();
        assert_eq!(f.len(), FRAME_HEADER_LEN + MAX_BODY_LEN);
        let mut d = StreamDecoder::new();
        assert_eq!(d.feed_all(&f), Ok(vec![Message::Overlay(o.clone())]));
        o.roster.push(Ipv4Address::from_u32(1));
        assert!(Message::Overlay(o.clone()).to_frame().is_err());
        let mut body = vec![0u8; o.buffer_len()];
        body[1] = 1;
        body[field::overlay::WINDOW] = 1;
        assert!(Overlay::parse(&body).is_err());
    }

    #[test]
    fn the_decoder_takes_only_up_to_the_end_of_a_frame() {
        let frames = pinned();
        let stream: Vec<u8> = frames.iter().flat_map(|(_, b)| b.clone()).collect();
        let mut d = StreamDecoder::new();
        let (n, m) = d.feed(&stream).unwrap();
        assert_eq!(n, frames[0].1.len());
        assert_eq!(m, Some(frames[0].0.clone()));
        let want: Vec<Message> = frames.iter().map(|(m, _)| m.clone()).collect();
        assert_eq!(d.feed_all(&stream[n..]).unwrap(), want[1..]);
    }

    proptest! {
        /// The same stream gives the same messages however it is cut into reads.
        #[test]
        fn any_split_of_a_stream_decodes_the_same(cuts in proptest::collection::vec(0usize..200, 0..12)) {
            let frames = pinned();
            let stream: Vec<u8> = frames.iter().flat_map(|(_, b)| b.clone()).collect();
            let want: Vec<Message> = frames.into_iter().map(|(m, _)| m).collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
            cuts.sort();
            let mut d = StreamDecoder::new();
            let mut got = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([stream.len()]) {
                got.extend(d.feed_all(&stream[at..c]).unwrap());
                at = c;
            }
            prop_assert_eq!(got, want);
            prop_assert_eq!(d.buffered(), 0);
        }

        /// Arbitrary bytes never panic the decoder or a parser, the decoder never holds
        /// more than one frame, and whatever parses re-emits to the same bytes.
        #[test]
        fn arbitrary_bytes_never_panic_and_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..1200)) {
            let mut d = StreamDecoder::new();
            let mut input = &bytes[..];
            while !input.is_empty() {
                match d.feed(input) {
                    Ok((n, m)) => {
                        prop_assert!(n > 0);
                        prop_assert!(d.buffered() <= FRAME_HEADER_LEN + MAX_BODY_LEN);
                        input = &input[n..];
                        if let Some(m) = m {
                            let f = m.to_frame().unwrap();
                            prop_assert_eq!(parse_frame(&f), Ok((m, f.len())));
                        }
                    }
                    Err(_) => break,
                }
            }
            for ty in MessageType::ALL {
                if let Ok(m) = Message::parse(ty, &bytes) {
                    let f = m.to_frame().unwrap();
                    prop_assert_eq!(&f[FRAME_HEADER_LEN..], &bytes[..]);
                }
            }
        }
    }
}
