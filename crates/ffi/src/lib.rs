//! `rocast-ffi`: a C ABI over the core's [`nack_multicast`] state machines — the
//! reliable UD multicast of the broadcast-select paper (002 §II-A, §IV: "a simple
//! NACK-based L4 multicast" over UD) — so that a C end host on libibverbs
//! (`verbs/rocast-verbs-ud`, on an unmodified Soft-RoCE or RNIC) runs the *same*
//! protocol code as the simulator and the namespace lab, not a second implementation.
//!
//! The ABI keeps the core's sans-IO shape: the C driver owns the QP, the clock and
//! the buffers; it hands each received UD payload to `*_handle_packet`, calls
//! `*_handle_timeout` when `*_poll_timeout` says, and sends what `*_poll_transmit`
//! writes (as one UD SEND each). Times are CLOCK_MONOTONIC nanoseconds. The header
//! is `verbs/rocast_nack.h`; `tests/c_abi.rs` compiles a C program against it and this
//! library and runs a lossy group through it.
//!
//! Bad input never panics across the boundary: a null handle, a bad configuration, a
//! too-small buffer or a malformed packet is an error code or a counted drop (the
//! core counts malformed packets); a panic inside the core would abort (the library
//! is built with unwinding, and every entry point catches it and returns an error).
//!
//! Memory: the sender holds at most `window` packets (≤ MTU each) plus 16 B per
//! packet and 40 B per receiver; a receiver at most `window` out-of-order fragments
//! plus one partial message (see [`nack_multicast`]'s module docs).

pub mod session;

use rocast_core::nack_multicast::auth::GroupKey;
use rocast_core::nack_multicast::{
    self, Destination, NackMulticastReceiver, NackMulticastSender, ReceiverConfig, ReceiverEvent,
    SendError, SenderConfig,
};
use rocast_core::time::{Duration, Instant};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Errors, as negative return values.
pub const ROCAST_NM_ERR_NULL: i64 = -1;
pub const ROCAST_NM_ERR_WINDOW_FULL: i64 = -2;
pub const ROCAST_NM_ERR_TOO_LARGE: i64 = -3;
pub const ROCAST_NM_ERR_BUFFER: i64 = -4;
pub const ROCAST_NM_ERR_PANIC: i64 = -5;

/// `poll_timeout`'s answer when nothing is timed.
pub const ROCAST_NM_NEVER: u64 = u64::MAX;

/// The sender's settings (`rocast_nm_sender_config` in C).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RocastNmSenderConfig {
    pub session: u32,
    /// Payload bytes per packet (the UD MTU less the protocol's DATA header).
    pub max_payload: u32,
    /// Retransmission buffer, in packets.
    pub window: u32,
    /// Receivers that must be heard before data flows.
    pub expected_receivers: u32,
    pub heartbeat_interval_ns: u64,
    pub receiver_timeout_ns: u64,
    pub repair_linger_ns: u64,
    pub max_pending_repairs: u32,
    pub initial_receiver_window: u32,
}

/// The receiver's settings (`rocast_nm_receiver_config` in C).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RocastNmReceiverConfig {
    pub receiver_id: u32,
    pub window: u32,
    pub group_size: u32,
    pub max_nack_ranges: u32,
    pub nack_max_backoff_ns: u64,
    pub nack_holdoff_ns: u64,
    pub status_interval_ns: u64,
    pub seed: u64,
}

/// Sender counters (`rocast_nm_sender_counters`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RocastNmSenderCounters {
    pub messages: u64,
    pub data_packets: u64,
    pub repair_packets: u64,
    pub heartbeats: u64,
    pub nacks_in: u64,
    pub status_in: u64,
    pub malformed: u64,
    pub receivers: u64,
}

/// Receiver counters (`rocast_nm_receiver_counters`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RocastNmReceiverCounters {
    pub data_packets: u64,
    pub repair_packets: u64,
    pub duplicates: u64,
    pub heartbeats: u64,
    pub messages: u64,
    pub nacks_sent: u64,
    pub nacks_suppressed: u64,
    pub nacks_heard: u64,
    pub status_sent: u64,
    pub lost_messages: u64,
    pub malformed: u64,
}

