//! `rocast sim`: run a datacenter scenario in the discrete-event simulator.

use clap::Args;
use rocast_sim::output::summary::render_summary;
use rocast_sim::run::{run_scenario, RunOptions};
use rocast_sim::scenario::config::Scenario;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SimCmd {
    /// Scenario file (TOML). Without one, the built-in `default` preset runs.
    scenario: Option<PathBuf>,
    /// Run a built-in scenario instead (every preset is listed below and by --list).
    #[arg(long, conflicts_with = "scenario")]
    preset: Option<String>,
    /// List every preset with a one-line description, and exit.
    #[arg(long)]
    list: bool,
    /// Override a scenario key, e.g. --set topology.k=8 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// RNG seed (same seed and scenario give identical outputs).
    #[arg(long)]
    seed: Option<u64>,
    /// Output directory for fct.txt, summary.json, ports.csv and logs.
    #[arg(long, default_value = "sim-out")]
    out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Print the resolved preset's TOML and exit.
    #[arg(long)]
    print_preset: bool,
    /// Print the results as one JSON object on stdout, the text report going to
    /// stderr: a workload run's summary.json; an experiment's `scenario`, `seed`,
    /// `verdicts` and `tables` (each CSV it writes as an array of row objects keyed by
    /// the header, as the NAME.json written beside every CSV).
    #[arg(long)]
    json: bool,
    /// Worker threads (default: every core). A flow-level run is cut into partitions
    /// that run in parallel; an experiment runs its points in parallel. Outputs do
    /// not depend on it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// The most partitions a flow-level run is cut into (default 16; 1: one engine,
    /// the schedule of rocast before partitioned runs). Outputs depend on it, not on
    /// --threads.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    partitions: Option<u32>,
    /// Write an experiment's CSVs without drawing their plots (`rocast bench sim`
    /// times the simulator, not matplotlib).
    #[arg(long)]
    no_plot: bool,
}

/// For `rocast bench sim`: with `ROCAST_BENCH_EVENTS` set, the events every
/// simulation of this process popped, on stderr.
fn report_events() {
    if std::env::var_os("ROCAST_BENCH_EVENTS").is_some() {
        eprintln!(
            "rocast-bench events {}",
            rocast_sim::engine::event_queue::events_total()
        );
    }
}

pub fn run(cmd: SimCmd) -> Result<(), String> {
    let r = run_inner(cmd);
    report_events();
    r
}

