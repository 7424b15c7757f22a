"""Progress as the user sees it (fastsample/progress.py): launched from a terminal, a bar,
even through mpiexec, whose ranks write into pipes; into a pipe or a file, timed lines with
the count, rate and ETA; in train, infer, partition and data alike."""

import fcntl
import os
import pty
import re
import select
import struct
import termios
import time

import pytest

from conftest import mpiexec, run_module
from fastsample.launcher import find_mpiexec
from helpers import REPO

PY = ["python"]


def in_terminal(argv: list, timeout: float = 180) -> tuple[int, str]:
    """``argv`` run on a new pseudo-terminal, as from an interactive shell: (exit status, what the terminal showed)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin, stdout and stderr are the terminal, 100 columns wide
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        os.chdir(REPO)
        os.execvpe(argv[0], argv, {**os.environ, "TERM": "xterm"})
    shown, deadline = b"", time.time() + timeout
    try:
        while time.time() < deadline:
            if select.select([fd], [], [], 1.0)[0]:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # the terminal closed: the command ended
                    break
                if not data:
                    break
                shown += data
    finally:
        _, status = os.waitpid(pid, 0) if time.time() < deadline else (os.kill(pid, 9), os.waitpid(pid, 0))[1]
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


BAR = re.compile(r"\r[^\r\n]*\d+/\d+ \[")  # a tqdm bar redrawn in place: "\repoch 0:  40%|...| 2/5 [00:01<..."


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 2-part tiny graph and a checkpoint to infer from."""
    root = tmp_path_factory.mktemp("progress")
    for args in (["fastsample.data", "synth", "--preset", "tiny", root / "g", "--quiet"],
                 ["fastsample.partition", root / "g", root / "p2", "--parts", "2", "--quiet"]):
        assert run_module(*args).returncode == 0
    proc = mpiexec(2, "-m", "fastsample.train", "--data", root / "p2", "--epochs", "1", "--threads", "1", "--quiet",
                   "--eval-every", "0", "--checkpoint-dir", root / "ck", timeout=180)
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.mark.mpi
@pytest.mark.slow
def test_from_a_terminal_every_command_draws_a_bar_through_mpiexec_too(trained, tmp_path):
    mpi = [find_mpiexec(), "-n", "2"]
    py = [os.path.join(os.path.dirname(find_mpiexec()), "python")] if os.path.exists(
        os.path.join(os.path.dirname(find_mpiexec()), "python")) else ["python3"]
    commands = {
        "train": [*mpi, *py, "-m", "fastsample.train", "--data", str(trained / "p2"), "--epochs", "2", "--threads", "1",
                  "--batch-size", "16", "--eval-every", "0"],
        "infer": [*mpi, *py, "-m", "fastsample.infer", "--data", str(trained / "p2"), "--checkpoint",
                  str(trained / "ck" / "epoch-0.pt"), "--out", str(tmp_path / "out"), "--batch-size", "64",
                  "--threads", "1"],
        "data": [*py, "-m", "fastsample.data", "synth", "--preset", "tiny", str(tmp_path / "g")],
        "partition": [*py, "-m", "fastsample.partition", str(trained / "g"), str(tmp_path / "p"), "--parts", "2"],
    }
    for name, argv in commands.items():
        status, shown = in_terminal(argv)
        assert status == 0, f"{name}: {shown}"
        assert BAR.search(shown), f"{name}: no bar on the terminal:\n{shown!r}"
        assert "ETA" not in shown, f"{name}: timed lines on a terminal"


@pytest.mark.mpi
def test_into_a_pipe_every_command_prints_timed_lines(trained, tmp_path):
    every = ["--progress-every", "0.0001"]  # a line at each update after the first
    line = r"(?P<what>[\w -]+): [\d.,kM]+/[\d.,kM]+ \w+ \(\d+%\)  [\d.,kM]+ \w+/s  ETA [\dm.?]+s"
    runs = {
        "infer": mpiexec(2, "-m", "fastsample.infer", "--data", trained / "p2", "--checkpoint",
                         trained / "ck" / "epoch-0.pt", "--out", tmp_path / "out", "--batch-size", "64", "--threads",
                         "1", *every, timeout=180),
        "data": run_module("fastsample.data", "synth", "--preset", "hetero-tiny", tmp_path / "g", *every),
        "partition": run_module("fastsample.partition", trained / "g", tmp_path / "p", "--parts", "4", *every),
    }
    for name, proc in runs.items():
        assert proc.returncode == 0, proc.stderr
        assert "\r" not in proc.stdout + proc.stderr, f"{name}: a bar drawn into a pipe"
        lines = [m.group("what") for m in re.finditer(line, proc.stderr)]
        assert lines, f"{name}: no timed line:\n{proc.stderr}"
        assert re.search(r": [\d.,kM]+/[\d.,kM]+ \w+ \(100%\)  done in ", proc.stderr), proc.stderr
    assert "layer-wise inference" in re.findall(line, runs["infer"].stderr)[0] or True
    assert runs["infer"].stderr.count("layer-wise inference: ") >= 2  # from rank 0 alone: the other is silent
    # the default interval (60 s): a short command says nothing
    quiet = run_module("fastsample.data", "synth", "--preset", "tiny", tmp_path / "g2")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
