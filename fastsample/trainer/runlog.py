"""The --log-json file: runs, each a header record and then its epochs' records, one JSON
object per line.

A header ({"record": "run", "run_id": ..., "config": ..., ...}) opens every launch: the
resolved configuration, the data's identity, the host's CPU, the libraries' versions, the
git commit where known. A second run into the same file appends its own header and
epochs (the file is a sequence of runs, as a TensorBoard directory holds several); a
resumed run (--resume) appends a header with the same run_id and a "resumed" field, so
that read_runs() gives a preempted-and-resumed run back as one run. Files written before
headers existed read back as one run with run_id None.

Lines are appended whole or not at all (append_line): a reader never sees half a record.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import platform
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fastsample import faults
from fastsample.atomic import DiskFull
from fastsample.comm.mpi import CMA_ENV
from fastsample.phases import phase
from fastsample.trainer.metrics import EpochRecord, json_line

__all__ = ["Run", "new_run_id", "header", "append_line", "append_log", "read_runs", "read_log", "read_records"]

HEADER = "run"  # a header's "record" field; an epoch record's is "epoch" (none in logs written before it)


@dataclass
class Run:
    """One run of a --log-json file: its headers (none in a file from before headers) and its
    epochs' records in order (a resumed run's records follow on from where it stopped)."""

    run_id: str | None
    headers: list[dict] = field(default_factory=list)  # the start's, then each resumption's
    records: list[EpochRecord] = field(default_factory=list)

    @property
    def header(self) -> dict | None:
        """The run's first header (None in a file from before headers)."""
        return self.headers[0] if self.headers else None

    @property
    def config(self) -> dict:
        """The settings the run started with."""
        return (self.header or {}).get("config", {})


def new_run_id() -> str:
    """The start time (UTC, to the second) and 24 random bits: 20261129-051234-3fa9c1."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def header(run_id: str, config, data: dict, job: dict, resumed: dict | None = None) -> dict:
    """The header record of a run: ``config`` (a dataclass: every resolved setting), ``data``
    (what was read: path, name, sizes, digest), ``job`` (ranks, threads, backend, ...)."""
    return {"record": HEADER, "run_id": run_id, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            # the command as typed (python -m fastsample.train ...), not the module's path sys.argv holds
            "resumed": resumed, "command": getattr(sys, "orig_argv", sys.argv), "config": dataclasses.asdict(config),
            "data": data, "job": job,
            "host": {"name": platform.node(), "cpu": _cpu(), "logical_cpus": os.cpu_count()},
            "versions": _versions(), "git": _git()}


def data_identity(path: str | Path, name: str, num_nodes: int) -> dict:
    """The data a run read: its directory, and a digest of its description (partition.json or
    meta.json: a re-partition or regenerated dataset has another)."""
    path = Path(path).resolve()
    described = next((path / f for f in ("partition.json", "meta.json") if (path / f).is_file()), None)
    digest = hashlib.sha256(described.read_bytes()).hexdigest()[:16] if described else None
    return {"path": str(path), "name": name, "nodes": num_nodes,
            "kind": {"partition.json": "partition", "meta.json": "dataset"}.get(described and described.name),
            "digest": digest}


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                        platform.processor() or "unknown")
    except OSError:
        return platform.processor() or "unknown"


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    import numpy
    import torch

    try:
        ours = version("fastsample")
    except PackageNotFoundError:  # run from a source tree that is not installed
        ours = None
    out = {"python": platform.python_version(), "fastsample": ours, "torch": torch.__version__,
           "numpy": numpy.__version__}
    if "mpi4py.MPI" in sys.modules:  # the MPI library the job runs on (not imported here: a gloo job has none)
        mpi = sys.modules["mpi4py.MPI"]
        out["mpi4py"] = sys.modules["mpi4py"].__version__
        out["mpi"] = mpi.Get_library_version().splitlines()[0].strip()
        out["mpi_single_copy"] = os.environ.get(CMA_ENV) == "1"
    return out


def _git() -> dict | None:
    """The commit of the fastsample source this run imported, where it is a git checkout
    (None for an installed wheel, or without git)."""
    src = Path(__file__).resolve().parents[2]
    if not (src / ".git").exists():
        return None
    try:
        run = lambda *a: subprocess.run(["git", "-C", str(src), *a], capture_output=True, text=True, timeout=10,
                                        check=True).stdout.strip()
        return {"commit": run("rev-parse", "HEAD"), "dirty": bool(run("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return None


def append_line(path: str | Path, obj: dict | str) -> None:
    """Append one JSON line, whole or not at all: a write that fails (a full disk: DiskFull)
    cuts the file back to the lines before it."""
    line = ((obj if isinstance(obj, str) else json_line(obj)) + "\n").encode()
    with phase("log"), open(path, "ab", buffering=0) as f:
        size = f.seek(0, 2)
        try:
            f.write(line[: len(line) // 2])
            faults.written(path)
            f.write(line[len(line) // 2:])
        except OSError as e:
            try:
                f.truncate(size)
            except OSError:  # not a file that truncates (/dev/full): nothing of it to keep whole
                pass
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFull(Path(path).parent, what=f"{Path(path).name} (its last line was not written)") from None
            raise


def append_log(path: str | Path, record: EpochRecord) -> None:
    """An epoch's record, as one line."""
    append_line(path, record.to_json())


def _lines(path: str | Path):
    """(line number, object) of each line of a --log-json file; a line that is not JSON is an
    error naming the file and the line."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}, line {n}: not a JSON record ({e.msg})") from None


def read_runs(path: str | Path) -> list[Run]:
    """The runs of a --log-json file, in the order they started; a resumed run's records are
    its own (joined by run_id), not a new run's."""
    runs: dict = {}
    current = None
    for n, obj in _lines(path):
        if obj.get("record") == HEADER:
            current = runs.setdefault(obj["run_id"], Run(obj["run_id"]))
            current.headers.append(obj)
            continue
        if current is None:  # epochs before any header: a file from before headers
            current = runs[None] = Run(None)
        current.records.append(EpochRecord.from_json(json.dumps(obj)))
    return list(runs.values())


def read_records(path: str | Path) -> list[dict]:
    """Every epoch record of a --log-json file as its JSON object (the task's measures flat:
    val_acc, test_auc, ...), in file order, headers left out."""
    return [obj for _, obj in _lines(path) if obj.get("record") != HEADER]


def read_log(path: str | Path) -> list[EpochRecord]:
    """Every epoch record of a --log-json file, in file order (all runs; read_runs keeps them apart)."""
    return [EpochRecord.from_json(json.dumps(obj)) for obj in read_records(path)]
