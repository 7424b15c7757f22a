"""The README as a new user meets it: its set-up command, then later commands of its own,
each in a fresh shell that inherits nothing but what the README says to do (issue 37).

Every bash block of the README (and of docs/) runs, page by page, in tests/test_docs.py;
here: the set-up a reader starts from, and what the README claims of its Cora link command."""

import re
import shutil
import subprocess

import pytest

from helpers import REPO

README = (REPO / "README.md").read_text()


def fresh_shell(script: str, cwd, home) -> subprocess.CompletedProcess:
    """``script`` in a login-less bash with an empty environment but HOME and the system PATH."""
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def block_with(text: str) -> list[str]:
    """The commands of the README's first bash block containing ``text`` (continuations joined)."""
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        if text in block:
            return [line.split("  #")[0].strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    raise AssertionError(f"README.md has no bash block with {text!r}")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_readme_setup_from_a_fresh_shell(tmp_path):
    activate = block_with(". .venv/bin/activate")
    assert activate == [". .venv/bin/activate"], activate
    assert block_with("make demo") == ["make demo"] and "make setup alone creates it" in README
    proc = fresh_shell("make setup", REPO, tmp_path)  # up to date: a no-op; else it installs, as for a user
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = fresh_shell(f"{activate[0]} && python -c 'import fastsample' && mpiexec --version", REPO, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.mpi
def test_the_readme_link_command_reproduces_across_kernels_modes_and_prefetch(planetoid_dir, tmp_path):
    # what the README says its link figures hold across: on one host with the engine it
    # pins, every kernel, both modes and prefetch give bitwise the same losses and AUCs
    from conftest import run_module
    from helpers import train_many

    setup = block_with("python -m fastsample.data link-split data/cora data/cora-link")
    train = next(c for c in setup if c.startswith("mpiexec -n 2 python -m fastsample.train --data data/cora-link-2"))
    flags = train.split("python -m fastsample.train", 1)[1].split()
    assert flags[:4] == ["--data", "data/cora-link-2", "--task", "link"] and "--matmul" in flags, flags
    run_module("fastsample.data", "planetoid", planetoid_dir, "--name", "cora", tmp_path / "cora", "--quiet",
               check=True)
    run_module("fastsample.data", "link-split", tmp_path / "cora", tmp_path / "cora-link", "--val-fraction", "0.05",
               "--test-fraction", "0.1", "--quiet", check=True)
    run_module("fastsample.partition", tmp_path / "cora-link", tmp_path / "cora-link-2", "--parts", "2", "--quiet",
               check=True)
    args = [*flags[4:], "--epochs", "2", "--quiet"]
    # both runs in one launch (helpers.train_many: the command's main() per run)
    runs = train_many(tmp_path / "cora-link-2", 2, {i: (tmp_path / f"{i}.jsonl", ["--task", "link", *args, *extra])
                                                    for i, extra in enumerate([[], ["--mode", "vanilla", "--sampler",
                                                                                    "numba", "--prefetch", "1"]])})
    fields = lambda records: [(r["step_losses"], r["val_auc"], r["test_mrr"]) for r in records]
    assert fields(runs[0]) == fields(runs[1])
    assert runs[0][-1]["loss"] < runs[0][0]["step_losses"][0]  # it learns
