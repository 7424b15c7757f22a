"""One network namespace per rank, joined through a rate-limited virtual switch.

Why: on one machine the ranks of an MPI job talk through shared memory, so a
collective costs microseconds and the network, the very thing hybrid partitioning
saves on, disappears from the measurement. Putting every rank in its own network
namespace makes the collectives (torch.distributed's gloo backend) cross real TCP
connections through real network devices, with each rank's link capped by a token
bucket; the traffic never leaves this machine.

Layout for a run with prefix `fsn<pid>` (the pid of the process that built it, so
concurrent runs never clash and leftovers of a dead run can be found and removed):

    namespace fsn<pid>-br   bridge fsn<pid>br, ports fsn<pid>b0 .. fsn<pid>b<P-1>
    namespace fsn<pid>-r<k> lo, and veth fsn<pid>r<k> = 10.213.0.<k+1>/24 (peer of fsn<pid>b<k>)

The bridge has a namespace of its own, so nothing is added to the host's (root)
namespace: no interface, address, route or qdisc. Each veth end gets a `tbf` root
qdisc at `gbps`: the rank-side end limits what the rank sends, the bridge-side end
what it receives, i.e. every rank has a full-duplex link of `gbps` into a
non-blocking switch (the model in fastsample/comm/netmodel.py). tbf parameters:

    rate     gbps Gbit/s
    burst    rate x 100 us, at least 64 KiB (about one GSO super-packet): short enough that a
             multi-MB all_to_all runs at `rate` (a burst lets ~0.1 ms of traffic through
             at memory speed), long enough that the timer does not fire per packet
    latency  5 ms (queue limit = rate x 5 ms + burst; longer queues only add
             bufferbloat, shorter ones drop packets of TCP bursts)

No latency is added: the `netem` qdisc is not in this kernel, so a round costs what
TCP over veth costs on this machine (tens of microseconds), not a real network's.
MTU is the veth default, 1500.

Ranks are started through bench/netns_exec.sh (see `wrapper`), which moves each rank
into its namespace by PMI_RANK and sets MASTER_ADDR (rank 0's address, which
fastsample.comm.torch_dist advertises) and GLOO_SOCKET_IFNAME (the rank's veth). MPI
itself still runs over shared memory; it only carries start-up agreement and abort.

    with NetNamespaces(4, gbps=25) as net:
        cmd = ["mpiexec", "-n", "4", *net.wrapper(), "python", "-m", "fastsample.train", ...]
        before = net.counters(); subprocess.run(cmd); after = net.counters()

Needs root and iproute2 (`ip`, `tc`). `NetNamespaces.check()` raises NetnsUnavailable,
with the reason, when they are not there. Teardown runs on exit, also on failure;
`sweep()` removes what runs that no longer live (killed with SIGKILL, say) left behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREFIX_RE = re.compile(r"^fsn(\d+)")   # every name this module creates starts with fsn<pid>
SUBNET = "10.213.0"


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be set up here (not root, no iproute2, no kernel support)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc


def _tc(*args: str) -> None:
    proc = subprocess.run(["tc", *args], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")


def list_namespaces() -> list[str]:
    proc = _ip("netns", "list", check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _delete_namespace(name: str) -> None:
    """Kill what still runs inside (processes this run started), then delete the namespace:
    its veths, their peers and their qdiscs go with it."""
    pids = _ip("netns", "pids", name, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _ip("netns", "delete", name, check=False)


def sweep(pid: int | None = None) -> list[str]:
    """Delete the namespaces and root-namespace links this module named (fsn<pid>...)
    whose creating process is gone, or with `pid`, those of that pid. Returns their names."""
    def stale(name: str) -> bool:
        m = PREFIX_RE.match(name)
        if not m:
            return False
        return int(m.group(1)) == pid if pid is not None else not _alive(int(m.group(1)))

    removed = []
    for ns in list_namespaces():
        if stale(ns):
            _delete_namespace(ns)
            removed.append(ns)
    # Links are only ever created inside the run's namespaces; a veth end could reach the
    # root namespace only if a namespace were deleted mid-setup. Remove such strays too.
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if stale(name):
                _ip("link", "delete", name, check=False)
                removed.append(name)
    return removed


class NetNamespaces:
    """Context manager: P namespaces on a tbf-limited bridge; torn down on exit."""

    def __init__(self, ranks: int, gbps: float, prefix: str | None = None):
        self.ranks, self.gbps = ranks, gbps
        self.prefix = prefix or f"fsn{os.getpid()}"
        m = re.fullmatch(r"fsn(\d+)", self.prefix)
        if not m:
            raise ValueError(f"prefix must look like fsn<pid>, got {self.prefix!r}")
        self.pid = int(m.group(1))
        if len(f"{self.prefix}r{ranks - 1}") > 15:
            raise ValueError(f"interface names from prefix {self.prefix!r} exceed 15 characters")
        self.bridge_ns = f"{self.prefix}-br"
        self.bridge = f"{self.prefix}br"
        self.created: list[str] = []

    # names
    def rank_ns(self, k: int) -> str:
        return f"{self.prefix}-r{k}"

    def rank_veth(self, k: int) -> str:
        return f"{self.prefix}r{k}"

    def port_veth(self, k: int) -> str:
        return f"{self.prefix}b{k}"

    def address(self, k: int) -> str:
        return f"{SUBNET}.{k + 1}"

    def tbf(self) -> dict:
        rate = self.gbps * 1e9  # bit/s
        return {"rate_bit": int(rate), "burst_bytes": max(65536, int(rate / 8 * 100e-6)), "latency_ms": 5}

    def describe(self) -> str:
        return f"veth+bridge, tbf {self.gbps:g} Gbit/s, no added latency"

    @staticmethod
    def check() -> None:
        """Raise NetnsUnavailable saying why, unless namespaces can be created here."""
        if os.geteuid() != 0:
            raise NetnsUnavailable("--net namespaces needs root (ip netns add, veth, bridge and tc); "
                                   "run as root or use --net none,model")
        for tool in ("ip", "tc"):
            if shutil.which(tool) is None:
                raise NetnsUnavailable(f"--net namespaces needs `{tool}` (iproute2), which is not on PATH")
        probe = f"fsn{os.getpid()}-probe"
        proc = _ip("netns", "add", probe, check=False)
        if proc.returncode != 0:
            raise NetnsUnavailable(f"--net namespaces: `ip netns add` fails here: {proc.stderr.strip()}")
        _ip("netns", "delete", probe, check=False)

    def __enter__(self) -> "NetNamespaces":
        self.check()
        sweep()              # leftovers of dead runs
        sweep(self.pid)      # and of a dead run that had our pid
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ns(self, name: str) -> None:
        _ip("netns", "add", name)
        self.created.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _limit(self, ns: str, dev: str) -> None:
        t = self.tbf()
        _tc("-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{t['rate_bit']}bit",
            "burst", str(t["burst_bytes"]), "latency", f"{t['latency_ms']}ms")

    def _setup(self) -> None:
        self._ns(self.bridge_ns)
        _ip("-n", self.bridge_ns, "link", "add", self.bridge, "type", "bridge")
        _ip("-n", self.bridge_ns, "link", "set", self.bridge, "up")
        for k in range(self.ranks):
            ns, veth, port = self.rank_ns(k), self.rank_veth(k), self.port_veth(k)
            self._ns(ns)
            _ip("-n", self.bridge_ns, "link", "add", port, "type", "veth", "peer", "name", veth, "netns", ns)
            _ip("-n", self.bridge_ns, "link", "set", port, "master", self.bridge)
            _ip("-n", self.bridge_ns, "link", "set", port, "up")
            _ip("-n", ns, "addr", "add", f"{self.address(k)}/24", "dev", veth)
            _ip("-n", ns, "link", "set", veth, "up")
            self._limit(self.bridge_ns, port)   # what rank k receives
            self._limit(ns, veth)               # what rank k sends

    def close(self) -> None:
        # A second SIGTERM/SIGINT waits until the teardown is done (then raises as usual).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        try:
            for name in reversed(self.created):
                try:
                    _delete_namespace(name)
                except Exception:  # keep going: the sweep below catches what is left
                    pass
            self.created.clear()
            sweep(self.pid)  # nothing should be left; this catches anything that is
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def wrapper(self) -> list[str]:
        """Command prefix that puts each rank (by PMI_RANK) in its namespace."""
        return [str(HERE / "netns_exec.sh"), self.prefix, self.address(0)]

    def counters(self) -> list[dict]:
        """Per rank, in rank order: bytes and packets its veth sent and received (kernel
        counters), and the packets its two tbf qdiscs dropped (queue full)."""
        out = []
        for k in range(self.ranks):
            info = json.loads(_ip("-n", self.rank_ns(k), "-s", "-j", "link", "show", "dev",
                                  self.rank_veth(k)).stdout)[0]["stats64"]
            drops = sum(self._qdisc_drops(ns, dev) for ns, dev in ((self.rank_ns(k), self.rank_veth(k)),
                                                                   (self.bridge_ns, self.port_veth(k))))
            out.append({"tx_bytes": info["tx"]["bytes"], "rx_bytes": info["rx"]["bytes"],
                        "tx_packets": info["tx"]["packets"], "rx_packets": info["rx"]["packets"],
                        "tbf_drops": drops})
        return out

    @staticmethod
    def _qdisc_drops(ns: str, dev: str) -> int:
        proc = subprocess.run(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev], capture_output=True,
                              text=True, timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"tc -n {ns} -s qdisc show dev {dev}: {proc.stderr.strip()}")
        return sum(q.get("drops", 0) for q in json.loads(proc.stdout) if q.get("kind") == "tbf")


if __name__ == "__main__":  # python bench/netns.py sweep: remove leftovers of dead runs
    import sys

    if sys.argv[1:] != ["sweep"]:
        sys.exit("usage: python bench/netns.py sweep")
    print("\n".join(sweep()) or "nothing to remove")
