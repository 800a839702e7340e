//! `rocast perf` as perftest's users run it: size suffixes, the -a sweep, the latency
//! test's columns, JSON that parses, a --min-gbps verdict in the exit status, and bad
//! arguments refused. One server (--loop) on its own loopback addresses for all.

mod common;
use common::rocast;
use std::process::{Child, Command, Stdio};

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn perf_client_speaks_perftest() {
    // Addresses of this test only (UDP 4791 is per address); a port from the pid.
    let port = (20_000 + std::process::id() % 20_000).to_string();
    let _server = Server(
        Command::new(env!("CARGO_BIN_EXE_rocast"))
            .args([
                "perf",
                "server",
                "--loop",
                "--bind",
                "127.0.0.61",
                "--port",
                &port,
            ])
            .args(["--timeout", "20"])
            .stdout(Stdio::null())
            .spawn()
            .expect("start the server"),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let client = |extra: &[&str]| {
        let mut a = vec![
            "perf",
            "client",
            "127.0.0.61",
            "--bind",
            "127.0.0.62",
            "--port",
            &port,
        ];
        a.extend_from_slice(extra);
        rocast(&a)
    };

    // A size suffix, the latency columns, one message in flight.
    let r = client(&["--test", "lat", "-s", "4K", "-n", "200"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("RDMA_Write Latency Test"), "{}", r.stdout);
    assert!(r.stdout.contains("t_typical[usec]"), "{}", r.stdout);
    assert!(r.stdout.contains(" TX depth        : 1\n"), "{}", r.stdout);
    let row: Vec<f64> = r
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("4096 "))
        .expect("a 4096 B row")
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    // bytes, iterations, min ≤ typical ≤ p99 ≤ p99.9 ≤ max.
    assert_eq!((row[0], row[1]), (4096.0, 200.0));
    assert!(row[2] <= row[4] && row[4] <= row[7] && row[7] <= row[8] && row[8] <= row[3]);

    // The -a sweep as JSON: 23 sizes, 2 B to 8 MiB, every field a number.
    let r = client(&["-a", "-n", "8", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_eq!(j["tool"], "rocast perf");
    assert_eq!(j["test"], "bw");
    let results = j["results"].as_array().unwrap();
    let sizes: Vec<u64> = results
        .iter()
        .map(|x| x["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, (1..=23).map(|k| 1u64 << k).collect::<Vec<_>>());
    for x in results {
        assert!(x["bw_avg_gbps"].as_f64().unwrap() > 0.0, "{x}");
        assert!(x["bw_peak_gbps"].as_f64().unwrap() >= x["bw_avg_gbps"].as_f64().unwrap());
        assert!(x.get("latency_us").is_none());
    }

    // A threshold no loopback reaches: the table marks it and the exit status says so.
    let r = client(&["-s", "64K", "-n", "50", "--min-gbps", "100000"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stdout.contains("< --min-gbps"), "{}", r.stdout);
    assert!(r.stderr.contains("below --min-gbps"), "{}", r.stderr);

    // perftest's units: MB/sec (2^20 bytes) by default, Gb/sec with --report_gbits.
    let r = client(&["-s", "64K", "-n", "50"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("BW average[MB/sec]"), "{}", r.stdout);
    // perftest's address lines, between the settings and the table: the client's QP
    // (no region of its own) and the server's with the region it registered for WRITE.
    let lines: Vec<&str> = r.stdout.lines().collect();
    let at = |p: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("{p}: {}", r.stdout))
    };
    let (local, remote, header) = (
        at(" local address: LID 0000 QPN 0x"),
        at(" remote address: LID 0000 QPN 0x"),
        at(" #bytes"),
    );
    assert!(local < remote && remote < header, "{}", r.stdout);
    assert!(
        !lines[local].contains("RKey")
            && lines[remote].contains(" RKey 0x")
            && lines[remote].contains(" VAddr 0x")
    );
    assert_eq!(
        lines[local + 1],
        " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:62"
    );
    assert_eq!(
        lines[remote + 1],
        " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:61"
    );
    // The same ends in JSON; SEND registers no region.
    let r = client(&["-s", "4K", "-n", "20", "--op", "send", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_eq!(
        (j["local"]["ip"].as_str(), j["remote"]["ip"].as_str()),
        (Some("127.0.0.62"), Some("127.0.0.61"))
    );
    assert!(j["local"]["qpn"].as_u64().is_some() && j["remote"]["psn"].as_u64().is_some());
    assert!(j["remote"].get("rkey").is_none(), "{j}");
    let r = client(&["-s", "64K", "-n", "50", "--report_gbits", "-c", "RC"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("BW average[Gb/sec]"), "{}", r.stdout);

    for bad in [
        &["-s", "4X"][..],
        &["--test", "jitter"],
        &["-s", "99999999999999999999"],
        &["-c", "UD"],
        &["-D", "5"],
        &["--mtu", "1000"],
    ] {
        let r = client(bad);
        assert_eq!(r.code, 2, "{bad:?}: {}", r.stderr);
    }
}
