//! `rocast bench switch`: how fast `rocast switch` replicates a Cepheus
//! group's RoCE frames on real interfaces, beside the kernel's own Linux bridge
//! flooding the same frames on the same interfaces in the same run.
//!
//! The bench network, built here and removed on every exit path:
//! - namespace `rocastbench-swh` holds the hosts: `h0`, the sender, and `h1..hN`, the
//!   receivers; namespace `rocastbench-sws` holds the switch side `p0..pN` of each
//!   veth pair. Links are not shaped: the switch (or bridge) is the only limit.
//! - Each receiver discards every frame at the first step of its IP input: the switch
//!   has each receiver pinned at a MAC one bit off the receiver's own, so its copies
//!   arrive addressed to another host, as the bridge's flooded copies do (they keep the
//!   switch's MAC). Both media's copies thus cost the receiving side the same, and
//!   little; a receiver's `rx_packets` (counted by the veth before) is what it was
//!   delivered. (`tc` drop actions are not in every kernel: this one lacks them.)
//! - With two or more CPUs the sender runs on CPU 0, and everything that forwards runs
//!   on CPU 1: the `rocast switch` process, and (through RPS on `p0`) the softirq work
//!   of the ingress port, which is where the bridge floods. Each medium thus gets one
//!   core, as one NIC queue's interrupt and its forwarding thread would.
//!
//! Per rep and medium the sender (a thread of this process in `rocastbench-swh`)
//! registers the group h0 → h1..hN by MRP (Cepheus §III-C) and then sends RC SEND
//! frames with consecutive PSNs and a valid ICRC as fast as `sendmmsg` on an AF_PACKET
//! socket goes, for `seconds`. For `rocast switch` every copy is bridged to its
//! member's connection (addresses, QPN, ICRC recomputed: Cepheus §III-B); the bridge
//! floods the frame as it is (its destination MAC is unknown to it).
//!
//! Memory: a ring of 1,024 frames in the sender (about 1 MB at 1 KB payloads); the switch as `rocast switch` states.

