//! `verbs/rocast_proto.h` against rocast's Rust definitions: the C programs
//! (`rocast-verbs-lead`, `rocast-verbs-member`, `rocast-verbs-ud`) and the Rust runtime
//! meet on the same ports and lengths, so every numeric `#define` in the header must
//! equal its Rust definition, every Rust definition must be in the header, and a define
//! this test does not know is an error (nothing in the header escapes the check).
//!
//! The header holds no codec of the group control channel: the C
//! programs run the group session through `crates/ffi` (`rocast_session.h`, checked by
//! `crates/ffi/tests/c_abi.rs`), so the bytes on the channel come from one body of code.

use rocast_core::wire::group_control::{field, GROUP_CONTROL_PORT, INVITATION_LEN};
use rocast_core::wire::mrp::MRP_UDP_PORT;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn verbs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../verbs")
}

/// Every constant the header must define, with the Rust value it must have.
fn expected_defines() -> BTreeMap<&'static str, i64> {
    BTreeMap::from([
        ("CONTROL_PORT", GROUP_CONTROL_PORT as i64),
        ("MRP_PORT", MRP_UDP_PORT as i64),
        ("ROCAST_INVITATION_LEN", INVITATION_LEN as i64),
        ("ROCAST_SHA256_LEN", field::result::SHA256.len() as i64),
        (
            "ROCAST_VIRTUAL_QPN",
            rocast_core::fabric::cepheus::VIRTUAL_QPN as i64,
        ),
    ])
}

/// `#define NAME VALUE` lines with a value (trailing comments dropped). A value that is
/// not an integer literal (optionally in parentheses) is an error.
fn header_defines(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("#define") else {
            continue;
        };
        let rest = rest.split("/*").next().unwrap_or("");
        let mut words = rest.split_whitespace();
        let Some(name) = words.next() else { continue };
        let value: String = words.collect();
        if value.is_empty() {
            continue; // the include guard
        }
        let v = value.trim_start_matches('(').trim_end_matches(')');
        let parsed = if let Some(hex) = v.strip_prefix("0x") {
            i64::from_str_radix(hex, 16)
        } else {
            v.parse::<i64>()
        };
        let n = parsed.unwrap_or_else(|_| {
            panic!("#define {name} {value}: not an integer literal, so this test cannot check it")
        });
        assert!(
            out.insert(name.to_string(), n).is_none(),
            "{name} defined twice"
        );
    }
    out
}

#[test]
fn every_header_constant_equals_its_rust_definition() {
    let path = verbs_dir().join("rocast_proto.h");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let have = header_defines(&text);
    let want = expected_defines();
    for (name, value) in &want {
        assert_eq!(
            have.get(*name),
            Some(value),
            "{name} in verbs/rocast_proto.h (None: missing)"
        );
    }
    for name in have.keys() {
        assert!(
            want.contains_key(name.as_str()),
            "verbs/rocast_proto.h defines {name}, which this test does not check: add it here"
        );
    }
}

#[test]
fn the_define_reader_refuses_what_it_cannot_check() {
    let ok = header_defines(
        "#ifndef X\n#define X\n#define A 3 /* c */\n#define B (-2)\n#define C 0x1f\n",
    );
    assert_eq!(ok.len(), 3);
    assert_eq!((ok["A"], ok["B"], ok["C"]), (3, -2, 31));
    assert!(std::panic::catch_unwind(|| header_defines("#define D (1 << 4)\n")).is_err());
}
