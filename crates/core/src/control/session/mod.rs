//! The group session: one multicast group's control lifecycle, end to end, as two
//! sans-IO state machines — [`LeaderSession`] on the leader (the source's host) and
//! [`MemberSession`] on each member. It owns the *control decisions* of a group and
//! nothing of its data path:
//!
//! 1. member discovery: each member's control connection gets `Params`, answers `Join`;
//! 2. registration through MRP (Cepheus §III-C), by wrapping a
//!    [`RegistrationController`](super::RegistrationController) at the leader and a
//!    [`MemberAgent`](super::MemberAgent) at each member;
//! 3. the fallback to an overlay broadcast (Cepheus §V-D) when a switch refuses the
//!    group, registration times out, the [`SafeguardMonitor`](super::SafeguardMonitor)
//!    finds the multicast too slow, or the group is configured to use one: `Overlay` to
//!    every member, `Ready` from every member;
//! 4. per buffer: `Announce`, `Ready` from every member, the transfer (the driver's),
//!    `Done` for WRITE through the switch, a `Result` verdict from every member;
//! 5. the close: `Close { ok }` carries *the outcome seen by all* (RDMC, DSN 2018, its failure
//!    semantics: a transfer either succeeds at every member or every member learns
//!    that it failed):
//!    `ok` only if the application says so and every member reported every buffer
//!    intact.
//!
//! The messages are [`crate::wire::group_control`]'s. The driver (`rocast_net::mcast`
//! on real sockets) carries bytes and runs the data path; the session tells it what to
//! do through events: open a QP, run the overlay as rank r, post receives for a
//! buffer, start sending.
//!
//! # Shape
//!
//! Both sessions are in the house shape (ARCHITECTURE.md): `handle_*(now, …)` for every
//! input (control bytes per connection, MRP packets, switch reports, the driver's
//! notifications), `poll_transmit(now, buf) -> Option<Transmit<SessionDest>>` for every
//! output (a framed control message for a member connection or the leader, an MRP
//! packet or release for the switch), `poll_event()` for the driver's actions and the
//! outcomes, `poll_timeout()` / `handle_timeout(now)` for every deadline. Nothing
//! blocks, sleeps or reads a clock.
//!
//! # Deadlines
//!
//! Every wait on a peer has one: discovery (members joining), registration (the
//! controller's resends), members' `Ready` (overlay setup and each announcement), and
//! verdicts. Each fires at most once: it moves the session out of the state that armed
//! it. Waits on the driver (opening a QP, posting receives, the transfer itself) have
//! none here: the data path measures its own progress and reports success or failure.
//!
//! # Malformed input
//!
//! A frame that does not decode (bad type or length, another protocol version) or a
//! message the peer's role never sends is a protocol error that fails the session
//! (`Failed`, and every member hears `Close { ok: false }`). Well-formed messages that
//! arrive late or twice (a second verdict from one member, a confirmation after
//! registration) are counted drops: per-member accounting is by the member's identity,
//! so one member answering N times never counts as N members.
//!
//! # Memory
//!
//! Leader: per member its MRP record (16 B), its connection's stream decoder (at most
//! one frame, `FRAME_HEADER_LEN + MAX_BODY_LEN` = 1,037 B) and one bit in each
//! ready/verdict set (a `BTreeMap` entry, about 40 B); the outbox holds at most one
//! message per member per phase plus the registration's MRP packets (≤ 255 × 1,472 B,
//! one copy); the wrapped `RegistrationController` holds the MRP packets once more.
//! Member: one decoder (≤ 1,037 B), its agent's membership record, and at most a few
//! queued messages. Nothing grows with the number of buffers sent.

mod leader;
mod member;
#[cfg(test)]
mod tests;

pub use leader::{
    BufferOutcome, LeaderEvent, LeaderPhase, LeaderSession, LeaderSessionConfig, LeaderStats,
    MemberVerdict, OverlayReason, STALLED_AFTER, TRANSFER_REFRESH_DIVISOR, UNREACHABLE_REFRESHES,
};
pub use member::{
    MemberEvent, MemberPhase, MemberSession, MemberSessionConfig, MemberStats, OverlayRole,
};

