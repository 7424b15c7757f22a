"""The DistDGL comparison's environments (bench/vs_distdgl.py, bench/distdgl/):
like for like, DistDGL's servers and trainers get the allocator tuning fastsample gives
itself and huge pages for their /dev/shm; as shipped, neither. Checked on the harness's own
machine script, with stand-ins for DGL's processes (DGL is not installed here)."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from fastsample import allocator
from helpers import REPO

sys.path.insert(0, str(REPO / "bench"))
import vs_distdgl as harness  # noqa: E402


def test_like_for_like_is_the_tuning_fastsample_gives_itself():
    # the values retain_freed_memory() sets with mallopt, as glibc's tunables spell them
    assert allocator.TUNABLES == f"glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold={allocator.NO_TRIM}"
    base = {"PATH": "/bin", "GLIBC_TUNABLES": "glibc.malloc.arena_max=1", "SHM_HUGE": "never"}
    like, shipped = harness.side_env(base, "like"), harness.side_env(base, "shipped")
    assert (like["GLIBC_TUNABLES"], like["SHM_HUGE"]) == (allocator.TUNABLES, "always")
    assert "GLIBC_TUNABLES" not in shipped and "SHM_HUGE" not in shipped  # glibc's defaults, whatever the caller had
    assert like["PATH"] == shipped["PATH"] == "/bin"
    with pytest.raises(ValueError, match="unknown setting"):
        harness.side_env(base, "tuned")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="the DistDGL harness mounts a tmpfs in a mount namespace: needs root and unshare")
@pytest.mark.parametrize("setting,graphbolt", [("like", "0"), ("shipped", "0"), ("like", "1")])
def test_every_distdgl_process_gets_the_settings_environment(tmp_path, setting, graphbolt):
    # machine.sh starts one graph server and one trainer; here $PY is a stand-in that reports
    # what it was started with: its GLIBC_TUNABLES, its /dev/shm mount, GraphBolt's switch and its arguments
    stand_in = tmp_path / "py"
    stand_in.write_text("#!/bin/sh\necho \"GLIBC_TUNABLES=$GLIBC_TUNABLES\"\ngrep ' /dev/shm ' /proc/mounts | tail -1\n"
                        "echo \"USE_GRAPHBOLT=$USE_GRAPHBOLT $*\"\n")
    stand_in.chmod(0o755)
    env = harness.side_env({**os.environ, "PY": str(stand_in), "SHM_SIZE": "64m", "USE_GRAPHBOLT": graphbolt}, setting)
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "bash",
                           str(REPO / "bench/distdgl/machine.sh"), "0", "1", "cfg.json", "ip.txt", str(tmp_path),
                           "30", "1", "1"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tunables = allocator.TUNABLES if setting == "like" else ""
    for log in ("server0.log", "trainer0.log", "env0.txt"):  # the server, the trainer, and what the result file records
        lines = (tmp_path / log).read_text().splitlines()
        assert lines[0] == f"GLIBC_TUNABLES={tunables}", (log, lines)
        assert " /dev/shm tmpfs " in lines[1] and ("huge=always" in lines[1]) == (setting == "like"), (log, lines)
    # GraphBolt's sampler: the server reads the switch (initialize(..., use_graphbolt=True)), the trainer is told too
    assert (tmp_path / "server0.log").read_text().splitlines()[2].startswith(f"USE_GRAPHBOLT={graphbolt} ")
    trainer = (tmp_path / "trainer0.log").read_text().splitlines()[2].split()
    assert trainer[1].endswith("train.py") and ("--graphbolt" in trainer) == (graphbolt == "1"), trainer


def _peer(tmp_path, name, **info):
    d = tmp_path / name
    d.mkdir()
    (d / "graph.json").write_text(json.dumps({"num_parts": 2}))
    (d / "info.json").write_text(json.dumps({"dataset": str(tmp_path / "data"), "kind": "untyped", **info}))
    return str(d / "graph.json")


def test_a_peer_partition_that_cannot_compare_is_refused_naming_it(tmp_path):
    python, data = sys.executable, (tmp_path / "data").resolve()
    cfg, info = harness.peer_partition("graphbolt", _peer(tmp_path, "gb", graphbolt=True), python, data, 2)
    assert info["kind"] == "untyped" and cfg.name == "graph.json"
    cases = [("dgl", _peer(tmp_path, "other", dataset=str(tmp_path / "elsewhere")), 2, "is a partition of"),
             ("graphbolt", _peer(tmp_path, "plain"), 2, "not converted for GraphBolt"),
             ("dgl", _peer(tmp_path, "two"), 4, "2 parts, --ranks 4"),
             ("dgl", str(tmp_path / "missing/graph.json"), 2, "info.json beside it) not found")]
    for flag, config, ranks, message in cases:
        with pytest.raises(SystemExit, match=re.escape(message)) as exc:
            harness.peer_partition(flag, config, python, data, ranks)
        assert f"--{flag} " in str(exc.value), exc.value
