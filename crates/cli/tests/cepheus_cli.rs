//! `rocast sim --preset cepheus-*`: the evaluation presets run and print the paper's
//! figures beside rocast's (on reduced sizes, to stay quick).

mod common;
use common::rocast;
use std::path::Path;

fn out_dir(name: &str) -> String {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cepheus_cli")
        .join(name);
    d.to_str().unwrap().to_string()
}

#[test]
fn testbed_preset_compares_every_scheme() {
    let out = out_dir("testbed");
    let r = rocast(&[
        "sim",
        "--preset",
        "cepheus-testbed",
        "--set",
        "multicast.sizes=\"64,2M\"",
        "--out",
        &out,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for want in [
        "cepheus us",
        "tree us",
        "chain us",
        "pipeline us",
        "paper 3-5.2x",
        "paper 2-2.8x",
    ] {
        assert!(r.stdout.contains(want), "{want}: {}", r.stdout);
    }
    let csv = std::fs::read_to_string(Path::new(&out).join("testbed.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 4);
    // Cepheus beats every baseline at both sizes on one switch.
    for line in r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("64 ") || l.trim_start().starts_with("2M "))
    {
        let ratios: Vec<f64> = line
            .split_whitespace()
            .filter_map(|w| w.strip_suffix('x'))
            .map(|w| w.parse().unwrap())
            .collect();
        assert_eq!(ratios.len(), 3, "{line}");
        assert!(ratios.iter().all(|&x| x > 1.0), "{line}");
    }
}

#[test]
fn iops_preset_reproduces_the_replication_gap() {
    let r = rocast(&[
        "sim",
        "--preset",
        "cepheus-iops",
        "--set",
        "multicast.ios=2000",
        "--out",
        &out_dir("iops"),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let miops = |name: &str| -> f64 {
        let l = r
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap();
        l.split_whitespace().last().unwrap().parse().unwrap()
    };
    let (one, three, ceph) = (miops("1-unicast"), miops("3-unicasts"), miops("cepheus"));
    assert!(ceph > 2.5 * three, "{ceph} vs {three}");
    assert!(ceph > 0.95 * one && ceph <= one * 1.01, "{ceph} vs {one}");
}

#[test]
fn bad_experiment_settings_are_clear_errors() {
    for (preset, set, says) in [
        (
            "cepheus-iops",
            "multicast.experiment=\"nope\"",
            "multicast.experiment",
        ),
        ("cepheus-testbed", "multicast.group=99", "does not fit"),
        (
            "cepheus-loss",
            "multicast.loss_rates=[2.0]",
            "not a probability",
        ),
    ] {
        let r = rocast(&["sim", "--preset", preset, "--set", set]);
        assert_eq!(r.code, 2, "{set}");
        assert!(r.stderr.contains(says), "{set}: {}", r.stderr);
    }
}
