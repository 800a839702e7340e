//! `lab`: a test network of Linux network namespaces, built and torn down by
//! `rocast lab`.
//!
//! The real-time runtime needs a network to run on that is cheap, private and
//! disposable: N hosts, each in its own namespace with an `eth0`, all wired by veth
//! pairs to one switch namespace (`p<i>` there), every link shaped by `tc` so that
//! rate, delay and loss look like a datacenter link rather than a memory copy. The
//! switch namespace holds a plain Linux bridge (`--bridge`), the rocast switch daemon
//! on AF_PACKET ports (`--switch`), or nothing (tests that drive the ports themselves).
//!
//! This module owns:
//! - the names, addresses and MACs of a lab (deterministic, so captures and tests are
//!   reproducible): [`ns_host`], [`ns_switch`], [`host_ip`], [`host_mac`],
//!   [`switch_port_mac`];
//! - argument validation ([`LabOptions`] → [`LabSpec`]);
//! - the plan, a pure list of the commands `up` runs ([`plan`]), unit-testable without
//!   root;
//! - [`Lab::up`], which runs that plan and tears down whatever it built if any step
//!   fails, and [`down`], which removes a lab even after a crash: it finds the
//!   namespaces by name prefix (`ip netns list`), not by the state file;
//! - the state directory `/run/rocast-lab/<name>/` (a `key=value` state file, pid
//!   files, the switch's log and control socket) and [`status`];
//! - the **two-tier** lab ([`LabOptions::tors`] ≥ 2, with the switch daemon): the hosts
//!   split evenly under `tors` rack switches (ToRs, namespaces `rocast-<name>-tor<t>`,
//!   ports `p<j>` to their hosts and `uplink` to the aggregation switch), all under one
//!   aggregation switch (`rocast-<name>-agg`, port `t<t>` to ToR t): a tree, so
//!   layer-2 learning and flooding need no loop prevention. Every switch runs
//!   `rocast switch` on AF_PACKET ports with its PEEL role (PEEL §3.2): the
//!   aggregation switch is the pod's one prefix-tier switch (rack id t behind port t),
//!   each ToR a rack switch with its uplink and the members of
//!   [`LabOptions::peel_groups`] under it ([`switch_daemons`] names them all). The
//!   switches' setup is the core's [`TwoTierFabric`], the description the simulator's
//!   byte-level fabric builds the same switches from. Loss is on every switch port, or
//!   with [`LabOptions::loss_host`] only on the ToR port toward that host.
//!
//! With [`LabOptions::capture`], every switch writes each of its links to
//! `DIR/<switch>/portN.pcap` (`rocast switch --capture`).
//!
//! Commands are run with argument vectors (`ip`, `tc`, `sysctl`), never through a shell.

use rocast_core::fabric::cepheus::GroupAddressSpace;
use rocast_core::switch::two_tier::{SetupRole, SwitchSetup, TwoTierFabric};
use rocast_core::wire::Ipv4Address;
use rustix::process::Signal;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Where every lab keeps its state: on tmpfs, so a reboot (which also removes every
/// namespace) clears it too.
pub const STATE_ROOT: &str = "/run/rocast-lab";
/// Largest lab: the switch-side MACs and host addresses use one byte for `i + 1`, and
/// 64 ports is well past what the 2-core test machines can drive anyway.
pub const MAX_HOSTS: usize = 64;
/// netem/tbf queue length in packets. netem's default (1000) tail-drops a burst of a
/// few MB at 1 Gbit/s, which would look like loss the user did not ask for.
pub const QUEUE_PACKETS: u32 = 10_000;
/// Prefix of the locally administered MACs ("rc" in ASCII after 02).
const MAC_PREFIX: &str = "02:72:63";

/// Errors of `rocast lab`.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("rocast lab must run as root (it creates network namespaces); try sudo")]
    NotRoot,
    #[error("invalid {what}: {msg}")]
    Invalid { what: &'static str, msg: String },
    #[error("lab '{name}' already exists ({why}); run `rocast lab down --name {name}` first")]
    Exists { name: String, why: String },
    #[error("lab '{name}' is not up (no namespaces named {prefix}*)")]
    NotUp { name: String, prefix: String },
    #[error("no host '{host}' in lab '{name}': {why}")]
    NoSuchHost {
        name: String,
        host: String,
        why: String,
    },
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error(
        "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so {what} cannot be \
         emulated; drop it, or use a kernel with netem"
    )]
    NoNetem { what: String },
    #[error("the switch daemon exited at once ({status}); the end of its log:\n{tail}")]
    SwitchDied { status: String, tail: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("teardown incomplete: {}", .0.join("; "))]
    Teardown(Vec<String>),
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> LabError {
    let context = context.into();
    move |source| LabError::Io { context, source }
}

fn invalid(what: &'static str, msg: impl Into<String>) -> LabError {
    LabError::Invalid {
        what,
        msg: msg.into(),
    }
}

/// What sits in the switch namespace and connects the `p<i>` ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Medium {
    /// Nothing: the ports are up but unconnected (a test drives them itself).
    None,
    /// Linux bridge `br0` with every `p<i>`: a plain L2 medium, multicast flooded.
    Bridge,
    /// The rocast switch daemon, `<exe> switch --port afpacket:p<i> … --control …`,
    /// started in the switch namespace. `exe` is the rocast binary to run.
    Switch { exe: PathBuf },
}

impl Medium {
    fn label(&self) -> &'static str {
        match self {
            Medium::None => "none",
            Medium::Bridge => "bridge",
            Medium::Switch { .. } => "switch",
        }
    }
}

/// Which qdisc shapes the links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShaperChoice {
    /// netem when the kernel has it, else tbf (rate only, with a warning; an asked-for
    /// loss is then an error, since silently not dropping would fake a result).
    Auto,
    /// netem or fail.
    Netem,
    /// tbf: rate only, no delay, no loss (kernels without netem).
    Tbf,
}

/// The qdisc actually used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shaper {
    Netem,
    Tbf,
}

impl Shaper {
    fn label(self) -> &'static str {
        match self {
            Shaper::Netem => "netem",
            Shaper::Tbf => "tbf",
        }
    }
}

/// Unvalidated lab parameters, as the command line gives them.
#[derive(Debug, Clone)]
pub struct LabOptions {
    pub name: String,
    pub hosts: usize,
    /// The hosts' /24: its first three octets ("10.77.0") or the block ("10.77.0.0/24").
    /// [`LabSpec::new`] checks it is unicast and stores the three octets.
    pub subnet: String,
    /// The switch's group space (McstIDs, `rocast switch --group-space`), a block
    /// inside the subnet clear of the hosts; `None`: the subnet's upper half
    /// ([`default_group_space`]). Only with the switch daemon.
    pub group_space: Option<String>,
    /// tc rate, e.g. "1gbit".
    pub rate: String,
    /// tc delay, e.g. "10us".
    pub delay: String,
    /// Drop probability in [0, 1) on the switch-side egress.
    pub loss: Option<f64>,
    /// Apply the loss only toward this host (on `p<I>`).
    pub loss_host: Option<usize>,
    pub mtu: u32,
    pub medium: Medium,
    pub shaper: ShaperChoice,
    /// Rack switches: 1 is the one-switch lab; 2 or more, the two-tier lab (module
    /// docs), which needs the switch daemon and `hosts` divisible by `tors`.
    pub tors: usize,
    /// Two-tier lab: per IPv4 multicast group, its member hosts, configured on their
    /// ToRs as the PEEL members (what IGMP snooping would learn).
    pub peel_groups: Vec<(std::net::Ipv4Addr, Vec<usize>)>,
    /// Every switch daemon captures its links to `DIR/<switch>/portN.pcap`.
    pub capture: Option<PathBuf>,
    /// Every switch daemon replicates its groups' new data in the kernel
    /// (`rocast switch --fast-path`).
    pub fast_path: bool,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            name: "lab".into(),
            hosts: 2,
            subnet: "10.77.0".into(),
            group_space: None,
            rate: "1gbit".into(),
            delay: "10us".into(),
            loss: None,
            loss_host: None,
            // 9000 so a 4096-byte RoCE payload plus headers fits in one frame.
            mtu: 9000,
            medium: Medium::None,
            shaper: ShaperChoice::Auto,
            tors: 1,
            peel_groups: Vec::new(),
            capture: None,
            fast_path: false,
        }
    }
}

/// Validated lab parameters; only [`LabSpec::new`] makes one.
#[derive(Debug, Clone)]
pub struct LabSpec {
    opts: LabOptions,
    rate_bps: u64,
    /// The switch daemons' group space (with the switch medium).
    group_space: Option<GroupAddressSpace>,
}

impl LabSpec {
    pub fn new(opts: LabOptions) -> Result<LabSpec, LabError> {
        validate_name(&opts.name)?;
        if !(1..=MAX_HOSTS).contains(&opts.hosts) {
            return Err(invalid(
                "--hosts",
                format!("{} (must be 1..={MAX_HOSTS})", opts.hosts),
            ));
        }
        let subnet = parse_subnet(&opts.subnet)?;
        let rate_bps = parse_rate(&opts.rate)?;
        let delay_us = parse_delay(&opts.delay)?;
        if let Some(p) = opts.loss {
            if !(p.is_finite() && (0.0..1.0).contains(&p)) {
                return Err(invalid("--loss", format!("{p} (must be in [0, 1))")));
            }
        }
        if let Some(h) = opts.loss_host {
            if opts.loss.is_none() {
                return Err(invalid("--loss-host", "needs --loss"));
            }
            if h >= opts.hosts {
                return Err(invalid(
                    "--loss-host",
                    format!("{h} (hosts are 0..{})", opts.hosts),
                ));
            }
        }
        if !(68..=65535).contains(&opts.mtu) {
            return Err(invalid(
                "--mtu",
                format!("{} (must be 68..=65535)", opts.mtu),
            ));
        }
        let daemon = matches!(opts.medium, Medium::Switch { .. });
        if opts.tors == 0 || opts.tors > MAX_HOSTS {
            return Err(invalid(
                "--tors",
                format!("{} (must be 1..={MAX_HOSTS})", opts.tors),
            ));
        }
        if opts.tors > 1 {
            if !daemon {
                return Err(invalid(
                    "--tors",
                    "a two-tier lab needs the switch daemon (--switch)",
                ));
            }
            if !opts.hosts.is_multiple_of(opts.tors) {
                return Err(invalid(
                    "--tors",
                    format!(
                        "{} hosts do not split evenly under {} ToRs",
                        opts.hosts, opts.tors
                    ),
                ));
            }
        }
        if !opts.peel_groups.is_empty() && opts.tors < 2 {
            return Err(invalid(
                "--peel-group",
                "needs a two-tier lab (--tors 2 or more)",
            ));
        }
        for (g, members) in &opts.peel_groups {
            if !g.is_multicast() {
                return Err(invalid(
                    "--peel-group",
                    format!("{g} is not an IPv4 multicast group"),
                ));
            }
            if let Some(h) = members.iter().find(|&&h| h >= opts.hosts) {
                return Err(invalid("--peel-group", format!("{g}: no host {h}")));
            }
        }
        if let Some(c) = &opts.capture {
            if !daemon {
                return Err(invalid("--capture", "needs the switch daemon (--switch)"));
            }
            if c.to_str().is_none_or(|s| s.contains(char::is_whitespace)) {
                return Err(invalid("--capture", "a UTF-8 path without spaces"));
            }
        }
        if opts.shaper == ShaperChoice::Tbf && opts.loss.unwrap_or(0.0) > 0.0 && !daemon {
            return Err(invalid("--loss", "tbf cannot drop packets; use netem"));
        }
        let group_space = match (&opts.group_space, daemon) {
            (Some(_), false) => {
                return Err(invalid(
                    "--group-space",
                    "needs --switch (only the switch daemon answers for group addresses)",
                ))
            }
            (None, false) => None,
            (text, true) => Some(lab_group_space(subnet, opts.hosts, text.as_deref())?),
        };
        let mut opts = opts;
        // tc's spelling of the rate in bits, one spelling so plans and state files
        // compare equal (and tc never reads rocast's "gbps" as its gigabytes).
        opts.rate = rocast_core::units::tc_rate(rate_bps);
        // tc's spelling, as for the rate: `1.5ms` is handed over as `1500us`.
        opts.delay = format!("{delay_us}us");
        opts.subnet = format!("{}.{}.{}", subnet[0], subnet[1], subnet[2]);
        Ok(LabSpec {
            opts,
            rate_bps,
            group_space,
        })
    }

