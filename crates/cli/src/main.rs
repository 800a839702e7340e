//! `rocast`: the command line. Each subcommand group lives in its own module; this file
//! only wires them into one clap parser. To add a group, add a variant to [`Command`]
//! and an arm to the `match` in `main`.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

mod bcast_cmd;
mod bench_cmd;
mod huge_pages;
mod lab_bench;
mod lab_cmd;
mod mcast_cmd;
mod output;
mod pcap_cmd;
mod perf_cmd;
mod plot;
mod repro_cmd;
mod sim_cmd;
mod switch_cmd;
mod tree_cmd;
mod ud_bench;

/// The system allocator, with the simulator's large arrays on transparent huge pages
/// ([`huge_pages`]).
#[global_allocator]
static ALLOCATOR: huge_pages::HugePageAdvisingAllocator = huge_pages::HugePageAdvisingAllocator;

#[derive(Debug, Parser)]
#[command(name = "rocast", version, about = "RoCEv2 multicast toolkit")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect, verify and generate RoCEv2 packet captures.
    #[command(subcommand)]
    Pcap(pcap_cmd::PcapCmd),
    /// perftest-style bandwidth and latency tests of the RoCE endpoint over UDP/4791
    /// sockets (server, client), and a 1→N multicast test in a lab (--mcast N).
    Perf(perf_cmd::PerfArgs),
    /// Discrete-event datacenter simulation (fat-tree/leaf-spine, PFC, ECN, DCQCN).
    Sim(sim_cmd::SimCmd),
    /// OSU-style broadcast latency of application-layer multicast (sequential, tree,
    /// chain, RDMC binomial pipeline, ring) in the simulator.
    Bcast(bcast_cmd::BcastCmd),
    /// Build a multicast tree offline (PEEL layer peeling, the symmetric optimum,
    /// Cepheus' hop-by-hop tree, the exact optimum) and PEEL's prefix state.
    Tree(tree_cmd::TreeCmd),
    /// Benchmarks that print figures.
    #[command(subcommand)]
    Bench(bench_cmd::BenchCmd),
    /// The software multicast switch: a daemon on afpacket/dgram ports running IPv4
    /// forwarding, the Cepheus engine and the MRP agent; `--stats` queries a running one.
    Switch(switch_cmd::SwitchCmd),
    /// Multicast on real sockets through `rocast switch`: lead a group (send) or join it.
    #[command(subcommand)]
    Mcast(mcast_cmd::McastCmd),
    /// The papers' figures and tables: --list names them all; run some or all, with
    /// reports, CSV/JSON, plots, provenance and REPORT.md.
    Repro(repro_cmd::ReproCmd),
    /// A test network of namespaces: hosts on shaped veth links to a switch namespace
    /// (bridge or `rocast switch`); up, down, status, exec. Needs root.
    #[command(subcommand)]
    Lab(lab_cmd::LabCmd),
}

/// The parser, with what only the registries know added to the help: `sim --help`
/// lists every preset from the preset registry.
fn parse() -> Cli {
    let presets = format!(
        "Presets (--preset NAME):\n{}",
        rocast_eval::experiments::preset_table()
    );
    let cmd = Cli::command().mut_subcommand("sim", |c| c.after_help(presets));
    let m = cmd.get_matches();
    Cli::from_arg_matches(&m).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    let cli = parse();
    // `rocast … | head -1`: a command that prints ends quietly when its reader has
    // gone, as Unix filters do, instead of panicking in println!. The switch daemon,
    // the lab (which starts it) and repro (which writes to its workers' stdin) keep
    // SIGPIPE ignored, so a vanished peer is an error they report; their own stdout
    // goes through `output::out!`, which stops printing on a closed pipe. `pcap dump`
    // stops on EPIPE itself and exits 0. The others' sockets are TCP (sent with
    // MSG_NOSIGNAL by std) and UDP, which never raise it.
    if !matches!(
        cli.command,
        Command::Switch(_) | Command::Lab(_) | Command::Repro(_) | Command::Pcap(_)
    ) {
        // SAFETY: sets a signal disposition to SIG_DFL before any thread starts; no
        // handler runs. Neither std nor rustix sets a disposition safely.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.command {
        Command::Pcap(cmd) => pcap_cmd::run(cmd),
        Command::Perf(cmd) => perf_cmd::run(cmd),
        Command::Lab(cmd) => lab_cmd::run(cmd),
        Command::Sim(cmd) => finish("rocast sim", sim_cmd::run(cmd)),
        Command::Bench(cmd) => finish("rocast bench", bench_cmd::run(cmd)),
        Command::Switch(cmd) => finish("rocast switch", switch_cmd::run(cmd)),
        Command::Mcast(cmd) => mcast_cmd::run(cmd),
        Command::Bcast(cmd) => finish("rocast bcast", bcast_cmd::run(cmd)),
        Command::Repro(cmd) => finish("rocast repro", repro_cmd::run(cmd)),
        Command::Tree(cmd) => finish("rocast tree", tree_cmd::run(cmd)),
    }
}

/// Exit status of a subcommand that reports failures as one message: 0, or the
/// message on stderr and 2.
fn finish(prefix: &str, r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prefix}: {e}");
            ExitCode::from(2)
        }
    }
}
