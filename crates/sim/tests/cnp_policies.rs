//! The congestion path multiplicity problem (TMCF §II): a multicast to six receivers,
//! each of whose downlinks also carries one long unicast. The max-min fair share of
//! the multicast is half a link. Forward-all makes the sender cut once per congested
//! branch; TMCF and Cepheus' counters pass one branch's CNPs; PEEL's guard timer
//! limits the sender to one cut per 50 µs.

use rocast_core::time::Duration;
use rocast_sim::engine::FlowSpec;
use rocast_sim::multicast::cepheus::{run_cepheus_with_flows, CepheusSpec};
use rocast_sim::scenario::topology::fabric_with;

/// The multicast's mean rate (Gb/s) while all six unicasts run, for one policy: the
/// mean over five phases of the unicasts' start against the multicast's (every 20 µs
/// from 1 ms on). One phase alone is a sample of a chaotic system: Cepheus' counters
/// gave 38.7 to 46.0 Gb/s across these five (measured when the group session's four
/// control messages moved the multicast's start by 40 µs), the other policies ±3.
fn multicast_gbps(extra: &[&str]) -> f64 {
    let phases = [0u64, 20, 40, 60, 80];
    phases
        .iter()
        .map(|us| multicast_run_at(extra, 1_000_000_000 + us * 1_000_000).0)
        .sum::<f64>()
        / phases.len() as f64
}

/// The rate of [`multicast_gbps`] and the CNPs that reached the source's QP.
fn multicast_run(extra: &[&str]) -> (f64, u64) {
    multicast_run_at(extra, 1_000_000_000)
}
fn multicast_run_at(extra: &[&str], start_ps: u64) -> (f64, u64) {
    let mut sets = vec!["topology.kind=\"fat-tree\"", "topology.k=4", "nic.mtu=4096"];
    sets.extend_from_slice(extra);
    let (topo, cfg) = fabric_with(&sets).unwrap();
    let receivers = vec![2, 4, 6, 8, 10, 12];
    // Rack neighbours: each unicast shares exactly one receiver's ToR downlink.
    let flows: Vec<FlowSpec> = receivers
        .iter()
        .map(|&r| FlowSpec {
            src: r + 1,
            dst: r,
            size: 200_000_000,
            start_ps,
            after: None,
        })
        .collect();
    let mut spec = CepheusSpec::new(0, receivers, 150_000_000);
    spec.sample_interval = Some(Duration::from_us(500));
    let out = run_cepheus_with_flows(topo, cfg, &spec, flows).unwrap();
    // Source bytes between 3 ms and 9 ms (unicasts all running).
    let at = |ps: u64| {
        out.samples
            .iter()
            .find(|s| s.t_ps >= ps)
            .map(|s| s.source_tx_bytes)
            .unwrap_or(0)
    };
    let (a, b) = (at(3_000_000_000), at(9_000_000_000));
    ((b - a) as f64 * 8.0 / 6e-3 / 1e9, out.source_feedback.cnps)
}

/// Thresholds are set in advance and checked against what the model does (means over
/// the five phases, with the group session: 26.3 / 49.0 / 43.9 Gb/s for forward-all /
/// TMCF / Cepheus against a 50 Gb/s fair share; one phase alone gave 26.3 / 52.1 / 45.8 before):
/// forward-all below 60 % of the fair share, TMCF above
/// 85 %. TMCF overshoots a little because the sender follows one branch and the other
/// branches' unicasts yield; more than 10 % over would mean it ignores congestion.
/// Cepheus' aged counters also pass one branch (88 %) but switch branches on bursts
/// more often than TMCF's slots; the guard timer sits between them and forward-all.
#[test]
fn cpmp_forward_all_collapses_and_tmcf_holds_the_fair_share() {
    let fair = 50.0;
    let fa = multicast_gbps(&["switch.cnp_filter=\"forward-all\""]);
    let tmcf = multicast_gbps(&["switch.cnp_filter=\"tmcf\""]);
    let cepheus = multicast_gbps(&["switch.cnp_filter=\"cepheus\""]);
    let guard = multicast_gbps(&["switch.cnp_filter=\"forward-all\"", "nic.cnp_guard_us=50"]);
    let all =
        format!("forward-all {fa:.1}, TMCF {tmcf:.1}, Cepheus {cepheus:.1}, guard {guard:.1} Gb/s");
    assert!(fa < 0.60 * fair, "{all}");
    assert!(tmcf > 0.85 * fair, "{all}");
    assert!(cepheus > 0.85 * fair, "{all}");
    assert!(
        tmcf > cepheus && tmcf > guard,
        "{tmcf:.1} {cepheus:.1} {guard:.1}"
    );
    assert!(
        guard > fa,
        "one cut per 50 µs beats one per CNP: {guard:.1} vs {fa:.1}"
    );
    assert!(
        tmcf < fair * 1.10,
        "no scheme takes more than its share: {tmcf:.1}"
    );
}

/// TMCF's other reading, a buffered release (`tmcf-buffered`): the switches hold each
/// slot's CNPs and send the busiest branch's one slot later. The released CNPs must
/// reach the source (a filter that held CNPs and never sent them would leave it none:
/// measured: the rate alone does not tell, PFC holds it near the share either way:
/// 52.8 Gb/s with no CNP released, 37.8 with the releases).
#[test]
fn buffered_tmcf_releases_reach_the_source() {
    let (buffered, cnps) = multicast_run(&["switch.cnp_filter=\"tmcf-buffered\""]);
    assert!(cnps > 0, "no released CNP reached the source");
    assert!(buffered > 0.0 && buffered < 50.0, "{buffered:.1} Gb/s");
}
