//! The namespace lab's helpers shared by the lab suites (fault_lab, attack_*_lab):
//! a switch and hosts under `rocast lab`, processes with deadlines, the switch's
//! counters, files compared byte for byte, and a lab taken down and checked gone.
#![allow(dead_code)] // not every suite uses every helper

use super::{bin, rocast};
use rocast_core::wire::{BthRepr, Ecn, ExtHeaders, Ipv4Address, RoceRepr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// One fault at a time: each test runs a switch and up to five hosts, and the faults'
/// timing (a port down for 300 ms, a restart within the leader's retry budget) is
/// only meaningful on a machine the test does not share with another lab.
pub static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn one_lab() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed while holding it poisons it; the next still runs.
    ONE_LAB.lock().unwrap_or_else(|e| e.into_inner())
}
/// Seconds any one process of a test may run before it counts as a hang.
pub const DEADLINE_S: u64 = 40;
/// Pacing of the leader: 24 MB at 300 Mbit/s takes about 0.65 s, long enough to
/// inject a fault while the buffer is in flight.
pub const PAYLOAD: usize = 24 << 20;
pub const RATE_MBPS: &str = "300";

pub fn host_ip(i: usize) -> String {
    format!("10.77.0.{}", i + 1)
}

pub fn control(lab: &str) -> String {
    format!("/run/rocast-lab/{lab}/switch.sock")
}

/// A process of the lab, its output in a file (a pipe nobody reads could stall it).
pub struct Proc {
    pub child: Child,
    pub out: PathBuf,
}

impl Proc {
    /// `rocast ARGS` in host `i`'s namespace; `ip netns exec` execs it in place, so
    /// the child's pid is rocast's (what a fault kills).
    pub fn spawn(lab: &str, tag: &str, i: usize, args: &[&str]) -> Proc {
        let ns = format!("rocast-{lab}-h{i}");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &ns, &bin()]).args(args);
        Proc::logged(
            cmd,
            PathBuf::from(format!("/tmp/rocast-{lab}-{tag}-h{i}.log")),
        )
    }

    /// Starts `cmd` with its stdout and stderr in the file `out`.
    pub fn logged(mut cmd: Command, out: PathBuf) -> Proc {
        let log = std::fs::File::create(&out).unwrap();
        let child = cmd
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn a lab process");
        Proc { child, out }
    }

    /// What it printed so far.
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Waits up to the deadline: (exit code, or -1 for a signal; output).
    pub fn finish(mut self) -> (i32, String) {
        let end = Instant::now() + Duration::from_secs(DEADLINE_S);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let text = std::fs::read_to_string(&self.out).unwrap_or_default();
                panic!("hang: still running after {DEADLINE_S} s:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let _ = std::fs::remove_file(&self.out);
        assert!(!text.contains("panicked"), "{text}");
        (status.code().unwrap_or(-1), text)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A test that fails early must not leave its processes running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn switch_query(lab: &str, groups: bool) -> String {
    let c = control(lab);
    let mut args = vec!["switch", "--stats", "--control", &c];
    if groups {
        args.push("--groups");
    }
    let r = rocast(&args);
    assert_eq!(r.code, 0, "switch query: {}", r.stderr);
    r.stdout
}

/// The switch's `scope name value` counter.
pub fn counter(stats: &str, scope: &str, name: &str) -> u64 {
    try_counter(stats, scope, name).unwrap_or_else(|| panic!("{scope} {name} not in:\n{stats}"))
}

/// A counter, or `None` where this switch has no such counter (a build before the
/// counter existed: a test prints what it has, then asserts).
pub fn try_counter(stats: &str, scope: &str, name: &str) -> Option<u64> {
    stats.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() == 3 && f[0] == scope && f[1] == name).then(|| f[2].parse().unwrap())
    })
}

/// Polls until `cond` holds; fails after `secs`.
pub fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < end, "{what}: not within {secs} s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the switch has seen the transfer's data (the fault lands mid-buffer).
pub fn wait_for_data(lab: &str) {
    wait_until(20, "data through the switch", || {
        counter(&switch_query(lab, false), "cepheus", "data_in") > 200
    });
}