use crate::overlay::Scheme;
use crate::wire::group_control::Message;
use crate::wire::mrp::{MrpPrune, MrpRelease, MrpRepr};

/// The driver's name for one member's control connection at the leader (an index it
/// chooses; the session never interprets it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

/// Where a session's transmit goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionDest {
    /// A framed control message on this member's connection (leader side).
    Member(ConnId),
    /// A framed control message on the connection to the leader (member side).
    Leader,
    /// An MRP packet or release, as UDP to `mcst_id:`[`MRP_UDP_PORT`](crate::wire::mrp::MRP_UDP_PORT).
    Mrp,
}

/// The leader's default interval between MRP refreshes of a registered group (its
/// switches' leases are the switch's `DEFAULT_GROUP_LEASE_MS`, which `control` does
/// not import: the switch sits above it):
/// rocast's assumption. A restarted switch relearns the group within one interval.
pub const DEFAULT_REFRESH_MS: u64 = 1_000;

/// The buffer [`LeaderSession::poll_transmit`] and [`MemberSession::poll_transmit`]
/// need at most: an MRP packet fills an Ethernet MTU's UDP payload (1,472 B), a control
/// frame is at most 1,037 B. With a smaller buffer an output that does not fit stays
/// queued and `poll_transmit` returns `None`.
pub const MAX_TRANSMIT_LEN: usize = 1500;

/// Why a session failed, in words a user can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// A peer broke the protocol (a frame that does not decode, another version, a
    /// message its role never sends, out-of-range parameters).
    #[error("{0}")]
    Protocol(String),
    /// A deadline passed.
    #[error("{0}")]
    Timeout(String),
    /// The group cannot be registered at all (an invalid group, not a refusal: a
    /// refusal falls back to the overlay).
    #[error("{0}")]
    Registration(String),
    /// The data path failed (the driver's report).
    #[error("{0}")]
    Transfer(String),
    /// A control connection closed or broke.
    #[error("{0}")]
    Connection(String),
}

/// An overlay broadcast as the leader configures it (the `Overlay` message without its
/// roster).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverlayPlan {
    pub scheme: Scheme,
    /// Block size of the schedule, ≥ 1.
    pub block_bytes: u32,
    /// Pacing per connection; 0 for none.
    pub rate_mbps: u32,
    /// Sends a rank keeps in flight, ≥ 1.
    pub window: u8,
}

/// One queued output.
#[derive(Clone, Debug)]
enum Outgoing {
    Control(Message),
    Mrp(MrpRepr),
    Release(MrpRelease),
    Prune(MrpPrune),
}

impl Outgoing {
    fn len(&self) -> usize {
        match self {
            Outgoing::Control(m) => m.buffer_len(),
            Outgoing::Mrp(m) => m.buffer_len(),
            Outgoing::Release(r) => r.buffer_len(),
            Outgoing::Prune(p) => p.buffer_len(),
        }
    }

    /// Writes into `buf` (at least `len()` bytes). A control message the wire refuses
    /// to emit (the sessions validate what they queue, so this is a bug guard) is an
    /// error, not a panic.
    fn emit(&self, buf: &mut [u8]) -> Result<usize, crate::wire::Error> {
        match self {
            Outgoing::Control(m) => m.emit(buf),
            Outgoing::Mrp(m) => Ok(m.emit(buf)),
            Outgoing::Release(r) => Ok(r.emit(buf)),
            Outgoing::Prune(p) => Ok(p.emit(buf)),
        }
    }
}

/// Pops the first output of `outbox` that fits `buf` and writes it; `dropped` counts
/// outputs the wire refused (never expected).
fn transmit_from(
    outbox: &mut std::collections::VecDeque<(SessionDest, Outgoing)>,
    buf: &mut [u8],
    dropped: &mut u64,
) -> Option<crate::transmit::Transmit<SessionDest>> {
    loop {
        let (dest, out) = outbox.front()?;
        if out.len() > buf.len() {
            return None;
        }
        let dest = *dest;
        let r = out.emit(buf);
        outbox.pop_front();
        match r {
            Ok(len) => return Some(crate::transmit::Transmit::to(len, dest)),
            Err(_) => *dropped += 1,
        }
    }
}
