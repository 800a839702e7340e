//! A scenario's errors and the value checks every part of it shares: the scenario
//! file's keys (`config`) and the experiments' own config types in `rocast-eval` both
//! use them, so they sit in a file of their own below `config`.

#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfigError {
    #[error("scenario: {0}")]
    Toml(String),
    #[error("--set {0:?}: expected key=value, e.g. topology.k=8")]
    SetSyntax(String),
    #[error("--set {key}: {msg}")]
    SetPath { key: String, msg: String },
    #[error("{key}: {msg}")]
    Invalid { key: &'static str, msg: String },
    #[error("unknown preset {0:?}; presets: {1}")]
    UnknownPreset(String, String),
}

pub fn invalid(key: &'static str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        msg: msg.into(),
    }
}

/// `value` must be one of `allowed`: else "expected "a", "b" or "c", got "x"".
pub fn one_of(key: &'static str, value: &str, allowed: &[&str]) -> Result<(), ConfigError> {
    if allowed.contains(&value) {
        return Ok(());
    }
    let quoted: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
    let list = match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.join(""),
    };
    Err(invalid(key, format!("expected {list}, got {value:?}")))
}

/// Every rate of `rates` (key, Gb/s) must be in (0, 10000].
pub fn check_gbps(rates: &[(&'static str, f64)]) -> Result<(), ConfigError> {
    for &(key, v) in rates {
        if !(v > 0.0 && v <= 10_000.0) {
            return Err(invalid(key, format!("must be in (0, 10000] Gb/s, got {v}")));
        }
    }
    Ok(())
}