fn run_inner(cmd: SimCmd) -> Result<(), String> {
    rocast_eval::report::set_progress(!cmd.quiet);
    if cmd.list {
        print!("{}", rocast_eval::experiments::preset_table());
        return Ok(());
    }
    let mut sets = cmd.sets.clone();
    if let Some(seed) = cmd.seed {
        sets.push(format!("seed={seed}"));
    }
    let (mut sc, base) = match &cmd.scenario {
        Some(path) => Scenario::from_file(path, &sets)?,
        None => {
            let name = cmd.preset.as_deref().unwrap_or("default");
            if cmd.print_preset {
                let text = rocast_eval::experiments::preset_toml(name).ok_or_else(|| {
                    format!(
                        "unknown preset {name:?}; presets: {}",
                        rocast_eval::experiments::registry().preset_names()
                    )
                })?;
                print!("{text}");
                return Ok(());
            }
            (
                rocast_eval::experiments::scenario(name, &sets).map_err(|e| e.to_string())?,
                PathBuf::from("."),
            )
        }
    };
    // With --json the text goes to stderr and stdout carries one JSON object.
    let json = cmd.json;
    macro_rules! say {
        ($($a:tt)*) => {
            if json { eprint!($($a)*) } else { print!($($a)*) }
        };
    }
    macro_rules! sayln {
        ($($a:tt)*) => {
            if json { eprintln!($($a)*) } else { println!($($a)*) }
        };
    }
    sayln!("scenario: {}  (seed {})", sc.title(), sc.seed);
    if let Some(n) = cmd.threads {
        // An experiment's points run on this many threads (not a `--set`: reports
        // list the overrides, and outputs must not depend on the thread count).
        sc.multicast.threads = n;
    }
    if sc.experiment_name().is_some() {
        let report = rocast_eval::run_experiment(&sc, &base).map_err(|e| e.to_string())?;
        say!("{}", report.text);
        if !report.files.is_empty() || !report.capture.is_empty() {
            std::fs::create_dir_all(&cmd.out).map_err(|e| format!("{}: {e}", cmd.out.display()))?;
        }
        if !report.capture.is_empty() {
            let path = cmd.out.join("capture.pcap");
            rocast_sim::output::files::capture_pcap(&path, &report.capture)
                .map_err(|e| e.to_string())?;
            sayln!(
                "capture: {} ({} frames)",
                path.display(),
                report.capture.len()
            );
        }
        // Every file first: a plot may read a sibling (peel-figN-paper.csv).
        let mut tables = serde_json::Map::new();
        for (name, body) in &report.files {
            let path = cmd.out.join(name);
            std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
            if name.ends_with(".csv") {
                let j = crate::output::csv_to_json(body).map_err(|e| format!("{name}: {e}"))?;
                let jp = path.with_extension("json");
                std::fs::write(&jp, crate::output::pretty(&j))
                    .map_err(|e| format!("{}: {e}", jp.display()))?;
                tables.insert(name.clone(), j);
            }
        }
        for (name, _) in &report.files {
            let path = cmd.out.join(name);
            let figure = name
                .strip_suffix(".csv")
                .and_then(rocast_eval::experiments::plot_for_table);
            if let Some(figure) = figure.filter(|_| !cmd.no_plot) {
                let png = path.with_extension("png");
                // A plot that was asked for (not --no-plot) and failed is an error.
                crate::plot::run_plot(figure, &path, &png, &sc.title()).map_err(|e| {
                    format!("plot of {}: {e} (--no-plot skips plots)", path.display())
                })?;
                sayln!(
                    "plot: {} and {}",
                    png.display(),
                    png.with_extension("svg").display()
                );
            }
        }
        if report.files.is_empty() {
            sayln!("(this experiment writes no files; its results are the text above)");
        } else {
            sayln!("outputs in {}/", cmd.out.display());
        }
        if cmd.json {
            let j = serde_json::json!({
                "scenario": sc.title(),
                "overrides": sc.overrides,
                "seed": sc.seed,
                "verdicts": rocast_eval::verdict::to_json(&report.verdicts),
                "tables": tables,
            });
            println!("{}", crate::output::pretty(&j));
        }
        return Ok(());
    }
    let opts = RunOptions {
        out_dir: Some(cmd.out.clone()),
        progress: !cmd.quiet && sc.output.progress && std::io::stderr().is_terminal(),
        threads: cmd.threads.unwrap_or(0) as usize,
        partitions: cmd.partitions.unwrap_or(0) as usize,
        cancel: None,
    };
    let report = run_scenario(&sc, &base, &opts).map_err(|e| e.to_string())?;
    say!("{}", render_summary(&report));
    sayln!(
        "outputs in {}/ (fct.txt, summary.json, ports.csv)",
        cmd.out.display()
    );
    if cmd.json {
        print!("{}", report.summary_json);
    }
    // A run whose flows did not all finish is a failed run, whatever it printed.
    let t = &report.totals;
    let total = report.results.len() as u64;
    let unfinished = total.saturating_sub(t.flows_finished + t.flows_failed);
    if t.flows_failed > 0 || unfinished > 0 {
        return Err(format!(
            "{} of {total} flows failed and {unfinished} did not finish (see {}/summary.json)",
            t.flows_failed,
            cmd.out.display()
        ));
    }
    Ok(())
}
