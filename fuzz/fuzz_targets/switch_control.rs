//! Requests on `rocast switch`'s control socket: arbitrary bytes as one request for a
//! switch of 1 to 8 ports (the first byte picks). Nothing may panic; a loss request
//! that parses names a probability in [0, 1) and only ports the switch has; anything
//! past `MAX_CONTROL_REQUEST` bytes is not read.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_net::switch::{ControlRequest, ControlRequestError, MAX_CONTROL_REQUEST};

fuzz_target!(|data: &[u8]| {
    let Some((&p, request)) = data.split_first() else {
        return;
    };
    let ports = (p % 8) as usize + 1;
    match ControlRequest::parse(request, ports) {
        Ok(ControlRequest::Loss { rate, ports: named }) => {
            assert!((0.0..1.0).contains(&rate));
            assert!(named.iter().all(|&i| i < ports));
        }
        Ok(_) => {}
        Err(why) => {
            let why = why.to_string();
            assert!(why.ends_with('\n') && !why.is_empty());
        }
    }
    // Bytes past the limit change nothing (compared as the client sees them: a refused
    // `loss NaN` is the same reply both times, though NaN != NaN).
    if request.len() > MAX_CONTROL_REQUEST {
        let reply = |r: Result<ControlRequest, ControlRequestError>| r.map_err(|e| e.to_string());
        assert_eq!(
            reply(ControlRequest::parse(request, ports)),
            reply(ControlRequest::parse(
                &request[..MAX_CONTROL_REQUEST],
                ports
            ))
        );
    }
});
