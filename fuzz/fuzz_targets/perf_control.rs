//! `rocast perf`'s control lines: arbitrary bytes, cut into lines of at most
//! `MAX_CONTROL_LINE` bytes as the server's reader does, each checked as a HELLO.
//! Nothing may panic; a HELLO that passes has every parameter within its documented
//! limit and asks for at most `MAX_SESSION_BYTES` of server memory (the bound that
//! stopped one HELLO from aborting the server).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_net::perf::{Hello, PerfOp, MAX_CONTROL_LINE, MAX_SESSION_BYTES};

fuzz_target!(|data: &[u8]| {
    for chunk in data.split(|&b| b == b'\n') {
        let line = String::from_utf8_lossy(&chunk[..chunk.len().min(MAX_CONTROL_LINE)]);
        let Ok(h) = Hello::parse(&line) else {
            continue;
        };
        let p = &h.params;
        assert!(p.validate().is_ok());
        assert!(p.size >= 1 && p.size <= i32::MAX as usize);
        assert!(p.tx_depth >= 1 && p.tx_depth <= 8192);
        assert!((0.0..1.0).contains(&p.loss));
        let need = (h.buffers + 1).saturating_mul(p.size as u64);
        assert!(need <= MAX_SESSION_BYTES, "{need} B accepted");
        if p.op == PerfOp::Write {
            assert_eq!(h.buffers, 1);
        }
    }
});
