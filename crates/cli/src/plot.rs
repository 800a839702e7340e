//! Plots: the repository's Python scripts (`python/plot_*.py`), run by the commands
//! that write CSVs (`rocast sim`, `rocast bcast`, the lab benchmarks), and how the
//! binary finds them: relative to where it is installed, never through the directory
//! it was built in (a moved or linked binary must still find them, or say why not).

use std::path::Path;

pub(crate) use rocast_eval::resources::{python, resource_root};

/// Runs a plotting script of the repository (`script`: relative to its root) as
/// `script CSV PNG TITLE` with the project's Python (its `.venv` when present). The
/// scripts are shims over `rocast.plot` (python/rocast/plot/), which writes the PNG and
/// an SVG beside it.
pub(crate) fn run_python(script: &str, csv: &Path, png: &Path, title: &str) -> Result<(), String> {
    let repo = resource_root()?;
    let script = repo.join(script);
    let python = python(&repo);
    let status = std::process::Command::new(&python)
        .arg(&script)
        .arg(csv)
        .arg(png)
        .arg(title)
        .status()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !status.success() {
        return Err(format!(
            "{} {} failed ({status}); is matplotlib installed (bash scripts/install-deps.sh)?",
            python.display(),
            script.display()
        ));
    }
    Ok(())
}
