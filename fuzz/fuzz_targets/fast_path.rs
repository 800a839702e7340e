//! The fast path's model (`FastPathGroup::forward`) held to the pipeline on arbitrary
//! frames: whatever the model forwards, the pipeline (`FrameSwitch`) must emit the same
//! copies byte for byte (or, for a frame whose ICRC is wrong, none: the one documented
//! difference). Nothing may panic.
//!
//! Input: `high PSN (3, BE) | frame`, sent by h0 on port 0 of the sample stage
//! (`sample_switch`, the group registered).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_core::fabric::cepheus::VIRTUAL_QPN;
use rocast_core::switch::fast_path::{
    sample_host_ip, sample_switch, FastPathVerdict, SAMPLE_MCST,
};
use rocast_core::time::Instant;
use rocast_core::wire::{Psn, RoceRepr};

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let high = u32::from_be_bytes([0, data[0], data[1], data[2]]);
    let frame = &data[3..];
    let mut sw = sample_switch(Vec::new(), [(0, 0), (1, 1), (2, 2), (3, 3)]);
    let g = sw
        .fast_path_group(SAMPLE_MCST, sample_host_ip(0), VIRTUAL_QPN)
        .expect("the sample group compiles");
    let FastPathVerdict::Forward { frames, .. } = g.forward(Psn::new(high), frame) else {
        return;
    };
    let now = Instant::from_ps(1_000_000);
    sw.handle_frame(now, 0, frame);
    let mut buf = vec![0u8; frame.len().max(64)];
    let mut pipeline = Vec::new();
    while let Some(t) = sw.poll_transmit(now, &mut buf) {
        pipeline.push((t.port, buf[..t.len].to_vec()));
    }
    let mut model = frames;
    model.sort();
    pipeline.sort();
    if RoceRepr::parse_verified(&frame[14..]).is_ok() {
        assert_eq!(model, pipeline);
    } else {
        assert!(pipeline.is_empty());
    }
});
