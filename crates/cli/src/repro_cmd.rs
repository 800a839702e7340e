//! `rocast repro`: the papers' figures and tables as one product. `--list` names every
//! figure and table of the five papers rocast reproduces (paper, figure, what it shows,
//! the command that runs it, its typical time here); `rocast repro [ID…] --out DIR`
//! runs them, each as a child `rocast` process, and writes per figure its report (the
//! paper-vs-rocast verdicts the experiments print), its CSVs with JSON beside them,
//! its plots, and `provenance.json` (rocast version, git commit, the exact command
//! line, seed, wall time, machine); then `REPORT.md` indexes all of them with their
//! verdicts. `--quick` runs the long figures at a smaller, stated scale (the registry
//! says which keys it changes) so that everything finishes in minutes.

use clap::Args;
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;

use rocast_eval::experiment::{AlternativeScale, Paper};
use rocast_eval::verdict::{Tally, Verdict};

#[derive(Debug, Args)]
pub struct ReproCmd {
    /// Figures to run (ids from --list, or a paper: cepheus, peel, tmcf, odbss, rdmc).
    ids: Vec<String>,
    /// Run every figure (about half an hour at --full on a 2-core machine; --list
    /// gives each one's time).
    #[arg(long, conflicts_with = "ids")]
    all: bool,
    /// List every figure and table with its command and typical time, and exit.
    #[arg(long)]
    list: bool,
    /// Print a paper's readings table (every open choice of its presets, the paper's
    /// words, the source, the alternatives) as Markdown, and exit: "cepheus" (Cepheus
    /// and broadcast-select, the default: `docs/cepheus/readings.md`) or "peel" (PEEL
    /// and TMCF: `docs/peel/readings.md`).
    #[arg(long, conflicts_with = "list", num_args = 0..=1, default_missing_value = "cepheus", value_name = "PAPER")]
    readings: Option<String>,
    /// Also run every alternative reading of each figure that has readings (one
    /// `--set` group at a time, at the scale `alternative_scale` states) and the primary
    /// at seeds 2-5, and write `alternatives.md` per figure with each alternative's
    /// verdicts beside the primary's and each claim's 95% interval over the seeds.
    #[arg(long)]
    alternatives: bool,
    /// Run the long figures at the smaller scale the registry states (all of them
    /// finish in minutes on a 2-core machine).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Run every figure at its preset's full scale (the default; `--list` gives the
    /// times).
    #[arg(long)]
    full: bool,
    /// Output directory: one folder per figure and REPORT.md.
    #[arg(long, default_value = "repro-out")]
    out: PathBuf,
    /// Where the figures run: local (child processes here) or dask (a Dask LocalCluster
    /// through the project's Python, or the cluster at --address; python -m
    /// rocast.distribute).
    #[arg(long, default_value = "local", value_parser = ["local", "dask"])]
    backend: String,
    /// Figures run at once (local: child processes; dask: LocalCluster workers). Each
    /// figure is parallel inside already, so 1 suits a small machine.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: u32,
    /// Worker threads of each simulated figure (`rocast sim --threads`; default every
    /// core). The figures' outputs do not depend on it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// A running Dask scheduler (tcp://host:8786) for --backend dask; every worker must
    /// see this binary and --out at the same paths.
    #[arg(long)]
    address: Option<String>,
}

/// What one figure's run returned.
struct JobResult {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    wall_s: f64,
}

