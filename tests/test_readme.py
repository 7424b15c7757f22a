"""The README as a new user meets it: its set-up command, then later commands of its own,
each in a fresh shell that inherits nothing but what the README says to do (issue 37)."""

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


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_readme_setup_then_its_commands_from_fresh_shells(tmp_path):
    activate = block_with(". .venv/bin/activate")
    assert activate == [". .venv/bin/activate"], activate
    quickstart = block_with("make demo")
    assert quickstart[0].startswith("make demo") and "make setup alone creates it" in README
    proc = fresh_shell("make setup", REPO, tmp_path)  # up to date: a no-op; else it installs, as for a user
    assert proc.returncode == 0, proc.stdout + proc.stderr
    typed = block_with("synth --preset hetero-small data/hetero ")
    infer = block_with("python -m fastsample.infer --data data/hetero-2 --checkpoint ckpt-hetero/epoch-9.pt")
    commands = [*typed, *infer]
    assert len(commands) >= 4 and commands[-2].startswith("mpiexec -n 2 python -m fastsample.train") and \
        commands[-1].startswith("mpiexec -n 2 python -m fastsample.infer"), commands
    work = tmp_path / "work"
    work.mkdir()
    for command in commands:
        if "fastsample.train" in command:  # the README's run, shortened
            command += " --max-steps 1 --eval-every 0"
        proc = fresh_shell(f"{activate[0]} && cd {work} && {command}", REPO, tmp_path)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    assert (work / "data" / "hetero-emb" / "index.json").is_file()


@pytest.mark.mpi
def test_the_readme_link_command_reproduces_across_kernels_modes_and_prefetch(planetoid_dir, tmp_path):
    # what the README says its link figures hold across: on one host with the engine it
    # pins, every kernel, both modes and prefetch give bitwise the same losses and AUCs
    from conftest import run_module
    from helpers import train_many

    setup = block_with("python -m fastsample.data link-split data/cora data/cora-link")
    train = next(c for c in setup if c.startswith("mpiexec -n 2 python -m fastsample.train"))
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


@pytest.mark.mpi
@pytest.mark.slow
def test_the_readme_own_data_walk_through_from_fresh_shells(tmp_path):
    # tables in (a generated Parquet fixture), a node and a link run, ids out, retrieval
    activate = block_with(". .venv/bin/activate")[0]
    commands = block_with("python examples/shop_tables.py")
    assert commands[0].startswith("python examples/shop_tables.py") and len(commands) == 9 and \
        commands[-1].startswith("python examples/retrieve.py"), commands
    work = tmp_path / "work"
    work.mkdir()
    for command in commands:
        command = command.replace("examples/", f"{REPO}/examples/")
        proc = fresh_shell(f"{activate} && cd {work} && {command}", REPO, tmp_path)
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.startswith("test mrr ") and len(proc.stdout.splitlines()) == 6, proc.stdout
    assert (work / "data" / "shop" / "id_maps" / "user.parquet").is_file()
