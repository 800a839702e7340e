//! `rocast._native`: the Rust half of the Python package `rocast` (python/rocast/). It
//! runs the simulator in-process and hands results back as Python values: column
//! dicts (the Python half makes pandas DataFrames of them) and CSV text for the
//! experiments' tables, so nothing goes through files. The simulator runs with the
//! GIL released, so a thread pool (or a Dask worker's threads) runs points in
//! parallel.

#![forbid(unsafe_code)]

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rocast_sim::run::{run_scenario, RunOptions, RunSample};
use rocast_sim::Scenario;
use std::path::PathBuf;

fn value_error(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Waits for a run's result on `rx` without the GIL, looking at Python's signals
/// every 100 ms. On the first signal (Ctrl-C) it calls `stop`, waits for the run to
/// return, and gives back the signal's exception (KeyboardInterrupt) instead of the
/// result.
fn wait_interruptibly<T: Send>(
    py: Python<'_>,
    rx: std::sync::mpsc::Receiver<T>,
    stop: impl Fn(),
) -> PyResult<T> {
    use std::sync::mpsc::RecvTimeoutError;
    let mut interrupted: Option<PyErr> = None;
    let mut rx = Some(rx);
    loop {
        // The receiver moves in and out: a borrowed one cannot cross `detach`.
        let (got, back) = py.detach(move || {
            let rx = rx.take().expect("the receiver is back after every wait");
            (rx.recv_timeout(std::time::Duration::from_millis(100)), rx)
        });
        rx = Some(back);
        match got {
            Ok(r) => {
                return match interrupted {
                    Some(e) => Err(e),
                    None => Ok(r),
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if interrupted.is_none() {
                    if let Err(e) = py.check_signals() {
                        stop();
                        interrupted = Some(e);
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(value_error("the run's thread ended without a result"))
            }
        }
    }
}

/// Every built-in preset as (name, description), in `rocast sim --list` order.
#[pyfunction]
fn presets() -> Vec<(String, String)> {
    rocast_eval::experiments::presets()
        .into_iter()
        .map(|(n, d)| (n.to_string(), d))
        .collect()
}

/// A preset's TOML text (`rocast sim --print-preset`).
#[pyfunction]
fn preset_toml(name: &str) -> PyResult<String> {
    rocast_eval::experiments::preset_toml(name)
        .map(str::to_string)
        // ValueError, as `sim` raises for the same name.
        .ok_or_else(|| PyValueError::new_err(format!("unknown preset {name:?}")))
}

/// Runs a scenario: `preset` names a built-in one, else `toml` is the scenario's text
/// (relative file names in it resolve against `base`). `sets` are `KEY=VALUE`
/// overrides, as `rocast sim --set`. Returns a dict: `scenario`, `seed`, and either
/// `kind="flows"` with `fct` and `samples` (column dicts), `ports_csv` and
/// `summary_json`, or `kind="experiment"` with `text` and `tables` (name -> CSV).
#[pyfunction]
#[pyo3(signature = (preset=None, toml=None, base=None, sets=Vec::new(), threads=0, progress=None))]
fn sim<'py>(
    py: Python<'py>,
    preset: Option<&str>,
    toml: Option<&str>,
    base: Option<PathBuf>,
    sets: Vec<String>,
    threads: u32,
    progress: Option<bool>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut sc = match (preset, toml) {
        (Some(name), None) => {
            rocast_eval::experiments::scenario(name, &sets).map_err(value_error)?
        }
        (None, Some(text)) => Scenario::from_toml(text, &sets).map_err(value_error)?,
        _ => return Err(value_error("give exactly one of preset and toml")),
    };
    let base = base.unwrap_or_else(|| PathBuf::from("."));
    let out = PyDict::new(py);
    out.set_item("scenario", sc.title())?;
    out.set_item("overrides", sc.overrides.clone())?;
    out.set_item("seed", sc.seed)?;
    if threads > 0 {
        // As `rocast sim --threads`: an experiment's points run on this many threads.
        sc.multicast.threads = threads;
    }
    let show_progress =
        progress.unwrap_or_else(|| std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if sc.experiment_name().is_some() {
        // The experiment's bar: runs done of all, on stderr (rocast_eval::report).
        rocast_eval::report::set_progress(show_progress);
        // As a flow run below: the experiment on a thread of its own, this one looking
        // at Python's signals. Ctrl-C stops the experiment at its next point (points
        // already running finish: a point is not cut in the middle).
        let (sc_ref, base_ref) = (&sc, &base);
        let report = std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel();
            s.spawn(move || {
                let _ = tx.send(rocast_eval::run_experiment(sc_ref, base_ref));
            });
            let r = wait_interruptibly(py, rx, || rocast_eval::report::cancel_runs(true));
            // Whether or not it was interrupted: the next run may start.
            rocast_eval::report::cancel_runs(false);
            r
        })?
        .map_err(value_error)?;
        out.set_item("kind", "experiment")?;
        out.set_item("text", report.text)?;
        out.set_item(
            "verdicts_json",
            rocast_eval::verdict::to_json_text(&report.verdicts),
        )?;
        let tables = PyDict::new(py);
        for (name, body) in report.files {
            if let Some(stem) = name.strip_suffix(".csv") {
                tables.set_item(stem, body)?;
            }
        }
        out.set_item("tables", tables)?;
        return Ok(out);
    }
    // The run goes on a thread of its own while this one waits without the GIL and
    // looks at Python's signals every 100 ms: Ctrl-C sets the run's cancel flag, the
    // run stops at its next step, and KeyboardInterrupt is raised here.
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opts = RunOptions {
        threads: threads as usize,
        progress: show_progress,
        cancel: Some(cancel.clone()),
        ..RunOptions::default()
    };
    let report = std::thread::scope(|s| -> PyResult<_> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (sc, base, opts) = (&sc, &base, &opts);
        s.spawn(move || {
            let _ = tx.send(run_scenario(sc, base, opts));
        });
        wait_interruptibly(py, rx, || {
            cancel.store(true, std::sync::atomic::Ordering::Relaxed)
        })?
        .map_err(value_error)
    })?;
    out.set_item("kind", "flows")?;
    let fct = PyDict::new(py);
    let r = &report.results;
    fct.set_item("src", r.iter().map(|f| f.src).collect::<Vec<_>>())?;
    fct.set_item("dst", r.iter().map(|f| f.dst).collect::<Vec<_>>())?;
    fct.set_item("sport", r.iter().map(|f| f.sport).collect::<Vec<_>>())?;
    fct.set_item("size_bytes", r.iter().map(|f| f.size).collect::<Vec<_>>())?;
    fct.set_item(
        "start_ns",
        r.iter()
            .map(|f| f.start_ps as f64 / 1e3)
            .collect::<Vec<_>>(),
    )?;
    // NaN for a flow that did not finish: a DataFrame column stays numeric.
    let opt = |t: Option<u64>, s: u64| t.map_or(f64::NAN, |t| (t - s) as f64 / 1e3);
    fct.set_item(
        "fct_ns",
        r.iter()
            .map(|f| opt(f.finish_ps, f.start_ps))
            .collect::<Vec<_>>(),
    )?;
    fct.set_item(
        "received_ns",
        r.iter()
            .map(|f| opt(f.received_ps, f.start_ps))
            .collect::<Vec<_>>(),
    )?;
    fct.set_item(
        "standalone_ns",
        r.iter()
            .map(|f| f.standalone_ps as f64 / 1e3)
            .collect::<Vec<_>>(),
    )?;
    fct.set_item("failed", r.iter().map(|f| f.failed).collect::<Vec<_>>())?;
    out.set_item("fct", fct)?;
    // Rows to columns: each sample's pairs once.
    let rows: Vec<[(&str, f64); 11]> = report.samples.iter().map(RunSample::columns).collect();
    let samples = PyDict::new(py);
    for (i, (name, _)) in RunSample::default().columns().iter().enumerate() {
        samples.set_item(*name, rows.iter().map(|r| r[i].1).collect::<Vec<_>>())?;
    }
    out.set_item("samples", samples)?;
    out.set_item("ports_csv", report.ports_csv)?;
    out.set_item("summary_json", report.summary_json)?;
    Ok(out)
}

/// The `rocast.plot` module that draws an experiment's table (its name without
/// `.csv`), or None: the map `rocast sim` uses.
#[pyfunction]
fn figure_for_table(table: &str) -> Option<&'static str> {
    rocast_eval::experiments::plot_for_table(table)
}