    pub fn name(&self) -> &str {
        &self.opts.name
    }
    pub fn hosts(&self) -> usize {
        self.opts.hosts
    }
    pub fn options(&self) -> &LabOptions {
        &self.opts
    }
    /// The link rate in bits per second.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }
    /// The block the lab's switch daemons take McstIDs from (`None` without them).
    pub fn group_space(&self) -> Option<GroupAddressSpace> {
        self.group_space
    }
    fn loss_percent(&self) -> Option<String> {
        self.opts
            .loss
            .filter(|&p| p > 0.0)
            .map(|p| format_percent(p * 100.0))
    }
}

fn validate_name(name: &str) -> Result<(), LabError> {
    // No '-': down() deletes every namespace under "rocast-<name>-", so a name with a
    // dash ("a-b") would let `lab down --name a` take lab "a-b" with it.
    let ok = !name.is_empty()
        && name.len() <= 24
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "--name",
            format!("{name:?} (1–24 characters of [A-Za-z0-9_])"),
        ))
    }
}

/// The hosts' /24 from `--subnet`: three octets ("10.77.0") or the block
/// ("10.77.0.0/24"). Refuses what is not ordinary unicast space: the lab's hosts,
/// and the switch's group addresses beside them, must be addresses Linux sends and
/// receives on a link (not 0/8, loopback, multicast 224/4 or reserved 240/4, which
/// holds the broadcast address).
pub fn parse_subnet(s: &str) -> Result<[u8; 3], LabError> {
    let bad = || {
        invalid(
            "--subnet",
            format!("{s:?} (three octets, e.g. 10.77.0, or a /24, e.g. 10.77.0.0/24)"),
        )
    };
    let octet = |p: &str| -> Option<u8> {
        (!p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse().ok())
            .flatten()
    };
    let (addr, prefix) = match s.split_once('/') {
        Some((a, p)) => (a, Some(octet(p).filter(|&p| p <= 32).ok_or_else(bad)?)),
        None => (s, None),
    };
    let parts: Vec<u8> = addr
        .split('.')
        .map(octet)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let (net, last) = match (parts.as_slice(), prefix) {
        (&[a, b, c], None) => ([a, b, c], 0),
        (&[a, b, c, d], Some(_)) => ([a, b, c], d),
        _ => return Err(bad()),
    };
    let why_not_unicast = match net[0] {
        0 => Some("0.0.0.0/8 is \"this network\", not an address a host can have"),
        127 => Some("127.0.0.0/8 is loopback"),
        224..=239 => Some("224.0.0.0/4 is multicast; hosts and McstIDs need unicast addresses"),
        240..=255 => Some("240.0.0.0/4 is reserved (and holds the broadcast address)"),
        _ => None,
    };
    if let Some(why) = why_not_unicast {
        return Err(invalid("--subnet", format!("{s}: {why}")));
    }
    match prefix {
        None | Some(24) => {}
        Some(p) if p > 24 => {
            return Err(invalid(
                "--subnet",
                format!(
                    "{s} is too small: the lab numbers its hosts .1, .2, … of a /24 and \
                     gives the switch the upper half for group addresses; use a /24"
                ),
            ))
        }
        Some(p) => {
            return Err(invalid(
                "--subnet",
                format!("{s}: the lab's hosts share one /24, not a /{p}; use a /24"),
            ))
        }
    }
    if last != 0 {
        return Err(invalid(
            "--subnet",
            format!(
                "{s} has host bits set (the block is {}.{}.{}.0/24)",
                net[0], net[1], net[2]
            ),
        ));
    }
    Ok(net)
}

/// The group space a lab on `subnet` gives its switch by default: the upper half of
/// the /24 (10.77.0.0/24 → 10.77.0.128/25, what `rocast switch` and `rocast mcast`
/// default to; hosts, at most 64, stay in the lower half).
pub fn default_group_space(subnet: [u8; 3]) -> GroupAddressSpace {
    let [a, b, c] = subnet;
    GroupAddressSpace::new(Ipv4Address([a, b, c, 128]), 25).expect("a valid /25")
}

/// The group space of a lab of `hosts` hosts on `subnet`: `text` (a block) or the
/// default. An explicit block must lie inside the subnet (the hosts reach it through
/// the switch's proxy ARP on their link) and hold no host's address.
fn lab_group_space(
    subnet: [u8; 3],
    hosts: usize,
    text: Option<&str>,
) -> Result<GroupAddressSpace, LabError> {
    let Some(text) = text else {
        return Ok(default_group_space(subnet));
    };
    let space =
        GroupAddressSpace::parse(text).map_err(|e| invalid("--group-space", e.to_string()))?;
    let [a, b, c] = subnet;
    let inside = space.size() <= 256 && space.nth(0).is_some_and(|ip| ip.0[..3] == subnet);
    if !inside {
        return Err(invalid(
            "--group-space",
            format!("{space} is not inside the subnet {a}.{b}.{c}.0/24"),
        ));
    }
    if let Some(i) = (0..hosts).find(|&i| space.contains(Ipv4Address([a, b, c, i as u8 + 1]))) {
        return Err(invalid(
            "--group-space",
            format!(
                "{space} holds host addresses ({} is h{i}'s); the hosts are {a}.{b}.{c}.1..={}",
                host_ip(&format!("{a}.{b}.{c}"), i),
                hosts
            ),
        ));
    }
    Ok(space)
}

/// `--rate` in bits per second, read as every rate in rocast is
/// ([`rocast_core::units::parse_rate`]: `1gbit`, `1Gbps`, `1gbps` and `1G` are all one
/// gigabit per second). The lab hands tc the same rate in tc's words
/// ([`rocast_core::units::tc_rate`]), where `gbps` would mean gigabytes.
pub fn parse_rate(s: &str) -> Result<u64, LabError> {
    rocast_core::units::parse_rate(s).map_err(|e| invalid("--rate", e.to_string()))
}

/// `--delay` in whole microseconds, read as every duration in rocast is
/// ([`rocast_core::units::parse_duration`]: `10us`, `1.5ms`, `0.5s`, `10000ns`), and
/// tc's own spellings `usec`, `msec`, `sec`. The lab hands tc whole microseconds
/// (`Nus`), the unit tc's netem delay is read in on every iproute2, so a value that is
/// not a whole number of them is refused rather than rounded.
pub fn parse_delay(s: &str) -> Result<u64, LabError> {
    let t = s.trim();
    let tc_spelling = [("usec", "us"), ("msec", "ms"), ("sec", "s")]
        .iter()
        .find_map(|(tc, ours)| t.strip_suffix(tc).map(|n| format!("{n}{ours}")));
    let ps = rocast_core::units::parse_duration(tc_spelling.as_deref().unwrap_or(t))
        .map_err(|e| invalid("--delay", format!("{e} (e.g. 10us, 1.5ms)")))?;
    if ps % 1_000_000 != 0 {
        return Err(invalid(
            "--delay",
            format!("{s:?} is not a whole number of microseconds (tc's netem delays are)"),
        ));
    }
    Ok(ps / 1_000_000)
}

/// `p` (a percentage) with at most 4 decimals and no trailing zeros, so 0.07 × 100
/// prints as "7%", not "7.000000000000001%".
fn format_percent(p: f64) -> String {
    let s = format!("{p:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

// ---------------------------------------------------------------------------------
// Names and addresses.

/// Every namespace of lab `name` starts with this.
pub fn ns_prefix(name: &str) -> String {
    format!("rocast-{name}-")
}
/// Namespace of host `i`.
pub fn ns_host(name: &str, i: usize) -> String {
    format!("rocast-{name}-h{i}")
}
/// Namespace of the switch.
pub fn ns_switch(name: &str) -> String {
    format!("rocast-{name}-sw")
}
/// Namespace of ToR `t` of a two-tier lab.
pub fn ns_tor(name: &str, t: usize) -> String {
    format!("rocast-{name}-tor{t}")
}
/// Namespace of the aggregation switch of a two-tier lab.
pub fn ns_agg(name: &str) -> String {
    format!("rocast-{name}-agg")
}

/// One `rocast switch` daemon of a lab: its short name (`sw`, `agg`, `tor<t>`; the
/// capture subdirectory and the file names in the state directory), namespace and
/// control socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchDaemonInfo {
    pub short: String,
    pub namespace: String,
    pub control: PathBuf,
}

/// The switch daemons a lab of `spec` runs (none without the switch medium).
pub fn switch_daemons(spec: &LabSpec) -> Vec<SwitchDaemonInfo> {
    let name = spec.name();
    if !matches!(spec.opts.medium, Medium::Switch { .. }) {
        return Vec::new();
    }
    let d = |short: String, namespace: String| SwitchDaemonInfo {
        control: state_dir(name).join(format!("{short}.sock")),
        short,
        namespace,
    };
    if spec.opts.tors < 2 {
        return vec![SwitchDaemonInfo {
            short: "sw".into(),
            namespace: ns_switch(name),
            control: switch_socket(name),
        }];
    }
    let mut v = vec![d("agg".into(), ns_agg(name))];
    v.extend((0..spec.opts.tors).map(|t| d(format!("tor{t}"), ns_tor(name, t))));
    v
}
/// Throwaway namespace for the netem probe (under the lab's prefix, so `down` finds it
/// if `up` dies while it exists).
fn ns_probe(name: &str) -> String {
    format!("rocast-{name}-probe")
}
/// Host `i`'s eth0 address (without the prefix length).
pub fn host_ip(subnet: &str, i: usize) -> String {
    format!("{subnet}.{}", i + 1)
}
/// Host `i`'s eth0 MAC.
pub fn host_mac(i: usize) -> String {
    format!("{MAC_PREFIX}:00:00:{:02x}", i + 1)
}
/// MAC of the switch-side port `p<i>`.
pub fn switch_port_mac(i: usize) -> String {
    format!("{MAC_PREFIX}:ff:00:{:02x}", i + 1)
}
/// State directory of lab `name`.
pub fn state_dir(name: &str) -> PathBuf {
    Path::new(STATE_ROOT).join(name)
}
/// The switch daemon's control socket.
pub fn switch_socket(name: &str) -> PathBuf {
    state_dir(name).join("switch.sock")
}

/// The namespace of `host` (`h<i>` or `sw`) in lab `name`, whether or not it exists.
pub fn host_namespace(name: &str, host: &str) -> Result<String, LabError> {
    if host == "sw" {
        return Ok(ns_switch(name));
    }
    if host == "agg" {
        return Ok(ns_agg(name));
    }
    if let Some(t) = host
        .strip_prefix("tor")
        .and_then(|d| d.parse::<usize>().ok())
    {
        return Ok(ns_tor(name, t));
    }
    match host.strip_prefix('h').map(|d| (d, d.parse::<usize>())) {
        Some((d, Ok(i))) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(ns_host(name, i))
        }
        _ => Err(LabError::NoSuchHost {
            name: name.into(),
            host: host.into(),
            why: "hosts are h0, h1, …, sw (or agg, tor0, … in a two-tier lab)".into(),
        }),
    }
}

