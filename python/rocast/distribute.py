"""Runs a list of commands in parallel on a backend and reports each one's exit status,
output and wall time: what `rocast repro --backend dask` hands its figures to.

    python -m rocast.distribute --backend dask [--address tcp://host:8786] [--workers N] < jobs.json

jobs.json is a JSON list of {"id": str, "argv": [program, args...]}; the answer on
stdout is a JSON list, in the same order, of {"id", "code", "stdout", "stderr",
"wall_s"}. On a multi-node cluster every worker must see the program and the output
directories at the same paths (a shared filesystem).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from ._backends import BACKENDS, map_on


def run_command(job: Dict[str, Any]) -> Dict[str, Any]:
    """One job, wherever it runs: its argv without a shell."""
    t0 = time.monotonic()
    p = subprocess.run(job["argv"], capture_output=True, text=True, errors="replace")
    return {"id": job["id"], "code": p.returncode, "stdout": p.stdout, "stderr": p.stderr,
            "wall_s": time.monotonic() - t0}


def run_commands(jobs: List[Dict[str, Any]], backend: str = "local", address: Optional[str] = None,
                 workers: Optional[int] = None) -> List[Dict[str, Any]]:
    """Runs `jobs` on "local" (a thread per job slot: each job is a process already) or
    "dask" (a LocalCluster, or the cluster at `address`); results in the jobs' order."""
    return map_on(run_command, jobs, backend, max(1, workers or 1), address, local_threads=True)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rocast.distribute", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="local", choices=BACKENDS)
    ap.add_argument("--address", help="a running Dask scheduler, e.g. tcp://host:8786")
    ap.add_argument("--workers", type=int, default=1, help="job slots (local) or LocalCluster workers")
    a = ap.parse_args(argv)
    try:
        jobs = json.load(sys.stdin)
        if not isinstance(jobs, list) or not all(
            isinstance(j, dict) and isinstance(j.get("id"), str) and isinstance(j.get("argv"), list)
            for j in jobs
        ):
            raise ValueError("expected a list of {\"id\": str, \"argv\": [...]}")
    except ValueError as e:
        print(f"rocast.distribute: bad jobs on stdin: {e}", file=sys.stderr)
        return 2
    json.dump(run_commands(jobs, a.backend, a.address, a.workers), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