/// Runs every `(id, argv)` with `slots` at a time, here (the evaluation's own
/// [`rocast_eval::report::parallel`]); results in order.
fn run_local(jobs: &[(String, Vec<String>)], slots: u32) -> Result<Vec<JobResult>, String> {
    // The ETA counts each figure's typical time (`--list`) still to come, over the slots.
    let figures = all_figures();
    let typical = |id: &str| {
        figures
            .iter()
            .find(|f| f.id == id)
            .map_or(0.0, |f| f.typical_s)
    };
    let started = std::time::Instant::now();
    let total: f64 = jobs.iter().map(|(id, _)| typical(id)).sum();
    let left = std::sync::Mutex::new(total);
    rocast_eval::report::parallel(slots, jobs, |job| {
        let (id, argv) = job;
        let i = jobs.iter().position(|j| std::ptr::eq(j, job)).unwrap_or(0);
        let remaining = {
            let mut l = left.lock().unwrap_or_else(|p| p.into_inner());
            let r = *l;
            *l -= typical(id);
            r
        };
        eprintln!(
            "rocast repro: [{}/{}] {id} (typically {:.0} s; {:.0} s elapsed, about {:.0} min of figures left)",
            i + 1,
            jobs.len(),
            typical(id),
            started.elapsed().as_secs_f64(),
            remaining / slots.max(1) as f64 / 60.0
        );
        let t0 = std::time::Instant::now();
        let o = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|e| format!("{id}: {e}"))?;
        Ok(JobResult {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            wall_s: t0.elapsed().as_secs_f64(),
        })
    })
}

/// Hands the jobs to Dask through `python -m rocast.distribute` (the project's Python,
/// the checkout's python/ first on its path); results in order.
fn run_dask(
    jobs: &[(String, Vec<String>)],
    slots: u32,
    address: Option<&str>,
) -> Result<Vec<JobResult>, String> {
    use std::io::Write as _;
    let root = crate::plot::resource_root().map_err(|e| e.to_string())?;
    let python = crate::plot::python(&root);
    let input = serde_json::Value::Array(
        jobs.iter()
            .map(|(id, argv)| json!({"id": id, "argv": argv}))
            .collect(),
    );
    let mut c = std::process::Command::new(&python);
    c.env("PYTHONPATH", root.join("python"))
        .args(["-m", "rocast.distribute", "--backend", "dask", "--workers"])
        .arg(slots.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    if let Some(a) = address {
        c.args(["--address", a]);
    }
    eprintln!(
        "rocast repro: {} figures to Dask ({})",
        jobs.len(),
        address.unwrap_or("a LocalCluster")
    );
    let mut child = c
        .spawn()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input.to_string().as_bytes())
        .map_err(|e| format!("rocast.distribute: {e}"))?;
    let o = child
        .wait_with_output()
        .map_err(|e| format!("rocast.distribute: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "python -m rocast.distribute failed ({}); is dask installed (bash scripts/install-deps.sh)?",
            o.status
        ));
    }
    let answers: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout)
        .map_err(|e| format!("rocast.distribute's answer: {e}"))?;
    if answers.len() != jobs.len() {
        return Err(format!(
            "rocast.distribute answered {} of {} jobs",
            answers.len(),
            jobs.len()
        ));
    }
    Ok(answers
        .into_iter()
        .map(|a| JobResult {
            code: a["code"].as_i64().map(|c| c as i32),
            stdout: a["stdout"].as_str().unwrap_or_default().to_string(),
            stderr: a["stderr"].as_str().unwrap_or_default().to_string(),
            wall_s: a["wall_s"].as_f64().unwrap_or(f64::NAN),
        })
        .collect())
}

/// A figure as the registry (`rocast_eval::experiment`) gives it, with its paper.
#[derive(Clone, Copy)]
struct Figure {
    of: &'static Paper,
    entry: &'static rocast_eval::experiment::Figure,
}

impl std::ops::Deref for Figure {
    type Target = rocast_eval::experiment::Figure;
    fn deref(&self) -> &Self::Target {
        self.entry
    }
}

/// Every figure and table rocast reproduces, in paper order, from the registry.
fn all_figures() -> Vec<Figure> {
    rocast_eval::experiments::figures()
        .into_iter()
        .map(|(of, entry)| Figure { of, entry })
        .collect()
}

