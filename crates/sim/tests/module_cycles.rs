//! No import cycles in a crate, between its top-level modules or between its files,
//! and the core's layering rules.
//!
//! **The graph.** Each source file under `src/` is a node named by its module path
//! (`scenario/odbss.rs` is `scenario::odbss`, `scenario/mod.rs` is `scenario`); the
//! crate root and `tests.rs` files are skipped, and so are each file's `#[cfg(test)]`
//! part and its comments (a doc link is no import). Every `crate::a::b::…`, `super::…` and `self::…` path in a file is an edge to
//! the longest prefix of that path that is a file (`crate::scenario::config::check`
//! is an edge to `scenario::config`). An edge from a file to one of its own ancestors
//! (`super::Thing` from a child) is not counted: a module and the files under it are
//! one unit that may refer upward; a cycle is between siblings or across subtrees.
//! `scripts/module-cycles.py` prints the top-level graph for reading.
//!
//! **The checks.** For every crate in `CHECKED`: no cycle between top-level modules
//! (files folded into their first path segment) and none between files. For the core,
//! `LAYERS`: `control` never imports `fabric` or `switch`, nor `fabric` `switch` or
//! `control` — the control plane's vocabulary (group addresses, MRP) lives in `wire`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CHECKED: &[&str] = &["core", "sim", "eval", "net", "cli"];

/// (crate, importer's top-level module, module it must not import).
const LAYERS: &[(&str, &str, &str)] = &[
    ("core", "control", "fabric"),
    ("core", "control", "switch"),
    ("core", "fabric", "switch"),
    ("core", "fabric", "control"),
];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a source file, or `None` for the crate root and test files.
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    let last = parts.last()?;
    if last.contains("tests") {
        return None;
    }
    Some(parts)
}

/// The module-name segments of the path that starts at `text` (`a::b::Type` gives
/// `[a, b, Type]`: the caller keeps the prefix that names a file).
fn path_segments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        out.push(name);
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out
}

/// Files-level graph of one crate: nodes are module paths joined by `::`.
fn file_graph_of_sources(files: &[(Vec<String>, String)]) -> Graph {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut g = Graph::new();
    for (module, text) in files {
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        // Code only: a comment's or a doc link's path is no import.
        let text: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let text = text.as_str();
        let from = module.join("::");
        g.entry(from.clone()).or_default();
        let mut targets: Vec<Vec<String>> = Vec::new();
        for (i, _) in text.match_indices("crate::") {
            // `$crate::` in macros and `rocast_crate::` are not this crate's paths.
            let before = text[..i].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            targets.push(path_segments(&text[i + "crate::".len()..]));
        }
        for (i, _) in text.match_indices("super::") {
            let before = text[..i].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue; // the second `super::` of `super::super::`, handled below
            }
            let mut base = module.clone();
            let mut rest = &text[i..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            base.extend(path_segments(rest));
            targets.push(base);
        }
        for (i, _) in text.match_indices("self::") {
            let before = text[..i].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut base = module.clone();
            base.extend(path_segments(&text[i + "self::".len()..]));
            targets.push(base);
        }
        for path in targets {
            // The longest prefix that is a file.
            let Some(target) = (1..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|p| modules.contains(*p))
            else {
                continue;
            };
            // Itself, or one of its ancestors: no edge.
            if target.len() <= module.len() && module[..target.len()] == *target {
                continue;
            }
            g.entry(from.clone()).or_default().insert(target.join("::"));
        }
    }
    g
}

fn sources(src: &Path) -> Vec<(Vec<String>, String)> {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    files
        .iter()
        .filter_map(|f| {
            let m = module_of(src, f)?;
            Some((m, std::fs::read_to_string(f).expect("readable source")))
        })
        .collect()
}

/// The file graph folded into top-level modules.
fn top_level(g: &Graph) -> Graph {
    let top = |m: &str| m.split("::").next().unwrap_or(m).to_string();
    let mut t = Graph::new();
    for (a, bs) in g {
        for b in bs {
            if top(a) != top(b) {
                t.entry(top(a)).or_default().insert(top(b));
            }
        }
    }
    t
}

