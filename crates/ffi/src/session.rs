//! A C ABI over the group session (`rocast_core::control::session`): the leader's and
//! a member's control lifecycle — discovery, MRP registration and its refreshes
//! (Cepheus §III-C), per-buffer announcements, verdicts, evictions and the close —
//! so that the C leader and member on libibverbs (`verbs/rocast-verbs-lead`,
//! `verbs/rocast-verbs-member`) run the *same* session as `rocast mcast` and keep
//! only I/O: sockets, the QP, the clock.
//!
//! Shape (the core's sans-IO one): the driver hands every input to a `handle_*`
//! call, sends what `*_poll_transmit` writes where its `dest` says (a member's
//! connection, the leader's connection, or the MRP port of the McstID), acts on each
//! `*_poll_event`, and calls `*_handle_timeout` when `*_poll_timeout` says. Times are
//! CLOCK_MONOTONIC nanoseconds; addresses are 4 bytes in network order. The header is
//! `verbs/rocast_session.h`; `tests/c_abi.rs` runs a leader and a member through it.
//!
//! The C programs run the switch path only: an overlay (configured or a fallback) is
//! an event they answer by ending the group, as before. MRP is not sealed here (no
//! fabric key): a keyed switch ignores this leader.
//!
//! Bad input never panics across the boundary: a null handle or buffer is an error
//! code, malformed control bytes fail the session with a reason (as in Rust), and a
//! panic inside the core is caught and returned as `ROCAST_GS_ERR_PANIC`.
//!
//! Memory: the core session's (see its module docs: per member about 1.1 KB, nothing
//! per buffer) plus one queued event text of at most 256 bytes.

use crate::{at, bytes, bytes_mut, dur, guarded, to_ns};
use rocast_core::control::invitation::INVITATION_LEN;
use rocast_core::control::registration::{RegistrationConfig, SwitchReport};
use rocast_core::control::session::{
    ConnId, LeaderEvent, LeaderSession, LeaderSessionConfig, MemberEvent, MemberSession,
    MemberSessionConfig, OverlayPlan, SessionDest, SessionError, DEFAULT_REFRESH_MS,
    MAX_TRANSMIT_LEN,
};
use rocast_core::fabric::cepheus::GroupAddressSpace;
use rocast_core::overlay::Scheme;
use rocast_core::wire::group_control::Params;
use rocast_core::wire::mrp::{MrpRepr, MRP_MAX_PAYLOAD};
use rocast_core::wire::Ipv4Address;

pub const ROCAST_GS_ERR_NULL: i64 = -1;
pub const ROCAST_GS_ERR_CONFIG: i64 = -2;
pub const ROCAST_GS_ERR_STATE: i64 = -3;
pub const ROCAST_GS_ERR_BUFFER: i64 = -4;
pub const ROCAST_GS_ERR_PANIC: i64 = -5;

/// Where a transmit goes.
pub const ROCAST_GS_DEST_MEMBER: u32 = 1;
pub const ROCAST_GS_DEST_LEADER: u32 = 2;
pub const ROCAST_GS_DEST_MRP: u32 = 3;

/// Leader events (`rocast_gs_event.kind`).
pub const ROCAST_GS_REGISTERED: u32 = 1;
pub const ROCAST_GS_USE_OVERLAY: u32 = 2;
pub const ROCAST_GS_UP: u32 = 3;
pub const ROCAST_GS_MEMBER_EVICTED: u32 = 4;
pub const ROCAST_GS_REROUTE: u32 = 5;
pub const ROCAST_GS_RESUME_TRANSFER: u32 = 6;
pub const ROCAST_GS_TRANSFER: u32 = 7;
pub const ROCAST_GS_BUFFER_DONE: u32 = 8;
pub const ROCAST_GS_CLOSED: u32 = 9;
pub const ROCAST_GS_FAILED: u32 = 10;
/// Member events.
pub const ROCAST_GS_OPEN_QP: u32 = 20;
pub const ROCAST_GS_POST_RECEIVES: u32 = 21;
pub const ROCAST_GS_RESUME_RECEIVE: u32 = 22;
pub const ROCAST_GS_WRITE_DONE: u32 = 23;
pub const ROCAST_GS_RECEIVED: u32 = 24;
pub const ROCAST_GS_PEER_EVICTED: u32 = 25;

/// The longest event text (a reason), NUL included.
pub const ROCAST_GS_TEXT_LEN: usize = 256;

