//! `verbs/rocast_nack.h` against this crate: the header's constants equal the
//! library's, and `verbs/nack_check.c`, compiled against the header and linked with
//! the static library (`$CC`, else `cc`; a missing compiler fails the test), runs one
//! sender and three receivers through the C ABI on a lossy in-memory medium: every
//! message arrives exactly once, in order, intact, and loss was repaired.

use std::path::{Path, PathBuf};
use std::process::Command;

fn verbs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../verbs")
}

/// The static library cargo built with this test (in the test binary's `deps/`; the
/// newest if several builds left one).
fn static_lib() -> PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::read_dir(&deps)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("librocast_ffi") && n.ends_with(".a")
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| panic!("no librocast_ffi*.a in {}", deps.display()))
}

fn define(header: &str, name: &str) -> i64 {
    let line = header
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name) && l.starts_with("#define"))
        .unwrap_or_else(|| panic!("rocast_nack.h has no #define {name}"));
    let v = line.split_whitespace().nth(2).unwrap();
    let v = v.trim_matches(|c| c == '(' || c == ')');
    if v == "UINT64_MAX" {
        return -1;
    }
    v.parse().unwrap()
}

#[test]
fn the_header_says_what_the_library_does() {
    let h = std::fs::read_to_string(verbs_dir().join("rocast_nack.h")).unwrap();
    use rocast_ffi::*;
    for (name, v) in [
        ("ROCAST_NM_ERR_NULL", ROCAST_NM_ERR_NULL),
        ("ROCAST_NM_ERR_WINDOW_FULL", ROCAST_NM_ERR_WINDOW_FULL),
        ("ROCAST_NM_ERR_TOO_LARGE", ROCAST_NM_ERR_TOO_LARGE),
        ("ROCAST_NM_ERR_BUFFER", ROCAST_NM_ERR_BUFFER),
        ("ROCAST_NM_ERR_PANIC", ROCAST_NM_ERR_PANIC),
        ("ROCAST_NM_EVENT_MESSAGE", ROCAST_NM_EVENT_MESSAGE as i64),
        (
            "ROCAST_NM_EVENT_UNRECOVERABLE",
            ROCAST_NM_EVENT_UNRECOVERABLE as i64,
        ),
        (
            "ROCAST_NM_DATA_HEADER_LEN",
            ROCAST_NM_DATA_HEADER_LEN as i64,
        ),
        ("ROCAST_NM_AUTH_TAG_LEN", ROCAST_NM_AUTH_TAG_LEN as i64),
        ("ROCAST_NM_NEVER", ROCAST_NM_NEVER as i64),
    ] {
        assert_eq!(define(&h, name), v, "{name}");
    }
    // Every #define in the header is one of the above.
    let known = h
        .lines()
        .filter(|l| l.starts_with("#define ROCAST_NM_"))
        .count();
    assert_eq!(known, 10);
}