/// One receiver event (`rocast_nm_event`): a message (its bytes were copied into the
/// caller's buffer) or messages that can never be delivered.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RocastNmEvent {
    /// 1: message; 2: unrecoverable.
    pub kind: u32,
    pub session: u32,
    /// The message's sequence number, or the first unrecoverable one.
    pub msg_seq: u64,
    /// The message's length, or one past the last unrecoverable sequence.
    pub len_or_end: u64,
}

pub const ROCAST_NM_EVENT_MESSAGE: u32 = 1;
pub const ROCAST_NM_EVENT_UNRECOVERABLE: u32 = 2;

/// The core's protocol header length before a DATA packet's payload, for sizing
/// `max_payload` from a UD MTU.
pub const ROCAST_NM_DATA_HEADER_LEN: u32 = nack_multicast::packet::DATA_HEADER_LEN as u32;
/// Bytes a group key's MAC adds to every packet (`rocast_nm_*_new_keyed`).
pub const ROCAST_NM_AUTH_TAG_LEN: u32 = nack_multicast::auth::AUTH_TAG_LEN as u32;
/// Bytes of a group key.
const GROUP_KEY_LEN: usize = 32;

pub struct RocastNmSender {
    inner: NackMulticastSender,
}

pub struct RocastNmReceiver {
    inner: NackMulticastReceiver,
    /// A delivered message too long for the caller's buffer waits here.
    pending: Option<ReceiverEvent>,
}

fn at(ns: u64) -> Instant {
    Instant::from_ps(ns.saturating_mul(1000))
}
fn dur(ns: u64) -> Duration {
    Duration::from_ps(ns.saturating_mul(1000))
}
fn to_ns(t: Option<Instant>) -> u64 {
    t.map_or(ROCAST_NM_NEVER, |t| t.as_ps() / 1000)
}

/// Runs `f`, turning a panic into `err` (nothing unwinds into C).
fn guarded<T>(err: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(err)
}

/// # Safety
/// `ptr` is null or points at `len` readable bytes.
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> Option<&'a [u8]> {
    if ptr.is_null() {
        return (len == 0).then_some(&[]);
    }
    // SAFETY: the caller's contract.
    Some(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// # Safety
/// `ptr` is null or points at `len` writable bytes.
unsafe fn bytes_mut<'a>(ptr: *mut u8, len: usize) -> Option<&'a mut [u8]> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    Some(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

// ---------------------------------------------------------------------------------
// Sender.

/// Fills `cfg` with the core's defaults for `session` and `max_payload`.
///
/// # Safety
/// `cfg` is null or points at a writable `RocastNmSenderConfig`.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_config_default(
    cfg: *mut RocastNmSenderConfig,
    session: u32,
    max_payload: u32,
) {
    // SAFETY: the caller's contract.
    let Some(cfg) = (unsafe { cfg.as_mut() }) else {
        return;
    };
    let c = SenderConfig::new(session, max_payload.max(1) as usize);
    *cfg = RocastNmSenderConfig {
        session,
        max_payload: c.max_payload as u32,
        window: c.window as u32,
        expected_receivers: c.expected_receivers as u32,
        heartbeat_interval_ns: c.heartbeat_interval.as_ps() / 1000,
        receiver_timeout_ns: c.receiver_timeout.as_ps() / 1000,
        repair_linger_ns: c.repair_linger.as_ps() / 1000,
        max_pending_repairs: c.max_pending_repairs as u32,
        initial_receiver_window: c.initial_receiver_window,
    };
}

/// A new sender, or null for a null or invalid configuration (zero payload or window).
///
/// # Safety
/// `cfg` is null or points at a readable `RocastNmSenderConfig`.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_new(
    cfg: *const RocastNmSenderConfig,
) -> *mut RocastNmSender {
    // SAFETY: the caller's contract, passed on.
    unsafe { rocast_nm_sender_new_keyed(cfg, std::ptr::null()) }
}

