"""Independent oracle for rocast's RoCEv2 wire code, built on scapy.

`rocast pcap sample` writes one frame of every opcode rocast models; scapy
(`scapy.contrib.roce`, written independently of rocast) must decode the same
opcode / destination QP / PSN that `rocast pcap dump` reports, and scapy's own
ICRC computation must reproduce the ICRC rocast emitted. The same checks run over
testdata/rxe-golden.pcap (real Linux rdma_rxe traffic) to show that the oracle
agrees with a third implementation.

Run from the repository root after `cargo build`:
    pip install -r tests/python/requirements.txt
    pytest tests/python
ROCAST_BIN overrides the binary (default target/debug/rocast).
"""

import os
import re
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest
from scapy.compat import raw
from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "testdata" / "rxe-golden.pcap"

# Opcodes rocast models (IBTA vol. 1 Table 35 and Annex A17): RC SEND/WRITE/READ/
# ATOMIC/ACK plus SEND with invalidate, UC SEND/WRITE, UD SEND, and the RoCEv2 CNP.
MODELED_OPCODES = (
    set(range(0x00, 0x15)) | {0x16, 0x17} | set(range(0x20, 0x2C)) | {0x64, 0x65, 0x81}
)
# Names scapy has no entry for.
EXTRA_NAMES = {0x16: "RC_SEND_LAST_WITH_INVALIDATE", 0x17: "RC_SEND_ONLY_WITH_INVALIDATE"}

NAK_NAMES = {
    0: "PSN sequence error",
    1: "invalid request",
    2: "remote access error",
    3: "remote operational error",
    4: "invalid RD request",
}


def rocast_bin():
    b = Path(os.environ.get("ROCAST_BIN", "target/debug/rocast"))
    if not b.is_absolute() and not b.exists():
        b = REPO / b
    if not b.exists():
        pytest.fail(f"rocast binary not found at {b}; run `cargo build` or set ROCAST_BIN")
    return str(b)


def rocast(*args, check=True):
    r = subprocess.run([rocast_bin(), *args], capture_output=True, text=True, timeout=60)
    assert "panicked" not in r.stderr, r.stderr
    if check:
        assert r.returncode == 0, f"rocast {args} exited {r.returncode}: {r.stderr}"
    return r


DUMP_LINE = re.compile(
    r"^\s*(?P<num>\d+)\s+(?P<time>-?\d+\.\d{6}) (?P<src>\S+) → (?P<dst>\S+) (?P<op>.+?) "
    r"QP=0x(?P<qp>[0-9a-f]{6}) PSN=(?P<psn>\d+)(?P<rest>.*) len=(?P<len>\d+) ICRC (?P<icrc>ok|BAD)$"
)


def dump(path):
    """`rocast pcap dump` as {frame number (1-based): parsed line}."""
    out = rocast("pcap", "dump", str(path)).stdout
    lines = {}
    for line in out.splitlines():
        m = DUMP_LINE.match(line)
        assert m, f"unparseable dump line: {line!r}"
        lines[int(m["num"])] = m
    return lines


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    path = tmp_path_factory.mktemp("oracle") / "sample.pcap"
    rocast("pcap", "sample", str(path))
    return path


# ----------------------------------------------------------------------------------------
# Independent helpers (no rocast, no scapy RoCE code)


def icrc_by_hand(ip_packet):
    """The RoCEv2 ICRC per IBTA Annex A17.3.3 over an IPv4 packet without its ICRC."""
    ihl = (ip_packet[0] & 0x0F) * 4
    b = bytearray(ip_packet)
    b[1] = 0xFF  # TOS
    b[8] = 0xFF  # TTL
    b[10:12] = b"\xff\xff"  # IP checksum
    b[ihl + 6 : ihl + 8] = b"\xff\xff"  # UDP checksum
    b[ihl + 8 + 4] = 0xFF  # BTH FECN/BECN/reserved
    return zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF


def ext_len(opcode):
    """Extended transport header bytes after the BTH for a modeled opcode."""
    if opcode == 0x81:
        return 16  # CNP reserved bytes
    if opcode in (0x64, 0x65):
        return 8 + (4 if opcode == 0x65 else 0)  # DETH (+ImmDt)
    op = opcode & 0x1F
    n = 0
    if op in (0x06, 0x0A, 0x0B, 0x0C):
        n += 16  # RETH
    if op in (0x13, 0x14):
        n += 28  # AtomicETH
    if op in (0x0D, 0x0F, 0x10, 0x11, 0x12):
        n += 4  # AETH
    if op == 0x12:
        n += 8  # AtomicAckETH
    if op in (0x03, 0x05, 0x09, 0x0B):
        n += 4  # ImmDt
    if op in (0x16, 0x17):
        n += 4  # IETH
    return n


