//! The C ABI end to end on loopback addresses, without root or a switch: a root and
//! two members on 127.0.0.x, the root's registration unanswered, so the group falls
//! back to RDMC's binomial pipeline (as librocast_mpi's groups do on a fabric whose
//! switch refuses them); three buffers of different sizes arrive intact, a buffer of
//! the wrong length is an error at the member, and the close ends every side.

use rocast_mpi_core::*;
use std::ffi::CStr;

fn ip(s: &str) -> [u8; 4] {
    s.parse::<std::net::Ipv4Addr>().unwrap().octets()
}

fn msg(e: &[libc::c_char]) -> String {
    unsafe { CStr::from_ptr(e.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_root_and_two_members_move_buffers_through_the_c_abi() {
    // Addresses of this test only (UDP 4791 is per address).
    std::env::set_var("ROCAST_MPI_GROUP_SPACE", "127.0.77.128/25");
    std::env::set_var("ROCAST_MPI_CONTROL_PORT", "17471");
    std::env::set_var("ROCAST_MPI_TIMEOUT_MS", "15000");
    std::env::set_var("ROCAST_MPI_RATE_MBPS", "0");
    let (root, group) = (ip("127.0.77.1"), ip("127.0.77.200"));
    let sizes = [1usize, 300_000, 2 << 20];
    let data = |n: usize, k: usize| -> Vec<u8> { (0..n).map(|i| (i * 7 + k * 13) as u8).collect() };
    let members: Vec<_> = (2..=3)
        .map(|m| {
            std::thread::spawn(move || {
                let me = ip(&format!("127.0.77.{m}"));
                let mut err = [0 as libc::c_char; 256];
                let g = unsafe {
                    rocast_mpi_join(
                        me.as_ptr(),
                        root.as_ptr(),
                        group.as_ptr(),
                        err.as_mut_ptr(),
                        256,
                    )
                };
                assert!(!g.is_null(), "join: {}", msg(&err));
                let mut got = Vec::new();
                for (k, &n) in sizes.iter().enumerate() {
                    let mut buf = vec![0u8; n];
                    let rc =
                        unsafe { rocast_mpi_recv(g, buf.as_mut_ptr(), n, err.as_mut_ptr(), 256) };
                    assert_eq!(rc, ROCAST_MPI_OK, "recv {k}: {}", msg(&err));
                    got.push(buf);
                }
                // The root's fourth buffer is 10 bytes; this rank expects 11.
                let mut buf = vec![0u8; 11];
                let rc = unsafe { rocast_mpi_recv(g, buf.as_mut_ptr(), 11, err.as_mut_ptr(), 256) };
                let wrong = (rc, msg(&err));
                unsafe { rocast_mpi_close(g, 1) };
                (got, wrong)
            })
        })
        .collect();
    let mut err = [0 as libc::c_char; 256];
    let g = unsafe {
        rocast_mpi_lead(
            root.as_ptr(),
            group.as_ptr(),
            2,
            4 << 20,
            err.as_mut_ptr(),
            256,
        )
    };
    assert!(!g.is_null(), "lead: {}", msg(&err));
    // No switch answered: the group runs on its fallback overlay.
    assert_eq!(unsafe { rocast_mpi_through_switch(g) }, 0);
    for (k, &n) in sizes.iter().enumerate() {
        let d = data(n, k);
        let rc = unsafe { rocast_mpi_send(g, d.as_ptr(), n, err.as_mut_ptr(), 256) };
        assert_eq!(rc, ROCAST_MPI_OK, "send {k}: {}", msg(&err));
    }
    let d = data(10, 9);
    let _ = unsafe { rocast_mpi_send(g, d.as_ptr(), 10, err.as_mut_ptr(), 256) };
    unsafe { rocast_mpi_close(g, 1) };
    for m in members {
        let (got, (rc, why)) = m.join().expect("member thread");
        for (k, &n) in sizes.iter().enumerate() {
            assert!(got[k] == data(n, k), "buffer {k} differs");
        }
        assert_eq!(rc, ROCAST_MPI_ERR);
        assert!(why.contains("10 bytes where this rank expects 11"), "{why}");
    }
}
