//! Attacks on the reliable UD multicast on real packets: `rocast bench
//! lab-ud` runs a sender on h0 and receivers on h1..h3 over a bridge, and h4 — a
//! stranger on its own port, neither sender nor receiver — injects forged protocol
//! packets (1e-3 loss injected in the drivers, as in `ud_lab`, so that repairs are
//! needed) as whole RoCEv2 UD frames (valid ICRC, the run's well-known Q_Key and the
//! sender's predictable QPN), built with the core's own emitters:
//!
//! - forged STATUS in the receivers' names (the sender must not declare completion,
//!   nor free packets a receiver still has to have repaired);
//! - forged DATA ahead of the stream (receivers must not deliver it);
//! - heartbeats of made-up stream ids (receivers must not NACK without bound);
//! - a restarted sender (a new stream, not a continuation of the old one).
//!
//! The attacker plays an on-path observer: it learns the stream id from the bench's
//! `# stream` line (what sniffing one group packet tells). Without a group key it sends
//! from its own address (a spoofed one is the switch's source guard's to stop);
//! with `--group-key` it spoofs the real hosts' addresses and QPNs and is
//! stopped by the MAC. The test brings the lab up (`rocast lab up --bridge`) and the
//! bench runs on it (`--existing-lab`), so the injections never race the lab's
//! teardown; the flood lasts exactly as long as the run. Needs root (namespaces). Only
//! the lab's namespaces carry traffic.

mod common;
use common::lab::*;
use common::{rocast, LabGuard};
use rocast_core::nack_multicast::packet::{DataRepr, Packet, PacketRepr, FLAG_FIRST, FLAG_LAST};
use rocast_core::rnic::{UdAddress, UdConfig, UdEndpoint};
use rocast_core::time::Instant as CoreInstant;
use rocast_core::wire::{EthernetAddress, Ipv4Address, Psn, ROCEV2_UDP_PORT};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// h0 sends, h1..h3 receive, h4 is the stranger.
const HOSTS: usize = 4;
const STRANGER: usize = 4;
/// The bench's Q_Key and QPNs (0x100 + host index): predictable, a stranger knows them.
const QKEY: u32 = 0x1111_0000;
const SENDER_QPN: u32 = 0x100;
const GROUP: [u8; 4] = [239, 77, 0, 1];
const SIZE: usize = 1000;
const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

fn ip(i: usize) -> [u8; 4] {
    [10, 77, 0, i as u8 + 1]
}

/// One UD SEND of `payload` from (`src`, `src_qpn`) to `dest`, as the IPv4 packet a
/// RoCE NIC would put on the wire (the core's UD endpoint writes it, ICRC included).
fn ud_packet(src: [u8; 4], src_qpn: u32, dest: &UdAddress, payload: &[u8]) -> Vec<u8> {
    let mut cfg = UdConfig::new(Ipv4Address(src), EthernetAddress([2, 0, 0, 0, 0, 9]));
    cfg.mtu = 4096;
    cfg.udp_src_port = ROCEV2_UDP_PORT;
    let mut ep = UdEndpoint::new(cfg).unwrap();
    ep.create_qp(src_qpn, QKEY, Psn::new(0)).unwrap();
    ep.post_send(src_qpn, 0, dest, payload, None).unwrap();
    let mut frame = vec![0u8; ep.max_frame_len()];
    let t = ep.poll_transmit(CoreInstant::ZERO, &mut frame).unwrap();
    frame[14..t.len].to_vec()
}

fn to_sender() -> UdAddress {
    UdAddress::unicast(
        Ipv4Address(ip(0)),
        EthernetAddress([2, 0, 0, 0, 0, 0]),
        SENDER_QPN,
        QKEY,
    )
}

fn to_group() -> UdAddress {
    UdAddress::multicast(Ipv4Address(GROUP), QKEY).unwrap()
}

/// A `rocast bench lab-ud` run in the background, its output in a file.
/// `rocast bench lab-ud`, running.
struct Bench(Proc);