use crate::switch::query;
use rocast_core::control::registration::GroupSpec;
use rocast_core::fabric::cepheus::{GroupAddressSpace, VIRTUAL_QPN};
use rocast_core::switch::frame::{FrameSwitch, DEFAULT_GROUP_SPACE, DEFAULT_SWITCH_MAC};
use rocast_core::wire::mrp::{MrpMember, MRP_UDP_PORT};
use rocast_core::wire::{
    BthRepr, Ecn, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, ExtHeaders, Ipv4Address,
    Opcode, Psn, RoceRepr, BTH_LEN, ETHERNET_HEADER_LEN, IPV4_HEADER_LEN, UDP_HEADER_LEN,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NS_HOSTS: &str = "rocastbench-swh";
const NS_SWITCH: &str = "rocastbench-sws";
/// Every `ip`/`tc` step of the setup must finish in this time.
const STEP_DEADLINE: Duration = Duration::from_secs(10);
/// The group's McstID, in `rocast switch`'s default block.
const MCST: Ipv4Address = Ipv4Address::new(10, 77, 0, 129);
/// Frames per `sendmmsg`.
const BATCH: usize = 32;
/// Distinct frames (PSNs) the sender cycles through.
const RING: usize = 1024;

/// What `rocast bench switch` is asked for.
#[derive(Clone, Debug)]
pub struct SwitchBenchArgs {
    /// Group sizes: receivers per group (e.g. 3 and 7).
    pub receivers: Vec<usize>,
    /// RoCE payload bytes per frame.
    pub payload: usize,
    /// Sending time per rep and medium.
    pub seconds: f64,
    pub reps: usize,
    /// The `rocast` binary that runs as the switch.
    pub exe: PathBuf,
}

/// One medium's run.
#[derive(Clone, Debug, Default)]
pub struct MediumRun {
    /// Frames per second the sender put on `h0` flat out.
    pub flat_out_pps: f64,
    /// Frames per second it put on `h0` in the measured window (the rate found).
    pub offered_pps: f64,
    /// The worst receiver's loss in the measured window.
    pub loss: f64,
    /// Frames delivered per second to the slowest and the fastest receiver.
    pub min_pps: f64,
    pub max_pps: f64,
}

impl MediumRun {
    fn describe(&self) -> String {
        format!(
            "flat out {:.3} Mpps offered; carried {:.3} Mpps, delivered {:.3}..{:.3} Mpps per receiver, loss {:.5}",
            self.flat_out_pps / 1e6,
            self.offered_pps / 1e6,
            self.min_pps / 1e6,
            self.max_pps / 1e6,
            self.loss
        )
    }
}

/// The medians of one group size.
#[derive(Clone, Debug)]
pub struct SwitchBenchRow {
    pub receivers: usize,
    pub bridge: Vec<MediumRun>,
    pub rocast: Vec<MediumRun>,
    /// `rocast switch --fast-path`.
    pub fast: Vec<MediumRun>,
}

/// The median of `v` (the upper one of an even count); 0 for none.
pub(crate) fn median(v: Vec<f64>) -> f64 {
    rocast_core::stats::upper_median(v).unwrap_or(0.0)
}

impl SwitchBenchRow {
    pub fn median_min_pps(runs: &[MediumRun]) -> f64 {
        median(runs.iter().map(|r| r.min_pps).collect())
    }
    pub fn median_flat_out_pps(runs: &[MediumRun]) -> f64 {
        median(runs.iter().map(|r| r.flat_out_pps).collect())
    }
}

fn host_mac(i: usize) -> EthernetAddress {
    EthernetAddress([0x02, 0x72, 0x63, 0xb0, 0x00, i as u8])
}

/// The MAC the switch has receiver `i` pinned at: not the receiver's own (module docs).
fn pinned_mac(i: usize) -> EthernetAddress {
    EthernetAddress([0x02, 0x72, 0x63, 0xb0, 0x01, i as u8])
}

fn host_ip(i: usize) -> Ipv4Address {
    Ipv4Address::new(10, 78, 0, i as u8 + 1)
}

/// Why the switch bench could not run or measure.
#[derive(Debug, thiserror::Error)]
pub enum SwitchBenchError {
    #[error("bench switch builds network namespaces: run it as root")]
    NotRoot,
    #[error("--payload {0}: must be 1..=8192")]
    Payload(usize),
    #[error("--seconds {0}: must be in (0, 600]")]
    Seconds(f64),
    #[error("--receivers {0}: must be 1..=62")]
    Receivers(usize),
    /// A setup command (`ip`, `tc`, `sysctl`…) could not run; `command` is its argv
    /// joined by spaces.
    #[error("{command}: {source}")]
    Step {
        command: String,
        source: std::io::Error,
    },
    #[error("{command}: {status}: {stderr}")]
    StepFailed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("{command}: no answer in {STEP_DEADLINE:?}")]
    StepTimeout { command: String },
    #[error("ip netns exec … switch: {0}")]
    SwitchSpawn(std::io::Error),
    #[error("rocast switch did not open its control socket")]
    NoControlSocket,
    #[error("rocast switch exited: {0}")]
    SwitchExited(std::process::ExitStatus),
    #[error("rocast switch did not register the group:\n{0}")]
    GroupNotRegistered(String),
    #[error("namespace {ns}: {source}")]
    Namespace { ns: String, source: std::io::Error },
    #[error("setns {ns}: {source}")]
    Setns { ns: String, source: std::io::Error },
    #[error("/proc/thread-self/net/dev: {0}")]
    NetDev(std::io::Error),
    #[error("{0}: not in /proc/net/dev")]
    NotInNetDev(String),
    #[error(transparent)]
    PacketSocket(std::io::Error),
    #[error("{0}")]
    GroupSpace(#[from] rocast_core::wire::group_space::GroupSpaceParseError),
    #[error(transparent)]
    Group(#[from] rocast_core::control::registration::GroupError),
    #[error("sendmmsg: {0}")]
    Sendmmsg(std::io::Error),
    #[error("the sender thread panicked")]
    SenderPanicked,
}

/// Runs `argv` and waits at most [`STEP_DEADLINE`]; a non-zero exit is an error.
pub(crate) fn run_step(argv: &[&str]) -> Result<(), SwitchBenchError> {
    run_step_input(argv, None)
}

fn run_step_input(argv: &[&str], input: Option<&str>) -> Result<(), SwitchBenchError> {
    use std::io::Write;
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| SwitchBenchError::Step {
            command: argv.join(" "),
            source,
        })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        let _ = stdin.write_all(text.as_bytes());
    }
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(SwitchBenchError::StepFailed {
                    command: argv.join(" "),
                    status,
                    stderr: err.trim().to_string(),
                });
            }
            Ok(None) if start.elapsed() > STEP_DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SwitchBenchError::StepTimeout {
                    command: argv.join(" "),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(source) => {
                return Err(SwitchBenchError::Step {
                    command: argv.join(" "),
                    source,
                })
            }
        }
    }
}