/// The leader's settings (`rocast_gs_leader_config`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RocastGsLeaderConfig {
    pub local: [u8; 4],
    pub local_qpn: u32,
    pub mcst_id: [u8; 4],
    /// The block McstIDs come from (`mcst_id` must lie in it).
    pub group_space: [u8; 4],
    pub group_space_prefix: u8,
    /// 1: RDMA WRITE; 0: SEND.
    pub write: u8,
    pub members: u32,
    pub capacity: u64,
    pub message_bytes: u32,
    pub start_psn: u32,
    /// Discovery, members' Ready and verdicts each wait at most this long.
    pub timeout_ns: u64,
    /// MRP resend interval during registration, and how many resends.
    pub registration_timeout_ns: u64,
    pub registration_retries: u32,
    /// Registration refresh interval while the group lives (0: never).
    pub refresh_ns: u64,
}

/// A member's settings (`rocast_gs_member_config`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RocastGsMemberConfig {
    pub local: [u8; 4],
    pub mcst_id: [u8; 4],
    pub group_space: [u8; 4],
    pub group_space_prefix: u8,
    /// 1: present `invitation` before the Join.
    pub has_invitation: u8,
    pub invitation: [u8; INVITATION_LEN],
    /// The largest buffer this member accepts.
    pub max_capacity: u64,
    /// Until `Params`, and while joined from one instruction to the next.
    pub timeout_ns: u64,
}

/// One event (`rocast_gs_event`); which fields mean something depends on `kind`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RocastGsEvent {
    pub kind: u32,
    /// Buffer sequence number (TRANSFER, BUFFER_DONE, POST_RECEIVES, WRITE_DONE,
    /// RECEIVED, REROUTE, RESUME_*).
    pub seq: u32,
    /// BUFFER_DONE, CLOSED, RECEIVED: the outcome.
    pub ok: u8,
    /// OPEN_QP: 1 for WRITE.
    pub write: u8,
    /// MEMBER_EVICTED, PEER_EVICTED: whom.
    pub ip: [u8; 4],
    /// BUFFER_DONE: members that reported the buffer intact, and members in all.
    pub members_ok: u32,
    pub members: u32,
    /// REGISTERED: how long it took (ns). POST_RECEIVES, OPEN_QP (capacity),
    /// RESUME_*: bytes; RESUME_*: `offset` below.
    pub bytes: u64,
    pub offset: u64,
    /// OPEN_QP: the leader's message size and start PSN.
    pub message_bytes: u32,
    pub start_psn: u32,
    /// POST_RECEIVES, RECEIVED: the SHA-256.
    pub sha256: [u8; 32],
    /// FAILED, USE_OVERLAY, MEMBER_EVICTED: why, NUL-terminated.
    pub text: [u8; ROCAST_GS_TEXT_LEN],
}

impl RocastGsEvent {
    fn new(kind: u32) -> Self {
        RocastGsEvent {
            kind,
            seq: 0,
            ok: 0,
            write: 0,
            ip: [0; 4],
            members_ok: 0,
            members: 0,
            bytes: 0,
            offset: 0,
            message_bytes: 0,
            start_psn: 0,
            sha256: [0; 32],
            text: [0; ROCAST_GS_TEXT_LEN],
        }
    }
    fn with_text(mut self, s: &str) -> Self {
        let b = s.as_bytes();
        // Cut at a character boundary, keeping the NUL.
        let mut n = b.len().min(ROCAST_GS_TEXT_LEN - 1);
        while n > 0 && !s.is_char_boundary(n) {
            n -= 1;
        }
        self.text[..n].copy_from_slice(&b[..n]);
        self
    }
}

pub struct RocastGsLeader {
    inner: LeaderSession,
}

pub struct RocastGsMember {
    inner: MemberSession,
}

fn space(base: [u8; 4], prefix: u8) -> Option<GroupAddressSpace> {
    GroupAddressSpace::new(Ipv4Address(base), prefix).ok()
}

/// The overlay the session would fall back to: RDMC's binomial pipeline. The C
/// programs do not run it (an overlay ends their group), but the session needs one.
const FALLBACK: OverlayPlan = OverlayPlan {
    scheme: Scheme::BinomialPipeline,
    block_bytes: 1 << 20,
    rate_mbps: 0,
    window: 1,
};