// ---------------------------------------------------------------------------------
// The plan.

/// One command of the plan: run to completion, or (the switch daemon) spawn and leave.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Run(Vec<String>),
    SpawnDaemon {
        argv: Vec<String>,
        pid_file: PathBuf,
        log: PathBuf,
    },
}

impl Step {
    fn argv(&self) -> &[String] {
        match self {
            Step::Run(a) | Step::SpawnDaemon { argv: a, .. } => a,
        }
    }
}

fn v(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// An argument vector from a line split at spaces. Not a shell: no quoting, no
/// expansion; every part interpolated into such a line (lab name, subnet, rate, delay,
/// MAC, MTU) is validated to hold no space. Paths, which may, are pushed separately.
fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// The root qdisc command for one link direction.
fn qdisc_cmd(
    spec: &LabSpec,
    shaper: Shaper,
    ns: &str,
    dev: &str,
    loss: Option<&str>,
) -> Vec<String> {
    let o = &spec.opts;
    let base = format!("tc -n {ns} qdisc replace dev {dev} root");
    match shaper {
        Shaper::Netem => {
            let loss = loss.map(|l| format!(" loss {l}")).unwrap_or_default();
            words(&format!(
                "{base} netem limit {QUEUE_PACKETS} rate {} delay {}{loss}",
                o.rate, o.delay
            ))
        }
        Shaper::Tbf => {
            // Bucket: 1 ms at line rate, at least two frames (tbf drops a frame larger
            // than its bucket). Queue: as many bytes as netem's packet limit holds.
            let frame = u64::from(o.mtu) + 14;
            let burst = (spec.rate_bps / 8 / 1000).clamp(2 * frame, u64::from(u32::MAX));
            let limit = (u64::from(QUEUE_PACKETS) * frame).min(u64::from(u32::MAX));
            words(&format!(
                "{base} tbf rate {} burst {burst} limit {limit}",
                o.rate
            ))
        }
    }
}

fn plan_steps(spec: &LabSpec, shaper: Shaper) -> Vec<Step> {
    if spec.opts.tors > 1 {
        return plan_two_tier(spec, shaper);
    }
    let name = spec.name();
    let o = &spec.opts;
    let sw = ns_switch(name);
    let mtu = o.mtu;
    let loss = spec.loss_percent();
    let mut steps = Vec::new();
    let mut run = |a: Vec<String>| steps.push(Step::Run(a));

    // IPv6 off: no router solicitations, MLD or DAD frames in the captures, so a
    // capture holds what the test sent and nothing else. Set before the veths exist,
    // so "default" covers them.
    let new_ns = |run: &mut dyn FnMut(Vec<String>), ns: &str| {
        run(words(&format!("ip netns add {ns}")));
        run(words(&format!(
            "ip netns exec {ns} sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
             net.ipv6.conf.default.disable_ipv6=1"
        )));
        run(words(&format!("ip -n {ns} link set lo up")));
    };

    new_ns(&mut run, &sw);
    for i in 0..spec.hosts() {
        let h = ns_host(name, i);
        new_ns(&mut run, &h);
        // Both ends created directly in their namespaces: nothing ever appears in the
        // namespace `rocast lab` runs in.
        run(words(&format!(
            "ip link add eth0 netns {h} address {} mtu {mtu} \
             type veth peer name p{i} netns {sw} address {} mtu {mtu}",
            host_mac(i),
            switch_port_mac(i)
        )));
        run(words(&format!(
            "ip -n {h} addr add {}/24 dev eth0",
            host_ip(&o.subnet, i)
        )));
        run(words(&format!("ip -n {h} link set eth0 up")));
        run(words(&format!("ip -n {sw} link set p{i} up")));
        run(qdisc_cmd(spec, shaper, &h, "eth0", None));
        // With the switch daemon, the daemon drops (the same everywhere, netem or not).
        let port_loss = match o.loss_host {
            _ if matches!(o.medium, Medium::Switch { .. }) => None,
            Some(only) if only != i => None,
            _ => loss.as_deref(),
        };
        run(qdisc_cmd(spec, shaper, &sw, &format!("p{i}"), port_loss));
        if !matches!(o.medium, Medium::Bridge) {
            // Without the kernel bridge, a userspace switch on AF_PACKET carries the
            // frames (ours, or one the user starts). A veth hands AF_PACKET frames with checksums left to offload (and TCP
            // super-frames); switched in userspace they would arrive unfinished.
            for (ns, dev) in [
                (h.clone(), "eth0".to_string()),
                (sw.clone(), format!("p{i}")),
            ] {
                run(words(&format!(
                    "ip netns exec {ns} ethtool -K {dev} tx off tso off gso off gro off"
                )));
            }
        }
    }

    match &o.medium {
        Medium::None => {}
        Medium::Bridge => {
            // Snooping off: the bridge floods multicast to every port, a true broadcast
            // medium, instead of learning (or failing to learn, with no querier) groups.
            run(words(&format!(
                "ip -n {sw} link add br0 type bridge mcast_snooping 0"
            )));
            for i in 0..spec.hosts() {
                run(words(&format!("ip -n {sw} link set p{i} master br0")));
            }
            run(words(&format!("ip -n {sw} link set br0 mtu {mtu} up")));
        }
        Medium::Switch { exe } => {
            let mut argv = words(&format!("ip netns exec {sw}"));
            argv.push(exe.to_string_lossy().into_owned());
            argv.push("switch".into());
            for i in 0..spec.hosts() {
                argv.push("--port".into());
                argv.push(format!("afpacket:p{i}"));
            }
            // The hosts are known: pin them, so registration never waits on learning.
            for i in 0..spec.hosts() {
                argv.push("--host".into());
                argv.push(format!("{}@{i}={}", host_ip(&o.subnet, i), host_mac(i)));
            }
            if let Some(p) = o.loss.filter(|&p| p > 0.0) {
                argv.push("--loss".into());
                argv.push(p.to_string());
                if let Some(h) = o.loss_host {
                    argv.push("--loss-port".into());
                    argv.push(h.to_string());
                }
            }
            // The group space follows the subnet: a switch left at its default
            // 10.77.0.128/25 on another subnet answers no ARP for the hosts' groups,
            // and every group would quietly fall back to an overlay.
            if let Some(g) = spec.group_space {
                argv.extend(["--group-space".to_string(), g.to_string()]);
            }
            argv.push("--control".into());
            argv.push(switch_socket(name).to_string_lossy().into_owned());
            if o.fast_path {
                argv.push("--fast-path".into());
            }
            if let Some(c) = &o.capture {
                argv.push("--capture".into());
                argv.push(c.join("sw").to_string_lossy().into_owned());
            }
            let dir = state_dir(name);
            steps.push(Step::SpawnDaemon {
                argv,
                pid_file: dir.join("switch.pid"),
                log: dir.join("switch.log"),
            });
        }
    }
    steps
}

/// The namespaces, veths, qdiscs and daemons of a two-tier lab (module docs).
fn plan_two_tier(spec: &LabSpec, shaper: Shaper) -> Vec<Step> {
    let name = spec.name();
    let o = &spec.opts;
    let Medium::Switch { exe } = &o.medium else {
        return Vec::new(); // LabSpec::new refuses this
    };
    let per = o.hosts / o.tors;
    let mtu = o.mtu;
    let agg = ns_agg(name);
    let mut steps = Vec::new();
    let run = |steps: &mut Vec<Step>, a: Vec<String>| steps.push(Step::Run(a));
    let new_ns = |steps: &mut Vec<Step>, ns: &str| {
        for l in [
            format!("ip netns add {ns}"),
            format!(
                "ip netns exec {ns} sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
                 net.ipv6.conf.default.disable_ipv6=1"
            ),
            format!("ip -n {ns} link set lo up"),
        ] {
            steps.push(Step::Run(words(&l)));
        }
    };
    // One link: a veth pair `a_dev`@`a_ns` — `b_dev`@`b_ns`, both up, shaped, offloads
    // off (userspace switches must get finished frames).
    let link = |steps: &mut Vec<Step>, a: (&str, &str, &str), b: (&str, &str, &str)| {
        let ((a_ns, a_dev, a_mac), (b_ns, b_dev, b_mac)) = (a, b);
        steps.push(Step::Run(words(&format!(
            "ip link add {a_dev} netns {a_ns} address {a_mac} mtu {mtu} \
             type veth peer name {b_dev} netns {b_ns} address {b_mac} mtu {mtu}"
        ))));
        for (ns, dev) in [(a_ns, a_dev), (b_ns, b_dev)] {
            steps.push(Step::Run(words(&format!("ip -n {ns} link set {dev} up"))));
            steps.push(Step::Run(qdisc_cmd(spec, shaper, ns, dev, None)));
            steps.push(Step::Run(words(&format!(
                "ip netns exec {ns} ethtool -K {dev} tx off tso off gso off gro off"
            ))));
        }
    };
    let uplink_mac = |t: usize, side: u8| format!("{MAC_PREFIX}:fe:{:02x}:{side:02x}", t + 1);
    new_ns(&mut steps, &agg);
    for t in 0..o.tors {
        let tor = ns_tor(name, t);
        new_ns(&mut steps, &tor);
        link(
            &mut steps,
            (&tor, "uplink", &uplink_mac(t, 1)),
            (&agg, &format!("t{t}"), &uplink_mac(t, 2)),
        );
        for j in 0..per {
            let i = t * per + j;
            let h = ns_host(name, i);
            new_ns(&mut steps, &h);
            link(
                &mut steps,
                (&h, "eth0", &host_mac(i)),
                (&tor, &format!("p{j}"), &switch_port_mac(i)),
            );
            run(
                &mut steps,
                words(&format!(
                    "ip -n {h} addr add {}/24 dev eth0",
                    host_ip(&o.subnet, i)
                )),
            );
        }
    }
    // The daemons: the aggregation switch first, so the ToRs' first frames find it.
    // Their setup is the core's description of the fabric, which the simulator's
    // byte-level fabric builds its switches from too.
    let dir = state_dir(name);
    let fabric = match two_tier_fabric(o) {
        Ok(f) => f,
        Err(_) => return Vec::new(), // LabSpec::new refuses this
    };
    // The aggregation switch, then ToR 0, 1, … (`TwoTierFabric::switches`' order).
    for (k, sw) in fabric.switches().into_iter().enumerate() {
        let short = sw.name.clone();
        let ns = if k == 0 {
            agg.clone()
        } else {
            ns_tor(name, k - 1)
        };
        let mut argv = words(&format!("ip netns exec {ns}"));
        argv.push(exe.to_string_lossy().into_owned());
        argv.push("switch".into());
        argv.extend(switch_setup_args(&sw));
        if let Some(g) = spec.group_space {
            argv.extend(["--group-space".to_string(), g.to_string()]);
        }
        if o.fast_path {
            argv.push("--fast-path".into());
        }
        // Loss on every port, or only on the port toward `loss_host` (on its ToR).
        if let Some(p) = o.loss.filter(|&p| p > 0.0) {
            match o.loss_host {
                None => argv.extend(["--loss".to_string(), p.to_string()]),
                Some(h) if k == h / per + 1 => argv.extend([
                    "--loss".to_string(),
                    p.to_string(),
                    "--loss-port".to_string(),
                    (h % per).to_string(),
                ]),
                Some(_) => {}
            }
        }
        argv.push("--control".into());
        argv.push(
            dir.join(format!("{short}.sock"))
                .to_string_lossy()
                .into_owned(),
        );
        if let Some(c) = &o.capture {
            argv.push("--capture".into());
            argv.push(c.join(&short).to_string_lossy().into_owned());
        }
        steps.push(Step::SpawnDaemon {
            argv,
            pid_file: dir.join(format!("{short}.pid")),
            log: dir.join(format!("{short}.log")),
        });
    }
    steps
}

/// Why a two-tier lab's options describe no fabric.
#[derive(Debug, thiserror::Error)]
pub enum FabricError {
    /// The subnet is not three dotted bytes.
    #[error("subnet {0:?}")]
    Subnet(String),
    /// The core refused the hosts, ToRs or groups (its words).
    #[error("{0}")]
    Fabric(String),
}

/// The core's description of a two-tier lab's fabric (hosts, ToRs, PEEL groups).
pub fn two_tier_fabric(o: &LabOptions) -> Result<TwoTierFabric, FabricError> {
    let mut subnet = [0u8; 3];
    for (i, p) in o.subnet.split('.').enumerate() {
        let v = p
            .parse()
            .map_err(|_| FabricError::Subnet(o.subnet.clone()))?;
        *subnet
            .get_mut(i)
            .ok_or_else(|| FabricError::Subnet(o.subnet.clone()))? = v;
    }
    let groups = o
        .peel_groups
        .iter()
        .map(|(g, m)| (Ipv4Address(g.octets()), m.clone()))
        .collect();
    TwoTierFabric::new(o.hosts, o.tors, subnet, groups)
        .map_err(|e| FabricError::Fabric(e.to_string()))
}

/// `rocast switch`'s arguments for one switch of a two-tier lab: its AF_PACKET ports
/// (the aggregation switch's `t<T>`, a ToR's `p<J>` and `uplink`), pinned hosts and
/// PEEL role.
fn switch_setup_args(sw: &SwitchSetup) -> Vec<String> {
    let mut args = Vec::new();
    let port_name = |p: u16| match &sw.role {
        SetupRole::Prefix { .. } => format!("afpacket:t{p}"),
        SetupRole::Rack { uplink, .. } if p == *uplink => "afpacket:uplink".to_string(),
        SetupRole::Rack { .. } => format!("afpacket:p{p}"),
    };
    for p in 0..sw.ports {
        args.extend(["--port".to_string(), port_name(p)]);
    }
    for (ip, port, mac) in &sw.hosts {
        args.extend(["--host".to_string(), format!("{ip}@{port}={mac}")]);
    }
    for p in &sw.switch_ports {
        args.extend(["--switch-port".to_string(), p.to_string()]);
    }
    match &sw.role {
        SetupRole::Prefix { racks } => {
            args.extend(words("--peel-role prefix"));
            for (id, port) in racks.iter().enumerate() {
                args.extend(["--peel-rack".to_string(), format!("{id}={port}")]);
            }
        }
        SetupRole::Rack { uplink, members } => {
            args.extend(words(&format!("--peel-role rack --peel-uplink {uplink}")));
            for (g, ports) in members {
                let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                args.extend([
                    "--peel-member".to_string(),
                    format!("{g}={}", ports.join(",")),
                ]);
            }
        }
    }
    args
}

/// Every command [`Lab::up`] runs for `spec` with `shaper`, in order (the switch
/// daemon, when asked for, is the last and is spawned rather than waited for).
pub fn plan(spec: &LabSpec, shaper: Shaper) -> Vec<Vec<String>> {
    plan_steps(spec, shaper)
        .iter()
        .map(|s| s.argv().to_vec())
        .collect()
}

// ---------------------------------------------------------------------------------
// Running commands.

fn require_root() -> Result<(), LabError> {
    if !rustix::process::geteuid().is_root() {
        return Err(LabError::NotRoot);
    }
    Ok(())
}

fn show(argv: &[String]) -> String {
    argv.join(" ")
}

/// Runs `argv` to completion; non-zero exit is an error carrying its stderr.
fn run_cmd(argv: &[String]) -> Result<String, LabError> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            let hint = if e.kind() == io::ErrorKind::NotFound {
                " (is iproute2 installed?)"
            } else {
                ""
            };
            LabError::Io {
                context: format!("cannot run {}{hint}", argv[0]),
                source: e,
            }
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(LabError::Command {
            cmd: show(argv),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The names in `ip netns list` ("name" or "name (id: 3)" per line).
pub fn list_namespaces() -> Result<Vec<String>, LabError> {
    let out = run_cmd(&v(&["ip", "netns", "list"]))?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// One interface's counters, as `/proc/net/dev` gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetDevCounters {
    pub rx_packets: u64,
    /// Frames received and dropped (a full backlog, a frame no socket could take).
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

/// Every interface of `/proc/net/dev` text (read inside one namespace: the file is per
/// namespace), by name.
pub fn parse_proc_net_dev(text: &str) -> BTreeMap<String, NetDevCounters> {
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            // Receive: bytes packets errs drop fifo frame compressed multicast;
            // transmit: bytes packets errs drop ….
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(|w| w.parse().ok())
                .collect::<Option<_>>()?;
            let c = NetDevCounters {
                rx_packets: *f.get(1)?,
                rx_dropped: *f.get(3)?,
                tx_dropped: *f.get(11)?,
            };
            Some((name.trim().to_string(), c))
        })
        .collect()
}

/// Frames the kernel dropped inside a lab, over all its namespaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkDrops {
    /// `rx_dropped` + `tx_dropped` of every interface (a veth whose peer's backlog was
    /// full, a frame no socket could take).
    pub interfaces: u64,
    /// Drops the qdiscs counted (a full shaping queue; netem's injected loss too).
    pub qdiscs: u64,
}

/// The kernel's drop counters of lab `name` now (they count from the lab's start).
pub fn link_drops(name: &str) -> Result<LinkDrops, LabError> {
    let mut d = LinkDrops::default();
    for ns in lab_namespaces(name)? {
        // `/proc/net/dev` as a process inside the namespace sees it.
        let out = run_cmd(&v(&["ip", "netns", "exec", &ns, "cat", "/proc/net/dev"]))?;
        d.interfaces += parse_proc_net_dev(&out)
            .values()
            .map(|c| c.rx_dropped + c.tx_dropped)
            .sum::<u64>();
        d.qdiscs += qdisc_drops(&run_cmd(&v(&["tc", "-n", &ns, "-s", "qdisc", "show"]))?);
    }
    Ok(d)
}

/// The sum of `(dropped N,` in `tc -s qdisc show` output.
fn qdisc_drops(text: &str) -> u64 {
    let w: Vec<&str> = text.split_whitespace().collect();
    w.windows(2)
        .filter(|p| p[0] == "(dropped")
        .filter_map(|p| p[1].trim_end_matches(',').parse::<u64>().ok())
        .sum()
}

/// Namespaces of lab `name`, sorted.
pub fn lab_namespaces(name: &str) -> Result<Vec<String>, LabError> {
    let prefix = ns_prefix(name);
    let mut v: Vec<String> = list_namespaces()?
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    v.sort();
    Ok(v)
}

/// Whether the kernel has netem, tried on `lo` of a throwaway namespace so nothing
/// outside the lab is touched.
fn probe_netem(name: &str) -> Result<bool, LabError> {
    let ns = ns_probe(name);
    run_cmd(&v(&["ip", "netns", "add", &ns]))?;
    let r = run_cmd(&v(&[
        "tc", "-n", &ns, "qdisc", "add", "dev", "lo", "root", "netem",
    ]));
    let del = run_cmd(&v(&["ip", "netns", "del", &ns]));
    let has = match r {
        Ok(_) => true,
        // "Specified qdisc kind is unknown." (older tc: "Unknown qdisc").
        Err(LabError::Command { ref stderr, .. }) if stderr.to_lowercase().contains("unknown") => {
            false
        }
        Err(e) => return Err(e),
    };
    del?;
    Ok(has)
}

// ---------------------------------------------------------------------------------
// State file.

/// A lab as recorded in its state file.
#[derive(Debug, Clone, PartialEq)]
pub struct LabState {
    pub name: String,
    pub hosts: usize,
    pub subnet: String,
    pub rate: String,
    pub delay: String,
    pub loss: Option<f64>,
    pub loss_host: Option<usize>,
    pub mtu: u32,
    pub medium: String,
    pub shaper: String,
    /// Rack switches (1: the one-switch lab).
    pub tors: usize,
    /// The switch daemons' group space (`None` without them).
    pub group_space: Option<String>,
}

impl LabState {
    fn from_spec(spec: &LabSpec, shaper: Shaper) -> LabState {
        let o = &spec.opts;
        LabState {
            name: o.name.clone(),
            hosts: o.hosts,
            subnet: o.subnet.clone(),
            rate: o.rate.clone(),
            delay: o.delay.clone(),
            loss: o.loss,
            loss_host: o.loss_host,
            mtu: o.mtu,
            medium: o.medium.label().into(),
            shaper: shaper.label().into(),
            tors: o.tors,
            group_space: spec.group_space.map(|g| g.to_string()),
        }
    }

    fn to_text(&self) -> String {
        let opt = |x: Option<String>| x.unwrap_or_else(|| "none".into());
        format!(
            "# rocast lab state: written by `rocast lab up`, read by status/exec/down\n\
             name={}\nhosts={}\nsubnet={}\nrate={}\ndelay={}\nloss={}\nloss_host={}\n\
             mtu={}\nmedium={}\nshaper={}\ntors={}\ngroup_space={}\n",
            self.name,
            self.hosts,
            self.subnet,
            self.rate,
            self.delay,
            opt(self.loss.map(|l| l.to_string())),
            opt(self.loss_host.map(|h| h.to_string())),
            self.mtu,
            self.medium,
            self.shaper,
            self.tors,
            opt(self.group_space.clone()),
        )
    }

    fn parse(text: &str) -> Option<LabState> {
        let get = |k: &str| {
            text.lines()
                .filter_map(|l| l.split_once('='))
                .find(|(key, _)| key.trim() == k)
                .map(|(_, val)| val.trim().to_string())
        };
        let opt_num = |k: &str| -> Option<Option<String>> {
            let s = get(k)?;
            Some(if s == "none" { None } else { Some(s) })
        };
        Some(LabState {
            name: get("name")?,
            hosts: get("hosts")?.parse().ok()?,
            subnet: get("subnet")?,
            rate: get("rate")?,
            delay: get("delay")?,
            loss: match opt_num("loss")? {
                None => None,
                Some(s) => Some(s.parse().ok()?),
            },
            loss_host: match opt_num("loss_host")? {
                None => None,
                Some(s) => Some(s.parse().ok()?),
            },
            mtu: get("mtu")?.parse().ok()?,
            medium: get("medium")?,
            shaper: get("shaper")?,
            // Written since the two-tier lab; absent means one switch.
            tors: match get("tors") {
                None => 1,
                Some(t) => t.parse().ok()?,
            },
            // Written since the switch daemons have a group space; absent means none.
            group_space: opt_num("group_space").flatten(),
        })
    }

    /// Reads lab `name`'s state file; `None` when absent or unreadable.
    pub fn load(name: &str) -> Option<LabState> {
        let text = fs::read_to_string(state_dir(name).join("state")).ok()?;
        LabState::parse(&text)
    }
}

impl fmt::Display for LabState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let loss = match (self.loss, self.loss_host) {
            (None, _) => "none".to_string(),
            (Some(l), None) => format!("{} toward every host", format_percent(l * 100.0)),
            (Some(l), Some(h)) => format!("{} toward h{h} only", format_percent(l * 100.0)),
        };
        write!(
            f,
            "{} hosts on {}.0/24, rate {}, delay {}, loss {}, mtu {}, medium {}, shaper {}",
            self.hosts,
            self.subnet,
            self.rate,
            if self.shaper == "tbf" {
                "none (tbf)"
            } else {
                &self.delay
            },
            loss,
            self.mtu,
            self.medium,
            self.shaper
        )?;
        if self.tors > 1 {
            write!(
                f,
                ", two-tier: {} ToRs under one aggregation switch (PEEL)",
                self.tors
            )?;
        }
        if let Some(g) = &self.group_space {
            write!(f, ", group space {g}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------
// Up.

/// A lab that is up.
#[derive(Debug)]
pub struct Lab {
    pub spec: LabSpec,
    pub shaper: Shaper,
    pub namespaces: Vec<String>,
    /// Pid of the switch daemon, with `--switch` (the last started, in a two-tier lab).
    pub switch_pid: Option<u32>,
    /// Pids of every switch daemon, in [`switch_daemons`] order.
    pub daemon_pids: Vec<u32>,
    /// Things the user asked for that this kernel could not give (e.g. delay without
    /// netem).
    pub warnings: Vec<String>,
}

/// Tears lab `name` down when dropped, unless disarmed: `up` arms it as soon as it
/// owns the state directory, so an error (or a panic) half-way leaves nothing behind.
struct TeardownGuard {
    name: String,
    armed: bool,
}

impl TeardownGuard {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for TeardownGuard {
    fn drop(&mut self) {
        if self.armed {
            // Drop has no caller to return to: stderr is the only way to say the
            // cleanup itself failed, and `rocast lab down` is the way out.
            if let Err(e) = teardown(&self.name) {
                eprintln!(
                    "rocast lab: cleaning up the half-built lab '{}' failed: {e}; run `rocast lab down --name {}`",
                    self.name, self.name
                );
            }
        }
    }
}

impl Lab {
    /// Builds the lab. Fails, touching nothing, if any namespace or the state directory
    /// of this lab already exists; fails, after removing what it built, if a step
    /// fails.
    pub fn up(spec: &LabSpec) -> Result<Lab, LabError> {
        require_root()?;
        let name = spec.name();
        let existing = lab_namespaces(name)?;
        if !existing.is_empty() {
            return Err(LabError::Exists {
                name: name.into(),
                why: format!("namespaces {}", existing.join(", ")),
            });
        }
        let dir = state_dir(name);
        fs::create_dir_all(STATE_ROOT).map_err(io_err(format!("cannot create {STATE_ROOT}")))?;
        // create_dir, not create_dir_all: it fails if the directory exists, which makes
        // two concurrent `up`s of one name exclusive.
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(LabError::Exists {
                    name: name.into(),
                    why: format!("{} exists", dir.display()),
                })
            }
            Err(e) => return Err(io_err(format!("cannot create {}", dir.display()))(e)),
        }
        let guard = TeardownGuard {
            name: name.into(),
            armed: true,
        };

        let mut warnings = Vec::new();
        let shaper = match spec.opts.shaper {
            ShaperChoice::Tbf => Shaper::Tbf,
            choice => {
                if probe_netem(name)? {
                    Shaper::Netem
                } else if choice == ShaperChoice::Netem {
                    return Err(LabError::NoNetem {
                        what: "--shaper netem".into(),
                    });
                } else if let Some(p) = spec
                    .loss_percent()
                    .filter(|_| !matches!(spec.opts.medium, Medium::Switch { .. }))
                {
                    return Err(LabError::NoNetem {
                        what: format!("--loss ({p})"),
                    });
                } else {
                    // Said whether or not the user gave --delay: the lab's links have a
                    // delay by default, and it is not there.
                    warnings.push(format!(
                        "this kernel has no netem qdisc: links are shaped by tbf at {} and carry no added delay (the lab's delay of {} is not emulated; --shaper netem makes this an error)",
                        spec.opts.rate, spec.opts.delay
                    ));
                    Shaper::Tbf
                }
            }
        };

        let state = LabState::from_spec(spec, shaper);
        fs::write(dir.join("state"), state.to_text()).map_err(io_err(format!(
            "cannot write {}",
            dir.join("state").display()
        )))?;

        let mut switch_pid = None;
        let mut daemon_pids = Vec::new();
        for step in plan_steps(spec, shaper) {
            match step {
                Step::Run(argv) => {
                    run_cmd(&argv)?;
                }
                Step::SpawnDaemon {
                    argv,
                    pid_file,
                    log,
                } => {
                    let pid = spawn_daemon(&argv, &pid_file, &log)?;
                    switch_pid = Some(pid);
                    daemon_pids.push(pid);
                }
            }
        }
        guard.disarm();
        Ok(Lab {
            spec: spec.clone(),
            shaper,
            namespaces: lab_namespaces(name)?,
            switch_pid,
            daemon_pids,
            warnings,
        })
    }
}

/// Starts `argv` detached (own session, stdin from /dev/null, output appended to
/// `log`), writes its pid to `pid_file`, and checks that it is still running a moment
/// later, so a daemon that rejects its arguments fails `up` instead of leaving a lab
/// without a switch.
/// The lab's switch daemons' nice value (see [`spawn_daemon`]).
pub const LAB_SWITCH_NICE: libc::c_int = -10;

fn spawn_daemon(argv: &[String], pid_file: &Path, log: &Path) -> Result<u32, LabError> {
    let open_log = || {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(io_err(format!("cannot open {}", log.display())))
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(open_log()?)
        .stderr(open_log()?);
    // SAFETY: the closure runs in the forked child before exec and makes only raw system
    // calls (setsid, setpriority), which allocate nothing and take no lock
    // (async-signal-safe). A new session detaches the daemon from the terminal, so
    // neither ^C nor closing the shell that ran `lab up` reaches it.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            // The switch daemon stands in for switch hardware, which shares no cores
            // with the hosts: it runs ahead of them (nice −10), so a loaded machine
            // slows the hosts, not the fabric (measured: under two busy simulators its
            // receive rings overflowed, thousands of frames per port). Best effort:
            // without the privilege it runs at the default priority.
            let _ = rustix::process::setpriority_process(None, LAB_SWITCH_NICE);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(io_err(format!("cannot start {}", show(argv))))?;
    // `ip netns exec` execs the daemon in place, so this pid is the daemon's.
    let pid = child.id();
    fs::write(pid_file, format!("{pid}\n"))
        .map_err(io_err(format!("cannot write {}", pid_file.display())))?;
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        if let Some(status) = child
            .try_wait()
            .map_err(io_err("cannot wait for the switch daemon"))?
        {
            let text = fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(10).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            // The log goes with the lab's state directory on teardown: quote it now.
            return Err(LabError::SwitchDied {
                status: status.to_string(),
                tail: tail.join("\n"),
            });
        }
        sleep(Duration::from_millis(20));
    }
    Ok(pid)
}

/// Kills lab `name`'s switch daemon (SIGKILL: a crash, its tables and queued frames
/// lost) and starts it again with the same arguments and `extra` ones, in the same
/// namespace, logging to the same file; the pid file then names the new daemon, so
/// `lab down` stops it. Returns once the new daemon's control socket answers (within
/// 5 s). Only a single-switch lab (`lab up --switch`) has one switch to restart.
pub fn restart_switch(name: &str, extra: &[&str]) -> Result<(), LabError> {
    let dir = state_dir(name);
    let pid_file = dir.join("switch.pid");
    let pid: i32 = fs::read_to_string(&pid_file)
        .map_err(io_err(format!("cannot read {}", pid_file.display())))?
        .trim()
        .parse()
        .map_err(|_| invalid("switch pid file", pid_file.display().to_string()))?;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline"))
        .map_err(io_err(format!("switch daemon {pid} is not running")))?;
    let mut argv: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if !argv.iter().any(|a| a == "switch") {
        return Err(invalid(
            "switch daemon",
            format!("pid {pid} runs {argv:?}, not `rocast switch`"),
        ));
    }
    // `ip netns exec` exec'd in place: run the daemon in its namespace again.
    let mut full = vec![
        "ip".to_string(),
        "netns".into(),
        "exec".into(),
        ns_switch(name),
    ];
    full.append(&mut argv);
    full.extend(extra.iter().map(|s| s.to_string()));
    if let Err(e) = send_signal(pid, Signal::KILL) {
        return Err(io_err(format!("cannot kill switch daemon {pid}"))(e));
    }
    // Wholly gone before the new daemon binds the same control socket and ports: a
    // dying process closes its files last, and a client that reached the old control
    // socket meanwhile would wait for an answer that never comes. Gone means reaped or
    // a zombie (whose files are closed); a process in exit has no cmdline any more, so
    // that is no test.
    let gone_by = Instant::now() + Duration::from_secs(5);
    let alive = || {
        fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
            st.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                != Some("Z")
        })
    };
    while alive() && Instant::now() < gone_by {
        sleep(Duration::from_millis(10));
    }
    let log = dir.join("switch.log");
    spawn_daemon(&full, &pid_file, &log)?;
    // Up once its control socket takes a connection (the old daemon's is closed by
    // now, so only the new one can). A connection, not an answer: a switch busy with
    // a transfer's retransmissions may take longer to answer than to be up.
    let socket = switch_socket(name);
    let up_by = Instant::now() + Duration::from_secs(5);
    loop {
        match std::os::unix::net::UnixStream::connect(&socket) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > up_by => {
                let text = fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(5).collect();
                return Err(invalid(
                    "restarted switch",
                    format!(
                        "{} takes no connection after 5 s ({e}); its log ends: {}",
                        socket.display(),
                        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                    ),
                ));
            }
            Err(_) => sleep(Duration::from_millis(20)),
        }
    }
}

