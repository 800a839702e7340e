//! End-to-end tests of `rocast pcap check|dump|sample`, running the built binary.

use rocast_core::wire::pcap::{PcapReader, PcapWriter, LINKTYPE_ETHERNET, LINKTYPE_RAW};
use rocast_core::wire::{classify_frame, FrameClass, Opcode};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{rocast, Run};

const GOLDEN_SUMMARY: &str = "550 frames, 506 roce, 506 icrc-ok, 0 icrc-bad\n";

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/rxe-golden.pcap")
}
fn golden() -> Vec<u8> {
    std::fs::read(golden_path()).expect("golden pcap")
}

/// A fresh path under cargo's per-target temporary directory.
fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pcap_cli");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn run_on(sub: &str, bytes: &[u8], name: &str) -> Run {
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    rocast(&["pcap", sub, p.to_str().unwrap()])
}

/// Byte offsets (within the file) of each record's data, and its length.
fn record_spans(pcap: &[u8]) -> Vec<(usize, usize)> {
    let base = pcap.as_ptr() as usize;
    PcapReader::new(pcap)
        .unwrap()
        .map(|r| r.unwrap())
        .map(|r| (r.data.as_ptr() as usize - base, r.data.len()))
        .collect()
}

#[test]
fn check_golden_is_clean() {
    let r = rocast(&["pcap", "check", golden_path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, GOLDEN_SUMMARY);
    assert_eq!(r.stderr, "");
}

#[test]
fn check_reports_a_flipped_payload_byte() {
    let mut bytes = golden();
    let spans = record_spans(&bytes);
    // The first RoCE frame is frame 22 (1-based), an RC SEND_ONLY with 64 payload bytes.
    let (idx, &(off, len)) = spans
        .iter()
        .enumerate()
        .find(|(_, &(o, l))| matches!(classify_frame(&bytes[o..o + l]), FrameClass::Roce { .. }))
        .unwrap();
    assert_eq!(idx + 1, 22);
    let payload_start = off + 14 + 20 + 8 + 12;
    assert!(payload_start + 10 < off + len - 4);
    bytes[payload_start + 10] ^= 0x20;
    let r = run_on("check", &bytes, "flipped.pcap");
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "550 frames, 506 roce, 505 icrc-ok, 1 icrc-bad\n");
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr
            .starts_with("frame 22: bad ICRC: RC SEND_ONLY QP=0x000011 PSN=3038818"),
        "{}",
        r.stderr
    );

    let d = run_on("dump", &bytes, "flipped-dump.pcap");
    assert_eq!(d.code, 0);
    let bad: Vec<&str> = d
        .stdout
        .lines()
        .filter(|l| l.ends_with("ICRC BAD"))
        .collect();
    assert_eq!(bad.len(), 1);
    assert!(bad[0].trim_start().starts_with("22 "), "{}", bad[0]);
}

#[test]
fn truncated_captures_report_what_was_read() {
    let bytes = golden();
    let spans = record_spans(&bytes);
    // Cut inside a record header, inside record data, and one byte short of the end.
    let (o5, l5) = spans[5];
    let (o300, _) = spans[300];
    for cut in [o5 - 16 + 7, o5 + l5 / 2, o300 + 1, bytes.len() - 1] {
        let complete = spans.iter().filter(|&&(o, l)| o + l <= cut).count();
        let r = run_on("check", &bytes[..cut], &format!("trunc-{cut}.pcap"));
        assert_eq!(r.code, 2, "cut at {cut}: {}", r.stderr);
        let first = r.stdout.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("{complete} frames, ")),
            "cut at {cut}: {first}"
        );
        assert!(r.stderr.contains("capture truncated"), "{}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("{complete} complete frames were read")),
            "{}",
            r.stderr
        );

        let d = run_on("dump", &bytes[..cut], &format!("trunc-dump-{cut}.pcap"));
        assert_eq!(d.code, 2);
        assert!(d.stderr.contains("capture truncated"));
    }
    // Just the file header: an empty but valid capture.
    let r = run_on("check", &bytes[..24], "header-only.pcap");
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "0 frames, 0 roce, 0 icrc-ok, 0 icrc-bad\n")
    );
    // Shorter than the file header.
    let r = run_on("check", &bytes[..10], "short-header.pcap");
    assert_eq!(r.code, 2);
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("not a pcap file"), "{}", r.stderr);
}

