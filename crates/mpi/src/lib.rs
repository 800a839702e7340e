//! `rocast-mpi`: the Rust half of `librocast_mpi` (`mpi/rocast_mpi.c`), a PMPI library
//! that carries an unmodified MPI program's `MPI_Bcast` as rocast in-network multicast
//! (Cepheus §III: the switch replicates the root's RoCE packets to every member and
//! aggregates their feedback). This crate is a blocking C ABI over the group of
//! [`rocast_net::mcast`] — the same leader and member `rocast mcast lead|join` run,
//! with the core's group session deciding everything — so the C side keeps only MPI:
//! which communicator, which root, addresses exchanged with PMPI calls, error codes.
//!
//! Settings come from the environment (the same at every rank: `mpirun -x`):
//! - `ROCAST_MPI_BIND`: this rank's IPv4 address (default: the first non-loopback
//!   IPv4 address of an interface that is up);
//! - `ROCAST_MPI_GROUP_SPACE`: the switch's group block (default: the upper half of
//!   the address's /24, as `rocast lab` and `rocast mcast` derive it);
//! - `ROCAST_MPI_TIMEOUT_MS` (20000), `ROCAST_MPI_MTU` (4096), `ROCAST_MPI_RATE_MBPS`
//!   (1000: the lab's links; 0 unpaced), `ROCAST_MPI_MESSAGE` (bytes per message,
//!   1 MiB), `ROCAST_MPI_CONTROL_PORT` (the group control port, 7471).
//!
//! Bad input never panics across the boundary: a null handle or buffer is an error
//! code with a message, and a panic inside is caught and returned as one.
//!
//! Memory: a leader holds a copy of the buffer it sends (the group shares it among
//! its posts); a member holds the message it receives until it is copied out; the
//! session adds about a kilobyte per member (`rocast_core::control::session`).

use rocast_core::fabric::cepheus::GroupAddressSpace;
use rocast_net::mcast::{
    allocate_group, Leader, LeaderConfig, McastOp, Member, MemberConfig, MemberEvent, CONTROL_PORT,
};
use std::net::Ipv4Addr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

/// Return codes.
pub const ROCAST_MPI_OK: i32 = 0;
pub const ROCAST_MPI_ERR: i32 = -1;

/// A group, at the root (leader) or at a member.
pub enum RocastMpiGroup {
    Leader(Leader),
    Member(Member),
}

/// The settings of [`rocast_mpi_*`](self) from the environment.
#[derive(Clone, Debug)]
pub struct Settings {
    pub local: Ipv4Addr,
    pub space: GroupAddressSpace,
    pub timeout: Duration,
    pub mtu: usize,
    pub rate_bps: Option<u64>,
    pub message_bytes: usize,
    pub control_port: u16,
}

fn env_u64(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{name}={v:?} is not a whole number")),
    }
}

