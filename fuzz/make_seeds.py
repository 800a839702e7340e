#!/usr/bin/env python3
"""Writes the committed seed corpus under fuzz/seeds/<target>/: a few valid inputs per
target, so each run starts from the protocols' real shapes. Regenerate with
`python3 fuzz/make_seeds.py` (deterministic: no randomness)."""
import hashlib, hmac, os, struct

HERE = os.path.dirname(os.path.abspath(__file__))
KEY = bytes([0x5a]) * 32


def ip(a, b, c, d):
    return bytes([a, b, c, d])


def frame(ty, body):
    return bytes([ty]) + struct.pack(">H", len(body)) + body


VERSION = 3
params = frame(1, bytes([VERSION, 1]) + struct.pack(">QII", 1 << 16, 4096, 0x5EED42))
join = frame(2, bytes([VERSION]) + ip(10, 77, 0, 2) + struct.pack(">IQI", 0x102, 0x1000, 7))
ready = frame(7, b"")
announce = frame(9, struct.pack(">IQ", 1, 300) + bytes([0xAB] * 32))
result = frame(5, bytes([1]) + bytes([0xAB] * 32) + struct.pack(">Q", 1))
close = frame(10, bytes([1]))
evicted = frame(11, ip(10, 77, 0, 3))


def mrp_registration(members, write=False, new_incarnation=False):
    """An MRP registration (crates/core/src/wire/mrp.rs): flags bit 0 WRITE, bit 4 a
    leader's first registration (a new incarnation), not a refresh."""
    flags = (1 if write else 0) | (0x10 if new_incarnation else 0)
    body = ip(10, 77, 0, 200) + bytes([0, 1, len(members), flags])
    for (a, qpn) in members:
        body += a + struct.pack(">I", qpn)
        if write:
            body += struct.pack(">QI", 0, 0)
    return body


def nm_packet(ty, flags, stream, body):
    """A NACK multicast packet (crates/core/src/nack_multicast/packet.rs)."""
    return bytes([0xA7, 2, ty, flags]) + struct.pack(">I", stream) + body


def nm_data(stream, seq, payload):
    return nm_packet(1, 3, stream, struct.pack(">QQII", seq, seq, len(payload), 0) + payload)


def nm_seal(packet):
    """FLAG_AUTH and the tag (nack_multicast/auth.rs): HMAC-SHA256(KEY, "rocast-nm" |
    packet with REPAIR cleared)[:16]."""
    p = bytearray(packet)
    p[3] |= 0x80
    covered = bytes(p[:3]) + bytes([p[3] & ~4 & 0xFF]) + bytes(p[4:])
    return bytes(p) + hmac.new(KEY, b"rocast-nm" + covered, hashlib.sha256).digest()[:16]


def seal(src, counter, payload):
    tag = hmac.new(KEY, src + struct.pack(">Q", counter) + payload, hashlib.sha256).digest()
    return payload + b"RMA1" + struct.pack(">Q", counter) + tag[:16]


def udp_frame(src, dst, port, payload, src_mac, dst_mac):
    udp = struct.pack(">HHHH", port, port, 8 + len(payload), 0) + payload
    hdr = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, src, dst)
    s = sum(struct.unpack(">10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    hdr = hdr[:10] + struct.pack(">H", ~s & 0xFFFF) + hdr[12:]
    return dst_mac + src_mac + b"\x08\x00" + hdr + udp


def roce_frame(opcode, psn, ext, payload, src_mac, dst_mac):
    """An RC packet from h0 to the group's virtual QP 1, ICRC computed (IBTA A17.3.3)."""
    import zlib
    bth = bytes([opcode, 0]) + struct.pack(">H", 0xFFFF) + bytes([0]) + (1).to_bytes(3, "big") \
        + bytes([0x80]) + psn.to_bytes(3, "big")
    l4 = bth + ext + payload
    udp = struct.pack(">HHHH", 49152, 4791, 8 + len(l4) + 4, 0)
    hdr = struct.pack(">BBHHHBBH4s4s", 0x45, 0x6A, 20 + len(udp) + len(l4) + 4, 0, 0x4000, 64, 17, 0,
                      ip(10, 77, 0, 1), ip(10, 77, 0, 200))
    s = sum(struct.unpack(">10H", hdr))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    hdr = hdr[:10] + struct.pack(">H", ~s & 0xFFFF) + hdr[12:]
    masked = bytearray(b"\xff" * 8 + hdr + udp + l4)
    for k in (8 + 1, 8 + 8, 8 + 10, 8 + 11, 8 + 26, 8 + 27, 8 + 28 + 4):
        masked[k] = 0xFF
    icrc = struct.pack("<I", zlib.crc32(bytes(masked)))
    return dst_mac + src_mac + b"\x08\x00" + hdr + udp + l4 + icrc


def record(port, dt, f):
    return bytes([port, dt]) + struct.pack(">H", len(f)) + f


members = [(ip(10, 77, 0, i + 1), 0x11 if i == 0 else 0x100 + i) for i in range(4)]
reg = mrp_registration(members)
release = ip(10, 77, 0, 200) + bytes([0, 1, 0, 2])
prune = ip(10, 77, 0, 200) + bytes([0, 1, 1, 4]) + ip(10, 77, 0, 3)
mac0 = bytes([2, 0x72, 0x63, 0, 0, 1])
sw_mac = bytes([2, 0x72, 0x63, 0xFE, 0, 0])
src = ip(10, 77, 0, 1)
group = ip(10, 77, 0, 200)
allocate = bytes([0, 0, 0, 0, 0, 1, 0, 8]) + struct.pack(">QI", 77, 60000)
allocation = b"RCAL" + ip(10, 77, 0, 128) + struct.pack(">QI", 77, 60000)

def pcapng(frames):
    """A little-endian pcapng file: section header, one Ethernet interface with
    nanosecond timestamps (if_tsresol 9), an enhanced packet block per frame."""
    def block(ty, body):
        body += bytes(-len(body) % 4)
        return struct.pack("<II", ty, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))
    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack("<HHI", 1, 0, 262144) + struct.pack("<HHB3x", 9, 1, 9) + bytes(4))
    for i, f in enumerate(frames):
        ts = 1_700_000_000_000_000_000 + i * 1000
        out += block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(f), len(f)) + f)
    return out


