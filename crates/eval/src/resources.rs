//! Where the binary finds the repository's Python helpers (`python/`: plots, the exact
//! Steiner solver, the MPI benchmark) and the project's venv: relative to where the
//! running binary is installed, never through the directory it was built in.

use crate::error::EvalError;
use std::path::{Path, PathBuf};

/// The directory holding `python/` (and its `.venv`): `$ROCAST_HOME` when set; else
/// the first directory, walking up from the running binary's real location (links
/// resolved: `/usr/local/bin/rocast` → the checkout's `target/release/rocast`), that
/// has `python/rocast/__init__.py`; else `<binary's dir>/../share/rocast` when that has it.
pub fn resource_root() -> Result<PathBuf, EvalError> {
    let marker = |d: &Path| {
        d.join("python")
            .join("rocast")
            .join("__init__.py")
            .is_file()
    };
    if let Some(home) = std::env::var_os("ROCAST_HOME") {
        let home = PathBuf::from(home);
        return if marker(&home) {
            Ok(home)
        } else {
            Err(EvalError::Setting(format!(
                "ROCAST_HOME={} has no python/rocast/__init__.py",
                home.display()
            )))
        };
    }
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot locate the rocast binary: {e}"))?;
    let mut dir = exe.parent();
    while let Some(d) = dir {
        if marker(d) {
            return Ok(d.to_path_buf());
        }
        let share = d.join("share").join("rocast");
        if marker(&share) {
            return Ok(share);
        }
        dir = d.parent();
    }
    Err(EvalError::Setting(format!(
        "no python/ helpers next to {} or above it: set ROCAST_HOME to the rocast checkout",
        exe.display()
    )))
}

/// The project's Python: the checkout's `.venv` when present, else `python3`.
pub fn python(root: &Path) -> PathBuf {
    let venv = root.join(".venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}