// ---------------------------------------------------------------------------------
// Down.

/// What [`down`] removed.
#[derive(Debug, Default)]
pub struct DownReport {
    pub name: String,
    /// Processes signalled (pid-file daemons and anything else in the namespaces).
    pub killed: Vec<i32>,
    pub namespaces: Vec<String>,
    pub state_dir_removed: bool,
}

impl DownReport {
    /// Whether there was nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.killed.is_empty() && self.namespaces.is_empty() && !self.state_dir_removed
    }
}

impl fmt::Display for DownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return write!(f, "lab '{}': nothing was there", self.name);
        }
        write!(f, "lab '{}' down:", self.name)?;
        if !self.killed.is_empty() {
            let p: Vec<String> = self.killed.iter().map(|p| p.to_string()).collect();
            write!(f, " stopped pid {};", p.join(", "))?;
        }
        write!(
            f,
            " deleted {} namespace{}",
            self.namespaces.len(),
            if self.namespaces.len() == 1 { "" } else { "s" }
        )?;
        if self.state_dir_removed {
            write!(f, "; removed {}", state_dir(&self.name).display())?;
        }
        Ok(())
    }
}

/// Removes lab `name`: stops its processes, deletes every namespace named
/// `rocast-<name>-*`, removes its state directory. Works from whatever is left after a
/// crash (namespaces without state, state without namespaces); succeeds with an empty
/// report when nothing is there.
pub fn down(name: &str) -> Result<DownReport, LabError> {
    require_root()?;
    validate_name(name)?;
    teardown(name)
}

