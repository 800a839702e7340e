// Compiles the C group-control helpers (verbs/rocast_proto.h) for the `c_framing`
// fuzz target.
fn main() {
    println!("cargo:rerun-if-changed=c/proto_shim.c");
    println!("cargo:rerun-if-changed=../verbs/rocast_proto.h");
    cc::Build::new()
        .file("c/proto_shim.c")
        .flag_if_supported("-std=c11")
        .define("_GNU_SOURCE", None)
        .compile("rocast_proto_shim");
}