fn leader_config(c: &RocastGsLeaderConfig) -> Option<LeaderSessionConfig> {
    let timeout = dur(c.timeout_ns);
    Some(LeaderSessionConfig {
        local: Ipv4Address(c.local),
        local_qpn: c.local_qpn,
        local_region: (0, 0),
        mcst_id: Ipv4Address(c.mcst_id),
        group_space: space(c.group_space, c.group_space_prefix)?,
        members: c.members as usize,
        params: Params {
            write: c.write != 0,
            capacity: c.capacity,
            message_bytes: c.message_bytes,
            start_psn: c.start_psn,
        },
        overlay: None,
        fallback: FALLBACK,
        registration: RegistrationConfig {
            timeout: dur(c.registration_timeout_ns),
            retries: c.registration_retries.min(u8::MAX as u32) as u8,
        },
        safeguard: None,
        discovery_timeout: timeout,
        ready_timeout: timeout,
        verdict_timeout: timeout,
        refresh: (c.refresh_ns > 0).then(|| dur(c.refresh_ns)),
        invitations: None,
        mrp_payload_limit: MRP_MAX_PAYLOAD,
    })
}

/// Fills `cfg` with `rocast mcast lead`'s defaults (registration resent every 250 ms,
/// three times; refreshed every second; 20 s deadlines); the caller sets addresses,
/// members, sizes and the start PSN.
///
/// # Safety
/// `cfg` is null or points at a writable `RocastGsLeaderConfig`.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_config_default(cfg: *mut RocastGsLeaderConfig) {
    // SAFETY: the caller's contract.
    let Some(cfg) = (unsafe { cfg.as_mut() }) else {
        return;
    };
    *cfg = RocastGsLeaderConfig {
        local: [0; 4],
        local_qpn: 0,
        mcst_id: [0; 4],
        group_space: [224, 0, 0, 0],
        group_space_prefix: 4,
        write: 0,
        members: 1,
        capacity: 1 << 20,
        message_bytes: 1 << 20,
        start_psn: 0,
        timeout_ns: 20_000_000_000,
        registration_timeout_ns: 250_000_000,
        registration_retries: 3,
        refresh_ns: DEFAULT_REFRESH_MS * 1_000_000,
    };
}

/// A leader session starting discovery at `now_ns`; null for a null or unusable
/// configuration (no members, zero sizes, a group space that is not a block, a
/// McstID outside it is refused at registration with a FAILED event).
///
/// # Safety
/// `cfg` is null or points at a readable `RocastGsLeaderConfig`.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_new(
    cfg: *const RocastGsLeaderConfig,
    now_ns: u64,
) -> *mut RocastGsLeader {
    guarded(std::ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let Some(c) = (unsafe { cfg.as_ref() }) else {
            return std::ptr::null_mut();
        };
        let Some(sc) = leader_config(c) else {
            return std::ptr::null_mut();
        };
        match LeaderSession::new(sc, at(now_ns)) {
            Ok(inner) => Box::into_raw(Box::new(RocastGsLeader { inner })),
            Err(_) => std::ptr::null_mut(),
        }
    })
}

/// # Safety
/// `l` is null or a leader from `rocast_gs_leader_new`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_free(l: *mut RocastGsLeader) {
    if !l.is_null() {
        // SAFETY: the caller's contract: from Box::into_raw, freed once.
        drop(unsafe { Box::from_raw(l) });
    }
}

/// Runs `f` on the leader behind `l`, or returns `ROCAST_GS_ERR_NULL`.
///
/// # Safety
/// `l` is null or a live leader.
unsafe fn with_leader(l: *mut RocastGsLeader, f: impl FnOnce(&mut LeaderSession) -> i64) -> i64 {
    // SAFETY: the caller's contract.
    let Some(l) = (unsafe { l.as_mut() }) else {
        return ROCAST_GS_ERR_NULL;
    };
    guarded(ROCAST_GS_ERR_PANIC, || f(&mut l.inner))
}

/// A member's control connection `conn` (a number the driver chooses) was accepted
/// from `peer`.
///
/// # Safety
/// `l` is null or a live leader; `peer` is null or 4 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_handle_connected(
    l: *mut RocastGsLeader,
    now_ns: u64,
    conn: u32,
    peer: *const u8,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(p) = (unsafe { bytes(peer, 4) }).filter(|p| p.len() == 4) else {
        return ROCAST_GS_ERR_NULL;
    };
    let ip = Ipv4Address([p[0], p[1], p[2], p[3]]);
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| {
            s.handle_connected(at(now_ns), ConnId(conn), ip);
            0
        })
    }
}

