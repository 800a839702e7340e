//! `rocast switch`: the software multicast switch daemon (`rocast_net::switch`), or,
//! with `--stats`, a query of a running one through its control socket.
//!
//! Exit status: 0 after a clean stop (SIGINT/SIGTERM or `--duration`); 2 on bad
//! arguments or when a port cannot be opened.

use clap::Args;
use rocast_core::fabric::cepheus::{CnpFilterPolicy, GroupAddressSpace};
use rocast_core::fabric::peel::{PeelRole, PrefixRules};
use rocast_core::fabric::EcnRed;
use rocast_core::switch::FrameSwitchConfig;
use rocast_core::time::Duration as CoreDuration;
use rocast_core::wire::{EthernetAddress, Ipv4Address};
use rocast_net::switch::{query, PortSpec, Shaping, SwitchConfig, SwitchDaemon};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SwitchCmd {
    /// A port: `afpacket:IFACE` (a raw socket on an interface) or
    /// `dgram:LOCAL=REMOTE` (Ethernet frames in loopback UDP, QEMU's `-netdev dgram`).
    /// Ports are numbered in the order given.
    #[arg(long = "port")]
    ports: Vec<String>,
    /// Unix control socket: `stats`, `groups` and `loss P [PORT...]` requests.
    #[arg(long)]
    control: Option<PathBuf>,
    /// Query a running switch at `--control` for its counters, print them and exit.
    #[arg(long)]
    stats: bool,
    /// With --stats: JSON instead of lines (`ports`: one object per port; one object
    /// per counter scope, `switch`, `cepheus`, `peel`, `memory`…; `other`: the lines
    /// that are not counters, such as group memberships).
    #[arg(long, requires = "stats")]
    json: bool,
    /// With --stats: print the groups only.
    #[arg(long, requires = "stats")]
    groups: bool,
    /// Tell a running switch at `--control` to drop frames from now on: "P" (every
    /// port) or "P PORT..." with P in [0, 1); "0" stops it (fault injection mid-run).
    #[arg(long, value_name = "P [PORT...]")]
    set_loss: Option<String>,
    /// The block McstIDs are drawn from (the switch answers ARP for it). A unicast
    /// block, because Linux drops packets whose source is multicast.
    #[arg(long, default_value = rocast_core::switch::frame::DEFAULT_GROUP_SPACE)]
    group_space: String,
    /// MFT capacity in groups (0 refuses every registration); at most the number of
    /// addresses in --group-space. Default: 1024, or the space's size if smaller.
    #[arg(long)]
    max_groups: Option<usize>,
    /// A group's MFT entries live this long after its leader's last registration or
    /// refresh (soft state); 0 keeps them until released.
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_GROUP_LEASE_MS)]
    group_lease_ms: u64,
    /// A file holding the fabric key (64 hex digits): MRP must then carry a valid
    /// authentication trailer from a key holder, with a fresh counter.
    #[arg(long, value_name = "FILE")]
    fabric_key: Option<PathBuf>,
    /// Group addresses must be allocated by this switch (`rocast mcast allocate`)
    /// before a leader registers them. Always on with --fabric-key.
    #[arg(long)]
    require_allocation: bool,
    /// The longest lease of an allocated group address; the holder's registrations
    /// renew it.
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_ALLOCATION_LEASE_MS,
          value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    allocation_lease_ms: u64,
    /// CNP filter: cepheus, tmcf, tmcf-buffered (TMCF's other reading), tmcf-damped (rocast's own) or forward-all.
    #[arg(long, default_value = rocast_core::switch::frame::DEFAULT_CNP_FILTER)]
    cnp_filter: String,
    /// TMCF slot or Cepheus aging window, microseconds.
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_CNP_WINDOW_US)]
    cnp_window_us: u64,
    /// A host pinned behind a port: IP@PORT=MAC (e.g. 10.77.0.1@0=02:72:63:00:00:01).
    #[arg(long = "host")]
    hosts: Vec<String>,
    /// A port toward another switch (repeatable): a host behind it is reached through
    /// that switch, so a Cepheus group's tree takes a switch hop there (the next
    /// switch bridges the copies), not a host connection.
    #[arg(long = "switch-port", value_name = "PORT")]
    switch_ports: Vec<u16>,
    /// Be the IGMP querier: a general query out of every host port at start and then
    /// every SECONDS (RFC 3376's default is 125), and IPv4 multicast memberships age
    /// out after 2 x SECONDS + 10 s without a report. Without it, memberships snooped
    /// from reports last until the host's leave or --table-age-ms without a report.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    igmp_querier: Option<u64>,
    /// Learned MACs the switch holds in all (a MAC past it is not learned, counted
    /// `refused_mac_table_full`; frames to it are flooded).
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_MAX_MACS)]
    max_macs: usize,
    /// Learned MACs from one host port.
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_MAX_MACS_PER_PORT)]
    max_macs_per_port: usize,
    /// Learned host addresses (source-guard bindings) in all; pinned --host entries
    /// do not count. An address past it is not bound: its RoCE is dropped.
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_MAX_HOSTS)]
    max_hosts: usize,
    /// Learned host addresses on one host port.
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_MAX_HOSTS_PER_PORT)]
    max_hosts_per_port: usize,
    /// IGMP memberships in all (a join past it is refused, counted).
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_MAX_IGMP_MEMBERSHIPS)]
    max_igmp_memberships: usize,
    /// IGMP memberships of one host port.
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_MAX_IGMP_PER_PORT)]
    max_igmp_per_port: usize,
    /// A learned MAC or host binding lives this long without a frame from it (until
    /// then another port cannot take it over), and an IGMP membership without
    /// --igmp-querier this long without a report.
    #[arg(long, default_value_t = rocast_core::switch::frame::DEFAULT_TABLE_AGE_MS,
          value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    table_age_ms: u64,
    /// Shape every port's egress to this rate (Mbit/s), with a queue and ECN marking.
    #[arg(long)]
    rate_mbps: Option<u64>,
    /// Egress queue per port when shaping (KB).
    #[arg(long, default_value_t = 1024)]
    queue_kb: usize,
    /// ECN RED marking when shaping: KMIN_KB,KMAX_KB,PMAX.
    #[arg(long)]
    ecn: Option<String>,
    /// Drop frames leaving --loss-port with this probability (seeded): a lossy link.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Ports whose egress --loss applies to (repeatable; default every port).
    #[arg(long = "loss-port")]
    loss_ports: Vec<u16>,
    /// Write every frame each port receives or sends to DIR/portN.pcap (a tap on
    /// each link), for `rocast pcap check`.
    #[arg(long, value_name = "DIR")]
    capture: Option<PathBuf>,
    /// Replicate each Cepheus group's new data in the kernel (a tc program generated
    /// from the pipeline's tables; needs Linux 6.6+, afpacket ports, no shaping,
    /// --loss or --capture). The daemon keeps feedback, MRP and retransmissions.
    #[arg(long)]
    fast_path: bool,
    /// Stop after this long (500ms, 10s; a bare number is seconds; default: run until
    /// SIGINT/SIGTERM).
    #[arg(long, value_parser = crate::output::parse_seconds)]
    duration: Option<f64>,
    /// Seed of the ECN marking draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// This switch's place in a PEEL fabric (PEEL §3.2): `prefix` (one tier above the
    /// racks: replicates a shimmed frame, UDP 4793, to the racks of its (value,
    /// length) block by k − 1 static rules built from --peel-rack) or `rack` (a ToR:
    /// a shimmed frame from a host climbs to --peel-uplink, and also goes to the local
    /// members when it carries SOURCE_RACK; from above it goes to the --peel-member
    /// ports with the shim stripped, or is discarded and counted when the rack has
    /// none). Without it, shimmed frames are forwarded as plain IPv4.
    #[arg(long, value_name = "prefix|rack")]
    peel_role: Option<String>,
    /// Prefix role: rack id ID is behind PORT (repeatable; ids 0..N-1, each once).
    #[arg(long = "peel-rack", value_name = "ID=PORT")]
    peel_racks: Vec<String>,
    /// Prefix role: the pod this switch serves (the shim's pod field).
    #[arg(long, default_value_t = 0)]
    peel_pod: u16,
    /// Prefix role: this switch's plane index in its pod (the shim's plane field).
    #[arg(long, default_value_t = 0)]
    peel_plane: u16,
    /// Rack role: the port toward plane 0, 1, … (repeatable, in plane order).
    #[arg(long = "peel-uplink", value_name = "PORT")]
    peel_uplinks: Vec<u16>,
    /// Rack role: the member ports of a group, GROUP=PORT[,PORT…] (repeatable), what
    /// IGMP snooping keeps on a commodity ToR.
    #[arg(long = "peel-member", value_name = "GROUP=PORTS")]
    peel_members: Vec<String>,
}