/// The group key behind `key`: null for none, else 32 readable bytes.
///
/// # Safety
/// `key` is null or points at 32 readable bytes.
unsafe fn group_key(key: *const u8) -> Option<GroupKey> {
    if key.is_null() {
        return None;
    }
    let mut k = [0u8; GROUP_KEY_LEN];
    // SAFETY: the caller's contract: 32 readable bytes.
    k.copy_from_slice(unsafe { std::slice::from_raw_parts(key, GROUP_KEY_LEN) });
    Some(GroupKey::new(k))
}

/// A sender with a group key (`key`: 32 bytes, or null for none, as
/// [`rocast_nm_sender_new`]): every packet it sends carries the key's MAC
/// (`ROCAST_NM_AUTH_TAG_LEN` bytes more than `max_payload` plus the header, so size
/// `max_payload` for the path MTU less both), and it takes only STATUS and NACKs that
/// carry a valid one. Null for a null or invalid configuration.
///
/// # Safety
/// `cfg` is null or points at a readable `RocastNmSenderConfig`; `key` is null or
/// points at 32 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_new_keyed(
    cfg: *const RocastNmSenderConfig,
    key: *const u8,
) -> *mut RocastNmSender {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { cfg.as_ref() }).copied() else {
        return std::ptr::null_mut();
    };
    if c.max_payload == 0 || c.window == 0 || c.heartbeat_interval_ns == 0 {
        return std::ptr::null_mut();
    }
    let mut s = SenderConfig::new(c.session, c.max_payload as usize);
    s.window = c.window as usize;
    s.expected_receivers = c.expected_receivers as usize;
    s.heartbeat_interval = dur(c.heartbeat_interval_ns);
    s.receiver_timeout = dur(c.receiver_timeout_ns);
    s.repair_linger = dur(c.repair_linger_ns);
    s.max_pending_repairs = c.max_pending_repairs as usize;
    s.initial_receiver_window = c.initial_receiver_window;
    // SAFETY: the caller's contract.
    s.group_key = unsafe { group_key(key) };
    guarded(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(RocastNmSender {
            inner: NackMulticastSender::new(s),
        }))
    })
}

/// Frees a sender (null is ignored).
///
/// # Safety
/// `s` is null or a sender from `rocast_nm_sender_new`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_free(s: *mut RocastNmSender) {
    if !s.is_null() {
        // SAFETY: made by Box::into_raw in rocast_nm_sender_new.
        drop(unsafe { Box::from_raw(s) });
    }
}

/// Queues one message: its sequence number (≥ 0), or `ROCAST_NM_ERR_WINDOW_FULL`
/// (retry after the receivers progress) or `ROCAST_NM_ERR_TOO_LARGE`.
///
/// # Safety
/// `s` is null or a live sender; `msg` points at `len` readable bytes (or is null with
/// `len` 0).
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_send(
    s: *mut RocastNmSender,
    now_ns: u64,
    msg: *const u8,
    len: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(s), Some(msg)) = (unsafe { s.as_mut() }, unsafe { bytes(msg, len) }) else {
        return ROCAST_NM_ERR_NULL;
    };
    guarded(ROCAST_NM_ERR_PANIC, || {
        match s.inner.send(at(now_ns), msg) {
            Ok(seq) => seq as i64,
            Err(SendError::WindowFull { .. }) => ROCAST_NM_ERR_WINDOW_FULL,
            Err(SendError::TooLarge { .. }) => ROCAST_NM_ERR_TOO_LARGE,
        }
    })
}

/// Hands the sender one received UD payload (a NACK or STATUS; anything else is
/// counted as malformed or ignored).
///
/// # Safety
/// `s` is null or a live sender; `buf` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_handle_packet(
    s: *mut RocastNmSender,
    now_ns: u64,
    buf: *const u8,
    len: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(s), Some(b)) = (unsafe { s.as_mut() }, unsafe { bytes(buf, len) }) else {
        return ROCAST_NM_ERR_NULL;
    };
    guarded(ROCAST_NM_ERR_PANIC, || {
        s.inner.handle_packet(at(now_ns), b);
        0
    })
}