/// The first IPv4 address of an interface that is up and not loopback.
fn first_interface_address() -> Result<Ipv4Addr, String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list freed below by freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(format!("getifaddrs: {}", std::io::Error::last_os_error()));
    }
    let mut found = None;
    let mut p = list;
    while !p.is_null() {
        // SAFETY: `p` walks the list getifaddrs returned; each node is valid until freed.
        let ifa = unsafe { &*p };
        let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0;
        let lo = ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0;
        if up && !lo && !ifa.ifa_addr.is_null() {
            // SAFETY: a non-null ifa_addr points at a sockaddr of its family.
            let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
            if family == libc::AF_INET {
                // SAFETY: AF_INET: the sockaddr is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                found = Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
                break;
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs.
    unsafe { libc::freeifaddrs(list) };
    found.ok_or_else(|| "no interface with an IPv4 address is up (set ROCAST_MPI_BIND)".into())
}

impl Settings {
    /// Reads the environment (see the crate docs).
    pub fn from_env() -> Result<Settings, String> {
        let local = match std::env::var("ROCAST_MPI_BIND") {
            Ok(v) => v
                .trim()
                .parse::<Ipv4Addr>()
                .map_err(|_| format!("ROCAST_MPI_BIND={v:?} is not an IPv4 address"))?,
            Err(_) => first_interface_address()?,
        };
        let space = match std::env::var("ROCAST_MPI_GROUP_SPACE") {
            Ok(v) => GroupAddressSpace::parse(v.trim())
                .map_err(|e| format!("ROCAST_MPI_GROUP_SPACE={v:?}: {e}"))?,
            Err(_) => {
                let [a, b, c, _] = local.octets();
                rocast_net::lab::default_group_space([a, b, c])
            }
        };
        let mtu = env_u64("ROCAST_MPI_MTU", 4096)? as usize;
        if !(256..=4096).contains(&mtu) || !mtu.is_power_of_two() {
            return Err(format!(
                "ROCAST_MPI_MTU={mtu}: must be 256, 512, 1024, 2048 or 4096"
            ));
        }
        let rate = env_u64("ROCAST_MPI_RATE_MBPS", 1000)?;
        let message_bytes = env_u64("ROCAST_MPI_MESSAGE", 1 << 20)? as usize;
        if message_bytes == 0 {
            return Err("ROCAST_MPI_MESSAGE must be positive".into());
        }
        let port = env_u64("ROCAST_MPI_CONTROL_PORT", u64::from(CONTROL_PORT))?;
        Ok(Settings {
            local,
            space,
            timeout: Duration::from_millis(env_u64("ROCAST_MPI_TIMEOUT_MS", 20_000)?.max(1)),
            mtu,
            rate_bps: (rate > 0).then(|| rate.saturating_mul(1_000_000)),
            message_bytes,
            control_port: u16::try_from(port)
                .map_err(|_| format!("ROCAST_MPI_CONTROL_PORT={port}: not a port"))?,
        })
    }
}

/// Writes `msg` into the caller's `err` buffer (NUL-terminated, cut to fit).
fn set_err(err: *mut libc::c_char, len: usize, msg: &str) {
    if err.is_null() || len == 0 {
        return;
    }
    let n = msg.len().min(len - 1);
    // SAFETY: the caller gives `len` writable bytes at `err`.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), err as *mut u8, n);
        *err.add(n) = 0;
    }
}

/// Runs `f`, turning an error or a panic into `ROCAST_MPI_ERR` and its message.
fn guarded<T>(
    err: *mut libc::c_char,
    len: usize,
    f: impl FnOnce() -> Result<T, String>,
) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            set_err(err, len, &e);
            None
        }
        Err(_) => {
            set_err(err, len, "rocast-mpi: internal panic");
            None
        }
    }
}

/// [`guarded`] for the entry points that return a status.
fn guarded_status(
    err: *mut libc::c_char,
    len: usize,
    f: impl FnOnce() -> Result<(), String>,
) -> i32 {
    guarded(err, len, f).map_or(ROCAST_MPI_ERR, |()| ROCAST_MPI_OK)
}

/// Writes `ip` to the caller's 4 bytes at `out` (network order).
fn write_addr(out: *mut u8, ip: Ipv4Addr) -> Result<(), String> {
    if out.is_null() {
        return Err("null output".into());
    }
    // SAFETY: the caller gives 4 writable bytes at `out` (every entry point's contract).
    unsafe { std::ptr::copy_nonoverlapping(ip.octets().as_ptr(), out, 4) };
    Ok(())
}

