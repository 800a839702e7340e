//! No import cycles between the top-level modules of a crate (issue 20: "rocast-sim
//! as a map of itself"). The graph is built as `scripts/module-cycles.py` builds it:
//! a file under `src/` belongs to its top-level module; every `crate::NAME` in the
//! file, before its `#[cfg(test)]` part, is an edge to `NAME`; `tests.rs` files and
//! the crate root are skipped. An edge lies on a cycle when its target reaches its
//! source.
//!
//! `CHECKED` lists the crates held to it: the core (where `control` must not import
//! the switch, nor `fabric` the switch or `control`), the simulator, the experiments
//! the real-time runtime and the command line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CHECKED: &[&str] = &["core", "sim", "eval", "net", "cli"];

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

/// The top-level module graph of the crate whose sources are under `src`.
fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rs_files(src, &mut files);
    let mut g = Graph::new();
    for f in files {
        let rel = f.strip_prefix(src).expect("under src").with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
            parts.pop();
        }
        let Some(last) = parts.last() else { continue };
        if last.contains("tests") {
            continue;
        }
        let module = parts[0].clone();
        let text = std::fs::read_to_string(&f).expect("readable source");
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && name != module {
                g.entry(module.clone()).or_default().insert(name);
            }
        }
    }
    g
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

#[test]
fn no_module_cycles_in_checked_crates() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for name in CHECKED {
        let g = module_graph(&crates.join(name).join("src"));
        assert!(!g.is_empty(), "crates/{name}: no module edges found");
        let cyc = cycle_edges(&g);
        assert!(
            cyc.is_empty(),
            "crates/{name}: modules import each other in a cycle, edges {cyc:?}\ngraph {g:?}"
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