# ----------------------------------------------------------------------------------------
# Tests


def check_frame_against_dump(num, frame_bytes, pkt, line):
    """Every field scapy (or plain struct) decodes must match rocast's dump line."""
    bth = pkt[BTH]
    assert line is not None, f"frame {num}: rocast printed no line"
    # Opcode: scapy's name (e.g. RC_RDMA_WRITE_FIRST, CNP) vs rocast's (RC RDMA_WRITE_FIRST).
    name = BTH.fields_desc[0].i2s.get(bth.opcode) or EXTRA_NAMES[bth.opcode]
    assert line["op"].replace(" ", "_") == name, f"frame {num}"
    assert int(line["qp"], 16) == bth.dqpn, f"frame {num}"
    assert int(line["psn"]) == bth.psn, f"frame {num}"
    assert line["src"] == pkt[IP].src and line["dst"] == pkt[IP].dst
    rest = line["rest"].split()
    assert ("AckReq" in rest) == bool(bth.ackreq), f"frame {num}"
    assert ("SE" in rest) == bool(bth.solicited), f"frame {num}"
    assert ("BECN" in rest) == bool(bth.becn), f"frame {num}"
    assert ("FECN" in rest) == bool(bth.fecn), f"frame {num}"
    assert ("ECN-CE" in rest) == (pkt[IP].tos & 3 == 3), f"frame {num}"

    # Payload length from UDP length, BTH pad count and the opcode's header table.
    udp_payload = raw(pkt[UDP].payload)[: pkt[UDP].len - 8]
    data_len = len(udp_payload) - 12 - ext_len(bth.opcode) - bth.padcount - 4
    assert int(line["len"]) == data_len, f"frame {num}"

    # Extended headers, decoded with struct straight from the bytes.
    ext = udp_payload[12:]
    op = bth.opcode & 0x1F
    if bth.opcode in (0x64, 0x65):
        qkey, src_qp = struct.unpack(">I4x", ext[:8])[0], int.from_bytes(ext[5:8], "big")
        assert f"DETH(qkey=0x{qkey:08x} srcQP=0x{src_qp:06x})" in line["rest"], f"frame {num}"
    elif bth.opcode != 0x81 and op in (0x06, 0x0A, 0x0B, 0x0C):
        va, rkey, dlen = struct.unpack(">QII", ext[:16])
        assert f"RETH(va=0x{va:x} rkey=0x{rkey:x} len={dlen})" in line["rest"], f"frame {num}"
    if bth.opcode == 0x11 or bth.haslayer(AETH):
        a = pkt[AETH]
        assert a.syndrome == ext[0] and a.msn == int.from_bytes(ext[1:4], "big")
    if bth.opcode < 0x20 and op in (0x0D, 0x0F, 0x10, 0x11, 0x12):
        syn, msn = ext[0], int.from_bytes(ext[1:4], "big")
        kind = (syn >> 5) & 3
        if kind == 0:
            want = f"AETH(ACK credits={syn & 0x1f} msn={msn})"
        elif kind == 1:
            want = f"AETH(RNR NAK timer={syn & 0x1f} msn={msn})"
        else:
            want = f"AETH(NAK {NAK_NAMES[syn & 0x1f]} msn={msn})"
        assert want in line["rest"], f"frame {num}: {want} not in {line['rest']}"
    if bth.opcode in (0x65,) or (bth.opcode < 0x30 and op in (0x03, 0x05, 0x09, 0x0B)):
        imm = struct.unpack(">I", ext[ext_len(bth.opcode) - 4 : ext_len(bth.opcode)])[0]
        assert f"ImmDt=0x{imm:08x}" in line["rest"], f"frame {num}"
    if bth.opcode == 0x81:
        assert pkt.haslayer(CNPPadding)
        assert pkt[CNPPadding].reserved1 == 0 and pkt[CNPPadding].reserved2 == 0

    # The ICRC: scapy rebuilds the frame with a freshly computed ICRC; it must be identical.
    ok = icrc_matches(frame_bytes)
    assert ok == (line["icrc"] == "ok"), f"frame {num}: scapy ICRC ok={ok}, rocast says {line['icrc']}"
    return ok