fn addr(p: *const u8) -> Result<Ipv4Addr, String> {
    if p.is_null() {
        return Err("null address".into());
    }
    // SAFETY: the caller gives 4 readable bytes (an address in network order).
    let b = unsafe { std::slice::from_raw_parts(p, 4) };
    Ok(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
}

/// This rank's address (`ROCAST_MPI_BIND`, or the first interface's), into `out[4]`
/// in network order. 0, or `ROCAST_MPI_ERR` with the reason in `err`.
///
/// # Safety
/// `out` points at 4 writable bytes; `err` at `err_len` writable bytes (or is null).
#[no_mangle]
pub unsafe extern "C" fn rocast_mpi_local_address(
    out: *mut u8,
    err: *mut libc::c_char,
    err_len: usize,
) -> i32 {
    guarded_status(err, err_len, || {
        write_addr(out, Settings::from_env()?.local)
    })
}

/// Asks the switch for a group address (an MRP allocation from `local`), into
/// `mcst_out[4]`. Fails when no switch answers (a fabric without one: the caller falls
/// back to `PMPI_Bcast`).
///
/// # Safety
/// `local` points at 4 bytes, `mcst_out` at 4 writable bytes, `err` at `err_len`.
#[no_mangle]
pub unsafe extern "C" fn rocast_mpi_allocate(
    local: *const u8,
    mcst_out: *mut u8,
    err: *mut libc::c_char,
    err_len: usize,
) -> i32 {
    guarded_status(err, err_len, || {
        let s = Settings::from_env()?;
        // A lease long enough for the leader's registration to follow.
        let g = allocate_group(addr(local)?, s.space, None, 10_000).map_err(|e| e.to_string())?;
        write_addr(mcst_out, g.mcst_id)
    })
}

/// Opens a group as its root: waits for `members` members to join on the control
/// port, registers `mcst` with the switch (or falls back to RDMC's binomial pipeline
/// when the switch refuses it), for buffers of up to `capacity` bytes. Null on failure,
/// with the reason in `err`.
///
/// # Safety
/// `local` and `mcst` point at 4 bytes; `err` at `err_len` writable bytes (or null).
#[no_mangle]
pub unsafe extern "C" fn rocast_mpi_lead(
    local: *const u8,
    mcst: *const u8,
    members: u32,
    capacity: u64,
    err: *mut libc::c_char,
    err_len: usize,
) -> *mut RocastMpiGroup {
    guarded(err, err_len, || {
        let s = Settings::from_env()?;
        if members == 0 {
            return Err("a group needs at least one member".into());
        }
        let cfg = LeaderConfig {
            local: addr(local)?,
            mcst_id: addr(mcst)?,
            group_space: s.space,
            members: members as usize,
            op: McastOp::Send,
            message_bytes: s.message_bytes,
            capacity: usize::try_from(capacity).map_err(|_| "capacity too large")?,
            control_port: s.control_port,
            mtu: s.mtu,
            rate_bps: s.rate_bps,
            overlay: None,
            // The fallback overlay as `rocast mcast lead` runs it by default: RDMC's
            // binomial pipeline, its 1 MiB blocks (RDMC §4), two sends in flight.
            fallback: rocast_core::overlay::Scheme::BinomialPipeline,
            block_bytes: 1 << 20,
            window: 2,
            fabric_key: None,
            invitations: None,
            safeguard: None,
            refresh: Duration::from_millis(rocast_core::control::session::DEFAULT_REFRESH_MS),
            timeout: s.timeout,
        };
        let leader = Leader::create(&cfg).map_err(|e| format!("lead: {e}"))?;
        Ok(Box::into_raw(Box::new(RocastMpiGroup::Leader(leader))))
    })
    .unwrap_or(std::ptr::null_mut())
}

/// Joins the group `mcst` whose root is at `leader`. Null on failure, with the reason.
///
/// # Safety
/// `local`, `leader` and `mcst` point at 4 bytes; `err` at `err_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn rocast_mpi_join(
    local: *const u8,
    leader: *const u8,
    mcst: *const u8,
    err: *mut libc::c_char,
    err_len: usize,
) -> *mut RocastMpiGroup {
    guarded(err, err_len, || {
        let s = Settings::from_env()?;
        let cfg = MemberConfig {
            local: addr(local)?,
            leader: addr(leader)?,
            mcst_id: addr(mcst)?,
            group_space: s.space,
            control_port: s.control_port,
            mtu: s.mtu,
            timeout: s.timeout,
            invitation: None,
        };
        let m = Member::join(&cfg).map_err(|e| format!("join: {e}"))?;
        Ok(Box::into_raw(Box::new(RocastMpiGroup::Member(m))))
    })
    .unwrap_or(std::ptr::null_mut())
}

