"""librocast_mpi (mpi/rocast_mpi.c over crates/mpi) under Open MPI in a namespace lab:
unmodified MPI programs, preloaded, broadcast through `rocast switch`.

A lab of four hosts and the switch (`rocast lab up --switch`), mpirun in h0 with its
daemons started in the other namespaces by an rsh agent that enters them (as `rocast
bench lab-bcast --mpi` runs Open MPI), and LD_PRELOAD=librocast_mpi.so on every rank:
- the C program mpi/bcast_check (osu_bcast's loop; every rank checks every byte of
  every call, a fresh pattern each call) and the mpi4py script python/mpi_bcast.py
  (comm.Bcast of numpy buffers; every rank compares the root's bytes) both exit 0, the
  large broadcasts went through rocast at every rank, the small ones through
  PMPI_Bcast, and the switch's replicated_bytes grew by at least the payload times the
  receivers;
- a member whose data path is cut mid-broadcast (its route to the group addresses
  blackholed; its MPI connections stay up) makes MPI_Bcast return MPI_ERR_OTHER at every
  rank (under MPI_ERRORS_RETURN), within a deadline;
- a rank killed mid-broadcast ends the job with an error, within a deadline: never a
  hang.

Needs root (namespaces), Open MPI (mpicc, mpirun) and mpi4py, which
scripts/install-deps.sh installs; ROCAST_BIN is the `rocast` binary (CI's debug one).
"""

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROCAST = os.environ.get("ROCAST_BIN", str(REPO / "target" / "debug" / "rocast"))
LAB = "mpit"
HOSTS = 4
# Every step of these tests has a deadline (seconds).
STEP_S = 120