/// The UD source of a received payload: `ip` points at the IPv4 address's 4 bytes in
/// network order (as `struct in_addr`'s `s_addr` holds them).
///
/// # Safety
/// `ip` is null or points at 4 readable bytes.
unsafe fn peer(ip: *const u8, qpn: u32) -> Option<nack_multicast::Peer> {
    // SAFETY: the caller's contract.
    let b = unsafe { bytes(ip, 4) }?;
    Some(nack_multicast::Peer {
        ip: rocast_core::wire::Ipv4Address(b.try_into().ok()?),
        qpn,
    })
}

/// [`rocast_nm_sender_handle_packet`] with the payload's UD source (the GRH's IPv4
/// source, 4 bytes in network order, and the completion's source QPN): a receiver's
/// STATUS and NACKs are then taken only from the address its first STATUS came from
/// (a forged one is counted, not obeyed).
///
/// # Safety
/// `s` is null or a live sender; `src_ip` points at 4 readable bytes; `buf` points at
/// `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_handle_packet_from(
    s: *mut RocastNmSender,
    now_ns: u64,
    src_ip: *const u8,
    src_qpn: u32,
    buf: *const u8,
    len: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(s), Some(b), Some(from)) =
        (unsafe { s.as_mut() }, unsafe { bytes(buf, len) }, unsafe {
            peer(src_ip, src_qpn)
        })
    else {
        return ROCAST_NM_ERR_NULL;
    };
    guarded(ROCAST_NM_ERR_PANIC, || {
        s.inner.handle_packet_from(at(now_ns), Some(from), b);
        0
    })
}

/// # Safety
/// `s` is null or a live sender.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_handle_timeout(
    s: *mut RocastNmSender,
    now_ns: u64,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(s) = (unsafe { s.as_mut() }) else {
        return ROCAST_NM_ERR_NULL;
    };
    guarded(ROCAST_NM_ERR_PANIC, || {
        s.inner.handle_timeout(at(now_ns));
        0
    })
}

/// When to call `handle_timeout` next (ns), or `ROCAST_NM_NEVER`.
///
/// # Safety
/// `s` is null or a live sender.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_poll_timeout(s: *const RocastNmSender) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { s.as_ref() }.map_or(ROCAST_NM_NEVER, |s| to_ns(s.inner.poll_timeout()))
}

/// The longest packet `poll_transmit` writes.
///
/// # Safety
/// `s` is null or a live sender.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_max_packet_len(s: *const RocastNmSender) -> usize {
    // SAFETY: the caller's contract.
    unsafe { s.as_ref() }.map_or(0, |s| s.inner.max_packet_len())
}

/// Writes the next packet (always to the group) into `buf`: its length, 0 when there
/// is none, or `ROCAST_NM_ERR_BUFFER` when `cap` is under `max_packet_len`.
///
/// # Safety
/// `s` is null or a live sender; `buf` points at `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_poll_transmit(
    s: *mut RocastNmSender,
    now_ns: u64,
    buf: *mut u8,
    cap: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(s), Some(b)) = (unsafe { s.as_mut() }, unsafe { bytes_mut(buf, cap) }) else {
        return ROCAST_NM_ERR_NULL;
    };
    if cap < s.inner.max_packet_len() {
        return ROCAST_NM_ERR_BUFFER;
    }
    guarded(ROCAST_NM_ERR_PANIC, || {
        s.inner
            .poll_transmit(at(now_ns), b)
            .map_or(0, |t| t.len as i64)
    })
}

/// 1 once every queued packet was sent and every live receiver (at least the
/// expected number) consumed all of it; else 0.
///
/// # Safety
/// `s` is null or a live sender.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_all_delivered(s: *const RocastNmSender) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { s.as_ref() }.map_or(0, |s| s.inner.all_delivered() as i32)
}

/// Free packets in the retransmission buffer.
///
/// # Safety
/// `s` is null or a live sender.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_free_window(s: *const RocastNmSender) -> usize {
    // SAFETY: the caller's contract.
    unsafe { s.as_ref() }.map_or(0, |s| s.inner.free_window())
}

