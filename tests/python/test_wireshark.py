"""The Wireshark dissector (contrib/wireshark/rocast.lua) under tshark.

Two captures: `rocast pcap sample --all-protocols` (every rocast protocol, built by the
core's emitters, with known field values) and a capture of a real group transfer in a
`rocast lab` (MRP, the group control channel and RoCE as the runtime sends them). tshark
must decode the fields the Lua dissector declares to exactly the values rocast put there.

Needs tshark (scripts/install-deps.sh installs it) and, for the lab capture, root.
ROCAST_BIN overrides the binary (default target/debug/rocast).
"""

import os
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LUA = REPO / "contrib" / "wireshark" / "rocast.lua"
ROCAST = os.environ.get("ROCAST_BIN", str(REPO / "target" / "debug" / "rocast"))


def rocast(*args, timeout=60, check=True):
    return subprocess.run(
        [ROCAST, *args], capture_output=True, text=True, timeout=timeout, check=check
    )


def tshark_fields(pcap, fields, display_filter=None):
    """One dict per frame: field -> list of values (tshark -T fields)."""
    cmd = ["tshark", "-n", "-X", f"lua_script:{LUA}", "-r", str(pcap), "-T", "fields",
           "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=|"]
    if display_filter:
        cmd += ["-Y", display_filter]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # A Lua error is printed, not fatal: fail on it.
    assert "Lua: Error" not in out.stderr and "lua_load" not in out.stderr, out.stderr
    rows = []
    for line in out.stdout.splitlines():
        cols = line.split("\t")
        rows.append({f: (c.split("|") if c else []) for f, c in zip(fields, cols)})
    return rows


def test_the_sample_of_every_protocol_decodes_to_the_values_rocast_emitted(tmp_path):
    pcap = tmp_path / "all.pcap"
    rocast("pcap", "sample", "--all-protocols", str(pcap))
    f = ["frame.number", "rocast_cnp.dest_qp", "rocast_mrp.kind", "rocast_mrp.mcst_id",
         "rocast_mrp.member.ip", "rocast_mrp.member.qpn", "rocast_mrp.member.va",
         "rocast_mrp.member.rkey", "rocast_mrp.auth.counter", "rocast_mrp.pruned",
         "rocast_mrp.nonce", "rocast_mrp.lease_ms", "rocast_peel.version",
         "rocast_peel.flags", "rocast_peel.prefix_len", "rocast_peel.pod",
         "rocast_peel.prefix_value", "rocast_peel.plane", "infiniband.bth.opcode",
         "infiniband.bth.destqp", "rocast_control.type", "rocast_control.ip",
         "rocast_control.qpn", "rocast_control.held_ns", "rocast_control.roster",
         "rocast_control.scheme", "rocast_control.sha256", "rocast_control.offset",
         "rocast_control.bytes",
         "rocast_control.start_psn", "rocast_mrp.flags.new_incarnation"]
    rows = tshark_fields(pcap, f)
    assert len(rows) == 65

    cnp = [r for r in rows if r["rocast_cnp.dest_qp"]]
    assert [r["rocast_cnp.dest_qp"] for r in cnp] == [["0x000011"]]

    mrp = [r for r in rows if r["rocast_mrp.kind"]]
    assert [r["rocast_mrp.kind"][0] for r in mrp] == [
        "registration", "registration", "registration", "prune", "release", "allocate",
        "allocation"]
    assert mrp[0]["rocast_mrp.member.ip"] == ["10.0.0.2", "10.0.0.3"]
    assert mrp[0]["rocast_mrp.member.qpn"] == ["0x000012", "0x000013"]
    assert mrp[0]["rocast_mrp.mcst_id"] == ["10.77.0.200"]
    # The sample's registrations are a leader's first: a new incarnation (flags bit 4).
    assert mrp[0]["rocast_mrp.flags.new_incarnation"][0] in ("1", "True")
    assert mrp[1]["rocast_mrp.member.va"] == ["0x00007f0000001000"]
    assert mrp[1]["rocast_mrp.member.rkey"] == ["0x0000abcd"]
    assert mrp[2]["rocast_mrp.auth.counter"] == ["42"]
    assert mrp[2]["rocast_mrp.member.ip"] == ["10.0.0.2", "10.0.0.3"]
    assert mrp[3]["rocast_mrp.pruned"] == ["10.0.0.3"]
    assert mrp[5]["rocast_mrp.lease_ms"] == ["600000"]
    assert mrp[6]["rocast_mrp.nonce"] == ["0x0123456789abcdef"]
    assert mrp[6]["rocast_mrp.lease_ms"] == ["300000"]

    peel = [r for r in rows if r["rocast_peel.pod"]]
    assert len(peel) == 1
    p = peel[0]
    assert (p["rocast_peel.version"], p["rocast_peel.flags"], p["rocast_peel.prefix_len"],
            p["rocast_peel.pod"], p["rocast_peel.prefix_value"], p["rocast_peel.plane"]) == (
        ["1"], ["0x05"], ["3"], ["2"], ["5"], ["1"])
    # The RoCE packet behind the shim went on to Wireshark's own dissector.
    assert p["infiniband.bth.opcode"] == ["10"]
    assert p["infiniband.bth.destqp"] == ["0x000012"]

    ctl = [r for r in rows if r["rocast_control.type"]]
    assert [r["rocast_control.type"] for r in ctl] == [
        ["12"], ["1"], ["2"], ["6"], ["7"], ["3"], ["9"], ["13"], ["14"], ["4"], ["5"], ["11", "10"]]
    assert ctl[2]["rocast_control.ip"] == ["10.0.0.2"]
    assert ctl[2]["rocast_control.qpn"] == ["0x000012"]
    assert ctl[3]["rocast_control.roster"] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert ctl[3]["rocast_control.scheme"] == ["3"]
    assert ctl[1]["rocast_control.start_psn"] == ["0x5eed42"]
    assert ctl[6]["rocast_control.sha256"] == ["ca" * 32]
    assert ctl[8]["rocast_control.bytes"] == ["40960"]
    assert ctl[10]["rocast_control.sha256"] == ["ca" * 32]
    assert ctl[7]["rocast_control.offset"] == ["32768"]
    assert ctl[10]["rocast_control.held_ns"] == ["123456789"]
    assert ctl[11]["rocast_control.ip"] == ["10.0.0.3"]