fn select(ids: &[String]) -> Result<Vec<Figure>, String> {
    let all = all_figures();
    if ids.is_empty() {
        return Ok(all);
    }
    let mut out: Vec<Figure> = Vec::new();
    for id in ids {
        let hit: Vec<Figure> = all
            .iter()
            .filter(|f| f.id == id || f.of.key == id)
            .copied()
            .collect();
        if hit.is_empty() {
            return Err(format!(
                "no figure {id:?}: see `rocast repro --list` (or a paper: cepheus, peel, tmcf, odbss, rdmc)"
            ));
        }
        for f in hit {
            if !out.iter().any(|g| g.id == f.id) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

/// The extra arguments the alternatives of a figure run at (`Err`: its alternatives
/// are not run here, and why), so that every alternative of every figure
/// finishes in minutes; the primary runs again at the same scale beside them.
fn alternative_scale(f: &Figure) -> Result<(&'static [&'static str], &'static str), &'static str> {
    match f.alternatives {
        AlternativeScale::Own => Ok((&[], "the figure's own scale")),
        AlternativeScale::At(args, says) => Ok((args, says)),
        AlternativeScale::NotRun(why) => Err(why),
    }
}

/// One alternative's run: the reading's key, the alternative's words, its `--set`s,
/// and the verdicts it gave (`Err`: the run failed, with its error).
struct AlternativeRun {
    key: String,
    value: String,
    sets: Vec<String>,
    /// The sentence that rules it out as the primary reading.
    ruled_out: String,
    verdicts: Result<Vec<Verdict>, String>,
}

/// Seeds besides the presets' own (1) that `--alternatives` reruns the primary with, for
/// the confidence intervals of `alternatives.md`.
const CI_SEEDS: [u64; 4] = [2, 3, 4, 5];
/// The key of those runs' rows, and of the primary's.
const SEED_KEY: &str = "(seed)";
const PRIMARY_KEY: &str = "(primary)";

/// Student's t at 97.5% for n − 1 degrees of freedom, n = 2..=10 (a two-sided 95%
/// interval of a mean of n values): the first entries of `python/rocast/sweep.py`'s
/// table, which the Python sweeps use (this one runs without Python).
fn t975(n: usize) -> Option<f64> {
    const T: [f64; 9] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262,
    ];
    T.get(n.checked_sub(2)?).copied()
}

/// The leading number of a verdict's "rocast" figure ("1.067", "2.4x"), if it has one.
fn leading_number(s: &str) -> Option<f64> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e' || c == '+'))
        .unwrap_or(s.len());
    s[..end].parse().ok().filter(|x: &f64| x.is_finite())
}

/// Mean and the half-width of its two-sided 95% t-interval, if at least two values.
fn mean_ci95(v: &[f64]) -> Option<(f64, f64)> {
    let n = v.len();
    let t = t975(n)?;
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((mean, t * (var / n as f64).sqrt()))
}

/// Runs the primary and every alternative of `readings` with `scale` added, one child
/// `rocast sim` each, `slots` at a time, into `dir/alternatives/`.
fn run_alternatives(
    exe: &std::path::Path,
    readings: &rocast_eval::readings::PresetReadings,
    scale: &[&str],
    dir: &std::path::Path,
    slots: u32,
) -> Result<Vec<AlternativeRun>, String> {
    let preset = readings.preset;
    let not_run = || Err("not run".to_string());
    let mut runs = vec![AlternativeRun {
        key: PRIMARY_KEY.into(),
        value: "every primary reading".into(),
        sets: Vec::new(),
        ruled_out: String::new(),
        verdicts: not_run(),
    }];
    // The primary again under other seeds: the spread of each claim's figure.
    for seed in CI_SEEDS {
        runs.push(AlternativeRun {
            key: SEED_KEY.into(),
            value: format!("the primary readings, seed {seed}"),
            sets: vec![format!("seed={seed}")],
            ruled_out: String::new(),
            verdicts: not_run(),
        });
    }
    for r in readings.readings {
        for a in r.alternatives.iter().filter(|a| !a.sets.is_empty()) {
            runs.push(AlternativeRun {
                key: r.key.to_string(),
                value: a.value.to_string(),
                sets: a.sets.iter().map(|s| s.to_string()).collect(),
                ruled_out: a.ruled_out.to_string(),
                verdicts: not_run(),
            });
        }
    }
    let mut jobs = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let out = dir.join("alternatives").join(format!("{i:02}"));
        std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let _ = std::fs::remove_file(out.join("verdicts.json"));
        let mut argv: Vec<String> = vec![
            exe.to_string_lossy().into_owned(),
            "sim".into(),
            "--preset".into(),
            preset.into(),
        ];
        argv.extend(scale.iter().map(|s| s.to_string()));
        for set in &run.sets {
            argv.push("--set".into());
            argv.push(set.clone());
        }
        argv.extend(["--quiet".into(), "--no-plot".into(), "--out".into()]);
        argv.push(out.to_string_lossy().into_owned());
        jobs.push((format!("{preset} alternative {i}"), argv, out));
    }
    let plain: Vec<(String, Vec<String>)> = jobs
        .iter()
        .map(|(id, argv, _)| (id.clone(), argv.clone()))
        .collect();
    let results = run_local(&plain, slots)?;
    for ((run, (_, _, out)), o) in runs.iter_mut().zip(&jobs).zip(results) {
        run.verdicts = if o.code == Some(0) {
            verdicts(out).and_then(|v| v.ok_or_else(|| "no verdicts.json".to_string()))
        } else {
            Err(o.stderr.lines().last().unwrap_or("failed").to_string())
        };
    }
    Ok(runs)
}

