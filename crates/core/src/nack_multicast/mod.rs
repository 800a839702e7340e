//! `nack_multicast`: reliable multicast over RDMA Unreliable Datagram with NACKs — the
//! transport of the broadcast-select paper (002, §II-A and §IV: "a simple NACK-based L4
//! multicast" over UD, practical because the optical fabric's loss ratio is tiny).
//!
//! Two sans-IO state machines with the shape every rocast core object shares
//! (`handle_packet`/`handle_timeout` in, `poll_transmit`/`poll_timeout`/`poll_event`
//! out), carried as UD SEND payloads (one protocol packet per UD message, so each fits
//! one path MTU; [`packet`] has the format):
//!
//! - [`NackMulticastSender`]: 64-bit sequence numbers per stream (session), a bounded
//!   retransmission buffer, fragmentation of messages larger than one packet, periodic
//!   heartbeats carrying the high and low edges (tail-loss detection, explicit loss
//!   reports), repairs re-multicast once per NACK burst (a linger time) with a cap on
//!   queued repairs, and flow control from receivers' STATUS reports.
//! - [`NackMulticastReceiver`]: gap detection, NACKs after an RFC 5401 back-off scaled
//!   to the group size ([`NackBackoff`]), suppression by NACKs heard from other receivers
//!   (NACKs are multicast), reassembly, exactly-once in-order delivery per sender, and an
//!   explicit [`ReceiverEvent::Unrecoverable`] when a gap has left the sender's window.
//!
//! Flow control (Aeron's min/max/tagged strategies): [`FlowControl::Min`] is the
//! default: the sender never runs more than a receiver window ahead of the slowest live
//! receiver, because the point of this transport (consistency protocols, replication)
//! is that *every* receiver gets every message; a receiver silent for
//! `receiver_timeout` stops counting, so one dead host cannot stall the group forever.
//! `Max` follows the fastest receiver (slow ones may lose data, reported explicitly);
//! `Tagged` follows the slowest of a named set (a quorum).
//!
//! Trust: the paper builds this transport for consistency
//! protocols, Byzantine-fault-tolerant ones included (002, abstract and §I), on a
//! broadcast-select fabric where every node hears every packet and can put any on the
//! medium; it leaves integrity to the closed fabric. Here a packet is taken only from
//! whom it can come from.
//!
//! - **Streams.** Each sender start picks a random stream id (the runtime draws it from
//!   the OS CSPRNG; the simulator keeps its seeded one): a restarted sender is a new
//!   stream, never the old one's continuation, and an off-path host cannot guess it.
//! - **Sources.** Drivers hand the state machines each packet's source (IPv4 address
//!   and QPN, [`Peer`]). A receiver binds a stream to the source of its first DATA or
//!   heartbeat and drops the stream's packets from anywhere else; the sender takes a
//!   receiver's STATUS and NACKs only from that receiver's configured address (or, when
//!   it was given none, from the address its first STATUS came from). Drops are
//!   counted (`wrong_source`, `status_refused`, …).
//! - **Group key** ([`auth`]): with one, every packet carries a MAC over the stream id
//!   and sequence numbers; a packet without a valid one is a counted drop
//!   (`auth_failures`), whatever its source address claims.
//! - **Bounded state.** A receiver tracks at most `max_streams` streams (more are
//!   counted refusals; one silent for `stream_idle_timeout` makes room), holds per
//!   stream at most `window` fragments and one message of at most `max_message_len`,
//!   and stops NACKing a stream after `max_fruitless_nack_rounds` rounds in which no
//!   DATA of it arrived (heartbeats of made-up streams cannot start an endless NACK
//!   storm). The sender tracks at most `max_receivers` receivers.
//!
//! What stays open without a key: a host that spoofs the sender's (or a receiver's)
//! address and QPN passes the source checks (the switch's source guard is what stops
//! that), and binding is trust on first use: a forger whose packet
//! reaches a receiver before the real sender's first one could take the stream, if it
//! knew the random id, which only a host that sees the group's packets does. With a key,
//! neither works; a replay within its own stream is a duplicate the rules already
//! ignore.
//!
//! Memory: the sender holds at most `window` packets (≤ MTU each) plus 16 B per buffered
//! packet and 56 B per known receiver (at most `max_receivers`); a receiver holds per
//! stream at most `window` out-of-order fragments (payload + 40 B), one partly
//! reassembled message (≤ `max_message_len`) and 64 heard NACK ranges (16 B each), for
//! at most `max_streams` streams.

pub mod auth;
pub mod backoff;
pub mod packet;
mod receiver;
mod sender;
#[cfg(test)]
mod tests;

pub use backoff::NackBackoff;
pub use receiver::{NackMulticastReceiver, ReceiverConfig, ReceiverCounters, ReceiverEvent};
pub use sender::{
    FlowControl, NackMulticastSender, SendError, SenderConfig, SenderCounters, SenderEvent,
};

/// Where a packet came from (or goes to): the UD source address and QPN the RoCE
/// endpoint reported. Drivers that cannot tell pass `None`, and the source checks are
/// skipped (the group key, if any, still applies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Peer {
    pub ip: crate::wire::Ipv4Address,
    pub qpn: u32,
}

/// Where a receiver's packet goes: NACKs to the group (so other receivers hear them and
/// suppress theirs), STATUS to the sender alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    Group,
    Sender,
}
