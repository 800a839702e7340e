//! The experiment registry drives every listing: a toy experiment in one folder
//! (`tests/toy_experiment/`, written as a folder of `src/experiments/` is) appears in
//! `rocast sim --list`, `rocast repro --list`'s figures, `rocast.presets()`, the
//! table-to-plot map and `--preset`, and runs; and every folder of
//! `src/experiments/` is in the built-in registry (build.rs found it).

#[path = "toy_experiment/mod.rs"]
mod toy_experiment;

use rocast_eval::experiment::Registry;
use rocast_eval::experiments::{registry, BUILTIN};

fn with_toy() -> Registry {
    registry().with(&toy_experiment::EXPERIMENT)
}

#[test]
fn a_toy_experiment_in_one_folder_appears_in_every_listing() {
    let plain = registry();
    let toy = with_toy();
    // rocast sim --list (and sim --help's preset table)
    assert!(!plain.preset_table().contains("toy-echo"));
    let table = toy.preset_table();
    assert!(
        table.contains("toy-echo") && table.contains("the registry's template experiment"),
        "{table}"
    );
    assert_eq!(
        table.lines().count(),
        plain.preset_table().lines().count() + 1
    );
    // rocast.presets()
    assert!(toy
        .preset_descriptions()
        .iter()
        .any(|(n, d)| *n == "toy-echo" && d == "the registry's template experiment"));
    // rocast repro --list
    let figs = toy.figures();
    let (paper, fig) = figs.iter().find(|(_, f)| f.id == "toy-fig1").unwrap();
    assert_eq!(paper.key, "rdmc");
    assert_eq!(fig.preset(), Some("toy-echo"));
    assert_eq!(figs.len(), plain.figures().len() + 1);
    // the last of its paper's figures: rank 999
    assert_eq!(figs.last().unwrap().1.id, "toy-fig1");
    // plots and presets
    assert_eq!(toy.plot_for_table("toy-echo"), Some("bcast"));
    assert_eq!(plain.plot_for_table("toy-echo"), None);
    assert!(toy.preset_names().ends_with("toy-echo"));
    assert!(plain.scenario("toy-echo", &[]).is_err());
}

#[test]
fn the_toy_experiment_runs_with_its_own_config() {
    let toy = with_toy();
    let sc = toy
        .scenario("toy-echo", &["experiment.toy-echo.repeat=2".into()])
        .unwrap();
    assert_eq!(sc.experiment_name(), Some("toy-echo"));
    let r = rocast_eval::run_experiment_in(&toy, &sc, std::path::Path::new(".")).unwrap();
    assert!(r.text.starts_with("multicast multicast\n"), "{}", r.text);
    assert_eq!(r.files[0].1, "seed,words\n7,multicast multicast\n");
    // Unknown keys of its table are refused, naming the table.
    let bad = toy
        .scenario("toy-echo", &["experiment.toy-echo.colour=1".into()])
        .unwrap();
    let e = rocast_eval::run_experiment_in(&toy, &bad, std::path::Path::new("."))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("experiment.toy-echo") && e.contains("colour"),
        "{e}"
    );
    // Without the toy, the same scenario names an experiment nobody has.
    let e = rocast_eval::run_experiment(&sc, std::path::Path::new("."))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("\"toy-echo\""), "{e}");
}

#[test]
fn every_experiment_folder_is_built_in() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/experiments");
    let mut folders: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("mod.rs").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    assert_eq!(BUILTIN.len(), folders.len(), "{folders:?}");
    assert!(folders.len() >= 28);
    // Every preset TOML in a folder is one of its experiment's presets.
    for f in &folders {
        let tomls: Vec<String> = std::fs::read_dir(dir.join(f))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".toml"))
            .collect();
        for t in tomls {
            let name = t.trim_end_matches(".toml");
            assert!(
                BUILTIN
                    .iter()
                    .any(|e| e.presets().iter().any(|p| p.name == name)),
                "{f}/{t} is not registered"
            );
        }
    }
}

#[test]
fn names_are_unique_and_every_preset_parses_and_checks() {
    let r = registry();
    let mut names: Vec<&str> = r.experiments().iter().map(|e| e.name()).collect();
    names.sort_unstable();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "two experiments share a name");
    let mut presets: Vec<&str> = r.presets().iter().map(|(n, _, _)| *n).collect();
    presets.sort_unstable();
    let n = presets.len();
    presets.dedup();
    assert_eq!(presets.len(), n, "two presets share a name");
    for (name, _, e) in r.presets() {
        let sc = r
            .scenario(name, &[])
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        match e {
            // An experiment's preset selects that experiment, and its config checks.
            Some(e) => {
                assert_eq!(sc.experiment_name(), Some(e.name()), "{name}");
                e.check(&sc).unwrap_or_else(|err| panic!("{name}: {err}"));
            }
            None => assert_eq!(sc.experiment_name(), None, "{name}"),
        }
    }
    // Every plot module exists in the Python package.
    let plot = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/rocast/plot");
    for e in r.experiments() {
        for (table, module) in e.plots() {
            assert!(
                plot.join(format!("{module}.py")).is_file(),
                "{}: {table} -> {module}.py missing",
                e.name()
            );
        }
    }
}

/// An experiment with no config type of its own takes no keys: a `--set
/// experiment.KEY` it would not read is refused, not ignored.
#[test]
fn an_experiment_without_a_config_refuses_keys() {
    let sc = registry()
        .scenario("peel-ablation", &["experiment.broadcasts=4".into()])
        .unwrap();
    let Err(err) = rocast_eval::run_experiment(&sc, std::path::Path::new(".")) else {
        panic!("peel-ablation ran with a key it does not read");
    };
    assert!(
        err.to_string()
            .contains("experiment.peel-ablation: takes no keys, got broadcasts"),
        "{err}"
    );
}