/// (group, port) pairs of `--peel-member`.
type PeelMembers = Vec<(Ipv4Address, u16)>;

/// The PEEL role the `--peel-*` flags describe, and the rack members.
fn peel_config(cmd: &SwitchCmd) -> Result<(Option<PeelRole>, PeelMembers), String> {
    let mut members = Vec::new();
    for m in &cmd.peel_members {
        let bad = || format!("--peel-member {m:?}: expected GROUP=PORT[,PORT…]");
        let (g, ports) = m.split_once('=').ok_or_else(bad)?;
        let g: std::net::Ipv4Addr = g.parse().map_err(|_| bad())?;
        for p in ports.split(',') {
            members.push((
                Ipv4Address(g.octets()),
                p.trim().parse::<u16>().map_err(|_| bad())?,
            ));
        }
    }
    let role = match cmd.peel_role.as_deref() {
        None => {
            if !(cmd.peel_racks.is_empty() && cmd.peel_uplinks.is_empty() && members.is_empty()) {
                return Err("--peel-rack, --peel-uplink and --peel-member need --peel-role".into());
            }
            None
        }
        Some("prefix") => {
            if !cmd.peel_uplinks.is_empty() || !members.is_empty() {
                return Err(
                    "--peel-role prefix takes --peel-rack, not --peel-uplink or --peel-member"
                        .into(),
                );
            }
            let mut racks = std::collections::BTreeMap::new();
            for r in &cmd.peel_racks {
                let bad = || format!("--peel-rack {r:?}: expected ID=PORT");
                let (id, port) = r.split_once('=').ok_or_else(bad)?;
                let id: usize = id.parse().map_err(|_| bad())?;
                let port: u16 = port.parse().map_err(|_| bad())?;
                if racks.insert(id, port).is_some() {
                    return Err(format!("--peel-rack: rack {id} given twice"));
                }
            }
            if racks.is_empty() || racks.keys().copied().ne(0..racks.len()) {
                return Err(
                    "--peel-role prefix needs --peel-rack ID=PORT for ids 0..N-1, each once".into(),
                );
            }
            let ports: Vec<u16> = racks.into_values().collect();
            Some(PeelRole::Prefix {
                pod: cmd.peel_pod,
                plane: cmd.peel_plane,
                rules: PrefixRules::for_racks(&ports),
            })
        }
        Some("rack") => {
            if !cmd.peel_racks.is_empty() {
                return Err(
                    "--peel-role rack takes --peel-uplink and --peel-member, not --peel-rack"
                        .into(),
                );
            }
            if cmd.peel_uplinks.is_empty() {
                return Err("--peel-role rack needs --peel-uplink PORT".into());
            }
            Some(PeelRole::Rack {
                uplinks: cmd.peel_uplinks.clone(),
            })
        }
        Some(r) => return Err(format!("--peel-role {r:?}: prefix or rack")),
    };
    {
        let n = cmd.ports.len();
        let bad_port = |p: u16| (p as usize) >= n;
        let used: Vec<u16> = match &role {
            Some(PeelRole::Prefix { rules, .. }) => {
                rules.iter().flat_map(|(_, p)| p.to_vec()).collect()
            }
            Some(PeelRole::Rack { uplinks }) => uplinks.clone(),
            None => Vec::new(),
        };
        if let Some(p) = used
            .into_iter()
            .chain(members.iter().map(|m| m.1))
            .find(|&p| bad_port(p))
        {
            return Err(format!("--peel-*: no port {p} (the switch has {n})"));
        }
    }
    Ok((role, members))
}