fn teardown(name: &str) -> Result<DownReport, LabError> {
    let mut report = DownReport {
        name: name.into(),
        ..Default::default()
    };
    let mut problems = Vec::new();
    let dir = state_dir(name);
    let namespaces = lab_namespaces(name)?;

    // Processes first: a namespace that still holds a process survives `ip netns del`
    // (only its name goes), keeping its veths and the daemon alive.
    let mut pids = BTreeSet::new();
    for pid in pid_file_pids(&dir) {
        // A pid file can outlive its process and the pid be reused; only signal a
        // process that is in one of the lab's namespaces or is a rocast.
        if in_namespaces(pid, &namespaces) || cmdline(pid).contains("rocast") {
            pids.insert(pid);
        }
    }
    for ns in &namespaces {
        if let Ok(out) = run_cmd(&v(&["ip", "netns", "pids", ns])) {
            pids.extend(out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
        }
    }
    pids.remove(&(std::process::id() as i32));
    let pids: Vec<i32> = pids.into_iter().filter(|&p| alive(p)).collect();
    if !pids.is_empty() {
        stop(&pids);
        for &p in &pids {
            if alive(p) {
                problems.push(format!("pid {p} survived SIGKILL"));
            }
        }
        report.killed = pids;
    }

    for ns in namespaces {
        match run_cmd(&v(&["ip", "netns", "del", &ns])) {
            Ok(_) => report.namespaces.push(ns),
            Err(e) => problems.push(e.to_string()),
        }
    }

    match fs::remove_dir_all(&dir) {
        Ok(()) => report.state_dir_removed = true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => problems.push(format!("cannot remove {}: {e}", dir.display())),
    }
    if problems.is_empty() {
        Ok(report)
    } else {
        Err(LabError::Teardown(problems))
    }
}

fn pid_file_pids(dir: &Path) -> Vec<i32> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "pid"))
        .filter_map(|e| fs::read_to_string(e.path()).ok())
        .filter_map(|s| s.trim().parse::<i32>().ok())
        .filter(|&p| p > 1)
        .collect()
}

