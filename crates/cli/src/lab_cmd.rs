//! `rocast lab`: build, inspect, use and remove a test network of namespaces (the
//! runtime's lab). The work is in [`rocast_net::lab`]; this module maps the
//! command line onto it.
//!
//! Exit status: 0 on success (`down` on nothing included); 2 for bad arguments; 1 for
//! any other failure (not root, lab exists, a command failed, `status` of a lab that is
//! not up). `exec` exits with its command's status.

use clap::{Args, Subcommand, ValueEnum};
use rocast_net::lab::{self, Lab, LabError, LabOptions, LabSpec, Medium, ShaperChoice};
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum LabCmd {
    /// Create the namespaces `rocast-<name>-h0`…`h<N-1>` and `rocast-<name>-sw`, a shaped
    /// veth link from each host's eth0 to port `p<i>` of the switch namespace, and
    /// optionally a bridge or the switch daemon there.
    Up(UpArgs),
    /// Stop the lab's processes and delete every namespace `rocast-<name>-*` and the state
    /// in `/run/rocast-lab/<name>`; succeeds when nothing is there.
    Down(NameArg),
    /// Show the lab's parameters, namespaces, addresses, qdiscs and switch daemon.
    Status(NameArg),
    /// Run a command in a lab namespace (`ip netns exec`); exits with its status.
    Exec(ExecArgs),
    /// Run a `transfer` scenario (the one `rocast sim` runs) on real packets: a lab of
    /// `multicast.group` hosts with the switch, one multicast, each member's CRC-32.
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A built-in scenario (e.g. `transfer`)...
    #[arg(long, conflicts_with = "scenario")]
    preset: Option<String>,
    /// ...or a scenario file.
    #[arg(long)]
    scenario: Option<std::path::PathBuf>,
    /// Override a scenario key, as `rocast sim --set`.
    #[arg(long = "set")]
    sets: Vec<String>,
    /// Lab name used for the run (brought up and removed).
    #[arg(long, default_value = "run")]
    name: String,
}