/// # Safety
/// `s` is null or a live sender; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_sender_counters(
    s: *const RocastNmSender,
    out: *mut RocastNmSenderCounters,
) {
    // SAFETY: the caller's contract.
    let (Some(s), Some(out)) = (unsafe { s.as_ref() }, unsafe { out.as_mut() }) else {
        return;
    };
    let c = s.inner.counters();
    *out = RocastNmSenderCounters {
        messages: c.messages,
        data_packets: c.data_packets,
        repair_packets: c.repair_packets,
        heartbeats: c.heartbeats,
        nacks_in: c.nacks_in,
        status_in: c.status_in,
        malformed: c.malformed,
        receivers: s.inner.receivers().count() as u64,
    };
}

// ---------------------------------------------------------------------------------
// Receiver.

/// Fills `cfg` with the core's defaults.
///
/// # Safety
/// `cfg` is null or points at a writable `RocastNmReceiverConfig`.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_config_default(
    cfg: *mut RocastNmReceiverConfig,
    receiver_id: u32,
    group_size: u32,
    seed: u64,
) {
    // SAFETY: the caller's contract.
    let Some(cfg) = (unsafe { cfg.as_mut() }) else {
        return;
    };
    let c = ReceiverConfig::new(receiver_id, group_size as usize, seed);
    *cfg = RocastNmReceiverConfig {
        receiver_id,
        window: c.window,
        group_size,
        max_nack_ranges: c.max_nack_ranges as u32,
        nack_max_backoff_ns: c.nack_max_backoff.as_ps() / 1000,
        nack_holdoff_ns: c.nack_holdoff.as_ps() / 1000,
        status_interval_ns: c.status_interval.as_ps() / 1000,
        seed,
    };
}

/// A new receiver, or null for a null or invalid configuration (zero window or
/// group).
///
/// # Safety
/// `cfg` is null or points at a readable `RocastNmReceiverConfig`.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_new(
    cfg: *const RocastNmReceiverConfig,
) -> *mut RocastNmReceiver {
    // SAFETY: the caller's contract, passed on.
    unsafe { rocast_nm_receiver_new_keyed(cfg, std::ptr::null()) }
}

/// A receiver with a group key (`key`: 32 bytes, or null for none, as
/// [`rocast_nm_receiver_new`]): it takes only packets that carry the key's MAC (others
/// are counted `auth_failures`) and seals every NACK and STATUS. Null for a null or
/// invalid configuration.
///
/// # Safety
/// `cfg` is null or points at a readable `RocastNmReceiverConfig`; `key` is null or
/// points at 32 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_new_keyed(
    cfg: *const RocastNmReceiverConfig,
    key: *const u8,
) -> *mut RocastNmReceiver {
    // SAFETY: the caller's contract.
    let Some(c) = (unsafe { cfg.as_ref() }).copied() else {
        return std::ptr::null_mut();
    };
    if c.window == 0 || c.group_size == 0 || c.max_nack_ranges == 0 || c.status_interval_ns == 0 {
        return std::ptr::null_mut();
    }
    let mut r = ReceiverConfig::new(c.receiver_id, c.group_size as usize, c.seed);
    r.window = c.window;
    r.max_nack_ranges = c.max_nack_ranges as usize;
    r.nack_max_backoff = dur(c.nack_max_backoff_ns);
    r.nack_holdoff = dur(c.nack_holdoff_ns);
    r.status_interval = dur(c.status_interval_ns);
    // SAFETY: the caller's contract.
    r.group_key = unsafe { group_key(key) };
    guarded(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(RocastNmReceiver {
            inner: NackMulticastReceiver::new(r),
            pending: None,
        }))
    })
}

/// # Safety
/// `r` is null or a receiver from `rocast_nm_receiver_new`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_free(r: *mut RocastNmReceiver) {
    if !r.is_null() {
        // SAFETY: made by Box::into_raw in rocast_nm_receiver_new.
        drop(unsafe { Box::from_raw(r) });
    }
}

/// Hands the receiver one received UD payload (DATA, repair, heartbeat, or another
/// receiver's NACK).
///
/// # Safety
/// `r` is null or a live receiver; `buf` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_handle_packet(
    r: *mut RocastNmReceiver,
    now_ns: u64,
    buf: *const u8,
    len: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(r), Some(b)) = (unsafe { r.as_mut() }, unsafe { bytes(buf, len) }) else {
        return ROCAST_NM_ERR_NULL;
    };
    guarded(ROCAST_NM_ERR_PANIC, || {
        r.inner.handle_packet(at(now_ns), b);
        0
    })
}