/// A small deterministic byte generator (xorshift64*).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

#[test]
fn garbage_is_rejected_without_panic() {
    for (i, len) in [0usize, 1, 23, 24, 100, 5000].into_iter().enumerate() {
        let g = noise(i as u64 + 7, len);
        for sub in ["check", "dump"] {
            let r = run_on(sub, &g, &format!("garbage-{sub}-{len}"));
            assert_eq!(r.code, 2, "{sub} on {len} garbage bytes");
            assert!(r.stderr.contains("not a pcap file"), "{}", r.stderr);
        }
    }
    // A valid file header followed by garbage records.
    let golden = golden();
    for seed in 0..8u64 {
        let mut g = golden[..24].to_vec();
        g.extend(noise(seed + 100, 3000));
        for sub in ["check", "dump"] {
            let r = run_on(sub, &g, &format!("garbage-records-{sub}-{seed}"));
            assert_ne!(r.code, 0, "{sub}: {}", r.stdout);
        }
    }
    let r = run_on("check", b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x4d\x3c\x2b\x1a\x01\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x1c\x00\x00\x00", "x.pcapng");
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("pcapng"), "{}", r.stderr);
    let r = rocast(&["pcap", "check", tmp("does-not-exist").to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("cannot read"), "{}", r.stderr);
}

#[test]
fn malformed_roce_frames_are_counted_and_explained() {
    let golden = golden();
    let spans = record_spans(&golden);
    let (o, l) = spans[21]; // frame 22: RC SEND_ONLY
    let frame = &golden[o..o + l];
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    w.write_record(1_000, frame).unwrap();
    w.write_record(2_000, &frame[..60]).unwrap(); // IPv4 says 104 bytes: truncated
    let mut bad_ip = frame.to_vec();
    bad_ip[14 + 8] ^= 1; // TTL change breaks the IPv4 header checksum
    w.write_record(3_000, &bad_ip).unwrap();
    let mut bytes = w.into_inner();
    // Mark record 2 as snapped: orig_len (bytes 12..16 of its record header) = the full length.
    let rec2 = 24 + 16 + frame.len();
    bytes[rec2 + 12..rec2 + 16].copy_from_slice(&(frame.len() as u32).to_le_bytes());

    let r = run_on("check", &bytes, "malformed.pcap");
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        "3 frames, 1 roce, 1 icrc-ok, 0 icrc-bad\n2 malformed\n"
    );
    let errs: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(errs.len(), 2, "{}", r.stderr);
    assert!(
        errs[0].starts_with("frame 2: malformed RoCE frame: truncated"),
        "{}",
        errs[0]
    );
    assert!(
        errs[0].contains(&format!(
            "only 60 of its {} bytes were captured",
            frame.len()
        )),
        "{}",
        errs[0]
    );
    assert_eq!(errs[1], "frame 3: malformed RoCE frame: bad ipv4 checksum");

    let d = run_on("dump", &bytes, "malformed-dump.pcap");
    assert_eq!(d.code, 0);
    let lines: Vec<&str> = d.stdout.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(
        lines[1].contains("10.99.0.2 → 10.99.0.1 MALFORMED: truncated"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].ends_with("MALFORMED: bad ipv4 checksum"),
        "{}",
        lines[2]
    );
}