pub(crate) fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("{s:?} is not a MAC address"));
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        m[i] = u8::from_str_radix(p, 16).map_err(|_| format!("{s:?} is not a MAC address"))?;
    }
    Ok(EthernetAddress(m))
}

fn parse_host(s: &str) -> Result<(Ipv4Address, u16, EthernetAddress), String> {
    let bad = || format!("--host {s:?}: expected IP@PORT=MAC");
    let (ip, rest) = s.split_once('@').ok_or_else(bad)?;
    let (port, mac) = rest.split_once('=').ok_or_else(bad)?;
    let ip: std::net::Ipv4Addr = ip.parse().map_err(|_| bad())?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    Ok((Ipv4Address(ip.octets()), port, parse_mac(mac)?))
}

fn parse_ecn(s: &str) -> Result<EcnRed, String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("--ecn {s:?}: expected KMIN_KB,KMAX_KB,PMAX"))?;
    match v.as_slice() {
        &[kmin, kmax, pmax] if kmin >= 0.0 && kmax > kmin && (0.0..=1.0).contains(&pmax) => {
            Ok(EcnRed {
                kmin_bytes: (kmin * 1000.0) as u64,
                kmax_bytes: (kmax * 1000.0) as u64,
                pmax,
            })
        }
        _ => Err(format!(
            "--ecn {s:?}: need 0 <= KMIN < KMAX (KB) and 0 <= PMAX <= 1"
        )),
    }
}