/// `alternatives.md`: each alternative's verdicts beside the primary's, a row per
/// alternative and a column per claim.
fn alternatives_md(f: &Figure, scale_says: &str, runs: &[AlternativeRun]) -> String {
    let mut t = format!(
        "# {} ({}, {}): the result under each alternative reading

Made by `rocast repro {} --alternatives` at {scale_says}; each row is `rocast sim --preset {}` with the row's `--set`s (the readings and what rules each alternative out: `docs/{}/readings.md`). A cell is the verdict word and rocast's figure for that claim; the `(seed)` rows are the primary under other seeds.

",
        f.id,
        f.of.title,
        f.figure,
        f.id,
        f.preset().unwrap_or("?"),
        rocast_eval::readings::paper_of(f.preset().unwrap_or("?"))
    );
    let claims: Vec<String> = runs
        .first()
        .and_then(|r| r.verdicts.as_ref().ok())
        .map(|v| v.iter().map(|x| x.claim.clone()).collect())
        .unwrap_or_default();
    let _ = write!(t, "| reading | alternative | sets | tally |");
    for c in &claims {
        let _ = write!(t, " {} |", c.replace('|', "/"));
    }
    let _ = write!(t, "\n|---|---|---|---|");
    for _ in &claims {
        let _ = write!(t, "---|");
    }
    let _ = writeln!(t);
    for r in runs {
        let _ = write!(
            t,
            "| `{}` | {} | {} |",
            r.key,
            r.value.replace('|', "/"),
            if r.sets.is_empty() {
                "-".to_string()
            } else {
                format!("`{}`", r.sets.join("` `"))
            }
        );
        match &r.verdicts {
            Err(e) => {
                let _ = write!(t, " FAILED: {} |", e.replace('|', "/"));
                for _ in &claims {
                    let _ = write!(t, " - |");
                }
            }
            Ok(v) => {
                let _ = write!(t, " {} |", Tally::of(v).summary());
                for c in &claims {
                    match v.iter().find(|x| &x.claim == c) {
                        Some(x) => {
                            let _ =
                                write!(t, " {}: {} |", x.word.as_str(), x.rocast.replace('|', "/"));
                        }
                        None => {
                            let _ = write!(t, " - |");
                        }
                    }
                }
            }
        }
        let _ = writeln!(t);
    }
    // The primary's figure for each claim over the seeds: mean and 95% interval.
    let seeded: Vec<&Vec<Verdict>> = runs
        .iter()
        .filter(|r| r.key == PRIMARY_KEY || r.key == SEED_KEY)
        .filter_map(|r| r.verdicts.as_ref().ok())
        .collect();
    let mut ci = String::new();
    for c in &claims {
        let values: Vec<f64> = seeded
            .iter()
            .filter_map(|v| v.iter().find(|x| &x.claim == c))
            .filter_map(|x| leading_number(&x.rocast))
            .collect();
        if let Some((mean, half)) = mean_ci95(&values) {
            let paper = seeded
                .first()
                .and_then(|v| v.iter().find(|x| &x.claim == c))
                .map_or("-".to_string(), |x| x.paper.clone());
            let _ = writeln!(
                ci,
                "| {} | {} | {} | {mean:.3} | {:.3} to {:.3} |",
                c.replace('|', "/"),
                paper.replace('|', "/"),
                values
                    .iter()
                    .map(|x| format!("{x:.3}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                mean - half,
                mean + half
            );
        }
    }
    if !ci.is_empty() {
        let _ = writeln!(
            t,
            "
## Seed confidence intervals

The primary readings at seeds 1 (the preset's) and {} at the scale above: each claim's figure per seed, the mean and its two-sided 95% Student-t interval.

| claim | paper | per seed | mean | 95% interval |
|---|---|---|---|---|
{ci}",
            CI_SEEDS.map(|s| s.to_string()).join(", ")
        );
    }
    // Where the primary differs: which alternatives reproduce the claim, and the
    // sentence that rules each out as the primary reading.
    let primary = runs.first().and_then(|r| r.verdicts.as_ref().ok());
    let mut gaps = String::new();
    for v in primary.into_iter().flatten() {
        if !v.word.is_prediction() || v.word == rocast_eval::verdict::Word::Reproduced {
            continue;
        }
        let closing: Vec<&AlternativeRun> = runs[1..]
            .iter()
            .filter(|r| r.key != SEED_KEY)
            .filter(|r| {
                r.verdicts.as_ref().is_ok_and(|vs| {
                    vs.iter().any(|x| {
                        x.claim == v.claim && x.word == rocast_eval::verdict::Word::Reproduced
                    })
                })
            })
            .collect();
        let _ = writeln!(
            gaps,
            "- **{}** ({}: paper {}, rocast {}):",
            v.claim,
            v.word.as_str(),
            v.paper,
            v.rocast
        );
        if closing.is_empty() {
            let _ = writeln!(gaps, "  no single alternative reading reproduces it.");
        }
        for r in closing {
            let _ = writeln!(
                gaps,
                "  reproduced under `{}` ({}); ruled out as the primary by: {}",
                r.sets.join("` `"),
                r.value,
                r.ruled_out
            );
        }
    }
    if !gaps.is_empty() {
        let _ = writeln!(
            t,
            "\n## Where the primary reading differs: the alternatives that close the gap\n\n{gaps}"
        );
    }
    t
}

/// What of a figure matches by construction (its report's "calibrated" verdicts).
fn list() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<24} {:<46} {:<20} {:>9}  what / command",
        "id", "paper", "figure", "full s"
    );
    let figures = all_figures();
    for f in &figures {
        let _ = writeln!(
            s,
            "{:<24} {:<46} {:<20} {:>9.1}  {}\n{:<103}  rocast {}{}",
            f.id,
            f.of.title,
            f.figure,
            f.typical_s,
            f.what,
            "",
            f.args.join(" "),
            if f.quick.is_empty() {
                String::new()
            } else {
                format!("   (--quick: {})", f.quick_says)
            }
        );
        if let Some(c) = f.calibrated {
            let _ = writeln!(s, "{:<103}  calibrated: {c}", "");
        }
    }
    let full: f64 = figures.iter().map(|f| f.typical_s).sum();
    let _ = writeln!(
        s,
        "{} figures and tables; about {:.0} min at full scale on a 2-core machine; --quick runs the long ones smaller",
        figures.len(),
        full / 60.0
    );
    s
}

