//! The group session state machines (`LeaderSession`, `MemberSession`) driven by an
//! arbitrary script: connections, honest exchanges between the leader and three
//! members (so the script reaches registration, transfers, evictions, refreshes and
//! the close, and with a safeguard the mid-transfer reroute), arbitrary control bytes from any side, broken connections, deadlines,
//! driver calls in and out of turn, switch reports. Nothing may panic, every transmit
//! must decode (a control frame, or an MRP registration, release or prune), and a
//! terminal session stays terminal.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rocast_core::control::invitation::InvitationKey;
use rocast_core::control::registration::{RegistrationConfig, SwitchRejection, SwitchReport};
use rocast_core::control::safeguard::SafeguardConfig;
use rocast_core::control::session::{
    ConnId, LeaderSession, LeaderSessionConfig, MemberEvent, MemberSession, MemberSessionConfig,
    OverlayPlan, SessionDest, MAX_TRANSMIT_LEN,
};
use rocast_core::fabric::cepheus::GroupAddressSpace;
use rocast_core::overlay::Scheme;
use rocast_core::time::{Duration, Instant};
use rocast_core::wire::group_control::{parse_frame, Params};
use rocast_core::wire::mrp::{MrpPrune, MrpRelease, MrpRepr, MRP_MAX_PAYLOAD};
use rocast_core::wire::Ipv4Address;

const N: usize = 3;
const MCST: Ipv4Address = Ipv4Address::new(10, 77, 0, 200);

fn ip(i: usize) -> Ipv4Address {
    Ipv4Address::new(10, 77, 0, 2 + i as u8)
}

struct World {
    leader: LeaderSession,
    members: Vec<MemberSession>,
    now: Instant,
    buf: Vec<u8>,
}

impl World {
    /// Moves every output: leader → members (and MRP to every member, as a switch
    /// would), members → leader. Checks each transmit decodes.
    fn exchange(&mut self) {
        let now = self.now;
        while let Some(t) = self.leader.poll_transmit(now, &mut self.buf) {
            let b = self.buf[..t.len].to_vec();
            match t.dest {
                SessionDest::Member(ConnId(c)) => {
                    let (_, n) = parse_frame(&b).expect("the leader emits whole frames");
                    assert_eq!(n, b.len());
                    if let Some(m) = self.members.get_mut(c as usize) {
                        m.handle_stream(now, &b);
                    }
                }
                SessionDest::Mrp => {
                    if let Ok(p) = MrpRepr::parse(&b) {
                        for m in &mut self.members {
                            m.handle_mrp(now, &p);
                        }
                    } else {
                        assert!(
                            MrpRelease::parse(&b).is_ok() || MrpPrune::parse(&b).is_ok(),
                            "an MRP transmit that is neither registration, release nor prune"
                        );
                    }
                }
                SessionDest::Leader => panic!("the leader sent to a leader"),
            }
        }
        for i in 0..self.members.len() {
            while let Some(t) = self.members[i].poll_transmit(now, &mut self.buf) {
                assert_eq!(t.dest, SessionDest::Leader);
                let b = self.buf[..t.len].to_vec();
                parse_frame(&b).expect("a member emits whole frames");
                self.leader.handle_stream(now, ConnId(i as u32), &b);
            }
        }
    }