/// Builds a multicast tree offline (`rocast tree`): `topo` as `fat-tree:k=8`,
/// `leaf-spine:spines=S,leaves=L,hosts=H` or a topology file; `fail`, a fraction of
/// switch links failed (seeded); `dst` as `random:N`, a comma list or a file; `algo`
/// one of optimal, peel, cepheus, exact. Returns the tree's JSON text.
#[pyfunction]
#[pyo3(signature = (topo="fat-tree:k=8", src=0, dst="random:16", algo="peel", fail=0.0, seed=1, exact_time_limit=120.0))]
#[allow(clippy::too_many_arguments)]
fn tree(
    py: Python<'_>,
    topo: &str,
    src: u32,
    dst: &str,
    algo: &str,
    fail: f64,
    seed: u64,
    exact_time_limit: f64,
) -> PyResult<String> {
    use rocast_eval::trees::{build_tree, parse_destinations, topology_from_spec, tree_json};
    if !(exact_time_limit.is_finite() && exact_time_limit > 0.0) {
        return Err(value_error(format!(
            "exact_time_limit {exact_time_limit}: must be a positive number of seconds"
        )));
    }
    let m = |e: rocast_eval::error::EvalError| e.python_message();
    py.detach(|| {
        let t = topology_from_spec(topo, fail, seed).map_err(m)?;
        if src as usize >= t.num_hosts() {
            return Err(format!("src {src}: not a host (0..{})", t.num_hosts()));
        }
        let d = parse_destinations(dst, &t, src, seed).map_err(m)?;
        let mut routes = None;
        let tr = build_tree(algo, &t, &mut routes, src, &d, exact_time_limit).map_err(m)?;
        tr.validate(&t).map_err(|e| e.to_string())?;
        let v = tree_json(&t, algo, &tr).map_err(|e| e.to_string())?;
        serde_json::to_string(&v).map_err(|e| e.to_string())
    })
    .map_err(value_error)
}