/// The git commit of the checkout the binary belongs to, when it is one, with
/// `-dirty` when tracked files differ from it.
fn git_commit() -> Option<String> {
    let root = crate::plot::resource_root().ok()?;
    let o = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    if !o.status.success() {
        return None;
    }
    let mut commit = String::from_utf8_lossy(&o.stdout).trim().to_string();
    // Uncommitted changes to tracked files: the commit alone does not say what ran.
    let dirty = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    if dirty {
        commit.push_str("-dirty");
    }
    Some(commit)
}

fn machine() -> serde_json::Value {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    json!({"cores": cores, "memory_gib": mem_kb as f64 / (1 << 20) as f64, "cpu": cpu, "kernel": kernel})
}

/// A `rocast sim --preset P [--set K=V…]` figure's seed and every parameter: the
/// preset's TOML and the overrides, which together fix the run. None for other commands
/// (their command line is all their parameters).
fn parameters(args: &[String]) -> Option<(u64, serde_json::Value)> {
    if args.first().map(String::as_str) != Some("sim")
        || args.get(1).map(String::as_str) != Some("--preset")
    {
        return None;
    }
    let name = args.get(2)?;
    let sets: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--set")
        .map(|w| w[1].clone())
        .collect();
    let sc = rocast_eval::experiments::scenario(name, &sets).ok()?;
    let toml = rocast_eval::experiments::preset_toml(name)?;
    Some((
        sc.seed,
        json!({"preset": name, "preset_toml": toml, "overrides": sets}),
    ))
}