/// [`rocast_nm_receiver_handle_packet`] with the payload's UD source (4 bytes of IPv4
/// in network order, and the source QPN): each stream is bound to the source of its
/// first DATA or heartbeat, and its packets from anywhere else are counted drops.
///
/// # Safety
/// `r` is null or a live receiver; `src_ip` points at 4 readable bytes; `buf` points at
/// `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_handle_packet_from(
    r: *mut RocastNmReceiver,
    now_ns: u64,
    src_ip: *const u8,
    src_qpn: u32,
    buf: *const u8,
    len: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(r), Some(b), Some(from)) =
        (unsafe { r.as_mut() }, unsafe { bytes(buf, len) }, unsafe {
            peer(src_ip, src_qpn)
        })
    else {
        return ROCAST_NM_ERR_NULL;
    };
    guarded(ROCAST_NM_ERR_PANIC, || {
        r.inner.handle_packet_from(at(now_ns), Some(from), b);
        0
    })
}

/// # Safety
/// `r` is null or a live receiver.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_handle_timeout(
    r: *mut RocastNmReceiver,
    now_ns: u64,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(r) = (unsafe { r.as_mut() }) else {
        return ROCAST_NM_ERR_NULL;
    };
    guarded(ROCAST_NM_ERR_PANIC, || {
        r.inner.handle_timeout(at(now_ns));
        0
    })
}

/// # Safety
/// `r` is null or a live receiver.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_poll_timeout(r: *const RocastNmReceiver) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { r.as_ref() }.map_or(ROCAST_NM_NEVER, |r| to_ns(r.inner.poll_timeout()))
}

/// # Safety
/// `r` is null or a live receiver.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_max_packet_len(r: *const RocastNmReceiver) -> usize {
    // SAFETY: the caller's contract.
    unsafe { r.as_ref() }.map_or(0, |r| r.inner.max_packet_len())
}

/// Writes the next NACK or STATUS into `buf`: its length (0: none, or
/// `ROCAST_NM_ERR_BUFFER`), and in `*to_sender` 1 for a STATUS (unicast to the
/// sender) or 0 for a NACK (to the group).
///
/// # Safety
/// `r` is null or a live receiver; `buf` points at `cap` writable bytes; `to_sender`
/// is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_poll_transmit(
    r: *mut RocastNmReceiver,
    now_ns: u64,
    buf: *mut u8,
    cap: usize,
    to_sender: *mut i32,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(r), Some(b)) = (unsafe { r.as_mut() }, unsafe { bytes_mut(buf, cap) }) else {
        return ROCAST_NM_ERR_NULL;
    };
    if cap < r.inner.max_packet_len() {
        return ROCAST_NM_ERR_BUFFER;
    }
    guarded(ROCAST_NM_ERR_PANIC, || {
        match r.inner.poll_transmit(at(now_ns), b) {
            None => 0,
            Some(t) => {
                // SAFETY: the caller's contract.
                if let Some(d) = unsafe { to_sender.as_mut() } {
                    *d = (t.dest == Destination::Sender) as i32;
                }
                t.len as i64
            }
        }
    })
}