#[test]
fn other_link_types() {
    let golden = golden();
    let spans = record_spans(&golden);
    let mut raw = PcapWriter::new(Vec::new(), LINKTYPE_RAW).unwrap();
    for &(o, l) in &spans {
        raw.write_record(0, &golden[o + 14..o + l]).unwrap();
    }
    let r = run_on("check", &raw.into_inner(), "raw.pcap");
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, GOLDEN_SUMMARY),
        "{}",
        r.stderr
    );

    let mut sll = PcapWriter::new(Vec::new(), 113).unwrap();
    for &(o, l) in &spans {
        let mut rec = vec![0, 0, 0, 1, 0, 6];
        rec.extend_from_slice(&golden[o + 6..o + 12]); // source MAC
        rec.extend_from_slice(&[0, 0]);
        rec.extend_from_slice(&golden[o + 12..o + l]); // ethertype and packet
        sll.write_record(0, &rec).unwrap();
    }
    let r = run_on("check", &sll.into_inner(), "sll.pcap");
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, GOLDEN_SUMMARY),
        "{}",
        r.stderr
    );

    let other = PcapWriter::new(Vec::new(), 147).unwrap().into_inner();
    let r = run_on("check", &other, "dlt-user0.pcap");
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("unsupported link type 147"),
        "{}",
        r.stderr
    );
}