/// Whether the group's data goes through the switch (1) or an overlay it fell back to
/// (0); -1 for a null handle.
///
/// # Safety
/// `g` is null or a handle from `rocast_mpi_lead`/`rocast_mpi_join` not yet closed.
#[no_mangle]
pub unsafe extern "C" fn rocast_mpi_through_switch(g: *const RocastMpiGroup) -> i32 {
    // SAFETY: by the contract.
    match unsafe { g.as_ref() } {
        None => -1,
        Some(RocastMpiGroup::Leader(l)) => i32::from(l.path().starts_with("cepheus")),
        Some(RocastMpiGroup::Member(m)) => i32::from(m.through_switch()),
    }
}

/// The root's side of one broadcast: sends `len` bytes at `buf` to every member and
/// returns when each has reported them intact (0), or `ROCAST_MPI_ERR` with the reason
/// (a member that lost or corrupted data, or left).
///
/// # Safety
/// `g` is a leader's handle; `buf` points at `len` readable bytes; `err` at `err_len`.
#[no_mangle]
pub unsafe extern "C" fn rocast_mpi_send(
    g: *mut RocastMpiGroup,
    buf: *const u8,
    len: usize,
    err: *mut libc::c_char,
    err_len: usize,
) -> i32 {
    guarded_status(err, err_len, || {
        // SAFETY: by the contract.
        let Some(RocastMpiGroup::Leader(l)) = (unsafe { g.as_mut() }) else {
            return Err("send: not a root's group".into());
        };
        if buf.is_null() && len > 0 {
            return Err("send: null buffer".into());
        }
        // SAFETY: `len` readable bytes at `buf`, by the contract.
        let data: Arc<[u8]> = Arc::from(unsafe { std::slice::from_raw_parts(buf, len) });
        let r = l.send(data).map_err(|e| format!("send: {e}"))?;
        if !r.all_ok() || !r.evicted.is_empty() {
            return Err(format!(
                "send: not every member holds the buffer intact (members {:?}, evicted {:?})",
                r.members, r.evicted
            ));
        }
        Ok(())
    })
}

/// A member's side of one broadcast: receives the root's next buffer into `buf`,
/// which must be exactly `len` bytes long (what the MPI call's count and type say).
/// 0, or `ROCAST_MPI_ERR` with the reason (a different length, a failed verdict, the
/// group closed or timed out).
///
/// # Safety
/// `g` is a member's handle; `buf` points at `len` writable bytes; `err` at `err_len`.
#[no_mangle]
pub unsafe extern "C" fn rocast_mpi_recv(
    g: *mut RocastMpiGroup,
    buf: *mut u8,
    len: usize,
    err: *mut libc::c_char,
    err_len: usize,
) -> i32 {
    guarded_status(err, err_len, || {
        // SAFETY: by the contract.
        let Some(RocastMpiGroup::Member(m)) = (unsafe { g.as_mut() }) else {
            return Err("recv: not a member's group".into());
        };
        if buf.is_null() && len > 0 {
            return Err("recv: null buffer".into());
        }
        match m.next().map_err(|e| format!("recv: {e}"))? {
            MemberEvent::Received(r) => {
                if !r.ok {
                    return Err(format!("recv: buffer {} failed the root's check", r.seq));
                }
                if r.data.len() != len {
                    return Err(format!(
                        "recv: the root sent {} bytes where this rank expects {len}",
                        r.data.len()
                    ));
                }
                // SAFETY: `len` writable bytes at `buf`, by the contract.
                unsafe { std::ptr::copy_nonoverlapping(r.data.as_ptr(), buf, len) };
                Ok(())
            }
            MemberEvent::Closed { ok } => Err(format!(
                "recv: the root closed the group ({})",
                if ok { "ok" } else { "failed" }
            )),
        }
    })
}

