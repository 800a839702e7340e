"""RoCEv2 captures as DataFrames: `rocast.pcap.read(path)` is `rocast pcap dump --json`.

    frames = rocast.pcap.read("capture.pcap")
    frames.groupby("opcode").size()          # frames per opcode
    frames[~frames["icrc_ok"]]               # frames whose ICRC does not check

One row per RoCE frame (frames to UDP 4791 and PEEL's 4793; other traffic is skipped),
in capture order: frame (numbered from 1, as Wireshark), time_s (from the first frame),
src, dst, opcode (name) and opcode_code, dest_qp, psn, flags (the BTH and IP flags set,
space-separated: AckReq, SE, MigReq, FECN, BECN, ECN-CE), payload_len, icrc_ok, then
the extended headers flattened (`deth.qkey`, `deth.src_qp`, `reth.va`, `reth.rkey`,
`reth.dma_len`, `aeth.syndrome`, `aeth.msn`, `imm`, `ieth`, `peel.prefix_len`, …: NaN
where a frame has no such header) and `malformed` (why a frame to UDP 4791 did not
parse; NaN for the others). The file is read by rocast's own parser (in Rust, the one
`rocast pcap` uses): pcap or pcapng, Ethernet, raw IP or Linux cooked. A file that
cannot be read or is damaged part-way raises ValueError. Memory: every RoCE frame's
row (about 0.5 KB each before pandas).
"""

from __future__ import annotations

import json
import os
from typing import Union

import pandas as pd

__all__ = ["read"]

# The columns every frame has, in `pcap dump --json`'s order.
BASE_COLUMNS = ["frame", "time_s", "src", "dst", "opcode", "opcode_code", "dest_qp", "psn",
                "flags", "payload_len", "icrc_ok"]


def read(path: Union[str, os.PathLike]) -> pd.DataFrame:
    """Every RoCE frame of the capture at `path`, one row each (see the module doc)."""
    from . import _lib

    records = json.loads(_lib().read_capture(os.fspath(path)))
    for r in records:
        if "flags" in r:
            r["flags"] = " ".join(r["flags"])
    df = pd.json_normalize(records) if records else pd.DataFrame(columns=BASE_COLUMNS)
    for c in BASE_COLUMNS:
        if c not in df.columns:
            df[c] = pd.NA  # a capture of malformed frames only
    rest = sorted(c for c in df.columns if c not in BASE_COLUMNS)
    return df[BASE_COLUMNS + rest].reset_index(drop=True)