/// The OSU-style broadcast benchmark (`rocast bcast`): one broadcast per scheme and
/// size on an idle fabric, each beside the model's critical path. Returns bcast.csv's
/// text (the Python half makes a DataFrame of it). `overhead_us` None: the CLI's
/// default per-post overhead.
#[pyfunction]
#[pyo3(signature = (schemes, group_size, sizes, topo, sets, block, ring_slice, ring_slots, overhead_us, flow_control, root, verify))]
#[allow(clippy::too_many_arguments)]
fn bcast(
    py: Python<'_>,
    schemes: Vec<String>,
    group_size: u32,
    sizes: &str,
    topo: &str,
    sets: Vec<String>,
    block: &str,
    ring_slice: &str,
    ring_slots: u32,
    overhead_us: Option<f64>,
    flow_control: bool,
    root: u32,
    verify: bool,
) -> PyResult<String> {
    use rocast_core::overlay::Scheme;
    use rocast_core::time::Duration;
    use rocast_eval::bcast::{fabric_scenario, measure, BcastFabric, BcastSettings, CSV_HEADER};
    use rocast_sim::scenario::config::{parse_bytes, parse_sizes};
    let arg = |name: &str, e: &dyn std::fmt::Display| value_error(format!("{name}: {e}"));
    let schemes = schemes
        .iter()
        .map(|s| s.parse::<Scheme>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| arg("schemes", &e))?;
    if schemes.is_empty() {
        return Err(value_error("schemes: name at least one"));
    }
    let sizes = parse_sizes(sizes).map_err(|e| arg("sizes", &e))?;
    let overhead = match overhead_us {
        None => rocast_sim::multicast::broadcast::DEFAULT_OVERHEAD,
        Some(us) if us.is_finite() && us >= 0.0 => Duration::from_ps((us * 1e6).round() as u64),
        Some(us) => {
            return Err(value_error(format!(
                "overhead_us {us}: must be a non-negative number"
            )))
        }
    };
    let settings = BcastSettings {
        group: group_size,
        root,
        block: parse_bytes(block).map_err(|e| arg("block", &e))?,
        ring_slice: parse_bytes(ring_slice).map_err(|e| arg("ring_slice", &e))?,
        ring_slots,
        overhead,
        flow_control,
        verify,
        failure: None,
        suspect_after: Duration::from_ps(10_000_000_000),
    };
    let m = |e: rocast_eval::error::EvalError| e.python_message();
    settings.validate(&sizes).map_err(|e| value_error(m(e)))?;
    py.detach(|| {
        let (sc, base) = fabric_scenario(topo, group_size, &sets).map_err(m)?;
        let fabric = BcastFabric::new(sc, &base, group_size).map_err(m)?;
        let mut csv = String::from(CSV_HEADER);
        for &scheme in &schemes {
            for &size in &sizes {
                let p = measure(&fabric, &settings, scheme, size).map_err(m)?;
                csv.push_str(&p.csv_row(group_size));
            }
        }
        Ok::<_, String>(csv)
    })
    .map_err(value_error)
}

/// Every RoCE frame of a capture (pcap or pcapng) as `rocast pcap dump --json`'s
/// objects, as JSON text. A file that cannot be read, or breaks part-way, raises.
#[pyfunction]
fn read_capture(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| {
        let frames = rocast_eval::captures::read_frames_json(&path)?;
        serde_json::to_string(&frames).map_err(|e| e.to_string())
    })
    .map_err(value_error)
}

/// rocast's simulator and tree builders, in-process (the Rust half of `rocast`).
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(preset_toml, m)?)?;
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(tree, m)?)?;
    m.add_function(wrap_pyfunction!(figure_for_table, m)?)?;
    m.add_function(wrap_pyfunction!(bcast, m)?)?;
    m.add_function(wrap_pyfunction!(read_capture, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