#[test]
fn dump_golden() {
    let r = rocast(&["pcap", "dump", golden_path().to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 506);
    assert_eq!(
        lines[0],
        "   22    1.468258 10.99.0.2 → 10.99.0.1 RC SEND_ONLY QP=0x000011 PSN=3038818 AckReq len=64 ICRC ok"
    );
    assert!(lines.iter().all(|l| l.ends_with(" ICRC ok")));
    let count = |pat: &str| lines.iter().filter(|l| l.contains(pat)).count();
    assert_eq!(count(" RC SEND_ONLY "), 6);
    assert_eq!(count(" RC RDMA_WRITE_FIRST "), 100);
    assert_eq!(count(" RC RDMA_WRITE_MIDDLE "), 200);
    assert_eq!(count(" RC RDMA_WRITE_LAST "), 99);
    assert_eq!(count(" RC ACKNOWLEDGE "), 101);
    assert_eq!(count(" AETH(ACK credits=31 msn="), 101);
    assert_eq!(count(" RETH(va=0x"), 100);
    // The BTH the wire module's unit test takes from this capture: WRITE_FIRST to QP 18, PSN 10088615.
    let wf = lines
        .iter()
        .find(|l| l.contains("RC RDMA_WRITE_FIRST QP=0x000012 PSN=10088615 "))
        .unwrap();
    assert!(
        wf.contains(" RETH(va=0x") && wf.contains(" len=4096) len=1024 ICRC ok"),
        "{wf}"
    );
    // Times are relative to the first frame and never go backwards here.
    let times: Vec<f64> = lines
        .iter()
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn sample_checks_clean_and_covers_every_opcode() {
    let p = tmp("sample.pcap");
    let r = rocast(&["pcap", "sample", p.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bytes = std::fs::read(&p).unwrap();

    let reader = PcapReader::new(&bytes).unwrap();
    assert_eq!(reader.linktype, LINKTYPE_ETHERNET);
    let mut seen = BTreeSet::new();
    let mut n = 0;
    for rec in reader {
        let rec = rec.unwrap();
        n += 1;
        let FrameClass::Roce {
            frame,
            icrc_ok: true,
        } = classify_frame(rec.data)
        else {
            panic!("frame {n}")
        };
        seen.insert(frame.roce.bth.opcode.0);
        let mut out = vec![0u8; frame.buffer_len()];
        frame.emit(&mut out);
        assert_eq!(out, rec.data, "frame {n} re-emits differently");
    }
    let known: BTreeSet<u8> = (0..=255u8).filter(|&o| Opcode(o).is_known()).collect();
    assert_eq!(seen, known);

    let c = rocast(&["pcap", "check", p.to_str().unwrap()]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert_eq!(
        c.stdout,
        format!("{n} frames, {n} roce, {n} icrc-ok, 0 icrc-bad\n")
    );

    // Deterministic: a second run writes the same bytes.
    let p2 = tmp("sample2.pcap");
    assert_eq!(rocast(&["pcap", "sample", p2.to_str().unwrap()]).code, 0);
    assert_eq!(std::fs::read(&p2).unwrap(), bytes);

    let d = rocast(&["pcap", "dump", p.to_str().unwrap()]);
    assert_eq!(d.code, 0);
    assert_eq!(d.stdout.lines().count(), n);
    for want in [
        "AETH(ACK credits=31 msn=",
        "AETH(ACK credits=8 msn=",
        "AETH(RNR NAK timer=14 msn=",
        "AETH(NAK PSN sequence error msn=",
        "AETH(NAK invalid request msn=",
        "AETH(NAK remote access error msn=",
        "AETH(NAK remote operational error msn=",
        "AETH(NAK invalid RD request msn=",
        "UD SEND_ONLY QP=0x000101 PSN=1024 DETH(qkey=0x11111111 srcQP=0x000100) len=50 ICRC ok",
        "ImmDt=0x01020304",
        "CNP QP=0x000011 PSN=0 BECN len=0 ICRC ok",
        "RC COMPARE_SWAP QP=0x000012 PSN=512 AckReq AtomicETH(va=0x666600000008 rkey=0x88 swap=0x1111222233334444 compare=0x42)",
        "RC FETCH_ADD QP=0x000012 PSN=513 AckReq AtomicETH(va=0x666600000008 rkey=0x88 add=0x1)",
        "AtomicAckETH(orig=0x42)",
        "RC RDMA_READ_REQUEST QP=0x000012 PSN=256 AckReq RETH(va=0x555500000000 rkey=0x77 len=600) len=0",
        "IETH(rkey=0x0000abcd)",
        "PSN=16777215 ECN-CE",
    ] {
        assert!(d.stdout.contains(want), "dump lacks {want:?}:\n{}", d.stdout);
    }
}

#[test]
fn unwritable_sample_path_fails_cleanly() {
    let r = rocast(&["pcap", "sample", "/nonexistent-dir/x.pcap"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("cannot write"), "{}", r.stderr);
}

#[test]
fn dump_into_a_closed_pipe_exits_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    // Many frames, so the output outgrows the pipe buffer after the reader goes away.
    let golden = golden();
    let spans = record_spans(&golden);
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for i in 0..20 {
        for &(o, l) in &spans {
            w.write_record(i, &golden[o..o + l]).unwrap();
        }
    }
    let p = tmp("big.pcap");
    std::fs::write(&p, w.into_inner()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rocast"))
        .args(["pcap", "dump", p.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("RC SEND_ONLY"), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sim_capture_passes_pcap_check_and_bad_configs_fail_clearly() {
    let dir = std::env::temp_dir().join(format!("rocast-sim-cli-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let r = rocast(&[
        "sim",
        "--quiet",
        "--set",
        "topology.k=2",
        "--set",
        "workload.size_bytes=20000",
        "--set",
        "output.capture_links=[[0,2]]",
        "--out",
        d,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("flows 2 finished"), "{}", r.stdout);
    let fct = std::fs::read_to_string(dir.join("fct.txt")).unwrap();
    assert_eq!(fct.lines().count(), 2);
    let capture = dir.join("capture.pcap");
    let check = rocast(&["pcap", "check", capture.to_str().unwrap()]);
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    for (args, want) in [
        (vec!["--set", "topology.k=3"], "topology.k"),
        (vec!["--set", "nic.mtu=1000"], "nic.mtu"),
        (vec!["--set", "bogus.key=1"], "bogus"),
        (vec!["--preset", "nope"], "unknown preset"),
        (vec!["/nonexistent.toml"], "nonexistent"),
    ] {
        let mut a = vec!["sim"];
        a.extend(&args);
        a.extend(["--quiet", "--out", d]);
        let o = rocast(&a);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains(want), "{args:?}: {}", o.stderr);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Cepheus connection bridging on real Soft-RoCE frames: every RoCE frame of the
/// golden rxe capture, rewritten as the switch next to a receiver rewrites it (new
/// dstIP/dstQP, srcIP = McstID, RETH pointed at the receiver's region), must pass
/// `rocast pcap check` — fresh IPv4 checksum and ICRC.
#[test]
fn bridged_rxe_frames_pass_check() {
    use rocast_core::fabric::cepheus::Bridge;
    use rocast_core::wire::{Ipv4Address, RoceRepr};
    let bytes = golden();
    let bridge = Bridge {
        mcst_id: Ipv4Address::new(239, 1, 0, 1),
        dst_ip: Ipv4Address::new(11, 0, 7, 1),
        dst_qp: 0x1234,
        region: Some((0x7f00_0000_0000, 0xabcd)),
    };
    let mut out = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    let (mut bridged, mut with_reth) = (0, 0);
    for rec in PcapReader::new(&bytes).unwrap() {
        let rec = rec.unwrap();
        let mut frame = rec.data.to_vec();
        if let FrameClass::Roce { icrc_ok: true, .. } = classify_frame(&frame) {
            bridge.rewrite_ip_packet(&mut frame[14..]).unwrap();
            let r = RoceRepr::parse_verified(&frame[14..]).unwrap();
            assert_eq!(
                (r.ip.src_addr, r.ip.dst_addr, r.bth.dest_qp),
                (bridge.mcst_id, bridge.dst_ip, 0x1234)
            );
            if let Some(reth) = r.ext.reth {
                assert_eq!(reth.rkey, 0xabcd);
                with_reth += 1;
            }
            bridged += 1;
        }
        out.write_record(rec.ts_ns, &frame).unwrap();
    }
    assert_eq!(bridged, 506);
    assert!(with_reth > 0, "the capture has WRITEs");
    let r = run_on("check", &out.into_inner(), "bridged.pcap");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.ends_with(GOLDEN_SUMMARY), "{}", r.stdout);
}

#[test]
fn peel_shimmed_frames_check_without_their_shim_and_dump_it() {
    use rocast_core::wire::peel::{insert_shim, PeelHeader};
    let golden = golden();
    let spans = record_spans(&golden);
    let (o, l) = spans[21]; // frame 22: RC SEND_ONLY
    let plain = &golden[o..o + l];
    let h = PeelHeader {
        flags: PeelHeader::SOURCE_RACK,
        prefix_len: 2,
        pod: 3,
        prefix_value: 0b01,
        plane: 1,
    };
    let mut shimmed = plain[..14].to_vec();
    shimmed.extend_from_slice(&insert_shim(&plain[14..], &h).unwrap());
    assert_eq!(shimmed.len(), plain.len() + 8);
    let shim_at = 14 + 20 + 8;

    // Clean: the plain frame and its shimmed copy both verify.
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    w.write_record(1_000, plain).unwrap();
    w.write_record(2_000, &shimmed).unwrap();
    let clean = w.into_inner();
    let r = run_on("check", &clean, "peel-clean.pcap");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "2 frames, 2 roce, 2 icrc-ok, 0 icrc-bad\n1 peel\n"
    );

    let d = run_on("dump", &clean, "peel-dump.pcap");
    assert_eq!(d.code, 0, "{}", d.stderr);
    let lines: Vec<&str> = d.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", d.stdout);
    let what = &lines[0][18..];
    assert_eq!(
        &lines[1][18..],
        format!("PEEL[len=2 value=0b1 pod=3 plane=1 SRC-RACK] {what}"),
        "the shim, then the frame a member receives"
    );

    // A corrupted payload under the shim fails the ICRC; a bad shim is malformed.
    let mut bad_payload = shimmed.clone();
    let last = bad_payload.len() - 10;
    bad_payload[last] ^= 0x40;
    let mut bad_shim = shimmed.clone();
    bad_shim[shim_at] = 0x20; // version 2
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for (t, f) in [
        (1_000, plain),
        (2_000, &shimmed[..]),
        (3_000, &bad_payload[..]),
        (4_000, &bad_shim[..]),
    ] {
        w.write_record(t, f).unwrap();
    }
    let r = run_on("check", &w.into_inner(), "peel-bad.pcap");
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        "4 frames, 3 roce, 2 icrc-ok, 1 icrc-bad\n1 malformed\n2 peel\n"
    );
    let errs: Vec<&str> = r.stderr.lines().collect();
    assert!(errs[0].starts_with("frame 3: bad ICRC"), "{}", r.stderr);
    assert_eq!(
        errs[1],
        "frame 4: malformed RoCE frame: unsupported peel version"
    );
}