/// Bytes read from `conn`'s stream.
///
/// # Safety
/// `l` is null or a live leader; `data` is null or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_handle_stream(
    l: *mut RocastGsLeader,
    now_ns: u64,
    conn: u32,
    data: *const u8,
    len: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { bytes(data, len) }) else {
        return ROCAST_GS_ERR_NULL;
    };
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| {
            s.handle_stream(at(now_ns), ConnId(conn), b);
            0
        })
    }
}

/// `conn` closed or broke.
///
/// # Safety
/// `l` is null or a live leader.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_handle_conn_error(
    l: *mut RocastGsLeader,
    now_ns: u64,
    conn: u32,
) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| {
            s.handle_conn_error(at(now_ns), ConnId(conn), "closed");
            0
        })
    }
}

/// A datagram on the leader's MRP port: a switch's refusal is handed to the
/// session; anything else (its own MRP looped back) is ignored. Returns 1 when it
/// was a switch report, 0 otherwise.
///
/// # Safety
/// `l` is null or a live leader; `data` is null or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_handle_mrp(
    l: *mut RocastGsLeader,
    now_ns: u64,
    data: *const u8,
    len: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { bytes(data, len) }) else {
        return ROCAST_GS_ERR_NULL;
    };
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| match SwitchReport::parse(b) {
            Ok(r) => {
                s.handle_switch_report(at(now_ns), r);
                1
            }
            Err(_) => 0,
        })
    }
}

/// Announces the next buffer of `bytes` bytes with SHA-256 `sha256`; returns its
/// sequence number, or `ROCAST_GS_ERR_STATE` (not idle, or a size outside
/// 1..=capacity: nothing changes).
///
/// # Safety
/// `l` is null or a live leader; `sha256` is null or 32 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_start_buffer(
    l: *mut RocastGsLeader,
    now_ns: u64,
    bytes_len: u64,
    sha256: *const u8,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(h) = (unsafe { bytes(sha256, 32) }).and_then(|h| <[u8; 32]>::try_from(h).ok()) else {
        return ROCAST_GS_ERR_NULL;
    };
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| match s.start_buffer(at(now_ns), bytes_len, h) {
            Ok(seq) => seq as i64,
            Err(_) => ROCAST_GS_ERR_STATE,
        })
    }
}

/// `bytes` of the current buffer were acknowledged by every member (a completion on
/// the group QP): the transfer's progress.
///
/// # Safety
/// `l` is null or a live leader.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_handle_acked(
    l: *mut RocastGsLeader,
    now_ns: u64,
    bytes_len: u64,
) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| {
            s.handle_acked(at(now_ns), bytes_len);
            0
        })
    }
}

/// The driver finished sending the current buffer: `ok` 1 when every message
/// completed; 0 (with `why`, NUL-terminated, may be null) when the data path failed.
///
/// # Safety
/// `l` is null or a live leader; `why` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_handle_transfer_done(
    l: *mut RocastGsLeader,
    now_ns: u64,
    ok: u32,
    why: *const std::ffi::c_char,
) -> i64 {
    let reason = if why.is_null() {
        "the data path failed".to_string()
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ffi::CStr::from_ptr(why) }
            .to_string_lossy()
            .into_owned()
    };
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| {
            let r = if ok != 0 {
                Ok(())
            } else {
                Err(SessionError::Transfer(reason))
            };
            s.handle_transfer_done(at(now_ns), r);
            0
        })
    }
}

/// Ends the group; returns the outcome every member is told (1 ok, 0 not), or
/// `ROCAST_GS_ERR_STATE` when it had already ended.
///
/// # Safety
/// `l` is null or a live leader.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_close(
    l: *mut RocastGsLeader,
    now_ns: u64,
    ok: u32,
) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| match s.close(at(now_ns), ok != 0) {
            Ok(o) => o as i64,
            Err(_) => ROCAST_GS_ERR_STATE,
        })
    }
}

/// The next deadline (ns), or `ROCAST_GS_NEVER`.
///
/// # Safety
/// `l` is null or a live leader.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_poll_timeout(l: *const RocastGsLeader) -> u64 {
    // SAFETY: the caller's contract.
    let Some(l) = (unsafe { l.as_ref() }) else {
        return u64::MAX;
    };
    guarded(u64::MAX, || to_ns(l.inner.poll_timeout()))
}

/// # Safety
/// `l` is null or a live leader.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_handle_timeout(l: *mut RocastGsLeader, now_ns: u64) {
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| {
            s.handle_timeout(at(now_ns));
            0
        });
    }
}

