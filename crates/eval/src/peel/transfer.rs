//! `peel-transfer`: the PEEL conformance scenario. One reliable UD
//! multicast (the NACK protocol of 002 §IV) from host 0 to every other host of a
//! two-tier fabric — `topology.leaves` ToRs of `topology.hosts_per_leaf` hosts under
//! one aggregation switch, the source's packets PEEL-shimmed per cover of the
//! receivers' racks (PEEL §3.2) — run in the simulator's byte-level fabric
//! (`rocast_sim::multicast::ud_transfer`) by `rocast sim --preset peel-transfer`, and
//! on real packets in the namespace lab by `rocast lab run --preset peel-transfer`.
//! Both print [`conformance_lines`]: per receiver its bytes and running CRC-32 and its
//! exactly-once accounting, and per switch its PEEL counters per packet the source
//! sent to the group. The per-packet counts are deterministic even though the number
//! of packets is not (heartbeats are timed, repairs follow losses): every switch
//! decision is a function of the packet's shim alone, and loss is at the ToR's egress,
//! after the decision was counted.

use crate::error::EvalError;
use std::fmt::Write as _;

use rocast_core::payload::StreamTally;
use rocast_core::time::Duration;
use rocast_core::wire::Ipv4Address;
use rocast_sim::multicast::ud_transfer::{run_ud_transfer, UdTransferSpec};
use rocast_sim::scenario::config::parse_bytes;
use rocast_sim::Scenario;

use crate::report::EvalReport;

/// The group every PEEL transfer uses (`rocast bench lab-ud`'s default).
pub const GROUP: Ipv4Address = Ipv4Address([239, 77, 0, 1]);

/// One switch's PEEL counters: (name, in, forwarded, delivered, dropped).
pub type PeelCounters = (String, u64, u64, u64, u64);

/// The spec a `peel-transfer` scenario describes (shared with `rocast lab run`).
pub fn spec(sc: &Scenario) -> Result<UdTransferSpec, EvalError> {
    let m = &sc.multicast;
    let t = &sc.topology;
    let hosts = (t.leaves * t.hosts_per_leaf) as usize;
    if m.group as usize != hosts {
        return Err(EvalError::Setting(format!(
            "peel-transfer: multicast.group {} must be every host ({} leaves x {} hosts)",
            m.group, t.leaves, t.hosts_per_leaf
        )));
    }
    let size = parse_bytes(&m.message)? as usize;
    Ok(UdTransferSpec {
        hosts,
        tors: t.leaves as usize,
        subnet: [10, 77, 0],
        group: GROUP,
        messages: u64::from(m.messages),
        size,
        mtu: sc.nic.mtu,
        seed: sc.seed,
        gbps: t.host_gbps,
        delay: Duration::from_ns(t.host_delay_ns),
        loss: m.loss,
        loss_host: (m.loss > 0.0).then_some(m.loss_rank as usize),
        time_limit: Duration::from_ms(60_000),
    })
}

/// A counter per source packet: an integer when it divides, else four decimals.
fn per_packet(v: u64, packets: u64) -> String {
    if packets == 0 {
        return format!("{v}/0");
    }
    if v % packets == 0 {
        (v / packets).to_string()
    } else {
        format!("{:.4}", v as f64 / packets as f64)
    }
}

/// The lines both runs print (see the module docs): `rank R bytes B crc32 X`, `rank R
/// delivered …`, and `switch NAME per_packet peel_in …`.
pub fn conformance_lines(ranks: &[StreamTally], packets: u64, switches: &[PeelCounters]) -> String {
    let mut t = String::new();
    for (i, r) in ranks.iter().enumerate() {
        let _ = writeln!(t, "rank {} bytes {} crc32 {:08x}", i + 1, r.bytes, r.crc32);
    }
    for (i, r) in ranks.iter().enumerate() {
        let _ = writeln!(
            t,
            "rank {} delivered {} duplicates {} out_of_order {} corrupt {} unrecoverable {}",
            i + 1,
            r.delivered,
            r.duplicates,
            r.out_of_order,
            r.corrupt,
            r.unrecoverable
        );
    }
    for (name, i, f, d, x) in switches {
        let _ = writeln!(
            t,
            "switch {name} per_packet peel_in {} peel_forwarded {} peel_delivered {} peel_dropped {}",
            per_packet(*i, packets),
            per_packet(*f, packets),
            per_packet(*d, packets),
            per_packet(*x, packets)
        );
    }
    t
}

