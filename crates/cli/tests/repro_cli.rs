//! `rocast repro`: every figure listed, and a run writes each figure's report, CSV and
//! JSON, provenance and the REPORT.md index.

mod common;
use common::rocast;

#[test]
fn repro_lists_every_paper_and_runs_figures_with_provenance() {
    let l = rocast(&["repro", "--list"]);
    assert_eq!(l.code, 0, "{}", l.stderr);
    for paper in ["Cepheus", "PEEL", "TMCF", "Broadcast-select", "RDMC"] {
        assert!(l.stdout.contains(paper), "{paper} missing:\n{}", l.stdout);
    }
    for id in [
        "cepheus-fig12",
        "peel-fig7",
        "tmcf-fig3-4",
        "odbss-fig4",
        "rdmc-small",
    ] {
        assert!(l.stdout.lines().any(|x| x.starts_with(id)), "{id} missing");
    }
    assert!(rocast(&["repro", "no-such-figure"]).code == 2);
    // The listings are the registry's: every figure it holds, in its order, and
    // `sim --list` is its preset table verbatim.
    let ids: Vec<&str> = l
        .stdout
        .lines()
        .filter(|x| !x.starts_with(' ') && !x.starts_with("id "))
        .filter_map(|x| x.split_whitespace().next())
        .filter(|x| x.contains('-'))
        .collect();
    let registry: Vec<&str> = rocast_eval::experiments::figures()
        .iter()
        .map(|(_, f)| f.id)
        .collect();
    assert_eq!(ids, registry);
    let sim_list = rocast(&["sim", "--list"]);
    assert_eq!(sim_list.code, 0, "{}", sim_list.stderr);
    assert_eq!(sim_list.stdout, rocast_eval::experiments::preset_table());

    let dir = std::env::temp_dir().join(format!("rocast-repro-{}", std::process::id()));
    let out = dir.to_str().unwrap();
    let r = rocast(&[
        "repro",
        "peel-fig1",
        "cepheus-fig10",
        "rdmc-failure",
        "--out",
        out,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let report = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
    for id in ["peel-fig1", "cepheus-fig10", "rdmc-failure"] {
        assert!(
            report.contains(&format!("[{id}]({id}/report.txt)")),
            "{report}"
        );
        let p: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(id).join("provenance.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(p["figure"], id);
        assert!(p["command"].as_str().unwrap().starts_with("rocast "), "{p}");
        assert_eq!(p["exit_status"], 0);
        assert!(p["machine"]["cores"].as_u64().unwrap() >= 1);
        assert!(!std::fs::read_to_string(dir.join(id).join("report.txt"))
            .unwrap()
            .is_empty());
    }
    // Verdicts are counted from the records the experiment wrote (verdicts.json), never
    // from the report's text: Fig. 10's 8 KB point matches by construction (the
    // calibrated host stack), its 512 KB point is a prediction.
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("cepheus-fig10").join("verdicts.json")).unwrap(),
    )
    .unwrap();
    let words: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["word"].as_str().unwrap())
        .collect();
    assert_eq!(words[0], "calibrated", "{v}");
    assert_eq!(words.len(), 2, "{v}");
    let reproduced = words.iter().filter(|w| **w == "reproduced").count();
    let row = report
        .lines()
        .find(|l| l.starts_with("| [cepheus-fig10]"))
        .unwrap();
    assert!(
        row.contains(&format!("| {reproduced} of 1 reproduced, 1 calibrated |")),
        "{row}"
    );
    // A figure with no claims of the paper to check (rdmc-failure) has no count.
    let row = report
        .lines()
        .find(|l| l.starts_with("| [rdmc-failure]"))
        .unwrap();
    assert!(row.contains("| - |"), "{row}");
    // --list says what is calibrated; --readings prints the readings table.
    assert!(
        l.stdout.contains("calibrated: the absolute IOPS"),
        "{}",
        l.stdout
    );
    // The readings table of a paper, checked for what it must hold.
    let readings = |args: &[&str], needles: &[&str]| {
        let r = rocast(args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        for needle in needles {
            assert!(r.stdout.contains(needle), "{needle}:\n{}", r.stdout);
        }
        r
    };
    readings(
        &["repro", "--readings"],
        &[
            "## Cepheus Fig. 12 (`cepheus-fig12`)",
            "| `experiment.loss_at` |",
            "ConnectX-5",
            "randomly discarding packets in the middle switches",
        ],
    );
    let peel = readings(
        &["repro", "--readings", "peel"],
        &[
            "## PEEL Fig. 7 (`peel-fig7`)",
            "| `experiment.core_copy` |",
            "the source transmits a *single* copy",
            "## TMCF Figs. 3-4 (`tmcf-cpmp`)",
        ],
    );
    assert!(!peel.stdout.contains("ConnectX-5"));
    let bad = rocast(&["repro", "--readings", "orca"]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("expected"), "{}", bad.stderr);
    // A simulator figure's CSVs come with JSON beside them.
    let csvs: Vec<_> = std::fs::read_dir(dir.join("peel-fig1"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    assert!(!csvs.is_empty());
    for c in csvs {
        assert!(c.with_extension("json").is_file(), "{}", c.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