fn cmdline(pid: i32) -> String {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn in_namespaces(pid: i32, namespaces: &[String]) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(own) = fs::metadata(format!("/proc/{pid}/ns/net")) else {
        return false;
    };
    namespaces.iter().any(|ns| {
        fs::metadata(Path::new("/run/netns").join(ns))
            .map(|m| m.ino() == own.ino() && m.dev() == own.dev())
            .unwrap_or(false)
    })
}

/// Whether `pid` exists and is not a zombie (a zombie holds no namespace and cannot be
/// killed; its parent reaps it).
fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the ")" that closes the command name.
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// kill(2) to one process; a pid that names no single process (0 or negative: a
/// process group) is refused as no such process.
fn send_signal(pid: i32, sig: Signal) -> io::Result<()> {
    let pid = rustix::process::Pid::from_raw(pid.max(0))
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    rustix::process::kill_process(pid, sig).map_err(io::Error::from)
}

/// SIGTERM, up to ~1 s for a clean exit, then SIGKILL and up to ~5 s more.
fn stop(pids: &[i32]) {
    let wait_gone = |limit: Duration| {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline && pids.iter().any(|&p| alive(p)) {
            sleep(Duration::from_millis(20));
        }
    };
    for &p in pids {
        let _ = send_signal(p, Signal::TERM);
    }
    wait_gone(Duration::from_secs(1));
    for &p in pids.iter().filter(|&&p| alive(p)) {
        let _ = send_signal(p, Signal::KILL);
    }
    // A killed process still has its memory and sockets to release; on a machine at
    // several times its cores' load that took over a second (parallel lab tests
    // beside a simulator run).
    wait_gone(Duration::from_secs(5));
}

// ---------------------------------------------------------------------------------
// Status and exec.

/// One namespace as `status` sees it.
#[derive(Debug)]
pub struct NsStatus {
    pub name: String,
    /// `ip -br addr` lines.
    pub addrs: String,
    /// `tc qdisc show` lines.
    pub qdiscs: String,
}

/// The switch daemon as `status` sees it.
#[derive(Debug)]
pub struct DaemonStatus {
    /// Which daemon: `switch` (one-switch lab), or `agg`, `tor0`, … (two-tier lab).
    pub name: String,
    pub pid: i32,
    pub alive: bool,
}

/// What `rocast lab status` shows.
#[derive(Debug)]
pub struct LabStatus {
    pub name: String,
    pub state: Option<LabState>,
    pub namespaces: Vec<NsStatus>,
    /// Every switch daemon the lab started (none without `--switch`), by name.
    pub switches: Vec<DaemonStatus>,
}

/// The lab's state file, namespaces (addresses, qdiscs) and switch daemon. An error
/// ([`LabError::NotUp`]) when neither state nor namespaces exist.
pub fn status(name: &str) -> Result<LabStatus, LabError> {
    require_root()?;
    validate_name(name)?;
    let dir = state_dir(name);
    let namespaces = lab_namespaces(name)?;
    if namespaces.is_empty() && !dir.exists() {
        return Err(LabError::NotUp {
            name: name.into(),
            prefix: ns_prefix(name),
        });
    }
    let grab = |argv: Vec<String>| run_cmd(&argv).unwrap_or_else(|e| format!("({e})"));
    let namespaces = namespaces
        .into_iter()
        .map(|ns| NsStatus {
            addrs: grab(v(&["ip", "-n", &ns, "-br", "addr", "show"])),
            qdiscs: grab(v(&["tc", "-n", &ns, "qdisc", "show"])),
            name: ns,
        })
        .collect();
    // One pid file per daemon: switch.pid, or agg.pid and tor<t>.pid (sorted by name).
    let mut switches: Vec<DaemonStatus> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let name = path.file_stem()?.to_str()?.to_string();
            if path.extension()? != "pid" {
                return None;
            }
            let pid = fs::read_to_string(&path).ok()?.trim().parse::<i32>().ok()?;
            Some(DaemonStatus {
                alive: alive(pid),
                name,
                pid,
            })
        })
        .collect();
    switches.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(LabStatus {
        name: name.into(),
        state: LabState::load(name),
        namespaces,
        switches,
    })
}

impl fmt::Display for LabStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            Some(s) => writeln!(f, "lab {}: {s}", self.name)?,
            None => writeln!(
                f,
                "lab {}: no state file in {} (crashed? `rocast lab down --name {}` removes what is left)",
                self.name,
                state_dir(&self.name).display(),
                self.name
            )?,
        }
        for ns in &self.namespaces {
            writeln!(f, "{}", ns.name)?;
            for l in ns.addrs.lines().filter(|l| !l.trim().is_empty()) {
                writeln!(f, "  {}", l.trim_end())?;
            }
            for l in ns.qdiscs.lines().filter(|l| !l.trim().is_empty()) {
                writeln!(f, "  {}", l.trim_end())?;
            }
        }
        if self.switches.is_empty() {
            writeln!(f, "switch daemon: none")?;
        }
        for d in &self.switches {
            if d.alive {
                writeln!(f, "switch daemon {}: pid {} running", d.name, d.pid)?;
            } else {
                writeln!(
                    f,
                    "switch daemon {}: pid {} NOT running (see {})",
                    d.name,
                    d.pid,
                    state_dir(&self.name)
                        .join(format!("{}.log", d.name))
                        .display()
                )?;
            }
        }
        Ok(())
    }
}

