"""bench/epoch.py --net namespaces leaves no namespace, veth or qdisc behind: not when
training fails, not when the benchmark is stopped with SIGTERM, not when it succeeds."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, run_module

EPOCH = REPO / "bench" / "epoch.py"
TINY = ["--reps", "1", "--steps", "2", "--fanouts", "4,3", "--batch-size", "40", "--hidden", "16",
        "--scenarios", "hybrid-twostep", "--timeout", "60"]


def _netns_usable() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (ip netns add, veth, bridge, tc)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2 (ip, tc)"
    probe = f"fsn{os.getpid()}-pytest"
    proc = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        return f"`ip netns add` fails here: {proc.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, timeout=30)
    return None


@pytest.fixture(scope="session")
def netns():
    """Skips the test where namespaces cannot be made; probed once, when a test first needs
    it (never at collection), and first among the test's fixtures (session scope)."""
    reason = _netns_usable()
    if reason is not None:
        pytest.skip(f"--net namespaces {reason}")


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    root = tmp_path_factory.mktemp("netns")
    run_module("fastsample.data", "synth", "--preset", "tiny", root / "g", "--quiet", check=True, timeout=120)
    run_module("fastsample.partition", root / "g", root / "p2", "--parts", "2", "--quiet", check=True, timeout=120)
    return root


def leftovers(pid: int) -> list[str]:
    """What run `pid` (prefix fsn<pid>) left in the root namespace: namespaces, links, tbf qdiscs."""
    prefix = f"fsn{pid}"
    found = []
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    found += [f"netns {line.split()[0]}" for line in out.splitlines()
              if line.split() and line.split()[0].startswith(prefix + "-")]
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(prefix) and name[len(prefix):len(prefix) + 1] in ("r", "b"):
            found.append(f"link {name}")
    out = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True, timeout=30).stdout
    found += [f"qdisc {line}" for line in out.splitlines() if " tbf " in f" {line} "]
    return found


def epoch(*args, timeout=90, signal_when=None):
    """Run bench/epoch.py; returns (returncode, output, pid). On timeout it is sent SIGTERM
    first, so that it can still clean up, and the test fails. With `signal_when`, SIGTERM
    is sent 1 s after signal_when(pid) becomes true."""
    proc = subprocess.Popen([sys.executable, str(EPOCH), *map(str, args)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if signal_when is not None:
        deadline = time.monotonic() + timeout
        while not signal_when(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # into the ranks' start-up (imports, gloo rendezvous over the veths)
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"bench/epoch.py did not finish in {timeout} s:\n{out}")
    return proc.returncode, out, proc.pid


def outputs(tmp_path):
    return ["--json", tmp_path / "e.json", "--csv", tmp_path / "e.csv", "--plot", tmp_path / "e.png"]


@pytest.mark.root
def test_failed_run_leaves_nothing_behind(netns, parts, tmp_path):
    broken = tmp_path / "p2"
    shutil.copytree(parts / "p2", broken)
    shutil.rmtree(broken / "part-1")   # rank 1 fails at start-up
    code, out, pid = epoch("--partitions", broken, "--net", "namespaces", *TINY, *outputs(tmp_path))
    assert code != 0, out
    assert "part-1" in out and "Traceback" not in out, out
    assert leftovers(pid) == []


def _processes_using(path) -> list[str]:
    """Command lines of live processes that name `path` (the ranks of a run on it)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(path) in cmdline and "fastsample.train" in cmdline:
                found.append(f"{entry}: {cmdline}")
    return found


@pytest.mark.root
def test_sigterm_mid_run_leaves_nothing_behind(netns, parts, tmp_path):
    data = tmp_path / "p2"
    shutil.copytree(parts / "p2", data)

    def ranks_running(pid):  # rank 1 is training inside its namespace
        out = subprocess.run(["ip", "netns", "pids", f"fsn{pid}-r1"], capture_output=True, text=True, timeout=30)
        for p in out.stdout.split():
            try:
                if b"fastsample.train" in open(f"/proc/{p}/cmdline", "rb").read():
                    return True
            except OSError:
                pass
        return False

    code, out, pid = epoch("--partitions", data, "--net", "namespaces", *TINY, *outputs(tmp_path),
                           signal_when=ranks_running)
    assert code == 128 + signal.SIGTERM, out
    assert "stopped by SIGTERM" in out, out
    assert leftovers(pid) == []
    assert _processes_using(data) == []


@pytest.mark.root
def test_successful_run_crosses_the_veths_and_leaves_nothing_behind(netns, parts, tmp_path):
    code, out, pid = epoch("--partitions", parts / "p2", "--net", "namespaces", "--gbps", "10", *TINY,
                           *outputs(tmp_path))
    assert code == 0, out
    assert leftovers(pid) == []
    result = json.loads((tmp_path / "e.json").read_text())
    label = "namespaces = veth+bridge, tbf 10 Gbit/s, no added latency (gloo over TCP)"
    assert result["settings"]["net_settings"] == {"namespaces": label}
    (row,) = result["rows"]
    assert row["net_desc"] == label and row["backend"] == "gloo"
    # features and gradients went over TCP through the veths (idle traffic, ARP and
    # neighbour discovery, is a few hundred bytes)
    assert row["veth_tx_bytes_rank0"] > 10_000 and row["veth_rx_bytes_rank0"] > 10_000, row
    assert label in out
    assert "namespaces" in (tmp_path / "e.csv").read_text()


def test_collecting_these_tests_runs_no_ip_command(tmp_path):
    """The namespace probe (`ip netns add`) runs only when a test that needs it runs, never
    when the tests are collected: collected with an `ip` on PATH that records its calls."""
    fake = tmp_path / "bin" / "ip"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho \"ip $*\" >> {tmp_path / 'calls'}\nexit 1\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           __file__], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / "calls").exists(), f"collecting ran: {(tmp_path / 'calls').read_text()}"


def test_unknown_net_is_one_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, str(EPOCH), "--partitions", tmp_path, "--net", "namespace"],
                          capture_output=True, text=True, timeout=30, cwd=REPO)
    assert proc.returncode == 2 and "unknown namespace" in proc.stderr and "Traceback" not in proc.stderr


NOT_ROOT = ("bench/epoch.py: error: --net namespaces needs root (ip netns add, veth, bridge and tc); "
            "run as root or use --net none,model")


def test_not_root_is_one_clear_error(tmp_path):
    """The non-root path, checked in a process whose effective uid reads as another user's:
    the real benchmark script, argument parsing and exit, wherever the clone is (a clone
    under a 0700 directory cannot be read by a real unprivileged user)."""
    as_nobody = ("import os, runpy, sys; os.geteuid = lambda: 65534; sys.argv = sys.argv[1:]; "
                 "sys.path.insert(0, os.path.dirname(sys.argv[0])); runpy.run_path(sys.argv[0], run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", as_nobody, str(EPOCH), "--partitions", tmp_path,
                           "--net", "none,namespaces", *outputs(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == NOT_ROOT, proc.stderr
    assert not (tmp_path / "e.json").exists()