/// A figure's structured verdicts: the `verdicts.json` its experiment wrote (`None`
/// when it wrote none: a command that is not an experiment, or one whose verdicts are
/// not structured yet). Counted from the records, never from the report's text.
fn verdicts(dir: &std::path::Path) -> Result<Option<Vec<Verdict>>, String> {
    let path = dir.join("verdicts.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    rocast_eval::verdict::from_json_text(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(cmd: ReproCmd) -> Result<(), String> {
    if cmd.list {
        crate::output::out!("{}", list());
        return Ok(());
    }
    if let Some(paper) = cmd.readings.as_deref() {
        let Some(&(_, title, papers)) = rocast_eval::readings::DOCUMENTS
            .iter()
            .find(|d| d.0 == paper)
        else {
            return Err(format!(
                "--readings {paper:?}: expected \"cepheus\" or \"peel\""
            ));
        };
        // The default document is what `--readings` alone prints.
        let command = if paper == "cepheus" {
            "rocast repro --readings".to_string()
        } else {
            format!("rocast repro --readings {paper}")
        };
        crate::output::out!(
            "# Readings: {title}\n\nMade by `{command}` (rocast {}, commit {}; no seed: a table, not a run). Every choice the papers leave open, or that rocast had to make, for the presets of {papers}: the paper's words with the section, the value rocast runs (primary), what decided it (the paper's text; then what it cites or the tool it ran; then consistency with its other numbers; never which value matches the figure), and the alternatives with the sentence that rules each out. `rocast sim --preset P --set KEY=VALUE` runs an alternative; `crates/eval/src/readings.rs` holds the table and a test pins every primary to its preset.\n{}",
            env!("CARGO_PKG_VERSION"),
            git_commit().as_deref().unwrap_or("unknown"),
            rocast_eval::readings::markdown(paper)
        );
        return Ok(());
    }
    if cmd.ids.is_empty() && !cmd.all {
        let minutes = all_figures().iter().map(|f| f.typical_s).sum::<f64>() / 60.0;
        return Err(format!(
            "name the figures to run (`rocast repro --list`) or a paper (cepheus, peel, tmcf, odbss, rdmc), or run every figure with --all (about {minutes:.0} min of figure time at full scale on a 2-core machine)"
        ));
    }
    let figures = select(&cmd.ids)?;
    if cmd.address.is_some() && cmd.backend != "dask" {
        return Err("--address names a Dask scheduler: use it with --backend dask".into());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&cmd.out).map_err(|e| format!("{}: {e}", cmd.out.display()))?;
    let commit = git_commit();
    let version = env!("CARGO_PKG_VERSION");
    let scale = if cmd.quick { "quick" } else { "full" };
    let mut index = String::new();
    let _ = writeln!(
        index,
        "# rocast repro: the papers' figures\n\nMade by `{}` (rocast {version}, commit {}), scale {scale}. Each folder has the figure's report (`report.txt`, with the paper-vs-rocast verdicts), its CSVs and JSON, its plots and `provenance.json` (the exact command, seed, wall time, machine).\n\n| id | paper | figure | scale | wall s | verdicts | status |\n|---|---|---|---|---|---|---|",
        std::env::args().collect::<Vec<_>>().join(" "),
        commit.as_deref().unwrap_or("unknown")
    );
    let mut details = String::new();
    let mut failed = Vec::new();
    let t_all = std::time::Instant::now();
    // Every figure's command line and folder first; then the backend runs them.
    let mut plan = Vec::new();
    for f in &figures {
        let dir = cmd.out.join(f.id);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let _ = std::fs::remove_file(dir.join("verdicts.json"));
        // `{out}` in a figure's arguments: its folder (a plot path, for commands whose
        // plot is a flag of its own).
        let mut args: Vec<String> = f
            .args
            .iter()
            .map(|s| s.replace("{out}", &dir.to_string_lossy()))
            .collect();
        let quick = cmd.quick && !f.quick.is_empty();
        if quick {
            args.extend(f.quick.iter().map(|s| s.to_string()));
        }
        if args[0] == "sim" {
            args.push("--quiet".into());
            if let Some(n) = cmd.threads {
                args.push("--threads".into());
                args.push(n.to_string());
            }
        }
        args.push("--out".into());
        args.push(dir.to_string_lossy().into_owned());
        plan.push((*f, dir, args, quick));
    }
    let jobs: Vec<(String, Vec<String>)> = plan
        .iter()
        .map(|(f, _, args, _)| {
            let mut argv = vec![exe.to_string_lossy().into_owned()];
            argv.extend(args.iter().cloned());
            (f.id.to_string(), argv)
        })
        .collect();
    let results = match cmd.backend.as_str() {
        "dask" => run_dask(&jobs, cmd.jobs, cmd.address.as_deref())?,
        _ => run_local(&jobs, cmd.jobs)?,
    };
    // The machine is the same for every figure: read it once.
    let machine = machine();
    for ((f, dir, args, quick), o) in plan.into_iter().zip(results) {
        let wall = o.wall_s;
        let (report, stderr) = (o.stdout, o.stderr);
        let params = parameters(&args);
        std::fs::write(dir.join("report.txt"), &report).map_err(|e| e.to_string())?;
        let ok = o.code == Some(0);
        if !ok {
            std::fs::write(dir.join("stderr.txt"), &stderr).map_err(|e| e.to_string())?;
            failed.push(f.id);
        }
        // A stale verdicts.json from an earlier run in this folder must not count.
        let v = if ok {
            verdicts(&dir)?.unwrap_or_default()
        } else {
            Vec::new()
        };
        let prov = json!({
            "figure": f.id,
            "paper": f.of.title,
            "paper_figure": f.figure,
            "what": f.what,
            "rocast_version": version,
            "git_commit": commit,
            "command": format!("rocast {}", args.join(" ")),
            "scale": if quick { "quick" } else { "full" },
            "quick_changes": if quick { Some(f.quick_says) } else { None },
            "seed": params.as_ref().map(|p| p.0),
            "parameters": params.as_ref().map(|p| &p.1),
            "wall_s": wall,
            "exit_status": o.code,
            "backend": cmd.backend,
            "machine": machine,
            "verdicts": rocast_eval::verdict::to_json(&v),
        });
        std::fs::write(dir.join("provenance.json"), crate::output::pretty(&prov))
            .map_err(|e| e.to_string())?;
        let _ = writeln!(
            index,
            "| [{}]({}/report.txt) | {} | {} | {} | {:.1} | {} | {} |",
            f.id,
            f.id,
            f.of.title,
            f.figure,
            if quick {
                format!("quick: {}", f.quick_says)
            } else {
                "full".into()
            },
            wall,
            if v.is_empty() {
                "-".to_string()
            } else {
                Tally::of(&v).summary()
            },
            if ok { "ok" } else { "FAILED (stderr.txt)" }
        );
        if !v.is_empty() {
            let _ = writeln!(details, "\n## {} ({}, {})\n", f.id, f.of.title, f.figure);
            let _ = write!(details, "{}", rocast_eval::verdict::render(&v));
        }
        let readings = f.preset().and_then(rocast_eval::readings::by_preset);
        if let Some(readings) = readings.filter(|_| cmd.alternatives) {
            match alternative_scale(&f) {
                Err(why) => {
                    let _ = writeln!(details, "\nalternatives: {why}");
                }
                Ok((scale, says)) => {
                    eprintln!("rocast repro: {}: the alternative readings", f.id);
                    let runs = run_alternatives(&exe, readings, scale, &dir, cmd.jobs)?;
                    let md = alternatives_md(&f, says, &runs);
                    std::fs::write(dir.join("alternatives.md"), &md).map_err(|e| e.to_string())?;
                    let _ = writeln!(
                        details,
                        "\nalternatives ({} runs at {says}; [alternatives.md]({}/alternatives.md)):",
                        runs.len(),
                        f.id
                    );
                    for r in &runs {
                        let _ = writeln!(
                            details,
                            "    {} {}: {}",
                            r.key,
                            if r.sets.is_empty() {
                                String::new()
                            } else {
                                r.sets.join(" ")
                            },
                            match &r.verdicts {
                                Ok(v) => Tally::of(v).summary(),
                                Err(e) => format!("FAILED: {e}"),
                            }
                        );
                    }
                }
            }
        }
    }
    let _ = writeln!(
        index,
        "\n{} figures in {:.1} s.\n\n# Verdicts\n{details}",
        figures.len(),
        t_all.elapsed().as_secs_f64()
    );
    let path = cmd.out.join("REPORT.md");
    std::fs::write(&path, &index).map_err(|e| format!("{}: {e}", path.display()))?;
    crate::output::out!("{index}\n");
    eprintln!("rocast repro: wrote {}", path.display());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", failed.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_intervals_use_students_t() {
        assert_eq!(leading_number("2.5x"), Some(2.5));
        assert_eq!(leading_number("1.067"), Some(1.067));
        assert_eq!(leading_number("rate [1.0 2.0]"), None);
        assert_eq!(mean_ci95(&[1.0]), None);
        // Five values 1..5: mean 3, sd sqrt(2.5), t(4) = 2.776.
        let (m, h) = mean_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(m, 3.0);
        assert!((h - 2.776 * (2.5f64 / 5.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn ids_are_unique_and_commands_name_presets_that_exist() {
        let figures = all_figures();
        let mut ids: Vec<&str> = figures.iter().map(|f| f.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), figures.len());
        for f in &figures {
            if f.args[0] == "sim" {
                assert_eq!(f.args[1], "--preset");
                rocast_eval::experiments::scenario(f.args[2], &[])
                    .unwrap_or_else(|e| panic!("{}: {e}", f.id));
            }
            assert_eq!(f.quick.is_empty(), f.quick_says.is_empty(), "{}", f.id);
        }
        assert!(select(&["peel".into()]).unwrap().len() >= 9);
        assert!(select(&["nope".into()]).is_err());
    }
}
