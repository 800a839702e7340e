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
    out.set_item("scenario", &sc.name)?;
    out.set_item("seed", sc.seed)?;
    if threads > 0 {
        // As `rocast sim --threads`: an experiment's points run on this many threads.
        sc.multicast.threads = threads;
    }
    if sc.experiment_name().is_some() {
        let report = py
            .detach(|| rocast_eval::run_experiment(&sc, &base))
            .map_err(value_error)?;
        out.set_item("kind", "experiment")?;
        out.set_item("text", report.text)?;
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
        progress: progress.unwrap_or_else(|| std::io::IsTerminal::is_terminal(&std::io::stderr())),
        cancel: Some(cancel.clone()),
        ..RunOptions::default()
    };
    let report = std::thread::scope(|s| -> PyResult<_> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (sc, base, opts) = (&sc, &base, &opts);
        s.spawn(move || {
            let _ = tx.send(run_scenario(sc, base, opts));
        });
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
                        None => r.map_err(value_error),
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if interrupted.is_none() {
                        if let Err(e) = py.check_signals() {
                            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                            interrupted = Some(e);
                        }
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(value_error("the run's thread ended without a result"))
                }
            }
        }
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
    py.detach(|| {
        let t = topology_from_spec(topo, fail, seed).map_err(|e| e.to_string())?;
        let d = parse_destinations(dst, &t, src, seed).map_err(|e| e.to_string())?;
        let mut routes = None;
        let tr = build_tree(algo, &t, &mut routes, src, &d, exact_time_limit)
            .map_err(|e| e.to_string())?;
        tr.validate(&t).map_err(|e| e.to_string())?;
        let v = tree_json(&t, algo, &tr).map_err(|e| e.to_string())?;
        serde_json::to_string(&v).map_err(|e| e.to_string())
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
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
