//! Multicast on real packets: a lab of namespaces, `rocast switch` as the
//! Cepheus switch, `rocast mcast lead|join` on the hosts. Needs root (it creates
//! namespaces); without it the tests fail loudly. Only the lab's own namespaces carry
//! traffic.

mod common;
use common::{rocast, LabGuard};
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_rocast");

/// Seeded bytes, so a misplaced packet is caught.
fn data(len: usize, seed: u64) -> Vec<u8> {
    rocast_core::payload::message_data(seed, 0, len)
}

fn host_ip(i: usize) -> String {
    format!("10.77.0.{}", i + 1)
}

/// `rocast lab exec --name LAB hI -- rocast ARGS…` as a child.
fn spawn_on(lab: &str, host: usize, args: &[&str]) -> Child {
    let h = format!("h{host}");
    let mut a = vec!["lab", "exec", "--name", lab, &h, "--", BIN];
    a.extend_from_slice(args);
    Command::new(BIN)
        .args(&a)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rocast")
}

fn finish(c: Child) -> (i32, String) {
    let o = c.wait_with_output().expect("wait");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!text.contains("panicked"), "{text}");
    (o.status.code().unwrap_or(-1), text)
}

/// Runs one transfer from h0 to h1..h(members) and returns (leader's output, each
/// member's received bytes).
fn transfer(
    lab: &str,
    members: usize,
    file: &str,
    op: &str,
    tag: &str,
) -> (i32, String, Vec<Vec<u8>>) {
    transfer_with(lab, members, file, &["--op", op], tag)
}

/// [`transfer`] with other `mcast lead` options.
fn transfer_with(
    lab: &str,
    members: usize,
    file: &str,
    lead_opts: &[&str],
    tag: &str,
) -> (i32, String, Vec<Vec<u8>>) {
    let outs: Vec<String> = (1..=members)
        .map(|i| format!("/tmp/rocast-{lab}-{tag}-h{i}.bin"))
        .collect();
    let joins: Vec<Child> = (1..=members)
        .map(|i| {
            spawn_on(
                lab,
                i,
                &[
                    "mcast",
                    "join",
                    "--bind",
                    &host_ip(i),
                    "--leader",
                    &host_ip(0),
                    "--out",
                    &outs[i - 1],
                    "--timeout",
                    "15",
                ],
            )
        })
        .collect();
    let n = members.to_string();
    let ip0 = host_ip(0);
    let mut args = vec![
        "mcast",
        "lead",
        "--bind",
        &ip0,
        "--members",
        &n,
        "--file",
        file,
        "--timeout",
        "15",
    ];
    args.extend_from_slice(lead_opts);
    let lead = spawn_on(lab, 0, &args);
    let (code, text) = finish(lead);
    let mut got = Vec::new();
    for (j, out) in joins.into_iter().zip(&outs) {
        let (jc, jt) = finish(j);
        if code == 0 {
            assert_eq!(jc, 0, "member: {jt}");
        }
        got.push(std::fs::read(out).unwrap_or_default());
        let _ = std::fs::remove_file(out);
    }
    (code, text, got)
}

/// The switch's `name value` counter from its stats text.
fn counter(stats: &str, scope: &str, name: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[0] == scope && f[1] == name).then(|| f[2].parse().unwrap())
        })
        .unwrap_or_else(|| panic!("{scope} {name} not in:\n{stats}"))
}