/// Runs the scenario in the simulator.
pub fn transfer(sc: &Scenario) -> Result<EvalReport, EvalError> {
    let s = spec(sc)?;
    let o = run_ud_transfer(&s)?;
    let packets = o.group_packets();
    let mut text = format!(
        "# peel-transfer: {} x {} B from host 0 to hosts 1..{} through {} ToRs under one \
         aggregation switch, PEEL copies per cover, seed {} (simulator, byte-level fabric)\n",
        s.messages,
        s.size,
        s.hosts - 1,
        s.tors,
        s.seed
    );
    let switches: Vec<PeelCounters> = o
        .switches
        .iter()
        .map(|(n, st, _)| {
            (
                n.clone(),
                st.peel_in,
                st.peel_forwarded,
                st.peel_delivered,
                st.peel_dropped,
            )
        })
        .collect();
    text.push_str(&conformance_lines(&o.receivers, packets, &switches));
    let _ = writeln!(
        text,
        "source packets {packets} (data {} repairs {} heartbeats {}), frames {}, nacks in {}",
        o.sender.data_packets,
        o.sender.repair_packets,
        o.sender.heartbeats,
        o.sender_frames,
        o.sender.nacks_in
    );
    for (n, st, drops) in &o.switches {
        let _ = writeln!(
            text,
            "switch {n}: rx_frames {} tx_frames {} flooded {} forwarded {} injected_drops {drops}",
            st.rx_frames, st.tx_frames, st.flooded, st.forwarded
        );
    }
    let _ = writeln!(
        text,
        "completed at {:.3} ms simulated, {} events",
        o.completion.as_ps() as f64 / 1e9,
        o.events
    );
    Ok(EvalReport {
        text,
        files: Vec::new(),
        capture: Vec::new(),
        verdicts: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The preset's run, pinned: a change to the fabric, the switch pipeline or the
    /// protocol that moves it must say so here.
    #[test]
    fn the_preset_run_is_pinned() {
        let sc = crate::experiments::scenario("peel-transfer", &[]).unwrap();
        let r = transfer(&sc).unwrap();
        for want in [
            "rank 5 bytes 8000000 crc32 608d3d0c",
            "switch tor0 per_packet peel_in 2 peel_forwarded 2 peel_delivered 1 peel_dropped 0",
            "source packets 2014 (data 2000 repairs 0 heartbeats 14), frames 4028, nacks in 0",
            "completed at 14.097 ms simulated, 44939 events",
        ] {
            assert!(r.text.contains(want), "no {want:?} in\n{}", r.text);
        }
        let lossy = crate::experiments::scenario(
            "peel-transfer",
            &[
                "multicast.loss=0.001".into(),
                "multicast.loss_rank=3".into(),
            ],
        )
        .unwrap();
        let r = transfer(&lossy).unwrap();
        assert!(
            r.text
                .contains("source packets 2019 (data 2000 repairs 7 heartbeats 12)"),
            "{}",
            r.text
        );
        assert!(
            r.text.contains("rank 3 delivered 2000 duplicates 0"),
            "{}",
            r.text
        );
    }

    #[test]
    fn a_group_that_is_not_every_host_is_refused() {
        let sc =
            crate::experiments::scenario("peel-transfer", &["multicast.group=4".into()]).unwrap();
        assert!(spec(&sc).unwrap_err().to_string().contains("every host"));
        assert_eq!(per_packet(7, 2), "3.5000");
        assert_eq!(per_packet(6, 0), "6/0");
    }
}
