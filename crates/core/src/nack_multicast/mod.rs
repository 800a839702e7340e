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
//! Memory: the sender holds at most `window` packets (≤ MTU each) plus 16 B per buffered
//! packet and 40 B per known receiver; a receiver holds per sender at most `window`
//! out-of-order fragments (payload + 40 B) and one partly reassembled message.

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

/// Where a receiver's packet goes: NACKs to the group (so other receivers hear them and
/// suppress theirs), STATUS to the sender alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    Group,
    Sender,
}