fn retransmitted(leader_out: &str) -> u64 {
    let at = leader_out
        .find(" packets retransmitted")
        .unwrap_or_else(|| panic!("{leader_out}"));
    leader_out[..at]
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn ten_megabytes_by_send_and_by_write_reach_every_member_byte_identical() {
    let lab = LabGuard::new("tm1");
    let r = rocast(&["lab", "up", "--name", lab.0, "--hosts", "4", "--switch"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let payload = data(10 << 20, 7);
    let file = "/tmp/rocast-tm1-payload.bin";
    std::fs::write(file, &payload).unwrap();
    let mut retx = 0;
    for op in ["send", "write"] {
        let (code, text, got) = transfer(lab.0, 3, file, op, op);
        assert_eq!(code, 0, "{op}: {text}");
        assert_eq!(text.matches(": ok").count(), 3, "{text}");
        for (i, g) in got.iter().enumerate() {
            assert!(
                g == &payload,
                "{op}: member h{} holds {} bytes that differ",
                i + 1,
                g.len()
            );
        }
        retx += retransmitted(&text);
    }
    let _ = std::fs::remove_file(file);
    // The switch saw every data packet once (plus the sender's retransmissions), sent
    // one bridged copy per member of each packet a member still needed, and freed the
    // group after each transfer.
    let control = format!("/run/rocast-lab/{}/switch.sock", lab.0);
    let r = rocast(&["switch", "--stats", "--control", &control]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = &r.stdout;
    let packets = 2 * (10u64 << 20) / 4096;
    let data_in = counter(s, "cepheus", "data_in");
    assert_eq!(data_in, packets + retx, "{s}");
    let (replicas, filtered) = (
        counter(s, "cepheus", "replicas"),
        counter(s, "cepheus", "retransmission_filtered"),
    );
    assert_eq!(replicas + filtered, 3 * data_in, "{s}");
    assert!(replicas >= 3 * packets, "{s}");
    assert_eq!(counter(s, "cepheus", "bridged"), replicas);
    assert_eq!(counter(s, "switch", "mrp_released"), 2);
    assert_eq!(counter(s, "switch", "drop_bad_icrc"), 0);
    assert_eq!(counter(s, "switch", "drop_no_mac"), 0);
    assert!(s.contains("groups 0"), "{s}");
}

/// The overlay baselines on the same host runtime (no switch help): every scheme
/// delivers the bytes.
#[test]
fn chain_tree_and_pipeline_overlays_deliver_byte_identical_data() {
    let lab = LabGuard::new("tm3");
    let r = rocast(&["lab", "up", "--name", lab.0, "--hosts", "4", "--switch"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let payload = data(3 << 20, 11);
    let file = "/tmp/rocast-tm3-payload.bin";
    std::fs::write(file, &payload).unwrap();
    for scheme in ["chain", "tree", "pipeline"] {
        let (code, text, got) = transfer_with(
            lab.0,
            3,
            file,
            &["--overlay", scheme, "--block", "256K"],
            scheme,
        );
        assert_eq!(code, 0, "{scheme}: {text}");
        assert!(text.contains(&format!("via {scheme} ")), "{text}");
        for g in &got {
            assert!(
                g == &payload,
                "{scheme}: a member's {} bytes differ",
                g.len()
            );
        }
    }
    let _ = std::fs::remove_file(file);
    // Nothing went through the Cepheus engine.
    let control = format!("/run/rocast-lab/{}/switch.sock", lab.0);
    let s = rocast(&["switch", "--stats", "--control", &control]).stdout;
    assert_eq!(counter(&s, "cepheus", "data_in"), 0, "{s}");
}

#[test]
fn a_switch_without_room_refuses_the_group_and_the_transfer_falls_back() {
    let lab = LabGuard::new("tm2");
    let r = rocast(&["lab", "up", "--name", lab.0, "--hosts", "3"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    // Our own switch in the lab's switch namespace, with an MFT of capacity 0.
    let mut args = vec![
        "lab".to_string(),
        "exec".into(),
        "--name".into(),
        lab.0.into(),
        "sw".into(),
        "--".into(),
        BIN.into(),
        "switch".into(),
        "--max-groups".into(),
        "0".into(),
        "--duration".into(),
        "30".into(),
    ];
    for i in 0..3 {
        args.push("--port".into());
        args.push(format!("afpacket:p{i}"));
        args.push("--host".into());
        args.push(format!("{}@{i}=02:72:63:00:00:{:02x}", host_ip(i), i + 1));
    }
    let mut switch = Command::new(BIN)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let file = "/tmp/rocast-tm2-payload.bin";
    std::fs::write(file, data(64 << 10, 3)).unwrap();
    // The 64 KB message in 8 KB blocks, so the pipeline really pipelines.
    let t0 = std::time::Instant::now();
    let (code, text, got) = transfer_with(lab.0, 2, file, &["--block", "8K"], "refused");
    let _ = std::fs::remove_file(file);
    let _ = switch.kill();
    let _ = switch.wait();
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("via pipeline (fallback: registration failed") && text.contains("TableFull"),
        "the switch's refusal reaches the leader, which falls back: {text}"
    );
    let payload = data(64 << 10, 3);
    assert!(
        got.iter().all(|g| g == &payload),
        "every member holds the data"
    );
    // The refusal is explicit, not a timeout.
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));
}

/// `tcpdump` on interface `dev` of namespace `ns`, writing `file`, until killed.
fn capture(lab: &str, dev: &str, file: &str) -> Child {
    Command::new(BIN)
        .args([
            "lab", "exec", "--name", lab, "sw", "--", "tcpdump", "-i", dev, "-U", "-s", "0", "-w",
            file,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tcpdump")
}

/// 1 in 1000 frames toward one receiver is dropped by the switch: the sender's
/// go-back-N recovers through the aggregated NAKs/timeouts, every byte arrives once,
/// and every RoCE frame on the wire (the leader's link and the lossy receiver's,
/// bridged copies included) passes `rocast pcap check`.
#[test]
fn loss_toward_one_receiver_is_recovered_and_the_wire_checks_out() {
    let lab = LabGuard::new("tm4");
    let r = rocast(&[
        "lab",
        "up",
        "--name",
        lab.0,
        "--hosts",
        "4",
        "--switch",
        "--loss",
        "0.001",
        "--loss-host",
        "2",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let pcaps = ["/tmp/rocast-tm4-p0.pcap", "/tmp/rocast-tm4-p2.pcap"];
    let mut caps: Vec<Child> = [("p0", pcaps[0]), ("p2", pcaps[1])]
        .iter()
        .map(|(dev, f)| capture(lab.0, dev, f))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let payload = data(10 << 20, 5);
    let file = "/tmp/rocast-tm4-payload.bin";
    std::fs::write(file, &payload).unwrap();
    let (code, text, got) = transfer(lab.0, 3, file, "send", "lossy");
    let _ = std::fs::remove_file(file);
    std::thread::sleep(std::time::Duration::from_millis(300));
    for c in caps.iter_mut() {
        // SIGTERM lets tcpdump flush; the child is `ip netns exec` → tcpdump itself.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_child(c),
            rustix::process::Signal::TERM,
        );
        let _ = c.wait();
    }
    assert_eq!(code, 0, "{text}");
    for g in &got {
        assert!(g == &payload, "a member's {} bytes differ", g.len());
    }
    assert!(retransmitted(&text) > 0, "losses were repaired: {text}");
    let control = format!("/run/rocast-lab/{}/switch.sock", lab.0);
    let s = rocast(&["switch", "--stats", "--control", &control]).stdout;
    let port2 = s.lines().find(|l| l.starts_with("port 2 ")).unwrap();
    let drops: u64 = port2
        .split_whitespace()
        .skip_while(|w| *w != "injected_drops")
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(drops > 0, "{port2}");
    assert!(
        s.lines().filter(|l| l.contains("injected_drops 0")).count() >= 3,
        "{s}"
    );
    for p in pcaps {
        let r = rocast(&["pcap", "check", p]);
        assert_eq!(r.code, 0, "{p}: {}{}", r.stdout, r.stderr);
        let roce: u64 = r
            .stdout
            .split(',')
            .find(|x| x.trim().ends_with("roce"))
            .and_then(|x| x.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}", r.stdout));
        assert!(roce > 1000, "{p}: {}", r.stdout);
        let _ = std::fs::remove_file(p);
    }
}

/// The conformance idea of turmoil's `io_uring_conformance`: one scenario description
/// runs in `rocast sim` and in `rocast lab run`, and every member ends up holding the
/// same bytes in both (same CRC-32 per member, and the data's own CRC). Through the
/// switch, and through the chain, binomial tree and binomial pipeline overlays, which
/// are one body of code in both (`overlay::OverlayRank`).
#[test]
fn the_same_scenario_delivers_the_same_data_in_the_simulator_and_the_lab() {
    let lab = LabGuard::new("tm5");
    let overlay = |scheme: &'static str| -> Vec<&'static str> {
        let schemes: &'static str = match scheme {
            "chain" => "multicast.schemes=[\"chain\"]",
            "tree" => "multicast.schemes=[\"tree\"]",
            _ => "multicast.schemes=[\"pipeline\"]",
        };
        vec![
            "--set",
            schemes,
            "--set",
            "multicast.block=256K",
            "--set",
            "seed=13",
        ]
    };
    for sets in [
        vec![],
        vec![
            "--set",
            "multicast.group=3",
            "--set",
            "multicast.messages=3",
            "--set",
            "seed=11",
        ],
        overlay("chain"),
        overlay("tree"),
        overlay("pipeline"),
    ] {
        let out = std::env::temp_dir().join("rocast-tm5-sim");
        let mut sim = vec![
            "sim",
            "--preset",
            "transfer",
            "--out",
            out.to_str().unwrap(),
        ];
        sim.extend_from_slice(&sets);
        let s = rocast(&sim);
        assert_eq!(s.code, 0, "{}", s.stderr);
        let mut real = vec!["lab", "run", "--preset", "transfer", "--name", lab.0];
        real.extend_from_slice(&sets);
        let l = rocast(&real);
        assert_eq!(l.code, 0, "{}{}", l.stdout, l.stderr);
        let ranks = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|x| x.starts_with("rank "))
                .map(str::to_string)
                .collect()
        };
        // An overlay case ran that overlay on both sides, not the switch.
        if let Some(set) = sets.iter().find(|x| x.starts_with("multicast.schemes=")) {
            let scheme = set.split('"').nth(1).unwrap();
            assert!(s.stdout.contains(&format!(" by {scheme},")), "{}", s.stdout);
            assert!(
                l.stdout.contains(&format!(" via {scheme} to ")),
                "{}",
                l.stdout
            );
        }
        let (a, b) = (ranks(&s.stdout), ranks(&l.stdout));
        assert!(!a.is_empty(), "{}", s.stdout);
        assert_eq!(a, b, "sim:\n{}\nlab:\n{}", s.stdout, l.stdout);
        // All members agree with each other too.
        let crcs: std::collections::BTreeSet<&str> = a
            .iter()
            .filter(|x| x.contains(" crc32 "))
            .map(|x| x.rsplit(' ').next().unwrap())
            .collect();
        assert_eq!(crcs.len(), 1, "{a:?}");
    }
}

/// Conformance by construction: the `transfer` scenario (a group of 4:
/// host 0 multicasts seeded messages to three members through one Cepheus switch, by
/// WRITE and by SEND) runs in `rocast sim` and in `rocast lab run`, without loss and
/// with 1e-3 loss at the switch port toward member 3. Both must deliver the same bytes to every member and complete
/// the messages at every member in the same order; without loss (where they do not
/// depend on timing) the switch's data packets in, replicas and bridged copies must be
/// equal too, and nothing may be filtered as a retransmission.
#[test]
fn the_simulator_and_the_lab_agree_on_bytes_order_and_switch_counters() {
    let lab = LabGuard::new("tm6");
    let lines = |t: &str, prefix: &str| -> Vec<String> {
        t.lines()
            .filter(|x| x.starts_with(prefix))
            .map(str::to_string)
            .collect()
    };
    // `switch data_in N replicas N …` as (name, value) pairs.
    let counters = |t: &str| -> std::collections::BTreeMap<String, u64> {
        let l = lines(t, "switch ");
        assert_eq!(l.len(), 1, "{t}");
        let w: Vec<&str> = l[0].split_whitespace().skip(1).collect();
        w.chunks(2)
            .map(|kv| (kv[0].to_string(), kv[1].parse().unwrap()))
            .collect()
    };
    for (op, loss) in [
        ("write", None),
        ("write", Some("0.001")),
        ("send", None),
        ("send", Some("0.001")),
    ] {
        let case = format!("{op}, loss {}", loss.unwrap_or("0"));
        let mut sets = vec![
            "--set".to_string(),
            format!("multicast.op={op}"),
            "--set".into(),
            "multicast.conformance=true".into(),
            "--set".into(),
            "multicast.messages=8".into(),
            "--set".into(),
            "multicast.message=256K".into(),
        ];
        if let Some(p) = loss {
            sets.extend(["--set".into(), format!("multicast.loss={p}")]);
            sets.extend(["--set".into(), "multicast.loss_rank=3".into()]);
        }
        let out = std::env::temp_dir().join("rocast-tm6-sim");
        let mut sim: Vec<&str> = vec![
            "sim",
            "--preset",
            "transfer",
            "--out",
            out.to_str().unwrap(),
        ];
        sim.extend(sets.iter().map(String::as_str));
        let s = rocast(&sim);
        assert_eq!(s.code, 0, "{case}: {}", s.stderr);
        let mut real: Vec<&str> = vec!["lab", "run", "--preset", "transfer", "--name", lab.0];
        real.extend(sets.iter().map(String::as_str));
        let l = rocast(&real);
        assert_eq!(l.code, 0, "{case}: {}{}", l.stdout, l.stderr);
        let both = format!("sim:\n{}\nlab:\n{}", s.stdout, l.stdout);
        // The same bytes at every member.
        let bytes = lines(&s.stdout, "rank ");
        let crcs: Vec<&String> = bytes.iter().filter(|x| x.contains(" crc32 ")).collect();
        assert_eq!(crcs.len(), 3, "{case}: {both}");
        assert_eq!(bytes, lines(&l.stdout, "rank "), "{case}: {both}");
        // Every member completed messages 0..8 in order, in both.
        let orders: Vec<&String> = bytes.iter().filter(|x| x.contains(" order ")).collect();
        assert_eq!(orders.len(), 3, "{case}: {both}");
        assert!(
            orders.iter().all(|o| o.ends_with(" order 0 1 2 3 4 5 6 7")),
            "{case}: {both}"
        );
        let (cs, cl) = (counters(&s.stdout), counters(&l.stdout));
        if loss.is_none() {
            for k in ["data_in", "replicas", "bridged", "filtered", "naks_out"] {
                assert_eq!(cs[k], cl[k], "{case}: {k}: {both}");
            }
            // 8 x 256 KB in 4 KB packets, to 3 members.
            assert_eq!((cs["data_in"], cs["replicas"]), (512, 1536), "{both}");
            assert_eq!(cs["filtered"], 0, "{both}");
        } else {
            // Which packets are lost depends on each run's own seeded stream, and what
            // the sender retransmits on timing: both must have recovered, no more.
            for c in [&cs, &cl] {
                assert!(c["data_in"] >= 512 && c["replicas"] >= 1536, "{both}");
            }
        }
    }
}

/// The `transfer` scenario with `sets` (`--set` pairs) run by `rocast sim` and by
/// `rocast lab run` in lab `lab`, each required to succeed: (sim, lab) stdout.
/// `--set KEY=VALUE` arguments for the `transfer` scenario by `op`, with `keys` added.
fn transfer_sets(op: &str, keys: &[&str]) -> Vec<String> {
    std::iter::once(format!("multicast.op={op}"))
        .chain(keys.iter().map(|k| k.to_string()))
        .flat_map(|s| ["--set".to_string(), s])
        .collect()
}

/// The per-member outcome lines `transfer` prints on both sides: bytes and verdict per
/// rank, the group's path, and a restart when there was one.
fn outcome_lines(t: &str) -> Vec<String> {
    t.lines()
        .filter(|x| {
            x.starts_with("rank ") || x.starts_with("group path ") || x.starts_with("switch ")
        })
        .map(str::to_string)
        .collect()
}

fn transfer_in_sim_and_lab(lab: &str, sets: &[String], case: &str) -> (String, String) {
    let out = std::env::temp_dir().join(format!("rocast-{lab}-sim"));
    let mut sim: Vec<&str> = vec![
        "sim",
        "--preset",
        "transfer",
        "--out",
        out.to_str().unwrap(),
    ];
    sim.extend(sets.iter().map(String::as_str));
    let s = rocast(&sim);
    assert_eq!(s.code, 0, "{case}: {}", s.stderr);
    let mut real: Vec<&str> = vec!["lab", "run", "--preset", "transfer", "--name", lab];
    real.extend(sets.iter().map(String::as_str));
    let l = rocast(&real);
    assert_eq!(l.code, 0, "{case}: {}{}", l.stdout, l.stderr);
    (s.stdout, l.stdout)
}

/// A shared scenario: a fallback in the middle of a stream, written once (the
/// `transfer` scenario with `multicast.safeguard_expected_ratio`: the leader expects ten
/// times what its links carry, so the safeguard must reroute within its first window)
/// and run by `rocast sim` and `rocast lab run`, by WRITE and by SEND. Both run the same
/// group session; both must end the same way for every member: the same bytes, the
/// verdict `ok` from each, and the group's data through the switch up to a message
/// boundary below the end, then the binomial pipeline for exactly the rest (where the
/// cut falls depends on each side's timing, so only its shape is compared).
#[test]
fn a_fallback_mid_stream_ends_the_same_for_every_member_in_the_simulator_and_the_lab() {
    let lab = LabGuard::new("tm46");
    let lines = |t: &str, prefix: &str| -> Vec<String> {
        t.lines()
            .filter(|x| x.starts_with(prefix))
            .map(str::to_string)
            .collect()
    };
    let (message, total) = (256u64 << 10, 32u64 * (256 << 10));
    for op in ["write", "send"] {
        let sets: Vec<String> = [
            format!("multicast.op={op}"),
            "multicast.messages=32".into(),
            "multicast.message=256K".into(),
            "multicast.block=256K".into(),
            "multicast.safeguard_expected_ratio=10".into(),
            // The simulated hosts' links at the lab's 1 Gbit/s: the same stream takes
            // the same tens of milliseconds, several safeguard windows, on both sides.
            "topology.host_gbps=1".into(),
        ]
        .into_iter()
        .flat_map(|s| ["--set".to_string(), s])
        .collect();
        let (s, l) = transfer_in_sim_and_lab(lab.0, &sets, op);
        let both = format!("{op}:\nsim:\n{}\nlab:\n{}", s, l);
        // The same bytes and the same verdict at every member.
        let ranks = lines(&s, "rank ");
        assert_eq!(ranks, lines(&l, "rank "), "{both}");
        assert_eq!(ranks.len(), 6, "{both}");
        assert_eq!(
            ranks.iter().filter(|r| r.ends_with(" verdict ok")).count(),
            3,
            "{both}"
        );
        // Through the switch to a message boundary, then the overlay for the rest.
        for text in [&s, &l] {
            let path = lines(text, "group path ");
            assert_eq!(path.len(), 1, "{both}");
            let at: u64 = path[0]
                .strip_prefix("group path cepheus to byte ")
                .and_then(|r| r.strip_suffix(", then pipeline (safeguard)"))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("not rerouted mid-stream by the safeguard: {both}"));
            assert!(at < total && at.is_multiple_of(message), "{both}");
        }
    }
}

/// The shared eviction scenario: the `transfer` scenario with rank 2 killed once
/// the switch has taken in 200 data packets (`multicast.kill_rank`), written once and
/// run by `rocast sim` (the member's QP and session end, its control connection
/// resets) and `rocast lab run` (`kill -9` of its `mcast join`), by WRITE and by SEND.
/// Both must end the same way for every member: rank 2 evicted, the others holding
/// every byte with the verdict `ok`, and the data all the way through the switch (the
/// prune lets the switch's aggregate ACK go on without it).
#[test]
fn a_member_killed_mid_stream_is_evicted_alike_in_the_simulator_and_the_lab() {
    let lab = LabGuard::new("tm47");
    for op in ["write", "send"] {
        let sets = transfer_sets(
            op,
            &[
                "multicast.messages=32",
                "multicast.message=256K",
                "multicast.kill_rank=2",
                "multicast.kill_after_packets=200",
            ],
        );
        let (s, l) = transfer_in_sim_and_lab(lab.0, &sets, op);
        let both = format!("{op}:\nsim:\n{}\nlab:\n{}", s, l);
        let outcome = outcome_lines;
        assert_eq!(outcome(&s), outcome(&l), "{both}");
        let crc = "crc32 969e5e94"; // the scenario's 8 MiB, seed 7
        assert_eq!(
            outcome(&s),
            vec![
                format!("rank 1 bytes 8388608 {crc}"),
                format!("rank 3 bytes 8388608 {crc}"),
                "rank 1 verdict ok".to_string(),
                "rank 2 verdict EVICTED".to_string(),
                "rank 3 verdict ok".to_string(),
                "group path cepheus".to_string(),
            ],
            "{both}"
        );
    }
}

/// The shared switch-restart scenario: the `transfer` scenario with the
/// switch crashing and starting again (its tables lost) once it has taken in 50 of the
/// group's data packets, and the leader refreshing its registration every 200 ms (50 ms
/// in transfer). Written once, run by `rocast sim` (`Engine::restart_switch`) and by
/// `rocast lab run` (`lab::restart_switch`: SIGKILL and a fresh `rocast switch`), by
/// WRITE and by SEND: in both, every member ends with every byte, its verdict `ok`, and
/// the group never left the switch — the new switch learnt the tree from the refresh
/// and the source's retransmissions carried what the restart dropped.
#[test]
fn a_switch_restarted_mid_stream_relearns_the_group_alike_in_the_simulator_and_the_lab() {
    let lab = LabGuard::new("tm48");
    for op in ["write", "send"] {
        let sets = transfer_sets(
            op,
            &[
                "multicast.messages=8",
                "multicast.message=256K",
                "multicast.refresh_ms=200",
                "multicast.restart_switch_after_packets=50",
            ],
        );
        let (s, l) = transfer_in_sim_and_lab(lab.0, &sets, op);
        let both = format!("{op}:\nsim:\n{}\nlab:\n{}", s, l);
        let outcome = outcome_lines;
        assert_eq!(outcome(&s), outcome(&l), "{both}");
        let crc = "crc32 4b63d7bc"; // the scenario's 2 MiB, seed 7
        let mut want: Vec<String> = (1..=3)
            .map(|r| format!("rank {r} bytes 2097152 {crc}"))
            .collect();
        want.extend((1..=3).map(|r| format!("rank {r} verdict ok")));
        want.push("group path cepheus".into());
        want.push("switch restarted mid-stream".into());
        assert_eq!(outcome(&s), want, "{both}");
    }
}

/// Cepheus §V-D's safeguard on real packets, at run time: links shaped to 100 Mbit/s
/// while the leader expects its 1000 Mbit/s pacing rate, threshold 0.5. The first
/// buffer starts through the switch and is acknowledged at about a tenth of the
/// expected rate; within the monitor's window the leader stops after the messages
/// every member acknowledged, releases the switch, and the rest of that buffer and the
/// whole second one go through the binomial pipeline. Both reach both members
/// byte-identical.
#[test]
fn the_safeguard_moves_a_slow_buffer_to_the_overlay_mid_transfer() {
    let lab = LabGuard::new("tm7");
    let r = rocast(&[
        "lab", "up", "--name", lab.0, "--hosts", "3", "--switch", "--rate", "100mbit",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let payload = data(2 << 20, 17);
    let file = "/tmp/rocast-tm7-payload.bin";
    std::fs::write(file, &payload).unwrap();
    let (code, text, got) = transfer_with(
        lab.0,
        2,
        file,
        &[
            "--buffers",
            "2",
            "--message",
            "64K",
            "--safeguard",
            "0.5",
            "--block",
            "256K",
        ],
        "safeguard",
    );
    assert_eq!(code, 0, "{text}");
    let sends: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("multicast "))
        .collect();
    assert_eq!(sends.len(), 2, "{text}");
    // The first buffer is moved mid-transfer: the switch delivered whole 64 KiB
    // messages up to the cut, the overlay the rest (at run time, without
    // losing or repeating a byte; the members' files below are compared whole). The
    // overlay starts from the least any member holds (by their `Holding` reports): on these
    // links the members usually hold the whole first buffer when the leader cuts (its
    // acknowledgements lag the data), and then the overlay resends none of it.
    let at: u64 = sends[0]
        .split(" via cepheus to byte ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not rerouted mid-transfer: {text}"));
    assert!(at <= 1 << 20 && at.is_multiple_of(64 << 10), "{text}");
    assert!(
        sends[0].contains("then pipeline (fallback: safeguard: LowThroughput"),
        "{text}"
    );
    assert!(
        sends[1].contains(" via pipeline (fallback: safeguard: LowThroughput"),
        "{text}"
    );
    assert_eq!(text.matches(": ok").count(), 4, "{text}");
    for g in &got {
        assert!(g == &payload, "a member's {} bytes differ", g.len());
    }
}

/// A switch port whose link goes down is an event on that port, never the
/// daemon's end. The switch-side veth of h1 goes down and up again mid-run; the daemon
/// still answers its control socket, counts what the port reported, and the next
/// transfer delivers every byte.
#[test]
fn a_switch_port_going_down_is_counted_not_fatal() {
    let lab = LabGuard::new("tm9");
    let r = rocast(&["lab", "up", "--name", lab.0, "--hosts", "3", "--switch"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let sw = format!("rocast-{}-sw", lab.0);
    let ip = |args: &[&str]| {
        let ok = Command::new("ip")
            .args(args)
            .status()
            .expect("run ip")
            .success();
        assert!(ok, "ip {args:?}");
    };
    for _ in 0..3 {
        ip(&["-n", &sw, "link", "set", "p1", "down"]);
        std::thread::sleep(std::time::Duration::from_millis(200));
        ip(&["-n", &sw, "link", "set", "p1", "up"]);
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let control = format!("/run/rocast-lab/{}/switch.sock", lab.0);
    let r = rocast(&["switch", "--stats", "--control", &control]);
    assert_eq!(r.code, 0, "the daemon died: {}", r.stderr);
    assert!(r.stdout.contains(" rx_errors "), "{}", r.stdout);
    // veth needs a moment to carry frames again after it is set up.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let payload = data(1 << 20, 3);
    let file = "/tmp/rocast-tm9-payload.bin";
    std::fs::write(file, &payload).unwrap();
    let (code, text, got) = transfer(lab.0, 2, file, "write", "flap");
    let _ = std::fs::remove_file(file);
    assert_eq!(code, 0, "{text}");
    assert!(got.iter().all(|g| g == &payload), "{text}");
}

/// Cepheus across switches (Cepheus §III-C): in the two-tier lab the group's tree
/// crosses ToR 0's uplink and the aggregation switch as switch hops (copies travel as
/// the leader sent them), and only the ToRs bridge copies to member connections.
#[test]
fn a_cepheus_group_crosses_the_two_tier_lab_as_one_tree() {
    let lab = LabGuard::new("tm8");
    let r = rocast(&[
        "lab", "up", "--name", lab.0, "--hosts", "4", "--tors", "2", "--switch",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let payload = data(4 << 20, 11);
    let file = "/tmp/rocast-tm8-payload.bin";
    std::fs::write(file, &payload).unwrap();
    let (code, text, got) = transfer(lab.0, 3, file, "send", "send");
    let _ = std::fs::remove_file(file);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("via cepheus"), "{text}");
    for (i, g) in got.iter().enumerate() {
        assert!(
            g == &payload,
            "member h{} holds {} bytes that differ",
            i + 1,
            g.len()
        );
    }
    let stats = |sw: &str| {
        let control = format!("/run/rocast-lab/{}/{sw}.sock", lab.0);
        let r = rocast(&["switch", "--stats", "--control", &control]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout
    };
    let (agg, tor0, tor1) = (stats("agg"), stats("tor0"), stats("tor1"));
    let packets = (4u64 << 20) / 4096;
    for s in [&agg, &tor0, &tor1] {
        assert_eq!(counter(s, "switch", "drop_bad_icrc"), 0, "{s}");
        assert!(counter(s, "cepheus", "data_in") >= packets, "{s}");
    }
    // h0 and h1 under ToR 0, h2 and h3 under ToR 1: ToR 0 bridges one copy (h1) and
    // sends one up as is; the aggregation switch forwards it as is to ToR 1, which
    // bridges two.
    assert_eq!(counter(&agg, "cepheus", "bridged"), 0, "{agg}");
    assert!(counter(&agg, "cepheus", "replicas") >= packets, "{agg}");
    let tor0_bridged = counter(&tor0, "cepheus", "bridged");
    assert!(tor0_bridged >= packets, "{tor0}");
    assert_eq!(
        counter(&tor0, "cepheus", "replicas"),
        2 * counter(&tor0, "cepheus", "data_in")
            - counter(&tor0, "cepheus", "retransmission_filtered"),
        "{tor0}"
    );
    assert!(
        counter(&tor1, "cepheus", "bridged") >= 2 * packets,
        "{tor1}"
    );
    assert_eq!(
        counter(&tor1, "cepheus", "bridged"),
        counter(&tor1, "cepheus", "replicas"),
        "{tor1}"
    );
}

/// `rocast perf --mcast 3`: a lab of its own, one Cepheus group, a row per
/// receiver and the aggregate; its JSON parses and agrees with itself; the lab is gone
/// afterwards.
#[test]
fn perf_mcast_prints_per_receiver_figures_and_json() {
    let _guard = LabGuard::new("perfmc");
    let r = rocast(&["perf", "--mcast", "3", "-s", "256K", "-n", "6"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for ip in ["10.77.0.2", "10.77.0.3", "10.77.0.4"] {
        let row = r
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(ip))
            .unwrap_or_else(|| panic!("no row for {ip}:\n{}", r.stdout));
        let f: Vec<&str> = row.split_whitespace().collect();
        assert_eq!((f[1], f[2]), ("262144", "6"), "{row}");
        assert!(f[6].parse::<f64>().unwrap() > 0.0, "{row}");
    }
    assert!(r.stdout.contains(" aggregate "), "{}", r.stdout);
    let r = rocast(&["perf", "--mcast", "2", "-s", "4K", "-n", "4", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    assert_eq!(j["path"], "cepheus");
    let per = j["per_receiver"].as_array().unwrap();
    assert_eq!(per.len(), 2);
    let slowest = per
        .iter()
        .map(|x| x["latency_median_us"].as_f64().unwrap())
        .fold(0.0, f64::max);
    // The group is done when its last receiver is: not before any receiver's median.
    assert!(
        j["group_latency_median_us"].as_f64().unwrap() >= slowest * 0.999,
        "{j}"
    );
    let st = rocast(&["lab", "status", "--name", "perfmc"]);
    assert!(!st.stdout.contains("h0"), "lab left behind: {}", st.stdout);
    assert_eq!(rocast(&["perf", "--mcast", "0"]).code, 1);
}

/// `rocast bench lab-bcast -f --json`: OSU's full format (the median of the reps
/// between their minimum and maximum) and the same rows as JSON.
#[test]
fn lab_bcast_full_format_and_json_agree() {
    let _guard = LabGuard::new("bench");
    let out = std::env::temp_dir().join(format!("rocast-lab-bcast-{}", std::process::id()));
    let r = rocast(&[
        "bench",
        "lab-bcast",
        "--group-sizes",
        "3",
        "--sizes",
        "64K",
        "--reps",
        "3",
        "--schemes",
        "cepheus,chain",
        "-f",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    // The tables on stderr, the JSON alone on stdout.
    assert!(
        r.stderr
            .contains("Min Latency(us)   Max Latency(us)  Iterations"),
        "{}",
        r.stderr
    );
    let rows: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for x in rows {
        let (lo, mid, hi) = (
            x["latency_min_us"].as_f64().unwrap(),
            x["latency_us"].as_f64().unwrap(),
            x["latency_max_us"].as_f64().unwrap(),
        );
        assert!(lo <= mid && mid <= hi, "{x}");
        assert_eq!(x["reps"], 3);
        // The table's row for this scheme says the same.
        let line = format!("{mid:.2}");
        assert!(r.stderr.contains(&line), "{line} not in the table");
    }
}