/// Writes the next output into `buf` (`ROCAST_GS_MAX_TRANSMIT` bytes hold any) and
/// says where it goes: `*dest` is `ROCAST_GS_DEST_MEMBER` (on connection `*conn`,
/// a framed control message) or `ROCAST_GS_DEST_MRP` (one UDP datagram to the
/// McstID's MRP port). Returns its length, 0 when nothing is queued, or an error.
///
/// # Safety
/// `l` is null or a live leader; `buf` is null or `cap` writable bytes; `dest` and
/// `conn` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_poll_transmit(
    l: *mut RocastGsLeader,
    now_ns: u64,
    buf: *mut u8,
    cap: usize,
    dest: *mut u32,
    conn: *mut u32,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(b), Some(dest), Some(conn)) = (
        unsafe { bytes_mut(buf, cap) },
        unsafe { dest.as_mut() },
        unsafe { conn.as_mut() },
    ) else {
        return ROCAST_GS_ERR_NULL;
    };
    if cap < MAX_TRANSMIT_LEN {
        return ROCAST_GS_ERR_BUFFER;
    }
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| match s.poll_transmit(at(now_ns), b) {
            None => 0,
            Some(t) => {
                (*dest, *conn) = match t.dest {
                    SessionDest::Member(c) => (ROCAST_GS_DEST_MEMBER, c.0),
                    SessionDest::Leader => (ROCAST_GS_DEST_LEADER, 0),
                    SessionDest::Mrp => (ROCAST_GS_DEST_MRP, 0),
                };
                t.len as i64
            }
        })
    }
}

fn error_text(e: &SessionError) -> String {
    e.to_string()
}

fn leader_event(ev: LeaderEvent) -> RocastGsEvent {
    match ev {
        LeaderEvent::Registered { took } => RocastGsEvent {
            bytes: took.as_ps() / 1000,
            ..RocastGsEvent::new(ROCAST_GS_REGISTERED)
        },
        LeaderEvent::UseOverlay { reason, .. } => {
            let why = match reason.describe() {
                d if d.is_empty() => "configured".to_string(),
                d => d,
            };
            RocastGsEvent::new(ROCAST_GS_USE_OVERLAY).with_text(&why)
        }
        LeaderEvent::Up => RocastGsEvent::new(ROCAST_GS_UP),
        LeaderEvent::MemberEvicted { ip, reason } => RocastGsEvent {
            ip: ip.0,
            ..RocastGsEvent::new(ROCAST_GS_MEMBER_EVICTED)
        }
        .with_text(&reason),
        LeaderEvent::Reroute { seq } => RocastGsEvent {
            seq,
            ..RocastGsEvent::new(ROCAST_GS_REROUTE)
        },
        LeaderEvent::ResumeTransfer { seq, offset, .. } => RocastGsEvent {
            seq,
            offset,
            ..RocastGsEvent::new(ROCAST_GS_RESUME_TRANSFER)
        },
        LeaderEvent::Transfer { seq } => RocastGsEvent {
            seq,
            ..RocastGsEvent::new(ROCAST_GS_TRANSFER)
        },
        LeaderEvent::BufferDone(o) => RocastGsEvent {
            seq: o.seq,
            ok: o.ok as u8,
            members_ok: o.verdicts.iter().filter(|v| v.ok).count() as u32,
            members: o.verdicts.len() as u32,
            sha256: o.sha256,
            ..RocastGsEvent::new(ROCAST_GS_BUFFER_DONE)
        },
        LeaderEvent::Closed { ok } => RocastGsEvent {
            ok: ok as u8,
            ..RocastGsEvent::new(ROCAST_GS_CLOSED)
        },
        LeaderEvent::Failed(e) => RocastGsEvent::new(ROCAST_GS_FAILED).with_text(&error_text(&e)),
    }
}

/// Takes the next event into `*ev`; returns 1, or 0 when none is queued.
///
/// # Safety
/// `l` is null or a live leader; `ev` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_leader_poll_event(
    l: *mut RocastGsLeader,
    ev: *mut RocastGsEvent,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(ev) = (unsafe { ev.as_mut() }) else {
        return ROCAST_GS_ERR_NULL;
    };
    // SAFETY: the caller's contract.
    unsafe {
        with_leader(l, |s| match s.poll_event() {
            Some(e) => {
                *ev = leader_event(e);
                1
            }
            None => 0,
        })
    }
}

// ---------------------------------------------------------------------------------
// Member.