/// Reads a fabric key file (64 hex digits, owner-only): whoever reads it can register
/// groups.
pub fn read_fabric_key(
    path: &std::path::Path,
) -> Result<rocast_core::wire::mrp_auth::FabricKey, String> {
    read_secret_file(path).map(rocast_core::wire::mrp_auth::FabricKey::new)
}

/// Reads a 32-byte secret written as 64 hex digits in a file only its owner may read
/// (`chmod 600`; anything looser is refused).
pub fn read_secret_file(path: &std::path::Path) -> Result<[u8; 32], String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{}: a key file must be readable by its owner only (chmod 600)",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    rocast_core::wire::mrp_auth::secret_from_hex(&text)
        .map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run(cmd: SwitchCmd) -> Result<(), String> {
    if let Some(loss) = &cmd.set_loss {
        let path = cmd
            .control
            .as_ref()
            .ok_or("--set-loss needs --control PATH")?;
        let reply = query(path, &format!("loss {loss}")).map_err(|e| e.to_string())?;
        crate::output::out!("{reply}");
        return if reply.starts_with("loss ") && reply.contains(" on ") {
            Ok(())
        } else {
            Err(reply.trim().to_string())
        };
    }
    if cmd.stats {
        let path = cmd.control.ok_or("--stats needs --control PATH")?;
        let what = if cmd.groups { "groups" } else { "stats" };
        let reply = query(&path, what).map_err(|e| e.to_string())?;
        if cmd.json {
            let j = stats_json(&reply);
            crate::output::out!(
                "{}\n",
                serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?
            );
        } else {
            crate::output::out!("{reply}");
        }
        return Ok(());
    }
    if cmd.ports.is_empty() {
        return Err("give at least one --port".into());
    }
    let ports = cmd
        .ports
        .iter()
        .map(|p| p.parse::<PortSpec>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let hosts = cmd
        .hosts
        .iter()
        .map(|h| parse_host(h))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(p) = cmd
        .switch_ports
        .iter()
        .find(|&&p| p as usize >= ports.len())
    {
        return Err(format!(
            "--switch-port {p}: there are {} ports",
            ports.len()
        ));
    }
    let shaping = match cmd.rate_mbps {
        Some(0) => return Err("--rate-mbps must be positive".into()),
        Some(r) => Some(Shaping {
            rate_bps: r * 1_000_000,
            queue_bytes: cmd.queue_kb * 1000,
            ecn: cmd.ecn.as_deref().map(parse_ecn).transpose()?,
        }),
        None if cmd.ecn.is_some() => return Err("--ecn needs --rate-mbps".into()),
        None => None,
    };
    if let Some(d) = cmd.duration {
        if !(d > 0.0 && d.is_finite()) {
            return Err("--duration must be a positive number of seconds".into());
        }
    }
    if !(0.0..1.0).contains(&cmd.loss) {
        return Err("--loss must be in [0, 1)".into());
    }
    let n_ports = ports.len();
    let (peel, peel_members) = peel_config(&cmd)?;
    let space = GroupAddressSpace::parse(&cmd.group_space).map_err(|e| e.to_string())?;
    let max_groups = match cmd.max_groups {
        Some(m) if m as u64 > space.size() => {
            return Err(format!(
                "--max-groups {m}: the group space {space} holds only {} addresses",
                space.size()
            ))
        }
        Some(m) => m,
        None => (rocast_core::switch::frame::DEFAULT_MAX_GROUPS as u64).min(space.size()) as usize,
    };
    let cfg = SwitchConfig {
        pipeline: FrameSwitchConfig {
            ports: ports.len() as u16,
            max_groups,
            group_space: space,
            switch_id: 0,
            mac: rocast_core::switch::frame::DEFAULT_SWITCH_MAC,
            peel,
            group_lease: (cmd.group_lease_ms > 0)
                .then(|| CoreDuration::from_ms(cmd.group_lease_ms)),
            mrp_key: cmd.fabric_key.as_deref().map(read_fabric_key).transpose()?,
            require_allocation: cmd.require_allocation || cmd.fabric_key.is_some(),
            allocation_lease: CoreDuration::from_ms(cmd.allocation_lease_ms),
            switch_ports: cmd.switch_ports.clone(),
            igmp_query_interval: cmd.igmp_querier.map(|s| CoreDuration::from_ms(s * 1000)),
            max_macs: cmd.max_macs,
            max_macs_per_port: cmd.max_macs_per_port,
            max_hosts: cmd.max_hosts,
            max_hosts_per_port: cmd.max_hosts_per_port,
            max_igmp_memberships: cmd.max_igmp_memberships,
            max_igmp_per_port: cmd.max_igmp_per_port,
            table_age: CoreDuration::from_ms(cmd.table_age_ms),
        },
        ports,
        cnp_filter: CnpFilterPolicy::from_name(
            &cmd.cnp_filter,
            CoreDuration::from_us(cmd.cnp_window_us.max(1)),
        )
        .map_err(|e| e.to_string())?,
        hosts,
        peel_members,
        shaping,
        loss: (cmd.loss > 0.0).then(|| {
            let ports = if cmd.loss_ports.is_empty() {
                (0..n_ports as u16).collect()
            } else {
                cmd.loss_ports.clone()
            };
            (ports, cmd.loss)
        }),
        control: cmd.control,
        capture: cmd.capture,
        fast_path: cmd.fast_path,
        seed: cmd.seed,
    };
    let mut d = SwitchDaemon::new(cfg).map_err(|e| e.to_string())?;
    eprintln!(
        "rocast switch: {} ports up; stop with SIGINT/SIGTERM",
        d.pipeline().config().ports
    );
    d.run(cmd.duration.map(std::time::Duration::from_secs_f64))
        .map_err(|e| e.to_string())?;
    crate::output::out!("{}", d.stats_text());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cmd: SwitchCmd,
    }

    fn peel(args: &[&str]) -> Result<(Option<PeelRole>, PeelMembers), String> {
        let mut argv = vec!["switch", "--port", "afpacket:a", "--port", "afpacket:b"];
        argv.extend_from_slice(&["--port", "afpacket:c"]);
        argv.extend_from_slice(args);
        peel_config(&Cli::try_parse_from(argv).map_err(|e| e.to_string())?.cmd)
    }

    #[test]
    fn peel_flags_build_the_role_and_members() {
        assert_eq!(peel(&[]).unwrap(), (None, Vec::new()));
        let (role, m) = peel(&[
            "--peel-role",
            "prefix",
            "--peel-rack",
            "1=0",
            "--peel-rack",
            "0=2",
        ])
        .unwrap();
        let Some(PeelRole::Prefix {
            pod: 0,
            plane: 0,
            rules,
        }) = role
        else {
            panic!("{role:?}")
        };
        assert_eq!(rules, PrefixRules::for_racks(&[2, 0]));
        assert!(m.is_empty());
        let g = Ipv4Address([239, 77, 0, 1]);
        let (role, m) = peel(&[
            "--peel-role",
            "rack",
            "--peel-uplink",
            "2",
            "--peel-member",
            "239.77.0.1=0,1",
        ])
        .unwrap();
        assert_eq!(role, Some(PeelRole::Rack { uplinks: vec![2] }));
        assert_eq!(m, vec![(g, 0), (g, 1)]);
    }

    #[test]
    fn bad_peel_flags_are_clear_errors() {
        for (args, want) in [
            (&["--peel-rack", "0=0"][..], "need --peel-role"),
            (&["--peel-role", "spine"][..], "prefix or rack"),
            (&["--peel-role", "prefix"][..], "ids 0..N-1"),
            (
                &["--peel-role", "prefix", "--peel-rack", "1=0"][..],
                "ids 0..N-1",
            ),
            (
                &[
                    "--peel-role",
                    "prefix",
                    "--peel-rack",
                    "0=0",
                    "--peel-rack",
                    "0=1",
                ][..],
                "given twice",
            ),
            (
                &["--peel-role", "prefix", "--peel-rack", "0=7"][..],
                "no port 7",
            ),
            (&["--peel-role", "rack"][..], "needs --peel-uplink"),
            (
                &["--peel-role", "rack", "--peel-uplink", "9"][..],
                "no port 9",
            ),
            (
                &[
                    "--peel-role",
                    "rack",
                    "--peel-uplink",
                    "2",
                    "--peel-member",
                    "x",
                ][..],
                "GROUP=PORT",
            ),
            (
                &[
                    "--peel-role",
                    "rack",
                    "--peel-uplink",
                    "2",
                    "--peel-rack",
                    "0=0",
                ][..],
                "not --peel-rack",
            ),
        ] {
            let e = peel(args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }
}

/// A `stats` reply as JSON: `port I SPEC k v …` lines into `ports`, `SCOPE KEY VALUE`
/// and `SCOPE k v k v …` lines into one object per scope (numbers where they parse),
/// anything else kept verbatim under `other`.
fn stats_json(reply: &str) -> serde_json::Value {
    use serde_json::{Map, Value};
    let num = |v: &str| -> Value {
        v.parse::<u64>()
            .map(Value::from)
            .or_else(|_| v.parse::<f64>().map(Value::from))
            .unwrap_or_else(|_| Value::from(v))
    };
    let mut out = Map::new();
    let mut ports = Vec::new();
    let mut other = Vec::new();
    for line in reply.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["port", i, spec, rest @ ..] if rest.len() % 2 == 0 && i.parse::<u32>().is_ok() => {
                let mut m = Map::new();
                m.insert("port".into(), num(i));
                m.insert("spec".into(), Value::from(*spec));
                for kv in rest.chunks(2) {
                    m.insert(kv[0].into(), num(kv[1]));
                }
                ports.push(Value::Object(m));
            }
            // `SCOPE KEY VALUE` counters, and the `memory k v …` line.
            [scope, rest @ ..]
                if rest.len() == 2 || (*scope == "memory" && rest.len() % 2 == 0) =>
            {
                let entry = out
                    .entry(scope.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                match entry {
                    Value::Object(m) => {
                        for kv in rest.chunks(2) {
                            m.insert(kv[0].into(), num(kv[1]));
                        }
                    }
                    _ => other.push(Value::from(line)),
                }
            }
            [] => {}
            _ => other.push(Value::from(line)),
        }
    }
    out.insert("ports".into(), Value::Array(ports));
    out.insert("other".into(), Value::Array(other));
    Value::Object(out)
}

#[cfg(test)]
mod stats_json_tests {
    #[test]
    fn counter_lines_become_objects_and_the_rest_is_kept() {
        let reply = "port 0 dgram:127.0.0.1:1=127.0.0.1:2 rx_frames 3 tx_frames 4\nswitch forwarded 7\ncepheus replicas 2\nmemory tables_bytes 10 learned_macs 1 hosts 2 cnp_filter aged\npeel group 1 member_ports 1,2,3\n";
        let j = super::stats_json(reply);
        assert_eq!(j["ports"][0]["spec"], "dgram:127.0.0.1:1=127.0.0.1:2");
        assert_eq!(j["ports"][0]["tx_frames"], 4);
        assert_eq!(j["switch"]["forwarded"], 7);
        assert_eq!(j["cepheus"]["replicas"], 2);
        assert_eq!(j["memory"]["cnp_filter"], "aged");
        assert_eq!(j["other"][0], "peel group 1 member_ports 1,2,3");
    }
}