def icrc_matches(frame_bytes):
    """scapy's verdict on the frame's ICRC (and a hand-computed one, which must agree)."""
    p = Ether(frame_bytes)
    end = 14 + p[IP].len
    stored = frame_bytes[end - 4 : end]
    # 1. scapy: delete the ICRC field and rebuild; scapy's BTH.post_build computes it.
    q = Ether(frame_bytes)
    del q[BTH].icrc
    rebuilt = raw(q)
    assert rebuilt[: end - 4] == frame_bytes[: end - 4], "scapy changed bytes other than the ICRC"
    scapy_icrc = rebuilt[end - 4 : end]
    # 2. scapy's compute_icrc directly.
    assert bytes(p[BTH].compute_icrc(None)) == scapy_icrc
    # 3. By hand from the specification text.
    by_hand = icrc_by_hand(frame_bytes[14 : end - 4]).to_bytes(4, "little")
    assert by_hand == scapy_icrc, "scapy and the by-hand ICRC disagree"
    return scapy_icrc == stored


def test_sample_matches_scapy(sample):
    pkts = rdpcap(str(sample))
    lines = dump(sample)
    assert len(pkts) == len(lines) >= len(MODELED_OPCODES)
    t0 = float(pkts[0].time)
    opcodes = Counter()
    for num, pkt in enumerate(pkts, 1):
        frame_bytes = raw(pkt)
        assert pkt.haslayer(BTH), f"frame {num}: scapy does not see RoCE"
        assert pkt[UDP].dport == 4791
        # The IPv4 header checksum scapy computes matches the one rocast wrote.
        ip = IP(raw(pkt[IP]))
        del ip.chksum
        assert IP(raw(ip)).chksum == pkt[IP].chksum, f"frame {num}"
        line = lines.get(num)
        assert check_frame_against_dump(num, frame_bytes, pkt, line), f"frame {num}: bad ICRC"
        assert abs(float(line["time"]) - (float(pkt.time) - t0)) < 2e-6
        opcodes[pkt[BTH].opcode] += 1
    assert set(opcodes) == MODELED_OPCODES
    # Every AETH flavour: ACK, RNR NAK and the five NAK codes.
    syndromes = {pkt[AETH].syndrome for pkt in pkts if pkt.haslayer(AETH)}
    assert {0x20 | 14, 0x60, 0x61, 0x62, 0x63, 0x64} <= syndromes
    assert any(s < 0x20 for s in syndromes)
    # Pad counts 0-3 all occur.
    assert {pkt[BTH].padcount for pkt in pkts} == {0, 1, 2, 3}
    assert rocast("pcap", "check", str(sample)).stdout == (
        f"{len(pkts)} frames, {len(pkts)} roce, {len(pkts)} icrc-ok, 0 icrc-bad\n"
    )


def test_corruption_seen_by_both(sample, tmp_path):
    pkts = rdpcap(str(sample))
    frames = [bytearray(raw(p)) for p in pkts]
    # Flip a payload byte of a SEND_FIRST (offset 14+20+8+12 = 54 is its first data byte).
    frames[0][60] ^= 0x01
    assert not icrc_matches(bytes(frames[0]))
    # Masked fields (TOS/ECN with the IP checksum fixed up, BTH FECN/BECN) keep the ICRC valid.
    p = Ether(bytes(frames[1]))
    p[IP].tos = p[IP].tos | 3
    p[BTH].fecn = 1
    del p[IP].chksum
    frames[1] = bytearray(raw(p))
    assert icrc_matches(bytes(frames[1]))
    out = tmp_path / "corrupt.pcap"
    wrpcap(str(out), [Ether(bytes(f)) for f in frames])
    r = rocast("pcap", "check", str(out), check=False)
    assert r.returncode == 1
    assert r.stdout == f"{len(frames)} frames, {len(frames)} roce, {len(frames) - 1} icrc-ok, 1 icrc-bad\n"
    assert r.stderr.startswith("frame 1: bad ICRC"), r.stderr
    lines = dump(out)
    assert lines[1]["icrc"] == "BAD" and lines[2]["icrc"] == "ok"
    assert "ECN-CE" in lines[2]["rest"] and "FECN" in lines[2]["rest"]


def test_golden_capture_agrees():
    pkts = rdpcap(str(GOLDEN))
    lines = dump(GOLDEN)
    assert len(pkts) == 550
    roce = [(n, p) for n, p in enumerate(pkts, 1) if p.haslayer(UDP) and p[UDP].dport == 4791]
    assert len(roce) == 506 == len(lines)
    assert [n for n, _ in roce] == sorted(lines)
    opcodes = Counter()
    for num, pkt in roce:
        assert check_frame_against_dump(num, raw(pkt), pkt, lines[num]), f"golden frame {num}: bad ICRC"
        opcodes[pkt[BTH].opcode] += 1
    assert opcodes == {0x04: 6, 0x06: 100, 0x07: 200, 0x08: 99, 0x11: 101}
    assert rocast("pcap", "check", str(GOLDEN)).stdout == "550 frames, 506 roce, 506 icrc-ok, 0 icrc-bad\n"