/// Fills `cfg` with `rocast mcast join`'s defaults (20 s deadline, 1 GiB capacity,
/// no invitation); the caller sets addresses.
///
/// # Safety
/// `cfg` is null or points at a writable `RocastGsMemberConfig`.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_config_default(cfg: *mut RocastGsMemberConfig) {
    // SAFETY: the caller's contract.
    let Some(cfg) = (unsafe { cfg.as_mut() }) else {
        return;
    };
    *cfg = RocastGsMemberConfig {
        local: [0; 4],
        mcst_id: [0; 4],
        group_space: [224, 0, 0, 0],
        group_space_prefix: 4,
        has_invitation: 0,
        invitation: [0; INVITATION_LEN],
        max_capacity: 1 << 30,
        timeout_ns: 20_000_000_000,
    };
}

/// A member session whose connection to the leader is up at `now_ns`; null for a
/// null configuration or a group space that is not a block.
///
/// # Safety
/// `cfg` is null or points at a readable `RocastGsMemberConfig`.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_new(
    cfg: *const RocastGsMemberConfig,
    now_ns: u64,
) -> *mut RocastGsMember {
    guarded(std::ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let Some(c) = (unsafe { cfg.as_ref() }) else {
            return std::ptr::null_mut();
        };
        let Some(group_space) = space(c.group_space, c.group_space_prefix) else {
            return std::ptr::null_mut();
        };
        let timeout = dur(c.timeout_ns);
        let sc = MemberSessionConfig {
            local: Ipv4Address(c.local),
            mcst_id: Ipv4Address(c.mcst_id),
            group_space,
            max_capacity: c.max_capacity,
            params_timeout: timeout,
            idle_timeout: timeout,
            invitation: (c.has_invitation != 0).then_some(c.invitation),
        };
        Box::into_raw(Box::new(RocastGsMember {
            inner: MemberSession::new(sc, at(now_ns)),
        }))
    })
}

/// # Safety
/// `m` is null or a member from `rocast_gs_member_new`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_free(m: *mut RocastGsMember) {
    if !m.is_null() {
        // SAFETY: the caller's contract: from Box::into_raw, freed once.
        drop(unsafe { Box::from_raw(m) });
    }
}

/// # Safety
/// `m` is null or a live member.
unsafe fn with_member(m: *mut RocastGsMember, f: impl FnOnce(&mut MemberSession) -> i64) -> i64 {
    // SAFETY: the caller's contract.
    let Some(m) = (unsafe { m.as_mut() }) else {
        return ROCAST_GS_ERR_NULL;
    };
    guarded(ROCAST_GS_ERR_PANIC, || f(&mut m.inner))
}

/// Bytes read from the leader's stream.
///
/// # Safety
/// `m` is null or a live member; `data` is null or `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_handle_stream(
    m: *mut RocastGsMember,
    now_ns: u64,
    data: *const u8,
    len: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { bytes(data, len) }) else {
        return ROCAST_GS_ERR_NULL;
    };
    // SAFETY: the caller's contract.
    unsafe {
        with_member(m, |s| {
            s.handle_stream(at(now_ns), b);
            0
        })
    }
}

/// The leader's connection closed or broke.
///
/// # Safety
/// `m` is null or a live member.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_handle_conn_error(
    m: *mut RocastGsMember,
    now_ns: u64,
) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        with_member(m, |s| {
            s.handle_conn_error(at(now_ns), "closed");
            0
        })
    }
}

/// An MRP datagram arrived on the member's MRP port from `from` (4 bytes): one from
/// any address but the leader's is dropped and counted (the switch delivers a
/// member's record from the leader's address), a malformed one is ignored; the
/// member's agent confirms a record that lists it. Returns 1 when handed to the
/// session, 0 when dropped.
///
/// # Safety
/// `m` is null or a live member; `data` is null or `len` readable bytes; `from` and
/// `leader` are null or 4 readable bytes each.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_handle_mrp(
    m: *mut RocastGsMember,
    now_ns: u64,
    data: *const u8,
    len: usize,
    from: *const u8,
    leader: *const u8,
) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(b), Some(f), Some(ld)) = (
        unsafe { bytes(data, len) },
        unsafe { bytes(from, 4) },
        unsafe { bytes(leader, 4) },
    ) else {
        return ROCAST_GS_ERR_NULL;
    };
    if f.len() != 4 || ld.len() != 4 {
        return ROCAST_GS_ERR_NULL;
    }
    if f != ld {
        return 0;
    }
    // SAFETY: the caller's contract.
    unsafe {
        with_member(m, |s| match MrpRepr::parse(b) {
            Ok(mrp) => {
                s.handle_mrp(at(now_ns), &mrp);
                1
            }
            Err(_) => 0,
        })
    }
}