/// `ip netns exec <ns of host> argv…` for host `h<i>` or `sw` of lab `name`, checked to
/// exist. The caller runs it (or `exec`s it, to hand over its exit status as is).
pub fn exec_command(name: &str, host: &str, argv: &[String]) -> Result<Command, LabError> {
    require_root()?;
    validate_name(name)?;
    if argv.is_empty() {
        return Err(invalid("command", "nothing to run"));
    }
    let ns = host_namespace(name, host)?;
    if !lab_namespaces(name)?.contains(&ns) {
        let why = match LabState::load(name) {
            Some(s) => format!("the lab has h0..h{} and sw", s.hosts - 1),
            None => format!("no namespace {ns} (is the lab up?)"),
        };
        return Err(LabError::NoSuchHost {
            name: name.into(),
            host: host.into(),
            why,
        });
    }
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns]).args(argv);
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(hosts: usize) -> LabOptions {
        LabOptions {
            hosts,
            ..Default::default()
        }
    }

    fn err_of(o: LabOptions) -> String {
        LabSpec::new(o).expect_err("should be rejected").to_string()
    }

    #[test]
    fn host_counts_outside_1_to_64_are_rejected() {
        assert!(err_of(opts(0)).contains("--hosts"));
        assert!(err_of(opts(65)).contains("1..=64"));
        assert!(LabSpec::new(opts(1)).is_ok());
        assert!(LabSpec::new(opts(64)).is_ok());
    }

    #[test]
    fn rates_must_be_digits_and_a_unit() {
        for bad in [
            "",
            "1",
            "gbit",
            "1 gbit",
            "1gbit;",
            "10GB/s",
            "-1gbit",
            "1furlong",
            "0gbit",
            "1gbit rate",
            "$(x)",
        ] {
            let e = err_of(LabOptions {
                rate: bad.into(),
                ..opts(2)
            });
            assert!(e.contains("--rate"), "{bad:?}: {e}");
        }
        for (good, bps) in [
            ("1gbit", 1_000_000_000),
            ("100Mbit", 100_000_000),
            ("10kbit", 10_000),
            // rocast's rates are bits whatever the spelling (tc's "mbps" is bytes):
            ("1mbps", 1_000_000),
            ("10Gbps", 10_000_000_000),
            ("1.5gbit", 1_500_000_000),
        ] {
            let s = LabSpec::new(LabOptions {
                rate: good.into(),
                ..opts(2)
            })
            .unwrap();
            assert_eq!(s.rate_bps(), bps, "{good}");
        }
    }

    #[test]
    fn delays_take_rocast_units_in_whole_microseconds() {
        for bad in ["10", "us", "10us x", "10ns", "1.5us", "-1us", "10xs"] {
            let e = err_of(LabOptions {
                delay: bad.into(),
                ..opts(2)
            });
            assert!(e.contains("--delay"), "{bad:?}: {e}");
        }
        for (good, tc) in [
            ("0us", "0us"),
            ("10us", "10us"),
            ("10 us", "10us"),
            ("10µs", "10us"),
            ("1ms", "1000us"),
            ("1.5ms", "1500us"),
            ("2msec", "2000us"),
            ("1s", "1000000us"),
            ("10000ns", "10us"),
        ] {
            let s = LabSpec::new(LabOptions {
                delay: good.into(),
                ..opts(2)
            })
            .unwrap();
            assert_eq!(s.opts.delay, tc, "{good}");
        }
    }

    #[test]
    fn loss_must_be_in_0_to_1() {
        for bad in [-0.1, 1.0, 1.5, f64::NAN, f64::INFINITY] {
            let e = err_of(LabOptions {
                loss: Some(bad),
                ..opts(2)
            });
            assert!(e.contains("--loss"), "{bad}: {e}");
        }
        LabSpec::new(LabOptions {
            loss: Some(0.0),
            ..opts(2)
        })
        .unwrap();
        LabSpec::new(LabOptions {
            loss: Some(0.999),
            ..opts(2)
        })
        .unwrap();
        // --loss-host needs --loss and an existing host.
        assert!(err_of(LabOptions {
            loss_host: Some(0),
            ..opts(2)
        })
        .contains("needs --loss"));
        assert!(err_of(LabOptions {
            loss: Some(0.1),
            loss_host: Some(2),
            ..opts(2)
        })
        .contains("--loss-host"));
        // tbf cannot drop.
        assert!(err_of(LabOptions {
            loss: Some(0.1),
            shaper: ShaperChoice::Tbf,
            ..opts(2)
        })
        .contains("tbf"));
    }

    #[test]
    fn names_subnets_and_mtus_are_checked() {
        for bad in ["", "a-b", "a b", "x/y", "..", "abcdefghijklmnopqrstuvwxy"] {
            assert!(
                err_of(LabOptions {
                    name: bad.into(),
                    ..opts(2)
                })
                .contains("--name"),
                "{bad:?}"
            );
        }
        for bad in ["10.77", "10.77.0.0", "10.77.256", "10.77.x", "10..0"] {
            assert!(
                err_of(LabOptions {
                    subnet: bad.into(),
                    ..opts(2)
                })
                .contains("--subnet"),
                "{bad:?}"
            );
        }
        assert!(err_of(LabOptions { mtu: 67, ..opts(2) }).contains("--mtu"));
    }

    #[test]
    fn subnets_are_a_unicast_slash_24_in_either_spelling() {
        assert_eq!(parse_subnet("10.78.0").unwrap(), [10, 78, 0]);
        assert_eq!(parse_subnet("10.78.0.0/24").unwrap(), [10, 78, 0]);
        assert_eq!(parse_subnet("192.168.7.0/24").unwrap(), [192, 168, 7]);
        for (bad, why) in [
            ("224.1.2.0/24", "multicast"),
            ("239.77.0", "multicast"),
            ("0.1.2.0/24", "0.0.0.0/8"),
            ("127.0.0", "loopback"),
            ("240.0.0.0/24", "reserved"),
            ("255.255.255", "reserved"),
            ("10.78.0.0/25", "too small"),
            ("10.78.0.0/30", "too small"),
            ("10.78.0.0/16", "one /24"),
            ("10.78.0.9/24", "host bits"),
            ("10.78.0.0/33", "three octets"),
            ("10.78.0.0/", "three octets"),
            ("10.78.0/24", "three octets"),
            ("10.78.0.0.0/24", "three octets"),
        ] {
            let e = parse_subnet(bad).unwrap_err().to_string();
            assert!(e.contains("--subnet") && e.contains(why), "{bad:?}: {e}");
        }
        // The spec keeps the three octets, whichever spelling came in.
        let spec = LabSpec::new(LabOptions {
            subnet: "10.78.0.0/24".into(),
            ..opts(2)
        })
        .unwrap();
        assert_eq!(spec.options().subnet, "10.78.0");
    }

    #[test]
    fn the_switch_group_space_follows_the_subnet() {
        let switch = || Medium::Switch {
            exe: "/bin/rocast".into(),
        };
        let spec = |subnet: &str, space: Option<&str>| {
            LabSpec::new(LabOptions {
                subnet: subnet.into(),
                group_space: space.map(str::to_string),
                medium: switch(),
                ..opts(4)
            })
        };
        let s = spec("10.78.0.0/24", None).unwrap();
        assert_eq!(s.group_space().unwrap().to_string(), "10.78.0.128/25");
        let daemon = show(plan(&s, Shaper::Netem).last().unwrap());
        assert!(daemon.contains("--group-space 10.78.0.128/25"), "{daemon}");
        assert!(daemon.contains("--host 10.78.0.1@0="), "{daemon}");
        let s = spec("10.78.0", Some("10.78.0.64/26")).unwrap();
        assert_eq!(s.group_space().unwrap().to_string(), "10.78.0.64/26");
        let state = LabState::from_spec(&s, Shaper::Netem);
        assert_eq!(state.group_space.as_deref(), Some("10.78.0.64/26"));
        assert!(
            state.to_string().contains("group space 10.78.0.64/26"),
            "{state}"
        );
        for (space, why) in [
            ("10.79.0.128/25", "not inside the subnet"),
            ("10.78.0.0/16", "not inside the subnet"),
            ("10.78.0.0/24", "holds host addresses"),
            ("10.78.0.0/29", "holds host addresses"),
            ("10.78.0.4/32", "holds host addresses"),
            ("10.78.0.130/25", "--group-space"),
            ("nonsense", "--group-space"),
        ] {
            let e = spec("10.78.0", Some(space)).unwrap_err().to_string();
            assert!(e.contains(why), "{space}: {e}");
        }
        // Hosts 1..=4: the first free address can be a group space of its own.
        assert!(spec("10.78.0", Some("10.78.0.5/32")).is_ok());
        // Without the daemon nothing answers for group addresses.
        let e = err_of(LabOptions {
            group_space: Some("10.77.0.128/25".into()),
            ..opts(2)
        });
        assert!(e.contains("needs --switch"), "{e}");
        assert_eq!(
            LabSpec::new(opts(2)).unwrap().group_space(),
            None,
            "no switch, no group space"
        );
    }

    #[test]
    fn names_and_addresses() {
        assert_eq!(ns_host("lab", 3), "rocast-lab-h3");
        assert_eq!(ns_switch("lab"), "rocast-lab-sw");
        assert_eq!(ns_prefix("lab"), "rocast-lab-");
        assert!(ns_probe("lab").starts_with(&ns_prefix("lab")));
        assert_eq!(host_ip("10.77.0", 0), "10.77.0.1");
        assert_eq!(host_ip("192.168.5", 63), "192.168.5.64");
        assert_eq!(host_mac(0), "02:72:63:00:00:01");
        assert_eq!(host_mac(9), "02:72:63:00:00:0a");
        assert_eq!(host_mac(63), "02:72:63:00:00:40");
        assert_eq!(switch_port_mac(0), "02:72:63:ff:00:01");
        assert_eq!(switch_port_mac(15), "02:72:63:ff:00:10");
        assert_eq!(host_namespace("lab", "h12").unwrap(), "rocast-lab-h12");
        assert_eq!(host_namespace("lab", "sw").unwrap(), "rocast-lab-sw");
        for bad in ["h", "x1", "h-1", "h1a", "H1", ""] {
            assert!(host_namespace("lab", bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            switch_socket("t1"),
            PathBuf::from("/run/rocast-lab/t1/switch.sock")
        );
    }

    #[test]
    fn loss_percentages_print_short() {
        assert_eq!(format_percent(1.0), "1%");
        assert_eq!(format_percent(0.07 * 100.0), "7%");
        assert_eq!(format_percent(0.5), "0.5%");
        assert_eq!(format_percent(0.0125 * 100.0), "1.25%");
    }

    fn lines(p: &[Vec<String>]) -> Vec<String> {
        p.iter().map(|c| c.join(" ")).collect()
    }

    /// The exact commands of a 2-host bridged lab with loss toward h1: pinned, so any
    /// change to what `up` does to the machine shows up here.
    #[test]
    fn two_host_plan_is_pinned() {
        let spec = LabSpec::new(LabOptions {
            name: "lab".into(),
            hosts: 2,
            loss: Some(0.01),
            loss_host: Some(1),
            medium: Medium::Bridge,
            ..Default::default()
        })
        .unwrap();
        let sysctl =
            "sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1";
        let expect: Vec<String> = [
            "ip netns add rocast-lab-sw".to_string(),
            format!("ip netns exec rocast-lab-sw {sysctl}"),
            "ip -n rocast-lab-sw link set lo up".into(),
            "ip netns add rocast-lab-h0".into(),
            format!("ip netns exec rocast-lab-h0 {sysctl}"),
            "ip -n rocast-lab-h0 link set lo up".into(),
            "ip link add eth0 netns rocast-lab-h0 address 02:72:63:00:00:01 mtu 9000 type veth peer name p0 netns rocast-lab-sw address 02:72:63:ff:00:01 mtu 9000".into(),
            "ip -n rocast-lab-h0 addr add 10.77.0.1/24 dev eth0".into(),
            "ip -n rocast-lab-h0 link set eth0 up".into(),
            "ip -n rocast-lab-sw link set p0 up".into(),
            "tc -n rocast-lab-h0 qdisc replace dev eth0 root netem limit 10000 rate 1gbit delay 10us".into(),
            "tc -n rocast-lab-sw qdisc replace dev p0 root netem limit 10000 rate 1gbit delay 10us".into(),
            "ip netns add rocast-lab-h1".into(),
            format!("ip netns exec rocast-lab-h1 {sysctl}"),
            "ip -n rocast-lab-h1 link set lo up".into(),
            "ip link add eth0 netns rocast-lab-h1 address 02:72:63:00:00:02 mtu 9000 type veth peer name p1 netns rocast-lab-sw address 02:72:63:ff:00:02 mtu 9000".into(),
            "ip -n rocast-lab-h1 addr add 10.77.0.2/24 dev eth0".into(),
            "ip -n rocast-lab-h1 link set eth0 up".into(),
            "ip -n rocast-lab-sw link set p1 up".into(),
            "tc -n rocast-lab-h1 qdisc replace dev eth0 root netem limit 10000 rate 1gbit delay 10us".into(),
            "tc -n rocast-lab-sw qdisc replace dev p1 root netem limit 10000 rate 1gbit delay 10us loss 1%".into(),
            "ip -n rocast-lab-sw link add br0 type bridge mcast_snooping 0".into(),
            "ip -n rocast-lab-sw link set p0 master br0".into(),
            "ip -n rocast-lab-sw link set p1 master br0".into(),
            "ip -n rocast-lab-sw link set br0 mtu 9000 up".into(),
        ]
        .into();
        assert_eq!(lines(&plan(&spec, Shaper::Netem)), expect);
    }

    #[test]
    fn loss_without_loss_host_is_on_every_switch_port_only() {
        let spec = LabSpec::new(LabOptions {
            hosts: 3,
            loss: Some(0.05),
            ..Default::default()
        })
        .unwrap();
        let tc: Vec<String> = lines(&plan(&spec, Shaper::Netem))
            .into_iter()
            .filter(|l| l.starts_with("tc "))
            .collect();
        assert_eq!(tc.len(), 6);
        for l in &tc {
            assert_eq!(l.ends_with("loss 5%"), l.contains("rocast-lab-sw"), "{l}");
        }
    }

    #[test]
    fn proc_net_dev_gives_packets_and_drops_per_interface() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
             face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
             lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n  \
             eth0: 1082000    1000    0    7    0     0          0         0     5000      50    0    2    0     0       0          0\n";
        let m = parse_proc_net_dev(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m["eth0"],
            NetDevCounters {
                rx_packets: 1000,
                rx_dropped: 7,
                tx_dropped: 2
            }
        );
        assert_eq!(m["lo"], NetDevCounters::default());
    }

    #[test]
    fn qdisc_drops_sums_every_qdisc() {
        let text = "qdisc tbf 8001: root refcnt 2 rate 10Gbit burst 1250000b lat 72.1s \n Sent 4113852 bytes 1021 pkt (dropped 3, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\nqdisc noqueue 0: dev lo root refcnt 2 \n Sent 0 bytes 0 pkt (dropped 12, overlimits 0 requeues 0) \n";
        assert_eq!(qdisc_drops(text), 15);
        assert_eq!(qdisc_drops("qdisc noqueue 0: dev lo root refcnt 2\n"), 0);
    }

    #[test]
    fn tbf_plan_shapes_rate_only() {
        let spec = LabSpec::new(LabOptions {
            hosts: 1,
            rate: "1gbit".into(),
            ..Default::default()
        })
        .unwrap();
        let tc: Vec<String> = lines(&plan(&spec, Shaper::Tbf))
            .into_iter()
            .filter(|l| l.starts_with("tc "))
            .collect();
        // burst: 1 ms at 1 Gbit/s = 125000 bytes; limit: 10000 frames of 9014 bytes.
        assert_eq!(
            tc,
            [
                "tc -n rocast-lab-h0 qdisc replace dev eth0 root tbf rate 1gbit burst 125000 limit 90140000",
                "tc -n rocast-lab-sw qdisc replace dev p0 root tbf rate 1gbit burst 125000 limit 90140000",
            ]
        );
    }

    #[test]
    fn switch_plan_ends_with_the_daemon() {
        let spec = LabSpec::new(LabOptions {
            name: "x".into(),
            hosts: 3,
            medium: Medium::Switch {
                exe: "/usr/bin/rocast".into(),
            },
            ..Default::default()
        })
        .unwrap();
        let steps = plan_steps(&spec, Shaper::Netem);
        assert!(!steps.iter().any(|s| show(s.argv()).contains("br0")));
        // Offloads off on both ends of every link the daemon switches.
        let ethtool: Vec<String> = steps
            .iter()
            .map(|s| show(s.argv()))
            .filter(|c| c.contains("ethtool"))
            .collect();
        assert_eq!(ethtool.len(), 6);
        assert!(ethtool[1].starts_with("ip netns exec rocast-x-sw ethtool -K p0 tx off"));
        assert_eq!(
            steps.last().unwrap(),
            &Step::SpawnDaemon {
                argv: v(&[
                    "ip",
                    "netns",
                    "exec",
                    "rocast-x-sw",
                    "/usr/bin/rocast",
                    "switch",
                    "--port",
                    "afpacket:p0",
                    "--port",
                    "afpacket:p1",
                    "--port",
                    "afpacket:p2",
                    "--host",
                    "10.77.0.1@0=02:72:63:00:00:01",
                    "--host",
                    "10.77.0.2@1=02:72:63:00:00:02",
                    "--host",
                    "10.77.0.3@2=02:72:63:00:00:03",
                    "--group-space",
                    "10.77.0.128/25",
                    "--control",
                    "/run/rocast-lab/x/switch.sock",
                ]),
                pid_file: "/run/rocast-lab/x/switch.pid".into(),
                log: "/run/rocast-lab/x/switch.log".into(),
            }
        );
    }

    #[test]
    fn state_file_round_trips() {
        let spec = LabSpec::new(LabOptions {
            name: "t".into(),
            hosts: 5,
            rate: "10Gbit".into(),
            loss: Some(0.02),
            loss_host: Some(4),
            medium: Medium::Bridge,
            ..Default::default()
        })
        .unwrap();
        let s = LabState::from_spec(&spec, Shaper::Netem);
        assert_eq!(s.rate, "10gbit");
        assert_eq!(LabState::parse(&s.to_text()), Some(s.clone()));
        assert!(s.to_string().contains("2% toward h4 only"), "{s}");
    }

    /// 4 hosts under 2 ToRs, with the daemon.
    fn two_tier() -> LabOptions {
        LabOptions {
            name: "x".into(),
            hosts: 4,
            medium: Medium::Switch {
                exe: "/bin/rocast".into(),
            },
            tors: 2,
            ..Default::default()
        }
    }

    #[test]
    fn two_tier_labs_need_the_daemon_and_an_even_split() {
        let e = |o: LabOptions| LabSpec::new(o).unwrap_err().to_string();
        assert!(e(LabOptions {
            medium: Medium::Bridge,
            ..two_tier()
        })
        .contains("switch daemon"));
        assert!(e(LabOptions {
            hosts: 5,
            ..two_tier()
        })
        .contains("do not split evenly"));
        assert!(e(LabOptions {
            tors: 0,
            ..two_tier()
        })
        .contains("--tors"));
        let g = |s: &str, h: Vec<usize>| vec![(s.parse().unwrap(), h)];
        assert!(e(LabOptions {
            peel_groups: g("10.0.0.1", vec![1]),
            ..two_tier()
        })
        .contains("not an IPv4 multicast group"));
        assert!(e(LabOptions {
            peel_groups: g("239.1.1.1", vec![4]),
            ..two_tier()
        })
        .contains("no host 4"));
        let one = LabSpec::new(LabOptions {
            peel_groups: g("239.1.1.1", vec![1]),
            ..opts(2)
        });
        assert!(one.unwrap_err().to_string().contains("two-tier"));
    }

    #[test]
    fn two_tier_plan_wires_tors_under_the_agg_with_peel_roles() {
        let spec = LabSpec::new(LabOptions {
            peel_groups: vec![("239.77.0.1".parse().unwrap(), vec![1, 2, 3])],
            capture: Some("/tmp/cap".into()),
            ..two_tier()
        })
        .unwrap();
        let l = lines(&plan(&spec, Shaper::Tbf));
        let has = |s: &str| assert!(l.iter().any(|x| x == s), "no `{s}` in\n{}", l.join("\n"));
        has(
            "ip link add uplink netns rocast-x-tor1 address 02:72:63:fe:02:01 mtu 9000 \
             type veth peer name t1 netns rocast-x-agg address 02:72:63:fe:02:02 mtu 9000",
        );
        has(
            "ip link add eth0 netns rocast-x-h3 address 02:72:63:00:00:04 mtu 9000 \
             type veth peer name p1 netns rocast-x-tor1 address 02:72:63:ff:00:04 mtu 9000",
        );
        has("ip -n rocast-x-h3 addr add 10.77.0.4/24 dev eth0");
        let daemons: Vec<&String> = l.iter().filter(|x| x.contains(" switch ")).collect();
        assert_eq!(daemons.len(), 3, "{daemons:?}");
        assert_eq!(
            daemons[0].as_str(),
            "ip netns exec rocast-x-agg /bin/rocast switch --port afpacket:t0 --port afpacket:t1 \
             --host 10.77.0.1@0=02:72:63:00:00:01 --host 10.77.0.2@0=02:72:63:00:00:02 \
             --host 10.77.0.3@1=02:72:63:00:00:03 --host 10.77.0.4@1=02:72:63:00:00:04 \
             --switch-port 0 --switch-port 1 --peel-role prefix --peel-rack 0=0 --peel-rack 1=1 \
             --group-space 10.77.0.128/25 --control /run/rocast-lab/x/agg.sock --capture /tmp/cap/agg"
        );
        assert_eq!(
            daemons[1].as_str(),
            "ip netns exec rocast-x-tor0 /bin/rocast switch --port afpacket:p0 --port afpacket:p1 \
             --port afpacket:uplink --host 10.77.0.1@0=02:72:63:00:00:01 \
             --host 10.77.0.2@1=02:72:63:00:00:02 --switch-port 2 --peel-role rack --peel-uplink 2 \
             --peel-member 239.77.0.1=1 --group-space 10.77.0.128/25 \
             --control /run/rocast-lab/x/tor0.sock --capture /tmp/cap/tor0"
        );
        assert!(
            daemons[2].contains("--peel-member 239.77.0.1=0,1"),
            "{}",
            daemons[2]
        );
        let names: Vec<String> = switch_daemons(&spec).into_iter().map(|d| d.short).collect();
        assert_eq!(names, ["agg", "tor0", "tor1"]);
        // Loss toward one host: only its ToR drops, only on the host's port.
        let lossy = LabSpec::new(LabOptions {
            loss: Some(0.001),
            loss_host: Some(3),
            ..two_tier()
        })
        .unwrap();
        let l = lines(&plan(&lossy, Shaper::Tbf));
        let daemons: Vec<&String> = l.iter().filter(|x| x.contains(" switch ")).collect();
        assert!(!daemons[0].contains("--loss") && !daemons[1].contains("--loss"));
        assert!(
            daemons[2].contains("--loss 0.001 --loss-port 1 "),
            "{}",
            daemons[2]
        );
        let s = LabState::from_spec(&spec, Shaper::Tbf);
        assert_eq!(LabState::parse(&s.to_text()), Some(s.clone()));
        assert!(
            s.to_string()
                .contains("2 ToRs under one aggregation switch"),
            "{s}"
        );
        // A state file from before the two-tier lab reads as one switch.
        let old = s.to_text().replace("tors=2\n", "");
        assert_eq!(LabState::parse(&old).map(|s| s.tors), Some(1));
        // …and one from before group spaces were recorded reads as none.
        assert_eq!(s.group_space.as_deref(), Some("10.77.0.128/25"));
        let old = s.to_text().replace("group_space=10.77.0.128/25\n", "");
        assert_eq!(LabState::parse(&old).map(|s| s.group_space), Some(None));
    }

    #[test]
    fn down_report_says_when_nothing_was_there() {
        let r = DownReport {
            name: "t".into(),
            ..Default::default()
        };
        assert!(r.is_empty());
        assert!(r.to_string().contains("nothing was there"));
    }
}