/// The bench network; dropping it removes both namespaces (and with them every veth,
/// qdisc and bridge in them).
struct BenchNet {
    receivers: usize,
    cpus: usize,
}

impl BenchNet {
    fn remove_namespaces() {
        for ns in [NS_HOSTS, NS_SWITCH] {
            if Path::new("/run/netns").join(ns).exists() {
                let _ = run_step(&["ip", "netns", "del", ns]);
            }
        }
    }

    fn up(receivers: usize, mtu: usize) -> Result<BenchNet, SwitchBenchError> {
        Self::remove_namespaces();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let net = BenchNet { receivers, cpus };
        for ns in [NS_HOSTS, NS_SWITCH] {
            run_step(&["ip", "netns", "add", ns])?;
            // No IPv6 router solicitations or DAD probes in the counts.
            for key in ["all", "default"] {
                let setting = format!("net.ipv6.conf.{key}.disable_ipv6=1");
                run_step(&["ip", "netns", "exec", ns, "sysctl", "-q", "-w", &setting])?;
            }
        }
        let mtu = mtu.to_string();
        for i in 0..=receivers {
            let (h, p, mac) = (format!("h{i}"), format!("p{i}"), host_mac(i).to_string());
            run_step(&[
                "ip", "-n", NS_HOSTS, "link", "add", &h, "address", &mac, "mtu", &mtu, "type",
                "veth", "peer", "name", &p, "mtu", &mtu, "netns", NS_SWITCH,
            ])?;
            run_step(&["ip", "-n", NS_HOSTS, "link", "set", &h, "up"])?;
            run_step(&["ip", "-n", NS_SWITCH, "link", "set", &p, "up"])?;
        }
        if cpus >= 2 {
            // The ingress port's softirq work on CPU 1, beside the switch process.
            run_step_input(
                &[
                    "ip",
                    "netns",
                    "exec",
                    NS_SWITCH,
                    "tee",
                    "/sys/class/net/p0/queues/rx-0/rps_cpus",
                ],
                Some("2\n"),
            )?;
        }
        Ok(net)
    }

    fn bridge_up(&self) -> Result<(), SwitchBenchError> {
        run_step(&[
            "ip",
            "-n",
            NS_SWITCH,
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "stp_state",
            "0",
            "mcast_snooping",
            "0",
        ])?;
        for i in 0..=self.receivers {
            run_step(&[
                "ip",
                "-n",
                NS_SWITCH,
                "link",
                "set",
                &format!("p{i}"),
                "master",
                "br0",
            ])?;
        }
        run_step(&["ip", "-n", NS_SWITCH, "link", "set", "br0", "up"])
    }

    fn bridge_down(&self) -> Result<(), SwitchBenchError> {
        run_step(&["ip", "-n", NS_SWITCH, "link", "del", "br0"])
    }