def test_rocast_reads_pcapng_as_wireshark_writes_it(tmp_path):
    """editcap (Wireshark's) converts the sample to pcapng; `rocast pcap dump` and
    `check` print the same as for the pcap."""
    pcap, ng = tmp_path / "all.pcap", tmp_path / "all.pcapng"
    rocast("pcap", "sample", "--all-protocols", str(pcap))
    subprocess.run(["editcap", "-F", "pcapng", str(pcap), str(ng)], check=True, timeout=60)
    assert ng.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
    for cmd in ("dump", "check"):
        a, b = rocast("pcap", cmd, str(pcap)), rocast("pcap", cmd, str(ng))
        assert a.stdout == b.stdout and a.stdout
    assert "65 frames, 46 roce, 46 icrc-ok, 0 icrc-bad" in b.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="a rocast lab needs root")
def test_a_lab_capture_decodes_the_group_as_it_ran(tmp_path):
    lab = "wsk"
    cap = tmp_path / "cap"
    payload = tmp_path / "payload.bin"
    payload.write_bytes(bytes((i * 31 + 7) % 251 for i in range(64 * 1024)))
    rocast("lab", "down", "--name", lab)
    try:
        rocast("lab", "up", "--name", lab, "--hosts", "3", "--switch", "--capture", str(cap))
        joins = [subprocess.Popen(
            [ROCAST, "lab", "exec", "--name", lab, f"h{i}", "--", ROCAST, "mcast", "join",
             "--bind", f"10.77.0.{i + 1}", "--leader", "10.77.0.1", "--timeout", "15"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
        lead = rocast("lab", "exec", "--name", lab, "h0", "--", ROCAST, "mcast", "lead",
                      "--bind", "10.77.0.1", "--members", "2", "--file", str(payload),
                      "--timeout", "15", timeout=60)
        for j in joins:
            j.communicate(timeout=30)
            assert j.returncode == 0
        assert lead.stdout.count(": ok") == 2, lead.stdout
    finally:
        # Stopping the switch closes its capture files.
        rocast("lab", "down", "--name", lab, check=False)
        time.sleep(0.2)
    leader_link = next(cap.rglob("port0.pcap"))
    f = ["rocast_mrp.kind", "rocast_mrp.mcst_id", "rocast_mrp.member.ip",
         "rocast_control.type", "rocast_control.ip", "infiniband.bth.opcode"]
    rows = tshark_fields(leader_link, f)
    regs = [r for r in rows if r["rocast_mrp.kind"] == ["registration"]]
    assert regs, "no MRP registration decoded"
    # The two members are in the registration (rocast also registers the leader's own
    # QP, which takes the aggregated feedback).
    assert {"10.77.0.2", "10.77.0.3"} <= set(regs[0]["rocast_mrp.member.ip"]), regs[0]
    group = regs[0]["rocast_mrp.mcst_id"][0]
    types = [t for r in rows for t in r["rocast_control.type"]]
    # Params, Join, Confirm, Announce, Ready, Result, Close (a SEND group: no Done).
    for t in ("1", "2", "3", "9", "7", "5", "10"):
        assert t in types, f"group control type {t} not decoded: {types}"
    joins_ip = sorted(r["rocast_control.ip"][0] for r in rows if r["rocast_control.type"] == ["2"])
    assert joins_ip == ["10.77.0.2", "10.77.0.3"]
    # The data went out as RoCE (WRITE or SEND opcodes) to the group.
    data = [r for r in rows if r["infiniband.bth.opcode"]]
    assert len(data) >= 16, f"{len(data)} RoCE frames"
    assert group.startswith("10.77.0.")


def tshark_count(pcap, display_filter):
    """Frames of `pcap` that tshark's own dissectors match with `display_filter`."""
    out = subprocess.run(["tshark", "-n", "-r", str(pcap), "-Y", display_filter],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return len(out.stdout.splitlines())


def test_a_cepheus_capture_decodes_as_roce_with_no_management_datagrams(tmp_path):
    # The sender's link of a simulated Cepheus group: its data goes to the virtual
    # remote (McstID, VIRTUAL_QPN). At the paper's QPN 0x1, tshark read all 64 data
    # frames as GSI management datagrams (infiniband.mad).
    out = tmp_path / "ceph"
    rocast("sim", "--preset", "multicast", "--set", 'multicast.sizes="64K"',
           "--set", 'multicast.schemes=["cepheus","tree"]',
           "--set", "output.capture_links=[[0,128]]", "--no-plot", "--quiet",
           "--out", str(out), timeout=600)
    pcap = out / "capture.pcap"
    data = tshark_count(pcap, "infiniband.bth.destqp == 0x100")
    assert data >= 64, data
    assert tshark_count(pcap, "infiniband.mad") == 0
    assert tshark_count(pcap, "infiniband.bth.destqp <= 1") == 0
    assert tshark_count(pcap, "infiniband.bth") == tshark_count(pcap, "frame")
