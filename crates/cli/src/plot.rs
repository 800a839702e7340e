//! Plots: the repository's Python scripts (`python/plot_*.py`), run by the commands
//! that write CSVs (`rocast sim`, `rocast bcast`, the lab benchmarks).

use std::path::{Path, PathBuf};

/// Runs a plotting script of the repository (`script`: relative to its root) as
/// `script CSV PNG TITLE` with the project's Python (its `.venv` when present).
pub(crate) fn run_python(script: &str, csv: &Path, png: &Path, title: &str) -> Result<(), String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = repo.join(script);
    let venv = repo.join(".venv/bin/python");
    let python = if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    };
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