#[derive(Debug, Args)]
pub struct NameArg {
    /// Lab name ([A-Za-z0-9_], no dashes).
    #[arg(long, default_value = "lab")]
    name: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ShaperArg {
    /// netem if the kernel has it, else tbf (rate only; --loss is then an error).
    Auto,
    /// netem (rate, delay, loss) or fail.
    Netem,
    /// tbf: rate only.
    Tbf,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Number of hosts, 1..=64.
    #[arg(long)]
    hosts: usize,
    /// Link rate, each direction, in bits per second (1gbit, 1Gbps and 1G are the same;
    /// the lab hands tc the rate in its own syntax).
    #[arg(long, default_value = "1gbit")]
    rate: String,
    /// One-way delay added on each egress, in whole microseconds with any of rocast's
    /// duration units (10us, 1.5ms, 0.5s; tc's usec/msec/sec too).
    #[arg(long, default_value = "10us")]
    delay: String,
    /// Drop probability in [0, 1) on the switch-side egress (toward the hosts).
    #[arg(long)]
    loss: Option<f64>,
    /// Drop only toward this host (on port `p<I>`); needs --loss.
    #[arg(long, value_name = "I")]
    loss_host: Option<usize>,
    /// MTU of both ends of every link.
    #[arg(long, default_value_t = 9000)]
    mtu: u32,
    /// The hosts' /24, as a block (10.78.0.0/24) or its first three octets
    /// (10.78.0): host i is `<subnet>.(i+1)`. Unicast only (not 0/8, 127/8, 224/4,
    /// 240/4).
    #[arg(long, default_value = "10.77.0")]
    subnet: String,
    /// The switch's group space (McstIDs; `rocast switch --group-space`): a block
    /// inside the subnet that holds no host. Default: the subnet's upper half
    /// (10.77.0.128/25 for 10.77.0.0/24), which is also what `rocast mcast` derives
    /// from `--bind`. Needs --switch.
    #[arg(long, value_name = "CIDR")]
    group_space: Option<String>,
    /// Lab name ([A-Za-z0-9_], no dashes).
    #[arg(long, default_value = "lab")]
    name: String,
    /// Connect the ports with a Linux bridge br0 (a plain L2 broadcast medium).
    #[arg(long, conflicts_with = "switch")]
    bridge: bool,
    /// Start `rocast switch` on the ports in the switch namespace (log, pid and
    /// control socket in `/run/rocast-lab/<name>/`).
    #[arg(long)]
    switch: bool,
    /// Which qdisc shapes the links.
    #[arg(long, value_enum, default_value = "auto")]
    shaper: ShaperArg,
    /// Rack switches: 2 or more builds the two-tier lab (needs --switch): the hosts
    /// split evenly under N ToRs (namespaces tor0, tor1, …; host ports p<j>, `uplink`
    /// to the agg), all under one aggregation switch (agg; port t<t> to ToR t), each running
    /// `rocast switch` with its PEEL role (agg: prefix, rack id t = port t; ToRs: rack,
    /// uplink = the port after the host ports).
    #[arg(long, default_value_t = 1)]
    tors: usize,
    /// Two-tier lab: a PEEL group and its member hosts, GROUP=I[,I…] (e.g.
    /// 239.77.0.1=1,2,3), configured as members on their ToRs (repeatable).
    #[arg(long = "peel-group", value_name = "GROUP=HOSTS")]
    peel_groups: Vec<String>,
    /// Every switch daemon writes its links to DIR/<switch>/portN.pcap (needs --switch).
    #[arg(long, value_name = "DIR")]
    capture: Option<std::path::PathBuf>,
    /// Every switch daemon runs with --fast-path (its groups' new data replicated in
    /// the kernel; needs --switch, no --loss or --capture).
    #[arg(long)]
    fast_path: bool,
}

fn parse_peel_group(s: &str) -> Result<(std::net::Ipv4Addr, Vec<usize>), LabError> {
    let bad = || LabError::Invalid {
        what: "--peel-group",
        msg: format!("{s:?}: expected GROUP=I[,I…]"),
    };
    let (g, hosts) = s.split_once('=').ok_or_else(bad)?;
    let g = g.parse().map_err(|_| bad())?;
    let hosts = hosts
        .split(',')
        .map(|h| h.trim().parse::<usize>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    Ok((g, hosts))
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Lab name.
    #[arg(long, default_value = "lab")]
    name: String,
    /// `h0`…`h<N-1>`, or `sw` for the switch namespace.
    host: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

pub fn run(cmd: LabCmd) -> ExitCode {
    let r = match cmd {
        LabCmd::Up(a) => up(a),
        LabCmd::Down(a) => lab::down(&a.name).map(|r| crate::output::out!("{r}\n")),
        LabCmd::Status(a) => lab::status(&a.name).map(|s| crate::output::out!("{s}")),
        LabCmd::Exec(a) => exec(a),
        LabCmd::Run(a) => {
            return match crate::lab_bench::lab_run(
                a.preset.as_deref(),
                a.scenario.as_deref(),
                &a.sets,
                &a.name,
            ) {
                Ok(text) => {
                    crate::output::out!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("rocast lab run: {e}");
                    ExitCode::from(1)
                }
            }
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocast lab: {e}");
            ExitCode::from(match e {
                LabError::Invalid { .. } => 2,
                _ => 1,
            })
        }
    }
}

fn up(a: UpArgs) -> Result<(), LabError> {
    let medium = if a.bridge {
        Medium::Bridge
    } else if a.switch {
        Medium::Switch {
            exe: std::env::current_exe().map_err(|source| LabError::Io {
                context: "cannot find the rocast binary to run the switch".into(),
                source,
            })?,
        }
    } else {
        Medium::None
    };
    let spec = LabSpec::new(LabOptions {
        name: a.name,
        hosts: a.hosts,
        subnet: a.subnet,
        group_space: a.group_space,
        rate: a.rate,
        delay: a.delay,
        loss: a.loss,
        loss_host: a.loss_host,
        mtu: a.mtu,
        medium,
        shaper: match a.shaper {
            ShaperArg::Auto => ShaperChoice::Auto,
            ShaperArg::Netem => ShaperChoice::Netem,
            ShaperArg::Tbf => ShaperChoice::Tbf,
        },
        tors: a.tors,
        peel_groups: a
            .peel_groups
            .iter()
            .map(|g| parse_peel_group(g))
            .collect::<Result<_, _>>()?,
        capture: a.capture,
        fast_path: a.fast_path,
    })?;
    let lab = Lab::up(&spec)?;
    for w in &lab.warnings {
        eprintln!("rocast lab: warning: {w}");
    }
    let o = spec.options();
    crate::output::out!(
        "lab '{}' up: {} hosts {}..{} on {}.0/24, shaper {}, medium {}\n",
        spec.name(),
        spec.hosts(),
        lab::host_ip(&o.subnet, 0),
        lab::host_ip(&o.subnet, spec.hosts() - 1),
        o.subnet,
        match lab.shaper {
            lab::Shaper::Netem => "netem",
            lab::Shaper::Tbf => "tbf",
        },
        match &o.medium {
            Medium::None => "none".to_string(),
            Medium::Bridge => "bridge br0".to_string(),
            Medium::Switch { .. } if o.tors > 1 => format!(
                "two-tier: {} ToRs under one aggregation switch, switch daemon pids {:?}",
                o.tors, lab.daemon_pids
            ),
            Medium::Switch { .. } => format!("switch daemon pid {}", lab.switch_pid.unwrap_or(0)),
        }
    );
    if let Some(g) = spec.group_space() {
        // `rocast mcast` derives the upper half from --bind; any other block it must
        // be told, or its groups fall back to an overlay.
        if lab::parse_subnet(&o.subnet).is_ok_and(|s| lab::default_group_space(s) == g) {
            crate::output::out!(
                "group space {g} (the subnet's upper half: `rocast mcast`'s default)\n"
            );
        } else {
            crate::output::out!("group space {g}: run `rocast mcast` with --group-space {g} --group-addr ADDR-IN-IT\n");
        }
    }
    crate::output::out!("run commands with `rocast lab exec --name {} h0 -- CMD…`; remove with `rocast lab down --name {}`\n",
        spec.name(),
        spec.name()
    );
    Ok(())
}

/// Replaces this process with `ip netns exec …`, so the command's exit status (or
/// signal) is ours without relaying it.
fn exec(a: ExecArgs) -> Result<(), LabError> {
    // `rocast lab exec h1 -- rocast …` runs this very binary, whether or not a
    // `rocast` is on the PATH inside the namespace.
    let mut argv = a.cmd.clone();
    if argv.first().map(String::as_str) == Some("rocast") {
        if let Ok(me) = std::env::current_exe() {
            argv[0] = me.to_string_lossy().into_owned();
        }
    }
    let mut cmd = lab::exec_command(&a.name, &a.host, &argv)?;
    let e = cmd.exec();
    Err(LabError::Io {
        context: "cannot run ip netns exec".into(),
        source: e,
    })
}
