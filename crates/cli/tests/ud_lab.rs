//! Reliable UD multicast on real packets: `rocast bench lab-ud`
//! runs a `NackMulticastSender` on h0 and receivers on h1..h3, each over a core UD
//! endpoint on an IPv4 multicast group, in a 4-host `rocast lab` whose bridge (or
//! `rocast switch`, by IGMP snooping) is the broadcast medium, with 1e-3 loss injected on
//! receive. Needs root (it creates namespaces); without it the tests fail loudly.
//! Only the lab's own namespaces carry traffic.

mod common;
use common::{line_counter, rocast, LabGuard};

const MESSAGES: u64 = 3000;

/// One `host delivered dup order corrupt lost nacks_sent …` row of the report.
fn row<'a>(out: &'a str, host: &str) -> Vec<&'a str> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.first() == Some(&host) && f.len() == 15)
        .unwrap_or_else(|| panic!("no row for {host} in:\n{out}"))
}

fn total(out: &str, key: &str) -> u64 {
    line_counter(out, "totals:", key)
}

fn run_bench(lab: &str, medium: &str) -> String {
    let m = MESSAGES.to_string();
    let r = rocast(&[
        "bench",
        "lab-ud",
        "--name",
        lab,
        "--medium",
        medium,
        "--hosts",
        "4",
        "--loss",
        "0.001",
        "--messages",
        &m,
        "--size",
        "4000",
        "--timeout",
        "60",
    ]);
    let out = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 0, "{out}");
    assert!(out.contains("result: PASS"), "{out}");
    for h in ["h1", "h2", "h3"] {
        let f = row(&out, h);
        // delivered, duplicates, out of order, corrupt, unrecoverable
        assert_eq!(f[1], m, "{h}: delivered\n{out}");
        assert_eq!(
            &f[2..6],
            &["0", "0", "0", "0"],
            "{h}: exactly once, in order\n{out}"
        );
    }
    // Loss happened and was repaired: NACKs went out and the sender re-multicast.
    assert!(total(&out, "injected_drops") > 0, "{out}");
    assert!(total(&out, "nacks_sent") > 0, "{out}");
    assert!(total(&out, "repairs_sent") > 0, "{out}");
    assert!(total(&out, "repairs_received") > 0, "{out}");
    // Every frame the endpoints saw verified (ICRC, Q_Key, addressing).
    assert!(!out.contains("bad_icrc=1"), "{out}");
    for line in out.lines().filter(|l| l.contains(" drops not_roce=")) {
        let drops = &line[line.find(" drops ").unwrap()..];
        assert!(
            drops
                .split_whitespace()
                .skip(1)
                .all(|kv| kv.ends_with("=0")),
            "UD endpoint dropped frames: {line}"
        );
    }
    out
}

#[test]
fn four_host_ud_multicast_over_a_bridge_with_loss_delivers_exactly_once() {
    let lab = LabGuard::new("udt1");
    run_bench(lab.0, "bridge");
}

/// Through `rocast switch`, which learns the group's members from the hosts' IGMP
/// reports (every host joins the group: the sender too, to hear NACKs) and forwards
/// the group's frames by membership, not by flooding.
#[test]
fn rocast_switch_snoops_the_group_and_ud_multicast_delivers_exactly_once() {
    let lab = LabGuard::new("udt2");
    let out = run_bench(lab.0, "switch");
    let line = out
        .lines()
        .find(|l| l.starts_with("switch:"))
        .unwrap_or_else(|| panic!("no switch stats in:\n{out}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    let counter = |k: &str| -> u64 {
        f[f.iter()
            .position(|w| *w == k)
            .unwrap_or_else(|| panic!("no {k}: {line}"))
            + 1]
        .parse()
        .unwrap()
    };
    assert!(counter("igmp_reports") >= 4, "four hosts joined: {line}");
    assert!(
        counter("mcast_forwarded") >= MESSAGES,
        "the group's frames go by membership: {line}"
    );
}
