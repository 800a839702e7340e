//! Running `rocast` like an installed tool: from another directory through a link
//! (as `scripts/install-bin.sh` installs it), its Python helpers found relative to the
//! binary; a wrong ROCAST_HOME is a clear error; `sim --list` and `sim --help` list
//! every preset from the registry.

mod common;
use common::rocast;
use std::process::Command;

#[test]
fn a_linked_binary_run_elsewhere_finds_its_plot_scripts() {
    let dir = std::env::temp_dir().join(format!("rocast-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("rocast");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_rocast"), &link).unwrap();
    let png = dir.join("bcast.png");
    let run = |home: Option<&str>| {
        let mut c = Command::new(&link);
        c.current_dir("/")
            .args([
                "bcast",
                "--group",
                "4",
                "--sizes",
                "64,4K",
                "--schemes",
                "chain",
            ])
            .arg("--out")
            .arg(dir.join("out"))
            .arg("--plot")
            .arg(&png);
        match home {
            Some(h) => c.env("ROCAST_HOME", h),
            None => c.env_remove("ROCAST_HOME"),
        };
        c.output().unwrap()
    };
    let o = run(None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(png.is_file());
    let o = run(Some("/nonexistent"));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ROCAST_HOME=/nonexistent has no python/rocast/__init__.py"),
        "{err}"
    );
    let v = Command::new(&link)
        .current_dir("/")
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("rocast "));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_lists_every_preset_with_a_description() {
    let list = rocast(&["sim", "--list"]);
    assert_eq!(list.code, 0);
    let help = rocast(&["sim", "--help"]);
    for name in [
        "default",
        "ud-fig4",
        "peel-fig5",
        "odbss-scale-80",
        "cepheus-fig11",
    ] {
        let line = list
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not in --list:\n{}", list.stdout));
        assert!(line.split_whitespace().count() > 2, "{line}");
        assert!(help.stdout.contains(line), "{name} not in --help");
    }
    assert!(list.stdout.lines().count() >= 20, "{}", list.stdout);
}