    /// Member `i`'s driver does what its session asks.
    fn member_driver(&mut self, i: usize, digest: [u8; 32]) {
        let now = self.now;
        let m = &mut self.members[i];
        while let Some(ev) = m.poll_event() {
            match ev {
                MemberEvent::OpenQp(_) => m.handle_qp_ready(now, 0x100 + i as u32, 0x1000, 7),
                MemberEvent::UseOverlay(_) => m.handle_overlay_ready(now),
                MemberEvent::PostReceives { .. }
                | MemberEvent::ResumeReceive { held: false, .. } => m.handle_receives_posted(now),
                MemberEvent::ResumeReceive { held: true, .. } => {
                    m.handle_receives_posted(now);
                    m.handle_relayed(now);
                }
                MemberEvent::WriteDone { .. } => m.handle_received(now, digest, 1),
                _ => {}
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, script)) = data.split_first() else {
        return;
    };
    let key = InvitationKey::new([0x17; 32]);
    let plan = OverlayPlan {
        scheme: Scheme::BinomialPipeline,
        block_bytes: 4096,
        rate_mbps: 0,
        window: 1,
    };
    let cfg = LeaderSessionConfig {
        local: Ipv4Address::new(10, 77, 0, 1),
        local_qpn: 0x11,
        local_region: (0, 0),
        mcst_id: MCST,
        group_space: GroupAddressSpace::parse("10.77.0.128/25").unwrap(),
        members: N,
        params: Params {
            write: mode & 1 == 1,
            capacity: 1 << 16,
            message_bytes: 4096,
            start_psn: 0x5e_ed42,
        },
        overlay: (mode & 2 == 2).then_some(plan),
        fallback: plan,
        registration: RegistrationConfig {
            timeout: Duration::from_ms(1),
            retries: 2,
        },
        // A monitor that expects far more than any script acknowledges: it decides
        // within a millisecond of busy time, so scripts reach the reroute.
        safeguard: (mode & 8 == 8).then(|| SafeguardConfig {
            expected_bps: 100_000_000_000,
            threshold: 0.5,
            window: Duration::from_ms(1),
            grace: Duration::from_us(10),
        }),
        discovery_timeout: Duration::from_ms(50),
        ready_timeout: Duration::from_ms(20),
        verdict_timeout: Duration::from_ms(20),
        refresh: Some(Duration::from_ms(3)),
        invitations: (mode & 4 == 4).then(|| key.clone()),
        mrp_payload_limit: MRP_MAX_PAYLOAD,
    };
    let t0 = Instant::from_us(10);
    let mut w = World {
        leader: LeaderSession::new(cfg, t0).unwrap(),
        members: (0..N)
            .map(|i| {
                MemberSession::new(
                    MemberSessionConfig {
                        local: ip(i),
                        mcst_id: MCST,
                        group_space: GroupAddressSpace::parse("10.77.0.128/25").unwrap(),
                        max_capacity: 1 << 20,
                        params_timeout: Duration::from_ms(50),
                        idle_timeout: Duration::from_ms(100),
                        // Member 2 is not invited when invitations are required.
                        invitation: (i < 2).then(|| key.token(MCST, ip(i))),
                    },
                    t0,
                )
            })
            .collect(),
        now: t0,
        buf: vec![0u8; MAX_TRANSMIT_LEN],
    };
    let mut s = script;
    while let Some((&op, rest)) = s.split_first() {
        let arg = rest.first().copied().unwrap_or(0);
        s = rest.get(1..).unwrap_or(&[]);
        let c = (arg as usize) % (N + 1); // N: a connection that never joined
        let was_terminal = w.leader.is_terminal();
        match op % 12 {
            0 => w.leader.handle_connected(w.now, ConnId(c as u32), ip(c)),
            1 => {
                let n = (arg as usize).min(s.len());
                w.leader.handle_stream(w.now, ConnId(c as u32), &s[..n]);
                s = &s[n..];
            }
            2 => w.exchange(),
            3 => w.leader.handle_conn_error(w.now, ConnId(c as u32), "fuzz"),
            4 => {
                w.now += Duration::from_us(arg as u64 * 250);
                w.leader.handle_timeout(w.now);
                for m in &mut w.members {
                    m.handle_timeout(w.now);
                }
            }
            5 => {
                let _ = w.leader.start_buffer(w.now, arg as u64 * 300, [0xab; 32]);
            }
            6 => w.leader.handle_transfer_done(
                w.now,
                if arg & 1 == 0 {
                    Ok(())
                } else {
                    Err(rocast_core::control::session::SessionError::Transfer("x".into()))
                },
            ),
            7 => {
                w.leader.handle_acked(w.now, arg as u64 * 1000);
                if w.leader.rerouting() {
                    let _ = w.leader.handle_transfer_cut(w.now, arg as u64 * 4096);
                }
            }
            8 => {
                let _ = w.leader.close(w.now, arg & 1 == 0);
            }
            9 => {
                let n = (arg as usize).min(s.len());
                if let Some(m) = w.members.get_mut(c) {
                    m.handle_stream(w.now, &s[..n]);
                }
                s = &s[n..];
            }
            10 => {
                if c < N {
                    w.member_driver(c, if arg & 0x80 == 0 { [0xab; 32] } else { [1; 32] });
                }
            }
            _ => w.leader.handle_switch_report(
                w.now,
                SwitchReport {
                    switch: 1,
                    mcst_id: if arg & 1 == 0 { MCST } else { ip(0) },
                    reason: SwitchRejection::TableFull,
                },
            ),
        }
        while w.leader.poll_event().is_some() {}
        if was_terminal {
            assert!(w.leader.is_terminal(), "a terminal session came back");
        }
    }
});
