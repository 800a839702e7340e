//! Plots: the Python package's figures (`python/rocast/plot/`, drawn by `python/plot.py`), run by the commands
//! that write CSVs (`rocast sim`, `rocast bcast`, the lab benchmarks), and how the
//! binary finds them: relative to where it is installed, never through the directory
//! it was built in (a moved or linked binary must still find them, or say why not).

use std::path::Path;

pub(crate) use rocast_eval::resources::{python, resource_root};

/// Draws `figure` (a module of the Python package's `rocast.plot`, e.g. `peel`) from
/// `csv` into `png` and an SVG beside it, through `python/plot.py` with the project's
/// Python (its `.venv` when present).
pub(crate) fn run_plot(figure: &str, csv: &Path, png: &Path, title: &str) -> Result<(), String> {
    let repo = resource_root().map_err(|e| e.to_string())?;
    let script = repo.join("python/plot.py");
    let python = python(&repo);
    let status = std::process::Command::new(&python)
        .arg(&script)
        .arg(figure)
        .arg(csv)
        .arg(png)
        .arg(title)
        .status()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !status.success() {
        return Err(format!(
            "{} {} {figure} failed ({status}); is matplotlib installed (bash scripts/install-deps.sh)?",
            python.display(),
            script.display()
        ));
    }
    Ok(())
}