    /// Starts `rocast switch` on `p0..pN` with the hosts pinned, on CPU 1.
    fn switch_up(
        &self,
        exe: &Path,
        control: &Path,
        fast_path: bool,
    ) -> Result<Child, SwitchBenchError> {
        let mut argv: Vec<String> = vec![
            "netns".into(),
            "exec".into(),
            NS_SWITCH.into(),
            exe.display().to_string(),
            "switch".into(),
            "--control".into(),
            control.display().to_string(),
            "--group-lease-ms".into(),
            "0".into(),
        ];
        if fast_path {
            argv.push("--fast-path".into());
        }
        for i in 0..=self.receivers {
            argv.push("--port".into());
            argv.push(format!("afpacket:p{i}"));
            argv.push("--host".into());
            // One bit off the receiver's own MAC (module docs); h0's is its own.
            let pinned = if i == 0 { host_mac(0) } else { pinned_mac(i) };
            argv.push(format!("{}@{i}={pinned}", host_ip(i)));
        }
        let _ = std::fs::remove_file(control);
        let mut cmd = Command::new("ip");
        cmd.args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if self.cpus >= 2 {
            // SAFETY: the closure runs in the forked child before exec and only makes
            // sched_setaffinity(2), a raw system call that allocates nothing and takes no
            // lock (async-signal-safe).
            unsafe {
                cmd.pre_exec(|| {
                    pin_to_cpu(1);
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().map_err(SwitchBenchError::SwitchSpawn)?;
        let start = Instant::now();
        while query(control, "stats").is_err() {
            if start.elapsed() > STEP_DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SwitchBenchError::NoControlSocket);
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(SwitchBenchError::SwitchExited(status));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(child)
    }
}

impl Drop for BenchNet {
    fn drop(&mut self) {
        Self::remove_namespaces();
    }
}

fn pin_to_cpu(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    // Pinning is an optimisation: a machine that refuses it runs the bench unpinned.
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

/// Moves the calling thread into network namespace `ns`.
pub(crate) fn enter_namespace(ns: &str) -> Result<(), SwitchBenchError> {
    let f = std::fs::File::open(Path::new("/run/netns").join(ns)).map_err(|source| {
        SwitchBenchError::Namespace {
            ns: ns.to_string(),
            source,
        }
    })?;
    use std::os::fd::AsFd;
    rustix::thread::move_into_link_name_space(
        f.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .map_err(|e| SwitchBenchError::Setns {
        ns: ns.to_string(),
        source: e.into(),
    })
}

/// `rx_packets` of the named interfaces, from this thread's namespace's
/// `/proc/net/dev`.
fn rx_packets(names: &[String]) -> Result<Vec<u64>, SwitchBenchError> {
    let text =
        std::fs::read_to_string("/proc/thread-self/net/dev").map_err(SwitchBenchError::NetDev)?;
    let dev = crate::lab::parse_proc_net_dev(&text);
    names
        .iter()
        .map(|n| {
            dev.get(n)
                .map(|c| c.rx_packets)
                .ok_or_else(|| SwitchBenchError::NotInNetDev(n.clone()))
        })
        .collect()
}

/// An AF_PACKET socket on `ifname` that bypasses the qdisc (the fastest way a
/// user-space sender puts frames on a veth).
pub(crate) fn packet_socket(ifname: &str) -> Result<OwnedFd, SwitchBenchError> {
    let (sock, _) =
        crate::switch::bound_packet_socket(ifname, 0).map_err(SwitchBenchError::PacketSocket)?;
    const PACKET_QDISC_BYPASS: i32 = 20;
    let _ = crate::udp::setsockopt_int(sock.as_raw_fd(), libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1);
    Ok(sock)
}

/// An Ethernet frame from h0 to the switch's port 0 carrying `ip_packet`.
fn frame_to_switch(ip_packet: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; ETHERNET_HEADER_LEN + ip_packet.len()];
    EthernetRepr {
        src_addr: host_mac(0),
        dst_addr: DEFAULT_SWITCH_MAC,
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f[ETHERNET_HEADER_LEN..].copy_from_slice(ip_packet);
    f
}

/// The MRP frames that register h0 → h1..hN.
fn registration_frames(receivers: usize) -> Result<Vec<Vec<u8>>, SwitchBenchError> {
    let member = |i: usize| MrpMember {
        ip: host_ip(i),
        qpn: 0x100 + i as u32,
        region: None,
    };
    let space = GroupAddressSpace::parse(DEFAULT_GROUP_SPACE)?;
    let spec = GroupSpec::in_space(
        space,
        MCST,
        member(0),
        (1..=receivers).map(member).collect(),
    )?;
    Ok(spec
        .mrp_packets()
        .iter()
        .map(|m| {
            let mut body = vec![0u8; m.buffer_len()];
            m.emit(&mut body);
            frame_to_switch(&FrameSwitch::udp_packet(
                host_ip(0),
                MCST,
                MRP_UDP_PORT,
                &body,
            ))
        })
        .collect())
}

/// An RC SEND (only) of `payload` bytes to the group at `psn`, its ICRC computed.
fn data_frame(payload: usize, psn: u32) -> Vec<u8> {
    let body = vec![0x5au8; payload];
    let bth = BthRepr::new(Opcode::RC_SEND_ONLY, VIRTUAL_QPN, Psn::new(psn));
    let r = RoceRepr::new(
        host_ip(0),
        MCST,
        26,
        Ecn::Ect0,
        49152,
        bth,
        ExtHeaders::default(),
        &body,
    );
    let mut ip = vec![0u8; r.buffer_len()];
    r.emit(&mut ip);
    frame_to_switch(&ip)
}

/// `RING` frames of the group with PSNs 0..RING, sent in turn; each lap moves their
/// PSNs on by `RING` ([`next_lap`]), so the stream is new data throughout, as a
/// sender's is (with no ACK coming back the switch filters nothing, Cepheus §III-D,
/// and a fast path sees no retransmission).
fn frame_ring(payload: usize) -> Vec<Vec<u8>> {
    (0..RING as u32)
        .map(|psn| data_frame(payload, psn))
        .collect()
}

/// Moves the ring's PSNs on by `RING` and recomputes the ICRCs in place (the frames'
/// buffers stay where the send headers point).
fn next_lap(ring: &mut [Vec<u8>]) {
    // The BTH's PSN (its last 3 bytes).
    const PSN_AT: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN - 3;
    for f in ring.iter_mut() {
        let psn = u32::from_be_bytes([0, f[PSN_AT], f[PSN_AT + 1], f[PSN_AT + 2]]);
        let next = (psn + RING as u32) & 0xff_ffff;
        f[PSN_AT..PSN_AT + 3].copy_from_slice(&next.to_be_bytes()[1..]);
        let _ = rocast_core::wire::icrc::fill(&mut f[ETHERNET_HEADER_LEN..]);
    }
}

/// Sends the ring over and over for `seconds` (at `rate_pps` in batches, or flat
/// out), starting at frame `next`; returns the frames the kernel took and where the
/// next send starts.
fn send_for(
    fd: i32,
    ring: &mut [Vec<u8>],
    mut next: usize,
    seconds: f64,
    rate_pps: Option<f64>,
) -> Result<(u64, usize), SwitchBenchError> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let mut sent = 0u64;
    let mut iov: Vec<libc::iovec> = ring
        .iter_mut()
        .map(|f| libc::iovec {
            iov_base: f.as_mut_ptr() as *mut libc::c_void,
            iov_len: f.len(),
        })
        .collect();
    // Each header points at one iovec over a frame that outlives every call below.
    let mut msgs = crate::udp::mmsg_headers(&mut iov);
    while Instant::now() < deadline {
        if let Some(rate) = rate_pps {
            // Paced: the next batch leaves when the rate allows it.
            let due = start + Duration::from_secs_f64(sent as f64 / rate);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        let n = BATCH.min(msgs.len() - next);
        // SAFETY: msgs[next..next + n] are valid mmsghdrs whose iovecs point into
        // `ring`'s frames, alive and unmoved for the call; the kernel only reads them. The
        // bench's send loop: a safe wrapper would rebuild the headers every batch.
        let r = unsafe { libc::sendmmsg(fd, msgs[next..].as_mut_ptr(), n as u32, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOBUFS)
                || e.kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            }
            return Err(SwitchBenchError::Sendmmsg(e));
        }
        sent += r as u64;
        next = (next + r as usize) % msgs.len();
        if next == 0 {
            next_lap(ring);
        }
    }
    Ok((sent, next))
}

/// One sending window's counts.
struct Trial {
    sent: u64,
    elapsed: f64,
    /// Frames each receiver got.
    got: Vec<u64>,
}

impl Trial {
    /// The fraction of the sent frames the worst receiver lost.
    fn loss(&self) -> f64 {
        let min = self.got.iter().copied().min().unwrap_or(0);
        if self.sent == 0 {
            return 0.0;
        }
        self.sent.saturating_sub(min) as f64 / self.sent as f64
    }
}

/// The loss a rate may have and still count as carried (RFC 2544 asks for none;
/// rocast's assumption allows 1 frame in 1,000 for this VM's scheduling hiccups).
pub const LOSS_TOLERANCE: f64 = 1e-3;
/// Rate-search steps, and each step's sending time.
const SEARCH_STEPS: usize = 6;
const SEARCH_SECONDS: f64 = 1.0;

/// One medium, one rep, in the hosts' namespace: registers the group (harmless on a
/// bridge), then finds the highest rate the medium carries to every receiver within
/// [`LOSS_TOLERANCE`] (RFC 2544 §26.1's throughput: a binary search between what it
/// delivered and what was offered flat out), and measures that rate for `seconds`.
/// A medium that applies back-pressure to the sender (the bridge: its copies hold
/// the sender's socket buffer until they are flooded) carries the flat-out rate.
fn measure(
    receivers: usize,
    payload: usize,
    seconds: f64,
    cpus: usize,
) -> Result<MediumRun, SwitchBenchError> {
    std::thread::scope(|s| {
        s.spawn(move || -> Result<MediumRun, SwitchBenchError> {
            enter_namespace(NS_HOSTS)?;
            if cpus >= 2 {
                pin_to_cpu(0);
            }
            let sock = packet_socket("h0")?;
            let fd = sock.as_raw_fd();
            for f in registration_frames(receivers)? {
                let _ = rustix::net::send(&sock, &f, rustix::net::SendFlags::empty());
            }
            std::thread::sleep(Duration::from_millis(50));
            let mut frames = frame_ring(payload);
            let names: Vec<String> = (1..=receivers).map(|i| format!("h{i}")).collect();
            let mut next = 0usize;
            let mut trial = |rate: Option<f64>, secs: f64| -> Result<Trial, SwitchBenchError> {
                let before = rx_packets(&names)?;
                let t0 = Instant::now();
                let (sent, n) = send_for(fd, &mut frames, next, secs, rate)?;
                next = n;
                let elapsed = t0.elapsed().as_secs_f64();
                // What is still queued (up to the switch's socket buffer) drains.
                std::thread::sleep(Duration::from_millis(150));
                let after = rx_packets(&names)?;
                Ok(Trial {
                    sent,
                    elapsed,
                    got: before.iter().zip(&after).map(|(b, a)| a - b).collect(),
                })
            };
            trial(None, 0.1)?; // warm-up
            let flat_out = trial(None, SEARCH_SECONDS)?;
            let flat_pps = flat_out.sent as f64 / flat_out.elapsed;
            let rate = if flat_out.loss() <= LOSS_TOLERANCE {
                None
            } else {
                let (mut lo, mut hi) = (0.0f64, flat_pps);
                // The first guess: what got through flat out.
                let mut mid =
                    flat_out.got.iter().copied().min().unwrap_or(0) as f64 / flat_out.elapsed;
                for _ in 0..SEARCH_STEPS {
                    let t = trial(Some(mid), SEARCH_SECONDS)?;
                    if t.loss() <= LOSS_TOLERANCE {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                    mid = (lo + hi) / 2.0;
                }
                Some(lo.max(1.0))
            };
            let t = trial(rate, seconds)?;
            let pps: Vec<f64> = t.got.iter().map(|&g| g as f64 / t.elapsed).collect();
            Ok(MediumRun {
                flat_out_pps: flat_pps,
                offered_pps: t.sent as f64 / t.elapsed,
                min_pps: pps.iter().copied().fold(f64::INFINITY, f64::min),
                max_pps: pps.iter().copied().fold(0.0, f64::max),
                loss: t.loss(),
            })
        })
        .join()
        .map_err(|_| SwitchBenchError::SenderPanicked)?
    })
}

/// Runs the bench; returns a row per group size.
pub fn run(
    args: &SwitchBenchArgs,
    mut progress: impl FnMut(&str),
) -> Result<Vec<SwitchBenchRow>, SwitchBenchError> {
    if !rustix::process::geteuid().is_root() {
        return Err(SwitchBenchError::NotRoot);
    }
    if args.payload < 1 || args.payload > 8192 {
        return Err(SwitchBenchError::Payload(args.payload));
    }
    if !(args.seconds > 0.0 && args.seconds <= 600.0) {
        return Err(SwitchBenchError::Seconds(args.seconds));
    }
    if let Some(n) = args.receivers.iter().find(|n| !(1..=62).contains(*n)) {
        return Err(SwitchBenchError::Receivers(*n));
    }
    // The IPv4 packet of a frame must fit the links' MTU.
    let mtu = if frame_len(args.payload) - ETHERNET_HEADER_LEN > 1500 {
        9000
    } else {
        1500
    };
    let control = PathBuf::from("/run/rocastbench-switch.sock");
    let mut rows = Vec::new();
    for &n in &args.receivers {
        let net = BenchNet::up(n, mtu)?;
        let mut row = SwitchBenchRow {
            receivers: n,
            bridge: Vec::new(),
            rocast: Vec::new(),
            fast: Vec::new(),
        };
        for rep in 0..args.reps {
            // The media alternate so that a slow moment of the machine hits both.
            net.bridge_up()?;
            let r = measure(n, args.payload, args.seconds, net.cpus);
            net.bridge_down()?;
            let r = r?;
            progress(&format!("1->{n} rep {} bridge: {}", rep + 1, r.describe()));
            row.bridge.push(r);
            for fast_path in [false, true] {
                let mut child = net.switch_up(&args.exe, &control, fast_path)?;
                let r = measure(n, args.payload, args.seconds, net.cpus);
                let groups = query(&control, "groups").unwrap_or_default();
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_child(&child),
                    rustix::process::Signal::TERM,
                );
                let _ = child.wait();
                let r = r?;
                if !groups.contains(&MCST.to_string()) {
                    return Err(SwitchBenchError::GroupNotRegistered(groups));
                }
                let name = if fast_path {
                    "rocast switch --fast-path"
                } else {
                    "rocast switch"
                };
                let fast_line = groups
                    .lines()
                    .find(|l| l.contains("fast_path"))
                    .unwrap_or("");
                progress(&format!(
                    "1->{n} rep {} {name}: {} {fast_line}",
                    rep + 1,
                    r.describe()
                ));
                if fast_path {
                    row.fast.push(r);
                } else {
                    row.rocast.push(r);
                }
            }
        }
        drop(net);
        rows.push(row);
    }
    let _ = std::fs::remove_file(&control);
    Ok(rows)
}

/// Bytes on the wire of one of the sender's frames (Ethernet header to ICRC).
fn frame_len(payload: usize) -> usize {
    data_frame(payload, 0).len()
}

/// The table `rocast bench switch` prints.
pub fn table(rows: &[SwitchBenchRow], args: &SwitchBenchArgs) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let frame = frame_len(args.payload);
    let _ = writeln!(
        s,
        "# rocast bench switch: 1->N replication of RC SEND frames ({} B payload, {frame} B frames), {} s per run, median of {}",
        args.payload, args.seconds, args.reps
    );
    let _ = writeln!(
        s,
        "# flat = frames/s the sender offered flat out; Mpps = frames/s reaching the slowest receiver at the highest rate carried with loss <= {LOSS_TOLERANCE} (RFC 2544 throughput); Gb = its Gbit/s of frame bytes"
    );
    let _ = writeln!(
        s,
        "# rocast = the daemon forwarding every frame; fast = rocast switch --fast-path (new data replicated by its tc program); ratios are to the bridge"
    );
    let _ = writeln!(
        s,
        "{:>9} {:>11} {:>11} {:>9} {:>11} {:>11} {:>9} {:>11} {:>11} {:>9} {:>7} {:>7}",
        "receivers",
        "bridge_flat",
        "bridge_Mpps",
        "bridge_Gb",
        "rocast_flat",
        "rocast_Mpps",
        "rocast_Gb",
        "fast_flat",
        "fast_Mpps",
        "fast_Gb",
        "rocast",
        "fast"
    );
    for r in rows {
        let b = SwitchBenchRow::median_min_pps(&r.bridge);
        let x = SwitchBenchRow::median_min_pps(&r.rocast);
        let f = SwitchBenchRow::median_min_pps(&r.fast);
        let bits = |pps: f64| pps * frame as f64 * 8.0 / 1e9;
        let ratio = |v: f64| if b > 0.0 { v / b } else { 0.0 };
        let _ = writeln!(
            s,
            "{:>9} {:>11.3} {:>11.3} {:>9.2} {:>11.3} {:>11.3} {:>9.2} {:>11.3} {:>11.3} {:>9.2} {:>7.2} {:>7.2}",
            r.receivers,
            SwitchBenchRow::median_flat_out_pps(&r.bridge) / 1e6,
            b / 1e6,
            bits(b),
            SwitchBenchRow::median_flat_out_pps(&r.rocast) / 1e6,
            x / 1e6,
            bits(x),
            SwitchBenchRow::median_flat_out_pps(&r.fast) / 1e6,
            f / 1e6,
            bits(f),
            ratio(x),
            ratio(f)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocast_core::wire::mrp::MrpRepr;
    use rocast_core::wire::{Ipv4Packet, UdpPacket};

    #[test]
    fn the_ring_holds_valid_roce_frames_with_consecutive_psns_to_the_group() {
        let ring = frame_ring(1024);
        assert_eq!(ring.len(), RING);
        for (i, f) in ring.iter().enumerate() {
            let eth = EthernetFrame::new_checked(&f[..]).unwrap();
            assert_eq!(eth.dst_addr(), DEFAULT_SWITCH_MAC);
            assert_eq!(eth.src_addr(), host_mac(0));
            let r = RoceRepr::parse_verified(&f[ETHERNET_HEADER_LEN..]).expect("ICRC verifies");
            assert_eq!(r.bth.psn, Psn::new(i as u32));
            assert_eq!((r.ip.src_addr, r.ip.dst_addr), (host_ip(0), MCST));
            assert_eq!(r.bth.dest_qp, VIRTUAL_QPN);
            assert_eq!(r.payload.len(), 1024);
        }
    }

    #[test]
    fn the_registration_names_every_receiver_once() {
        let frames = registration_frames(7).unwrap();
        let mut members = Vec::new();
        for f in &frames {
            let ip = Ipv4Packet::new_checked(&f[ETHERNET_HEADER_LEN..]).unwrap();
            assert_eq!(ip.dst_addr(), MCST);
            let udp = UdpPacket::new_checked(ip.payload()).unwrap();
            assert_eq!(udp.dst_port(), MRP_UDP_PORT);
            let m = MrpRepr::parse(udp.payload()).unwrap();
            members.extend(m.members.iter().map(|m| m.ip));
        }
        let want: Vec<_> = (0..=7).map(host_ip).collect();
        assert_eq!(members, want, "the leader first, then h1..h7");
    }

    #[test]
    fn loss_is_the_worst_receivers_share_of_what_was_sent() {
        let t = Trial {
            sent: 1000,
            elapsed: 1.0,
            got: vec![1000, 990, 1000],
        };
        assert!((t.loss() - 0.01).abs() < 1e-12);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }
}