/// The switch QP `OPEN_QP` asked for is connected: its QPN, and for WRITE the
/// region's VA and RKey (0 for SEND). The session sends the Join.
///
/// # Safety
/// `m` is null or a live member.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_handle_qp_ready(
    m: *mut RocastGsMember,
    now_ns: u64,
    qpn: u32,
    va: u64,
    rkey: u32,
) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        with_member(m, |s| {
            s.handle_qp_ready(at(now_ns), qpn, va, rkey);
            0
        })
    }
}

/// The receives (or the region) for the announced buffer are ready: says `Ready`.
///
/// # Safety
/// `m` is null or a live member.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_handle_receives_posted(
    m: *mut RocastGsMember,
    now_ns: u64,
) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        with_member(m, |s| {
            s.handle_receives_posted(at(now_ns));
            0
        })
    }
}

/// The member holds the whole buffer: the SHA-256 of its bytes and when it held
/// them (CLOCK_MONOTONIC ns). The session sends the verdict (a RECEIVED event says
/// whether it matched the announcement).
///
/// # Safety
/// `m` is null or a live member; `sha256` is null or 32 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_handle_received(
    m: *mut RocastGsMember,
    now_ns: u64,
    sha256: *const u8,
    held_ns: u64,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(h) = (unsafe { bytes(sha256, 32) }).and_then(|h| <[u8; 32]>::try_from(h).ok()) else {
        return ROCAST_GS_ERR_NULL;
    };
    // SAFETY: the caller's contract.
    unsafe {
        with_member(m, |s| {
            s.handle_received(at(now_ns), h, held_ns);
            0
        })
    }
}

/// # Safety
/// `m` is null or a live member.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_poll_timeout(m: *const RocastGsMember) -> u64 {
    // SAFETY: the caller's contract.
    let Some(m) = (unsafe { m.as_ref() }) else {
        return u64::MAX;
    };
    guarded(u64::MAX, || to_ns(m.inner.poll_timeout()))
}

/// # Safety
/// `m` is null or a live member.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_handle_timeout(m: *mut RocastGsMember, now_ns: u64) {
    // SAFETY: the caller's contract.
    unsafe {
        with_member(m, |s| {
            s.handle_timeout(at(now_ns));
            0
        });
    }
}

/// Writes the next framed control message for the leader into `buf`
/// (`ROCAST_GS_MAX_TRANSMIT` bytes hold any); returns its length, 0 when nothing is
/// queued, or an error.
///
/// # Safety
/// `m` is null or a live member; `buf` is null or `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_poll_transmit(
    m: *mut RocastGsMember,
    now_ns: u64,
    buf: *mut u8,
    cap: usize,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { bytes_mut(buf, cap) }) else {
        return ROCAST_GS_ERR_NULL;
    };
    if cap < MAX_TRANSMIT_LEN {
        return ROCAST_GS_ERR_BUFFER;
    }
    // SAFETY: the caller's contract.
    unsafe {
        with_member(m, |s| {
            s.poll_transmit(at(now_ns), b).map_or(0, |t| t.len as i64)
        })
    }
}

fn member_event(ev: MemberEvent) -> RocastGsEvent {
    match ev {
        MemberEvent::OpenQp(p) => RocastGsEvent {
            write: p.write as u8,
            bytes: p.capacity,
            message_bytes: p.message_bytes,
            start_psn: p.start_psn,
            ..RocastGsEvent::new(ROCAST_GS_OPEN_QP)
        },
        MemberEvent::UseOverlay(role) => RocastGsEvent::new(ROCAST_GS_USE_OVERLAY).with_text(
            &format!("the leader chose an overlay ({})", role.plan.scheme),
        ),
        MemberEvent::PostReceives { seq, bytes, sha256 } => RocastGsEvent {
            seq,
            bytes,
            sha256,
            ..RocastGsEvent::new(ROCAST_GS_POST_RECEIVES)
        },
        MemberEvent::ResumeReceive {
            seq, offset, bytes, ..
        } => RocastGsEvent {
            seq,
            offset,
            bytes,
            ..RocastGsEvent::new(ROCAST_GS_RESUME_RECEIVE)
        },
        MemberEvent::WriteDone { seq } => RocastGsEvent {
            seq,
            ..RocastGsEvent::new(ROCAST_GS_WRITE_DONE)
        },
        MemberEvent::Received { seq, ok, sha256 } => RocastGsEvent {
            seq,
            ok: ok as u8,
            sha256,
            ..RocastGsEvent::new(ROCAST_GS_RECEIVED)
        },
        MemberEvent::PeerEvicted { ip } => RocastGsEvent {
            ip: ip.0,
            ..RocastGsEvent::new(ROCAST_GS_PEER_EVICTED)
        },
        MemberEvent::Closed { ok } => RocastGsEvent {
            ok: ok as u8,
            ..RocastGsEvent::new(ROCAST_GS_CLOSED)
        },
        MemberEvent::Failed(e) => RocastGsEvent::new(ROCAST_GS_FAILED).with_text(&error_text(&e)),
    }
}

