//! The one output layer of the commands: every table a command prints is a CSV it can
//! write, and every CSV becomes `--json` the same way ([`csv_to_json`]): an array of
//! objects keyed by the CSV's header, numbers where a field parses as one. No command
//! assembles JSON by hand.

use serde_json::{Map, Value};

/// A CSV field as JSON: an integer, a float, `true`/`false`, an empty field as null,
/// else the text.
pub(crate) fn field_value(v: &str) -> Value {
    if v.is_empty() {
        return Value::Null;
    }
    if let Ok(i) = v.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(u) = v.parse::<u64>() {
        return Value::from(u);
    }
    if let Ok(f) = v.parse::<f64>() {
        if f.is_finite() {
            return Value::from(f);
        }
    }
    match v {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::from(v),
    }
}

/// A CSV (header line, then rows; no quoted commas: rocast's CSVs have none) as an
/// array of row objects. `#` comment lines are skipped. A row with more or fewer
/// fields than the header is an error.
pub(crate) fn csv_to_json(csv: &str) -> Result<Value, String> {
    let mut lines = csv
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    let Some(head) = lines.next() else {
        return Ok(Value::Array(Vec::new()));
    };
    let keys: Vec<&str> = head.split(',').collect();
    let mut rows = Vec::new();
    for (i, l) in lines.enumerate() {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() != keys.len() {
            return Err(format!(
                "CSV row {} has {} fields, the header {}",
                i + 2,
                f.len(),
                keys.len()
            ));
        }
        let mut m = Map::new();
        for (k, v) in keys.iter().zip(f) {
            m.insert(k.to_string(), field_value(v));
        }
        rows.push(Value::Object(m));
    }
    Ok(Value::Array(rows))
}

/// A size flag's value: bytes, with the units of [`rocast_core::units::parse_bytes`]
/// (`4096`, `4K` = `4KiB`, `10MB` = 10,000,000).
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let v = rocast_core::units::parse_bytes(s).map_err(|e| e.to_string())?;
    usize::try_from(v).map_err(|_| format!("size {s:?} is too large"))
}

/// A timeout or other span as the commands take it: a duration with its unit (`20s`,
/// `500ms`, `1.5m` is not a unit: use `90s`), or a bare number of seconds (as the
/// flags were before units); in seconds, positive and finite.
pub(crate) fn parse_seconds(s: &str) -> Result<f64, String> {
    let secs = match s.trim().parse::<f64>() {
        Ok(v) => v,
        Err(_) => {
            rocast_sim::scenario::config::parse_duration(s).map_err(|e| e.to_string())? as f64
                / 1e12
        }
    };
    if secs.is_finite() && secs > 0.0 && secs <= 1e6 {
        Ok(secs)
    } else {
        Err(format!(
            "{s:?}: a duration above 0 and at most 1e6 s (e.g. 20s, 500ms)"
        ))
    }
}

/// A command's result: with `json`, stdout is the JSON alone and the human table goes
/// to stderr (so `| python3 -m json.tool` works and the table is still seen); else
/// the table on stdout.
pub(crate) fn print_table_or_json(table: &str, json: Option<&Value>) {
    match json {
        Some(j) => {
            eprint!("{table}");
            print!("{}", pretty(j));
        }
        None => print!("{table}"),
    }
}

/// Pretty JSON text of `v`, with a final newline.
pub(crate) fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".into()) + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_carry_units_or_are_seconds() {
        assert_eq!(parse_seconds("20"), Ok(20.0));
        assert_eq!(parse_seconds("20s"), Ok(20.0));
        assert_eq!(parse_seconds("500ms"), Ok(0.5));
        assert_eq!(parse_seconds("250us"), Ok(0.00025));
        for bad in ["0", "-1", "5min", "inf", "", "1e9"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn csv_rows_become_objects_with_numbers() {
        let j = csv_to_json(
            "# made by x\nscheme,size,us,ok,note\nchain,64,1.5,true,\ntree,-3,2e3,false,a b\n",
        )
        .unwrap();
        assert_eq!(j[0]["scheme"], "chain");
        assert_eq!(j[0]["size"], 64);
        assert_eq!(j[0]["us"], 1.5);
        assert_eq!(j[0]["ok"], true);
        assert_eq!(j[0]["note"], Value::Null);
        assert_eq!(j[1]["size"], -3);
        assert_eq!(j[1]["us"], 2000.0);
        assert_eq!(j[1]["note"], "a b");
        assert!(csv_to_json("a,b\n1\n").is_err());
        assert_eq!(csv_to_json("").unwrap(), Value::Array(vec![]));
        // NaN and infinities stay text (JSON has no such numbers).
        assert_eq!(csv_to_json("x\nNaN\ninf\n").unwrap()[0]["x"], "NaN");
    }
}

/// Writes to stdout for a command that keeps SIGPIPE ignored (the switch, the lab,
/// repro): a reader that has gone (`rocast repro --list | head -1`) ends the output
/// quietly instead of panicking in `print!`.
pub(crate) fn print_out(text: std::fmt::Arguments) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    // A closed pipe is the reader's choice, not a failure of the command.
    let _ = out.write_fmt(text).and_then(|()| out.flush());
}

/// `print!` through [`print_out`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::print_out(format_args!($($arg)*))
    };
}
pub(crate) use out;