/// Brings lab `lab` up for the run: the bench's hosts and the stranger on a bridge,
/// the stranger with a route to the group (its namespace has only the subnet's).
fn lab_for_attack(lab: &str) {
    let n = (HOSTS + 1).to_string();
    let r = rocast(&["lab", "up", "--name", lab, "--hosts", &n, "--bridge"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let ns = format!("rocast-{lab}-h{STRANGER}");
    let r = Command::new("ip")
        .args(["-n", &ns, "route", "add", "224.0.0.0/4", "dev", "eth0"])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

impl Bench {
    /// `rocast bench lab-ud` on lab `lab` (brought up by [`lab_for_attack`]).
    fn start(lab: &str, extra: &[&str]) -> Bench {
        lab_for_attack(lab);
        let hosts = HOSTS.to_string();
        let mut cmd = Command::new(common::bin());
        cmd.args([
            "bench",
            "lab-ud",
            "--name",
            lab,
            "--medium",
            "bridge",
            "--hosts",
            &hosts,
            "--strangers",
            "1",
            "--existing-lab",
            "--loss",
            "0.001",
            "--size",
            &SIZE.to_string(),
            "--timeout",
            "20",
        ])
        .args(extra);
        let out = PathBuf::from(format!("/tmp/rocast-{lab}-bench.log"));
        Bench(Proc::logged(cmd, out))
    }

    fn text(&self) -> String {
        self.0.text()
    }

    /// The stream id the sender's incarnation `k` announced (the bench prints it when
    /// that incarnation starts).
    fn stream_id(&mut self, k: usize) -> u32 {
        let end = Instant::now() + Duration::from_secs(DEADLINE_S);
        let suffix = format!(" sender incarnation {k}");
        loop {
            let text = self.text();
            if let Some(id) = text.lines().find_map(|l| {
                let hex = l.strip_prefix("# stream 0x")?.strip_suffix(&suffix)?;
                u32::from_str_radix(hex, 16).ok()
            }) {
                return id;
            }
            if let Some(s) = self.0.child.try_wait().unwrap() {
                panic!("bench exited ({s}) before incarnation {k} started:\n{text}");
            }
            assert!(
                Instant::now() < end,
                "no stream id within {DEADLINE_S} s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits until every receiver bound `stream` to its sender (the bench prints it):
    /// forged DATA injected before could win the first-packet binding that an unkeyed
    /// receiver trusts (the module docs of `nack_multicast` say so).
    fn wait_bound(&mut self, stream: u32) {
        let end = Instant::now() + Duration::from_secs(DEADLINE_S);
        loop {
            let text = self.text();
            let bound = (1..HOSTS)
                .filter(|i| text.contains(&format!("# h{i} bound stream {stream:#010x} to ")))
                .count();
            if bound == HOSTS - 1 {
                return;
            }
            assert!(self.running(), "bench exited before binding:\n{text}");
            assert!(Instant::now() < end, "streams not bound:\n{text}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn running(&mut self) -> bool {
        self.0.running()
    }

    /// Calls `inject` while the bench runs (each call one batch), then waits for it:
    /// (exit code, output, batches injected while it ran).
    fn flood_until_done(mut self, mut inject: impl FnMut()) -> (i32, String, u32) {
        let end = Instant::now() + Duration::from_secs(DEADLINE_S);
        let mut batches = 0;
        while self.running() {
            assert!(
                Instant::now() < end,
                "hang: bench still running:\n{}",
                self.text()
            );
            inject();
            batches += 1;
        }
        let (code, text) = self.finish();
        (code, text, batches)
    }

    fn finish(self) -> (i32, String) {
        self.0.finish()
    }
}

/// The number after `key` on the first line starting with `prefix`.
fn field(out: &str, prefix: &str, key: &str) -> Option<u64> {
    let line = out.lines().find(|l| l.starts_with(prefix))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    let i = f.iter().position(|w| *w == key)?;
    f.get(i + 1)?.trim_end_matches(',').parse().ok()
}

/// The sum over the receivers of `guard hI:` lines' `key`.
fn receivers_sum(out: &str, key: &str) -> u64 {
    (1..HOSTS)
        .map(|i| field(out, &format!("guard h{i}:"), key).unwrap_or(0))
        .sum()
}

/// Every receiver got all `messages` exactly once, in order, intact.
fn every_receiver_exactly_once(code: i32, out: &str, messages: u64) {
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("result: PASS"), "{out}");
    for i in 1..HOSTS {
        let row: Vec<&str> = out
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.first() == Some(&format!("h{i}").as_str()) && f.len() == 15)
            .unwrap_or_else(|| panic!("no row for h{i}:\n{out}"));
        assert_eq!(row[1], messages.to_string(), "h{i} delivered:\n{out}");
        assert_eq!(&row[2..6], &["0", "0", "0", "0"], "h{i}:\n{out}");
    }
}

fn forged_status(stream: u32, keyed_spoof: bool) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for _ in 0..100 {
        for r in 1..HOSTS {
            let status = Packet {
                session: stream,
                repr: PacketRepr::Status {
                    receiver: r as u32,
                    position: (1 << 62) - 1,
                    window: 1 << 20,
                },
            }
            .to_vec();
            // Without a key the stranger sends from its own address; with one it
            // spoofs the receiver's (the MAC is what must stop it then).
            let (src, qpn) = if keyed_spoof {
                (ip(r), 0x100 + r as u32)
            } else {
                (ip(STRANGER), 0x100 + STRANGER as u32)
            };
            v.push(ud_packet(src, qpn, &to_sender(), &status));
        }
    }
    v
}

/// Forged STATUS in the three receivers' names claims they hold the whole stream:
/// the sender must keep serving the real receivers until each really has it.
#[test]
fn forged_status_does_not_make_the_sender_declare_completion() {
    let _one = one_lab();
    const MESSAGES: u64 = 100_000;
    for (lab, keyed) in [("au1", false), ("au2", true)] {
        let guard = LabGuard::new(lab);
        let m = MESSAGES.to_string();
        let mut extra = vec!["--messages", &m];
        if keyed {
            extra.extend(["--group-key", KEY]);
        }
        let mut bench = Bench::start(guard.0, &extra);
        let stream = bench.stream_id(0);
        let forged = forged_status(stream, keyed);
        let (code, out, batches) =
            bench.flood_until_done(|| inject_from(guard.0, STRANGER, &forged));
        eprintln!("{lab}: {batches} batches of forged STATUS\n{out}");
        every_receiver_exactly_once(code, &out, MESSAGES);
        // Without a key the stranger's own address gives it away; with one, the tag.
        let key = if keyed {
            "auth_failures"
        } else {
            "status_refused"
        };
        let refused = field(&out, "guard h0:", key).unwrap_or(0);
        assert!(
            refused > 0,
            "the forged STATUS arrived and was counted:\n{out}"
        );
    }
}

/// Forged DATA for sequences ahead of the receivers (the stream's id and numbering
/// sniffed): receivers must deliver only the sender's bytes.
#[test]
fn forged_data_ahead_of_the_stream_is_not_delivered() {
    let _one = one_lab();
    const MESSAGES: u64 = 100_000;
    for (lab, keyed) in [("au3", false), ("au4", true)] {
        let guard = LabGuard::new(lab);
        let m = MESSAGES.to_string();
        let mut extra = vec!["--messages", &m];
        if keyed {
            extra.extend(["--group-key", KEY]);
        }
        let mut bench = Bench::start(guard.0, &extra);
        let stream = bench.stream_id(0);
        bench.wait_bound(stream);
        let junk = vec![0x5a; SIZE];
        let (src, qpn) = if keyed {
            (ip(0), SENDER_QPN)
        } else {
            (ip(STRANGER), 0x100 + STRANGER as u32)
        };
        // One message per packet (SIZE fits the UD MTU): sequence = message number.
        // Each batch spreads 200 sequences 500 apart over the whole stream, so a
        // couple land within the receivers' window (1024) ahead of them, wherever the
        // stream is; the next batch is shifted.
        let mut k = 0u64;
        let (code, out, batches) = bench.flood_until_done(|| {
            let batch: Vec<Vec<u8>> = (0..200)
                .map(|j| (k * 37 + j * 500) % MESSAGES)
                .map(|seq| {
                    let data = Packet {
                        session: stream,
                        repr: PacketRepr::Data(DataRepr {
                            seq,
                            msg_seq: seq,
                            msg_len: SIZE as u32,
                            frag_offset: 0,
                            flags: FLAG_FIRST | FLAG_LAST,
                            payload: &junk,
                        }),
                    }
                    .to_vec();
                    ud_packet(src, qpn, &to_group(), &data)
                })
                .collect();
            k += 1;
            inject_from(guard.0, STRANGER, &batch);
        });
        eprintln!("{lab}: {batches} batches of forged DATA\n{out}");
        every_receiver_exactly_once(code, &out, MESSAGES);
        let key = if keyed {
            "auth_failures"
        } else {
            "wrong_source"
        };
        assert!(receivers_sum(&out, key) > 0, "forged DATA counted:\n{out}");
    }
}

/// Heartbeats of made-up stream ids claiming 2^40 packets: receivers track a bounded
/// number of streams and stop NACKing a stream nobody repairs, and the real stream
/// completes.
#[test]
fn heartbeats_of_made_up_streams_cause_bounded_nacks() {
    let _one = one_lab();
    const MESSAGES: u64 = 100_000;
    let guard = LabGuard::new("au5");
    let m = MESSAGES.to_string();
    let mut bench = Bench::start(guard.0, &["--messages", &m]);
    let _ = bench.stream_id(0);
    let forged: Vec<Vec<u8>> = (0..64u32)
        .map(|k| {
            let hb = Packet {
                session: 0x5eed_0000 + k,
                repr: PacketRepr::Heartbeat {
                    next_seq: 1 << 40,
                    low_seq: 0,
                    next_msg: 0,
                },
            }
            .to_vec();
            ud_packet(ip(STRANGER), 0x100 + STRANGER as u32, &to_group(), &hb)
        })
        .collect();
    let (code, out, batches) = bench.flood_until_done(|| inject_from(guard.0, STRANGER, &forged));
    eprintln!("au5: {batches} batches of forged heartbeats\n{out}");
    every_receiver_exactly_once(code, &out, MESSAGES);
    // Per receiver: at most `max_streams` streams, each NACKed for at most
    // `max_fruitless_nack_rounds` rounds of `max_nack_ranges` ranges (the bench's
    // receiver settings: 8 × 8 × 16), whatever the flood's length; plus the real
    // stream's own NACKs at 1e-3 loss (about 100 ranges in this run; 512 allowed).
    for i in 1..HOSTS {
        let guard_line = format!("guard h{i}:");
        let ranges = field(&out, &guard_line, "nack_ranges_sent").unwrap();
        assert!(
            ranges <= 8 * 8 * 16 + 512,
            "h{i} NACKed {ranges} ranges:\n{out}"
        );
        let withheld = field(&out, &guard_line, "nack_rounds_withheld").unwrap();
        assert!(
            withheld > 0,
            "h{i} stopped NACKing the made-up streams:\n{out}"
        );
    }
    assert!(receivers_sum(&out, "streams_refused") > 0, "{out}");
}

/// The sender restarts (a new process on the same host and QP): its stream is a new
/// one, with a fresh id, and the receivers deliver it whole — not as the old stream's
/// continuation.
#[test]
fn a_restarted_sender_is_a_new_stream() {
    let _one = one_lab();
    const MESSAGES: u64 = 5000;
    let guard = LabGuard::new("au6");
    let m = MESSAGES.to_string();
    let mut bench = Bench::start(guard.0, &["--messages", &m, "--restart-after", "2000"]);
    let first = bench.stream_id(0);
    let second = bench.stream_id(1);
    let (code, out) = bench.finish();
    eprintln!("au6: streams {first:#x} then {second:#x}\n{out}");
    assert_ne!(first, second, "a restarted sender picks a new stream id");
    every_receiver_exactly_once(code, &out, MESSAGES);
    for i in 1..HOSTS {
        assert!(
            out.contains(&format!("streams h{i}: 2 ")),
            "h{i} told the two streams apart:\n{out}"
        );
    }
}