/// Takes the next event into `*ev`; returns 1, or 0 when none is queued.
///
/// # Safety
/// `m` is null or a live member; `ev` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_member_poll_event(
    m: *mut RocastGsMember,
    ev: *mut RocastGsEvent,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(ev) = (unsafe { ev.as_mut() }) else {
        return ROCAST_GS_ERR_NULL;
    };
    // SAFETY: the caller's contract.
    unsafe {
        with_member(m, |s| match s.poll_event() {
            Some(e) => {
                *ev = member_event(e);
                1
            }
            None => 0,
        })
    }
}

/// SHA-256 of `len` bytes at `data` into `out` (32 bytes): the digest a member
/// reports and the leader announces, computed by the same code as `rocast mcast`'s
/// (`payload::sha256`), not a C copy.
///
/// # Safety
/// `data` is null (with `len` 0) or `len` readable bytes; `out` is null or 32
/// writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_gs_sha256(data: *const u8, len: usize, out: *mut u8) -> i64 {
    // SAFETY: the caller's contract.
    let (Some(d), Some(o)) = (unsafe { bytes(data, len) }, unsafe { bytes_mut(out, 32) }) else {
        return ROCAST_GS_ERR_NULL;
    };
    guarded(ROCAST_GS_ERR_PANIC, || {
        o.copy_from_slice(&rocast_core::payload::sha256(d));
        0
    })
}

/// The output buffer every `*_poll_transmit` needs at least.
pub const ROCAST_GS_MAX_TRANSMIT: usize = MAX_TRANSMIT_LEN;

#[cfg(test)]
mod tests {
    use super::*;

    /// Event texts are cut at a character boundary and stay NUL-terminated.
    #[test]
    fn event_text_is_cut_and_terminated() {
        let long = "é".repeat(300);
        let e = RocastGsEvent::new(ROCAST_GS_FAILED).with_text(&long);
        let end = e.text.iter().position(|&b| b == 0).unwrap();
        assert!(end < ROCAST_GS_TEXT_LEN);
        assert!(std::str::from_utf8(&e.text[..end]).is_ok());
    }

    /// Null handles and buffers are errors, never a crash.
    #[test]
    fn null_inputs_are_errors() {
        // SAFETY: null pointers are part of the contract.
        unsafe {
            assert!(rocast_gs_leader_new(std::ptr::null(), 0).is_null());
            assert!(rocast_gs_member_new(std::ptr::null(), 0).is_null());
            assert_eq!(
                rocast_gs_leader_handle_stream(std::ptr::null_mut(), 0, 0, std::ptr::null(), 0),
                ROCAST_GS_ERR_NULL
            );
            let mut buf = [0u8; 8];
            let (mut d, mut c) = (0, 0);
            let mut cfg = std::mem::zeroed();
            rocast_gs_leader_config_default(&mut cfg);
            cfg.local = [10, 0, 0, 1];
            cfg.mcst_id = [239, 1, 0, 1];
            let l = rocast_gs_leader_new(&cfg, 0);
            assert!(!l.is_null());
            assert_eq!(
                rocast_gs_leader_poll_transmit(l, 0, buf.as_mut_ptr(), buf.len(), &mut d, &mut c),
                ROCAST_GS_ERR_BUFFER
            );
            rocast_gs_leader_free(l);
            // SHA-256: an empty input may be null; a null output or a null non-empty
            // input is an error.
            let mut h = [0u8; 32];
            assert_eq!(rocast_gs_sha256(std::ptr::null(), 0, h.as_mut_ptr()), 0);
            assert_eq!(h, rocast_core::payload::sha256(&[]));
            assert_eq!(
                rocast_gs_sha256(std::ptr::null(), 5, h.as_mut_ptr()),
                ROCAST_GS_ERR_NULL
            );
            assert_eq!(
                rocast_gs_sha256(buf.as_ptr(), 8, std::ptr::null_mut()),
                ROCAST_GS_ERR_NULL
            );
        }
    }
}