/// A lab of `hosts` hosts and a switch, and the payload file.
pub fn lab_up(lab: &str, hosts: usize) -> (Vec<u8>, String) {
    let n = hosts.to_string();
    let r = rocast(&["lab", "up", "--name", lab, "--hosts", &n, "--switch"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let payload = rocast_core::payload::message_data(24, 0, PAYLOAD);
    let file = format!("/tmp/rocast-{lab}-payload.bin");
    std::fs::write(&file, &payload).unwrap();
    (payload, file)
}

/// Members h1..=hn join, writing what they receive to files.
pub fn join_all(lab: &str, n: usize) -> Vec<(Proc, PathBuf)> {
    (1..=n).map(|i| join_one(lab, i, &[])).collect()
}

/// Member hi joins (with more `mcast join` options).
pub fn join_one(lab: &str, i: usize, extra: &[&str]) -> (Proc, PathBuf) {
    {
        {
            let out = PathBuf::from(format!("/tmp/rocast-{lab}-h{i}.bin"));
            let _ = std::fs::remove_file(&out);
            let p = Proc::spawn(
                lab,
                "join",
                i,
                &[
                    "mcast",
                    "join",
                    "--bind",
                    &host_ip(i),
                    "--leader",
                    &host_ip(0),
                    "--out",
                    out.to_str().unwrap(),
                    "--timeout",
                    "15",
                ]
                .into_iter()
                .chain(extra.iter().copied())
                .collect::<Vec<_>>(),
            );
            (p, out)
        }
    }
}

pub fn lead(lab: &str, members: usize, file: &str) -> Proc {
    lead_with(lab, members, file, &[])
}

/// [`lead`] with more `mcast lead` options.
pub fn lead_with(lab: &str, members: usize, file: &str, extra: &[&str]) -> Proc {
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
        "--op",
        "write",
        "--rate-mbps",
        RATE_MBPS,
        "--timeout",
        "15",
    ];
    args.extend_from_slice(extra);
    Proc::spawn(lab, "lead", 0, &args)
}

/// The leader and every member exit 0, and every member's file holds `payload`
/// exactly. Returns the leader's output.
pub fn every_byte_everywhere(leader: Proc, joins: Vec<(Proc, PathBuf)>, payload: &[u8]) -> String {
    let (code, text) = leader.finish();
    assert_eq!(code, 0, "{text}");
    for (p, out) in joins {
        let (jc, jt) = p.finish();
        assert_eq!(jc, 0, "{jt}");
        assert!(read_and_remove(&out) == payload, "bytes differ: {jt}");
    }
    text
}

/// A member that must fail explicitly (exit 1) and leave no bytes behind: unverified
/// bytes never take the `--out` name, and the staging file goes. Returns its output.
pub fn failed_leaving_nothing(p: Proc, out: &Path) -> String {
    let (code, text) = p.finish();
    assert_eq!(code, 1, "an explicit failure: {text}");
    assert!(
        !out.exists(),
        "{} holds a failed member's bytes",
        out.display()
    );
    assert!(
        !partial_of(out).exists(),
        "staging file left behind: {text}"
    );
    text
}

/// `mcast join --out`'s staging file for `out`.
pub fn partial_of(out: &Path) -> PathBuf {
    PathBuf::from(format!("{}.partial", out.display()))
}

pub fn read_and_remove(p: &Path) -> Vec<u8> {
    let b = std::fs::read(p).unwrap_or_default();
    let _ = std::fs::remove_file(p);
    b
}

/// Takes the lab down and checks nothing of it is left: no namespace, no daemon.
pub fn down_and_check(lab: &str, file: &str) {
    let _ = std::fs::remove_file(file);
    let r = rocast(&["lab", "down", "--name", lab]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    let prefix = format!("rocast-{lab}-");
    assert!(!ns.contains(&prefix), "namespaces left: {ns}");
    assert!(!Path::new(&control(lab)).exists(), "control socket left");
}

/// Runs a Python `script` in host `i`'s namespace with `args`, `lines` on its stdin one
/// per line, under the lab's deadline; fails the test if it fails or hangs.
pub fn python_in(lab: &str, i: usize, script: &str, args: &[&str], lines: &[String]) {
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("rocast-{lab}-h{i}"),
            "python3",
            "-c",
        ])
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn python3");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(lines.join("\n").as_bytes()).unwrap();
    }
    let end = Instant::now() + Duration::from_secs(DEADLINE_S);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success(), "python in h{i}");
            return;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("hang: python in h{i}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn hex_lines(packets: &[Vec<u8>]) -> Vec<String> {
    packets
        .iter()
        .map(|p| p.iter().map(|b| format!("{b:02x}")).collect())
        .collect()
}

/// Sends whole IPv4 packets (`packets`, header included, as the test built them) from
/// host `i`'s namespace through a raw socket: what an attacker with its own switch
/// port can put on the wire, any source address included.
pub fn inject_from(lab: &str, i: usize, packets: &[Vec<u8>]) {
    let script = "import socket,sys\n\
        s=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_RAW)\n\
        s.setsockopt(socket.IPPROTO_IP,socket.IP_HDRINCL,1)\n\
        for h in sys.stdin.read().split():\n  p=bytes.fromhex(h); s.sendto(p,(socket.inet_ntoa(p[16:20]),0))\n";
    python_in(lab, i, script, &[], &hex_lines(packets));
}

/// Sends whole Ethernet frames out of host `i`'s eth0 (AF_PACKET): any source MAC,
/// any ethertype. Paced a little, so the switch's socket keeps up.
pub fn inject_frames_from(lab: &str, i: usize, frames: &[Vec<u8>]) {
    let script = "import socket,sys,time\n\
        s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
        s.bind(('eth0',0))\n\
        for n,h in enumerate(sys.stdin.read().split()):\n  s.send(bytes.fromhex(h))\n  \
        if n%500==499: time.sleep(0.005)\n";
    python_in(lab, i, script, &[], &hex_lines(frames));
}

/// Host `i`'s address (10.77.0.(i + 1)).
pub fn host_addr(i: usize) -> Ipv4Address {
    Ipv4Address::new(10, 77, 0, i as u8 + 1)
}

/// One RoCEv2 packet, IPv4 header through ICRC.
pub fn roce_packet(
    src: Ipv4Address,
    dst: Ipv4Address,
    bth: BthRepr,
    ext: ExtHeaders,
    payload: &[u8],
) -> Vec<u8> {
    let r = RoceRepr::new(src, dst, 0, Ecn::NotEct, 49152, bth, ext, payload);
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b);
    b
}