/// The next event: 1 with `*ev` filled (a message's bytes copied into `buf`), 0 when
/// there is none, or `ROCAST_NM_ERR_BUFFER` when the message is longer than `cap`
/// (it stays queued: `ev->len_or_end` says how long it is; call again with room).
///
/// # Safety
/// `r` is null or a live receiver; `ev` is null or writable; `buf` points at `cap`
/// writable bytes (or is null with `cap` 0).
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_poll_event(
    r: *mut RocastNmReceiver,
    ev: *mut RocastNmEvent,
    buf: *mut u8,
    cap: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(r), Some(ev)) = (unsafe { r.as_mut() }, unsafe { ev.as_mut() }) else {
        return ROCAST_NM_ERR_NULL;
    };
    let out: &mut [u8] = if cap == 0 {
        &mut []
    } else {
        // SAFETY: the caller's contract.
        match unsafe { bytes_mut(buf, cap) } {
            Some(b) => b,
            None => return ROCAST_NM_ERR_NULL,
        }
    };
    let Some(e) = r.pending.take().or_else(|| r.inner.poll_event()) else {
        return 0;
    };
    match e {
        ReceiverEvent::Message {
            session,
            msg_seq,
            data,
        } => {
            *ev = RocastNmEvent {
                kind: ROCAST_NM_EVENT_MESSAGE,
                session,
                msg_seq,
                len_or_end: data.len() as u64,
            };
            if data.len() > out.len() {
                r.pending = Some(ReceiverEvent::Message {
                    session,
                    msg_seq,
                    data,
                });
                return ROCAST_NM_ERR_BUFFER;
            }
            out[..data.len()].copy_from_slice(&data);
            r.inner.recycle(data);
            1
        }
        ReceiverEvent::Unrecoverable { session, messages } => {
            *ev = RocastNmEvent {
                kind: ROCAST_NM_EVENT_UNRECOVERABLE,
                session,
                msg_seq: messages.start,
                len_or_end: messages.end,
            };
            1
        }
    }
}

/// # Safety
/// `r` is null or a live receiver; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_receiver_counters(
    r: *const RocastNmReceiver,
    out: *mut RocastNmReceiverCounters,
) {
    // SAFETY: the caller's contract.
    let (Some(r), Some(out)) = (unsafe { r.as_ref() }, unsafe { out.as_mut() }) else {
        return;
    };
    let c = r.inner.counters();
    *out = RocastNmReceiverCounters {
        data_packets: c.data_packets,
        repair_packets: c.repair_packets,
        duplicates: c.duplicates,
        heartbeats: c.heartbeats,
        messages: c.messages,
        nacks_sent: c.nacks_sent,
        nacks_suppressed: c.nacks_suppressed,
        nacks_heard: c.nacks_heard,
        status_sent: c.status_sent,
        lost_messages: c.lost_messages,
        malformed: c.malformed,
    };
}

/// Whether `buf` is a packet from a sender (DATA, repair, heartbeat) rather than from
/// a receiver (NACK, STATUS): 1 or 0. A driver that hears its own group uses it to
/// route packets.
///
/// # Safety
/// `buf` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_nm_is_from_sender(buf: *const u8, len: usize) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { bytes(buf, len) }.is_some_and(nack_multicast::packet::Packet::is_from_sender) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ABI's null and bad-configuration paths return errors, never panic.
    #[test]
    fn null_handles_and_bad_configs_are_errors() {
        unsafe {
            assert!(rocast_nm_sender_new(std::ptr::null()).is_null());
            let mut c = RocastNmSenderConfig {
                session: 1,
                max_payload: 0,
                window: 0,
                expected_receivers: 0,
                heartbeat_interval_ns: 0,
                receiver_timeout_ns: 0,
                repair_linger_ns: 0,
                max_pending_repairs: 0,
                initial_receiver_window: 0,
            };
            assert!(rocast_nm_sender_new(&c).is_null());
            rocast_nm_sender_config_default(&mut c, 1, 1000);
            let s = rocast_nm_sender_new(&c);
            assert!(!s.is_null());
            let mut small = [0u8; 4];
            assert_eq!(
                rocast_nm_sender_poll_transmit(s, 0, small.as_mut_ptr(), 4),
                ROCAST_NM_ERR_BUFFER
            );
            assert_eq!(
                rocast_nm_sender_send(std::ptr::null_mut(), 0, std::ptr::null(), 0),
                ROCAST_NM_ERR_NULL
            );
            // A malformed packet is counted, not fatal.
            assert_eq!(rocast_nm_sender_handle_packet(s, 0, small.as_ptr(), 4), 0);
            let mut k = RocastNmSenderCounters::default();
            rocast_nm_sender_counters(s, &mut k);
            assert_eq!(k.malformed, 1);
            rocast_nm_sender_free(s);
            rocast_nm_sender_free(std::ptr::null_mut());
            assert_eq!(
                rocast_nm_receiver_poll_timeout(std::ptr::null()),
                ROCAST_NM_NEVER
            );
        }
    }
}