seeds = {
    "group_control": {"stream": bytes([7]) + params + join + ready + announce + result + close + evicted},
    "mrp": {"registration": reg, "release": release, "prune": prune,
            "new-incarnation": mrp_registration(members, write=True, new_incarnation=True),
            "sealed": seal(src, 7, reg),
            "report": b"RCRJ" + group + struct.pack(">I", 9) + bytes([1]),
            "allocate": allocate, "allocation": allocation},
    "switch_pipeline": {
        "plain": bytes([0]) + b"".join(record(0, 1, udp_frame(src, group, 4792, p, mac0, sw_mac))
                                       for p in [allocate, reg, prune, release]),
        "keyed": bytes([1]) + b"".join(record(0, 1, udp_frame(src, group, 4792, seal(src, c, p), mac0, sw_mac))
                                       for c, p in [(4, allocate), (5, reg), (6, prune), (7, release)]),
    },
    # connect 0..2, drivers open QPs, exchanges (joins, registration), a buffer with
    # its drivers, a broken connection, timeouts, the close.
    "group_session": {
        "switch": bytes([0]) + bytes([0, 0, 0, 1, 0, 2, 10, 0, 10, 1, 10, 2, 2, 0, 2, 0, 2, 0,
                                      5, 1, 2, 0, 10, 0, 10, 1, 10, 2, 2, 0, 3, 1, 6, 0, 2, 0,
                                      10, 0, 10, 2, 2, 0, 4, 20, 2, 0, 8, 0, 2, 0]),
        "overlay": bytes([2]) + bytes([0, 0, 0, 1, 0, 2, 10, 0, 10, 1, 10, 2, 2, 0, 10, 0, 10, 1,
                                       10, 2, 2, 0, 5, 1, 2, 0, 4, 200]),
    },
    "perf_control": {"hello": b"HELLO v=1 op=send size=65536 iters=1000 mtu=4096 tx_depth=64 window=128 rto_ns=1000000 sr=0 loss=0 seed=1 qpn=17 psn=5 ip=10.0.0.1\n",
                     "write": b"HELLO v=1 op=write size=2147483647 iters=1 mtu=1024 tx_depth=8192 window=1 rto_ns=5 sr=1 loss=0.5 seed=9 qpn=1 psn=1 ip=1.2.3.4\n"},
    "switch_control": {"stats": b"\x03stats\n", "groups": b"\x03groups\n", "loss": b"\x03loss 0.05 0 2\n"},
    "fast_path": {
        "send": (99).to_bytes(3, "big") + roce_frame(4, 100, b"", bytes(range(64)), mac0, sw_mac),
        "write": (99).to_bytes(3, "big")
        + roce_frame(10, 100, struct.pack(">QII", 0x40, 0x1234, 64), bytes(range(64)), mac0, sw_mac),
        "retransmission": (200).to_bytes(3, "big") + roce_frame(4, 100, b"", bytes(64), mac0, sw_mac),
    },
    "parse_frame": {"mrp-frame": udp_frame(src, group, 4792, reg, mac0, sw_mac),
                    "pcapng": pcapng([udp_frame(src, group, 4792, reg, mac0, sw_mac),
                                      roce_frame(4, 100, b"", bytes(range(64)), mac0, sw_mac)])},
    "ud_multicast": {"empty": b"\x00",
                     "data": nm_data(7, 0, b"hello"),
                     "heartbeat": nm_packet(2, 0, 7, struct.pack(">QQQ", 1, 0, 1)),
                     "status": nm_packet(4, 0, 7, struct.pack(">IIQ", 1, 256, 1)),
                     "nack": nm_packet(3, 0, 7, struct.pack(">IIQ", 2, 1, 0)),
                     "sealed-data": nm_seal(nm_data(1, 0, b"hello")),
                     "sealed-heartbeat": nm_seal(nm_packet(2, 0, 1, struct.pack(">QQQ", 2, 0, 1)))},
}

for target, files in seeds.items():
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