#[test]
fn a_lossy_group_through_the_c_abi_delivers_every_message_once_in_order() {
    let out = std::env::temp_dir().join(format!("rocast-nack-check-{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-O1", "-Wall", "-Wextra", "-Werror", "-std=c11", "-o"])
        .arg(&out)
        .arg(verbs_dir().join("nack_check.c"))
        .arg(static_lib())
        .args(["-lpthread", "-ldl", "-lm"])
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(built.success(), "compiling nack_check.c failed");
    // 1e-3 loss (the rxe test's) and 2e-2 (many repairs, some of them lost too); the
    // last with a group key (every packet sealed, each one checked).
    for (messages, ppm, seed, keyed) in [
        ("5000", "1000", "1", false),
        ("2000", "20000", "2", false),
        ("2000", "20000", "3", true),
    ] {
        let r = Command::new(&out)
            .args([messages, ppm, seed])
            .args(keyed.then_some("keyed"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&r.stdout).into_owned();
        assert!(
            r.status.success(),
            "{messages} {ppm}: {text}{}",
            String::from_utf8_lossy(&r.stderr)
        );
        assert!(text.ends_with("result: PASS\n"), "{text}");
        for i in 1..=3 {
            assert!(
                text.contains(&format!(
                    "receiver {i} delivered {messages} corrupt_or_out_of_order 0 unrecoverable 0"
                )),
                "{text}"
            );
        }
        let field = |k: &str| -> u64 {
            let at = text.find(&format!(" {k} ")).unwrap() + k.len() + 2;
            text[at..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        assert!(
            field("dropped") > 0 && field("repair_packets") > 0,
            "{text}"
        );
    }
    let _ = std::fs::remove_file(&out);
}

/// `verbs/rocast_session.h` against this crate: its constants are the library's,
/// and `verbs/session_check.c` (compiled like `nack_check.c`) runs one leader and
/// three members of the group session through the C ABI: the structs'
/// sizes agree, a clean group closes ok with every buffer at every member, a damaged
/// copy fails its buffer and the close, and a member whose connection breaks is
/// evicted while the others get every buffer.
#[test]
fn the_group_session_runs_through_the_c_abi() {
    use rocast_ffi::session::*;
    let h = std::fs::read_to_string(verbs_dir().join("rocast_session.h")).unwrap();
    for (name, v) in [
        ("ROCAST_GS_ERR_NULL", ROCAST_GS_ERR_NULL),
        ("ROCAST_GS_ERR_CONFIG", ROCAST_GS_ERR_CONFIG),
        ("ROCAST_GS_ERR_STATE", ROCAST_GS_ERR_STATE),
        ("ROCAST_GS_ERR_BUFFER", ROCAST_GS_ERR_BUFFER),
        ("ROCAST_GS_ERR_PANIC", ROCAST_GS_ERR_PANIC),
        ("ROCAST_GS_MAX_TRANSMIT", ROCAST_GS_MAX_TRANSMIT as i64),
        ("ROCAST_GS_TEXT_LEN", ROCAST_GS_TEXT_LEN as i64),
        ("ROCAST_GS_DEST_MEMBER", ROCAST_GS_DEST_MEMBER as i64),
        ("ROCAST_GS_DEST_LEADER", ROCAST_GS_DEST_LEADER as i64),
        ("ROCAST_GS_DEST_MRP", ROCAST_GS_DEST_MRP as i64),
        ("ROCAST_GS_REGISTERED", ROCAST_GS_REGISTERED as i64),
        ("ROCAST_GS_USE_OVERLAY", ROCAST_GS_USE_OVERLAY as i64),
        ("ROCAST_GS_UP", ROCAST_GS_UP as i64),
        ("ROCAST_GS_MEMBER_EVICTED", ROCAST_GS_MEMBER_EVICTED as i64),
        ("ROCAST_GS_REROUTE", ROCAST_GS_REROUTE as i64),
        (
            "ROCAST_GS_RESUME_TRANSFER",
            ROCAST_GS_RESUME_TRANSFER as i64,
        ),
        ("ROCAST_GS_TRANSFER", ROCAST_GS_TRANSFER as i64),
        ("ROCAST_GS_BUFFER_DONE", ROCAST_GS_BUFFER_DONE as i64),
        ("ROCAST_GS_CLOSED", ROCAST_GS_CLOSED as i64),
        ("ROCAST_GS_FAILED", ROCAST_GS_FAILED as i64),
        ("ROCAST_GS_OPEN_QP", ROCAST_GS_OPEN_QP as i64),
        ("ROCAST_GS_POST_RECEIVES", ROCAST_GS_POST_RECEIVES as i64),
        ("ROCAST_GS_RESUME_RECEIVE", ROCAST_GS_RESUME_RECEIVE as i64),
        ("ROCAST_GS_WRITE_DONE", ROCAST_GS_WRITE_DONE as i64),
        ("ROCAST_GS_RECEIVED", ROCAST_GS_RECEIVED as i64),
        ("ROCAST_GS_PEER_EVICTED", ROCAST_GS_PEER_EVICTED as i64),
        ("ROCAST_GS_NEVER", -1),
    ] {
        assert_eq!(define(&h, name), v, "{name}");
    }
    let known = h
        .lines()
        .filter(|l| l.starts_with("#define ROCAST_GS_"))
        .count();
    assert_eq!(known, 27, "every #define is checked above");

    let out = std::env::temp_dir().join(format!("rocast-session-check-{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-O1", "-Wall", "-Wextra", "-Werror", "-std=c11", "-o"])
        .arg(&out)
        .arg(verbs_dir().join("session_check.c"))
        .arg(static_lib())
        .args(["-lpthread", "-ldl", "-lm"])
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(built.success(), "compiling session_check.c failed");
    let sizes = format!(
        "sizes {} {} {}\n",
        std::mem::size_of::<RocastGsEvent>(),
        std::mem::size_of::<RocastGsLeaderConfig>(),
        std::mem::size_of::<RocastGsMemberConfig>()
    );
    for (mode, wants) in [
        (
            "ok",
            &[
                "registered",
                "member 1 open_qp write 1 capacity 65536 message 4096 psn 0x123456",
                "buffer 3 ok: 3 of 3 members ok",
                "member 3 received 3 ok",
                "leader closed ok",
                "member 2 closed ok",
            ][..],
        ),
        (
            "corrupt",
            &[
                "buffer 1 ok: 3 of 3 members ok",
                "member 2 received 2 FAILED",
                "buffer 2 FAILED: 2 of 3 members ok",
                "buffer 3 ok: 3 of 3 members ok",
                "leader closed FAILED",
                "member 1 closed FAILED",
            ][..],
        ),
        (
            "evict",
            &[
                "evicted 10.77.0.4: control connection: closed",
                "member 1 heard 10.77.0.4 evicted",
                "buffer 3 ok: 2 of 3 members ok",
                "leader closed ok",
                "member 2 closed ok",
            ][..],
        ),
    ] {
        let r = Command::new(&out).arg(mode).output().unwrap();
        let text = String::from_utf8_lossy(&r.stdout).into_owned();
        assert!(
            r.status.success(),
            "{mode}: {text}{}",
            String::from_utf8_lossy(&r.stderr)
        );
        assert!(
            text.starts_with(&sizes),
            "{mode}: C and Rust structs differ: {text}"
        );
        assert!(text.ends_with("result: PASS\n"), "{mode}: {text}");
        for w in wants {
            assert!(text.contains(w), "{mode}: no {w:?} in\n{text}");
        }
    }
    let _ = std::fs::remove_file(&out);
}