/// Every edge whose target reaches its source.
fn cycle_edges(g: &Graph) -> Vec<(String, String)> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(x) = stack.pop() {
            for y in g.get(&x).into_iter().flatten() {
                if seen.insert(y.clone()) {
                    stack.push(y.clone());
                }
            }
        }
        seen
    };
    let mut out = Vec::new();
    for (a, targets) in g {
        for b in targets {
            if reach(b).contains(a) {
                out.push((a.clone(), b.clone()));
            }
        }
    }
    out
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn no_module_cycles_in_checked_crates() {
    for name in CHECKED {
        let files = file_graph_of_sources(&sources(&crate_src(name)));
        let top = top_level(&files);
        assert!(!top.is_empty(), "crates/{name}: no module edges found");
        let cyc = cycle_edges(&top);
        assert!(
            cyc.is_empty(),
            "crates/{name}: top-level modules import each other in a cycle, edges {cyc:?}\ngraph {top:?}"
        );
    }
}

#[test]
fn no_file_level_cycles_in_checked_crates() {
    let mut found = Vec::new();
    for name in CHECKED {
        let g = file_graph_of_sources(&sources(&crate_src(name)));
        assert!(
            g.values().any(|t| !t.is_empty()),
            "crates/{name}: no file edges found"
        );
        let cyc = cycle_edges(&g);
        if !cyc.is_empty() {
            found.push(format!("crates/{name}: {cyc:?}"));
        }
    }
    assert!(
        found.is_empty(),
        "files import each other in a cycle (edges on it):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_core_keeps_its_layers() {
    for &(krate, from, banned) in LAYERS {
        let g = top_level(&file_graph_of_sources(&sources(&crate_src(krate))));
        assert!(
            !g.get(from).is_some_and(|t| t.contains(banned)),
            "crates/{krate}: `{from}` imports `{banned}`: {:?}",
            g.get(from)
        );
    }
}

#[test]
fn the_checker_sees_a_cycle() {
    let mut g = Graph::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        g.entry(a.into()).or_default().insert(b.into());
    }
    let cyc = cycle_edges(&g);
    let want: Vec<(String, String)> = [("a", "b"), ("b", "c"), ("c", "a")]
        .iter()
        .map(|&(a, b)| (a.into(), b.into()))
        .collect();
    assert_eq!(cyc, want);
}

/// Built from sources, not by hand: two sibling files that import each other (one by
/// `crate::`, one by `super::`) are a cycle; a child using its parent is not; a path
/// to an item resolves to the file that holds it.
#[test]
fn the_checker_sees_a_file_level_cycle_in_sources() {
    let m = |p: &str| p.split("::").map(String::from).collect::<Vec<_>>();
    let files = vec![
        (m("scenario"), "pub mod config; pub mod odbss;".to_string()),
        (
            m("scenario::config"),
            "pub struct C { o: crate::scenario::odbss::OdbssConfig }".to_string(),
        ),
        (
            m("scenario::odbss"),
            "use super::config::{check_gbps, ConfigError}; use super::Thing;\n\
             /// See [`crate::engine::Y`].\n\
             #[cfg(test)] mod t { use crate::engine::X; }"
                .to_string(),
        ),
        (
            m("engine"),
            "use crate::scenario::ScenarioConfig;".to_string(),
        ),
    ];
    let g = file_graph_of_sources(&files);
    assert_eq!(
        g["scenario::config"],
        BTreeSet::from(["scenario::odbss".to_string()])
    );
    assert_eq!(
        g["scenario::odbss"],
        BTreeSet::from(["scenario::config".to_string()]),
        "the parent (`super::Thing`), a doc link and the test part are no edges"
    );
    assert_eq!(g["engine"], BTreeSet::from(["scenario".to_string()]));
    let cyc = cycle_edges(&g);
    assert_eq!(cyc.len(), 2, "{cyc:?}");
    assert!(
        cycle_edges(&top_level(&g)).is_empty(),
        "the same cycle is inside one top-level module"
    );
}