/// Ends a group and frees the handle: the root closes it (`ok`: every broadcast
/// succeeded), which frees the switch's state and tells every member; a member waits
/// for that close (at most the timeout). Null is ignored.
///
/// # Safety
/// `g` is null or a handle not yet closed; it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn rocast_mpi_close(g: *mut RocastMpiGroup, ok: i32) {
    if g.is_null() {
        return;
    }
    // SAFETY: a handle from Box::into_raw, closed once, by the contract.
    let g = unsafe { Box::from_raw(g) };
    let _ = catch_unwind(AssertUnwindSafe(move || match *g {
        RocastMpiGroup::Leader(l) => l.close(ok != 0),
        RocastMpiGroup::Member(mut m) => {
            // The root's Close ends it; a stray buffer before it is dropped.
            while let Ok(MemberEvent::Received(_)) = m.next() {}
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_the_environment_and_refuse_bad_values() {
        // One test touches the environment, so no other reads it meanwhile.
        std::env::set_var("ROCAST_MPI_BIND", "10.77.0.3");
        std::env::remove_var("ROCAST_MPI_GROUP_SPACE");
        let s = Settings::from_env().unwrap();
        assert_eq!(s.local, Ipv4Addr::new(10, 77, 0, 3));
        assert_eq!(s.space, GroupAddressSpace::parse("10.77.0.128/25").unwrap());
        assert_eq!(s.rate_bps, Some(1_000_000_000));
        for (k, v) in [
            ("ROCAST_MPI_BIND", "10.77.0"),
            ("ROCAST_MPI_MTU", "1000"),
            ("ROCAST_MPI_TIMEOUT_MS", "soon"),
            ("ROCAST_MPI_GROUP_SPACE", "10.77.0.128/99"),
            ("ROCAST_MPI_CONTROL_PORT", "70000"),
        ] {
            let old = std::env::var(k).ok();
            std::env::set_var(k, v);
            let e = Settings::from_env().unwrap_err();
            assert!(e.contains(k), "{k}={v}: {e}");
            match old {
                Some(o) => std::env::set_var(k, o),
                None => std::env::remove_var(k),
            }
        }
        std::env::remove_var("ROCAST_MPI_BIND");
    }

    #[test]
    fn null_handles_and_buffers_are_errors_not_crashes() {
        let mut err = [0 as libc::c_char; 128];
        unsafe {
            assert_eq!(
                rocast_mpi_send(
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    0,
                    err.as_mut_ptr(),
                    128
                ),
                ROCAST_MPI_ERR
            );
            let msg = std::ffi::CStr::from_ptr(err.as_ptr())
                .to_string_lossy()
                .into_owned();
            assert!(msg.contains("not a root's group"), "{msg}");
            assert_eq!(
                rocast_mpi_recv(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    4,
                    err.as_mut_ptr(),
                    128
                ),
                ROCAST_MPI_ERR
            );
            assert_eq!(rocast_mpi_through_switch(std::ptr::null()), -1);
            rocast_mpi_close(std::ptr::null_mut(), 1);
            assert!(rocast_mpi_join(
                std::ptr::null(),
                std::ptr::null(),
                std::ptr::null(),
                err.as_mut_ptr(),
                128
            )
            .is_null());
            // A short error buffer is cut, still NUL-terminated.
            let mut small = [1 as libc::c_char; 4];
            rocast_mpi_send(
                std::ptr::null_mut(),
                std::ptr::null(),
                0,
                small.as_mut_ptr(),
                4,
            );
            assert_eq!(small[3], 0);
        }
    }
}