def rocast(*args, timeout=STEP_S):
    return subprocess.run([ROCAST, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The lab, librocast_mpi built (debug, as CI's cargo test left the crates) and the
    hostfile; the lab is taken down and checked gone afterwards."""
    d = tmp_path_factory.mktemp("mpi")
    b = subprocess.run(["bash", str(REPO / "scripts" / "build-mpi.sh"), "--debug"], capture_output=True,
                       text=True, timeout=900, cwd=REPO)
    assert b.returncode == 0, b.stderr
    rocast("lab", "down", "--name", LAB)
    up = rocast("lab", "up", "--name", LAB, "--hosts", str(HOSTS), "--switch")
    assert up.returncode == 0, up.stderr
    hosts = d / "hosts"
    hosts.write_text("".join(f"10.77.0.{i + 1} slots=1\n" for i in range(HOSTS)))
    try:
        yield {"hosts": hosts}
    finally:
        down = rocast("lab", "down", "--name", LAB)
        assert down.returncode == 0, down.stderr
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"rocast-{LAB}-" not in left, left
        for i in range(1, HOSTS + 1):
            shutil.rmtree(f"/tmp/rocast-ompi-h{i}", ignore_errors=True)


def mpirun_argv(lab, np, program, env=()):
    lib = REPO / "target" / "mpi" / "librocast_mpi.so"
    argv = [ROCAST, "lab", "exec", "--name", LAB, "h0", "--", "env", "OMPI_ALLOW_RUN_AS_ROOT=1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", f"ROCAST_LAB_NAME={LAB}", "mpirun", "-np", str(np), "--hostfile", str(lab["hosts"]),
            "--mca", "plm_rsh_agent", str(REPO / "scripts" / "lab-rsh-agent.sh"), "--mca", "btl", "tcp,self",
            "--mca", "btl_tcp_if_include", "eth0", "--mca", "oob_tcp_if_include", "eth0",
            "--mca", "routed", "direct", "--mca", "mpi_yield_when_idle", "1", "--mca", "rtc", "^hwloc",
            "-x", f"LD_PRELOAD={lib}", "-x", "ROCAST_MPI_VERBOSE=1", "-x", "ROCAST_MPI_TIMEOUT_MS=10000"]
    for e in env:
        argv += ["-x", e]
    return argv + list(program)


# Open MPI's own launch failures (a daemon that did not start in a namespace), which
# `rocast bench lab-bcast --mpi` also retries: the job never ran, so it runs again.
LAUNCH_FAILED = ("ORTE was unable to reliably start", "orte_init failed")


def run_mpi(argv):
    for _ in range(3):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_S)
        if p.returncode == 0 or not any(m in p.stdout + p.stderr for m in LAUNCH_FAILED):
            return p
    return p


def replicated_bytes():
    s = rocast("switch", "--stats", "--control", f"/run/rocast-lab/{LAB}/switch.sock").stdout
    m = re.search(r"^switch replicated_bytes (\d+)$", s, re.M)
    assert m, s
    return int(m.group(1))


def rocast_counts(text):
    """Per rank: (broadcasts by rocast, bytes, by PMPI_Bcast, failed)."""
    return {int(r): tuple(int(x) for x in rest) for r, *rest in re.findall(
        r"librocast_mpi: rank (\d+): (\d+) broadcasts by rocast \((\d+) bytes\), (\d+) by PMPI_Bcast, (\d+) failed",
        text)}


def test_unmodified_programs_broadcast_through_the_switch(lab):
    sizes = [1024, 262144, 1048576]
    before = replicated_bytes()
    p = run_mpi(mpirun_argv(lab, HOSTS, [str(REPO / "target" / "mpi" / "bcast_check"), "-i", "3",
                                         *map(str, sizes)]))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "WRONG BYTES" not in out
    rows = [l.split() for l in p.stdout.splitlines() if l and not l.startswith("#")]
    assert [int(r[0]) for r in rows] == sizes, p.stdout
    assert "librocast_mpi: root 0: rocast group through the switch" in out, out
    counts = rocast_counts(out)
    assert sorted(counts) == list(range(HOSTS)), out
    # 4 calls (1 warm-up, 3 timed) of each size; 1 KiB is under the 256 KiB threshold.
    large = 4 * (262144 + 1048576)
    for rank, (by_rocast, nbytes, by_pmpi, failed) in counts.items():
        assert (by_rocast, nbytes, failed) == (8, large, 0), (rank, counts[rank])
        assert by_pmpi >= 4, (rank, counts[rank])
    # The switch made the copies: every receiver's bytes were replicated at least once.
    assert replicated_bytes() - before >= large * (HOSTS - 1) * 0.9, (before, replicated_bytes())

    # mpi4py's comm.Bcast, unmodified, through the same library.
    before = replicated_bytes()
    p = run_mpi(mpirun_argv(lab, HOSTS, [str(REPO / ".venv" / "bin" / "python"),
                                         str(REPO / "python" / "mpi_bcast.py"), "1048576"]))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert re.search(r"^1048576 [\d.]+ [\d.]+$", p.stdout, re.M), p.stdout
    counts = rocast_counts(out)
    assert sorted(counts) == list(range(HOSTS)) and all(c[0] > 0 and c[3] == 0 for c in counts.values()), out
    assert replicated_bytes() - before >= counts[0][1] * (HOSTS - 1) * 0.9


def test_a_member_cut_off_mid_broadcast_fails_the_broadcast_at_every_rank(lab):
    argv = mpirun_argv(lab, HOSTS, [str(REPO / "target" / "mpi" / "bcast_check"), "-e", "1", "-i", "100",
                                     "16777216"], env=["ROCAST_MPI_TIMEOUT_MS=3000"])
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ns = f"rocast-{LAB}-h2"
    try:
        # The group is up and data flows after a few seconds; then h2 loses the group.
        time.sleep(6)
        cut = subprocess.run(["ip", "netns", "exec", ns, "ip", "route", "add", "blackhole", "10.77.0.128/25"],
                             capture_output=True, text=True)
        assert cut.returncode == 0, cut.stderr
        out, _ = p.communicate(timeout=STEP_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        subprocess.run(["ip", "netns", "exec", ns, "ip", "route", "del", "blackhole", "10.77.0.128/25"],
                       capture_output=True)
    assert p.returncode != 0, out
    failed = sorted(int(r) for r in re.findall(r"^rank (\d+): MPI_Bcast returned (?:MPI_ERR_OTHER|.*known error)",
                                                out, re.M))
    assert failed == list(range(HOSTS)), out
    # The root lost h2 (rank 2), h2 lost its data path; the others heard it in the vote.
    assert re.search(r"librocast_mpi: rank 0: MPI_Bcast of 16777216 bytes from root 0 failed: send:", out), out
    assert "failed at another rank" in out, out


def test_a_rank_killed_mid_broadcast_ends_the_job_with_an_error_not_a_hang(lab):
    # 16 MiB broadcasts, many of them: rank 2 is killed while they flow.
    argv = mpirun_argv(lab, HOSTS, [str(REPO / "target" / "mpi" / "bcast_check"), "-i", "200", "16777216"])
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = False
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            time.sleep(0.5)
            pids = subprocess.run(["ip", "netns", "pids", f"rocast-{LAB}-h2"], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    exe = os.readlink(f"/proc/{pid}/exe")
                except OSError:
                    continue
                if exe.endswith("bcast_check"):
                    # Give the group time to come up and data to flow, then kill.
                    time.sleep(2)
                    os.kill(int(pid), signal.SIGKILL)
                    killed = True
                    break
        assert killed, "rank 2's process never appeared"
        out, _ = p.communicate(timeout=STEP_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode != 0, out
    # The job ended with an error at the survivors or Open MPI's own abort, not a hang;
    # nothing of it is left in the namespaces.
    assert "librocast_mpi" in out or "mpirun noticed" in out or "exited on signal" in out, out
    time.sleep(1)
    for i in range(HOSTS):
        pids = subprocess.run(["ip", "netns", "pids", f"rocast-{LAB}-h{i}"], capture_output=True,
                              text=True).stdout.split()
        names = []
        for pid in pids:
            try:
                names.append(os.readlink(f"/proc/{pid}/exe"))
            except OSError:
                pass
        assert not [n for n in names if n.endswith("bcast_check")], (i, names)
