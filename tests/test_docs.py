"""Every command of the README and of docs/*.md, run as a reader runs them (issue 54).

Each page's ```bash blocks run in the page's order, in one fresh shell per page (bash
--noprofile --norc, an environment of HOME, the system PATH and LANG only, plus PLANETOID
where the page's commands read Cora's raw files: the ``planetoid_dir`` fixture's directory,
so those pages skip where the files are absent), after ``. .venv/bin/activate``, in a fresh
copy of the clone: a new directory with a link to each of the clone's top-level entries
(``git ls-files``: tracked, and untracked but not ignored) and to ``.venv``. So there is no
``data/``, no ``bench/out/``, no ``../shared``, and a command that relies on an earlier
page, on the test suite's environment or on this machine's layout fails here.

What the test changes, so that a page takes seconds rather than minutes, and nothing else:

* ``python -m fastsample.train`` (alone or under mpiexec) gets ``--max-steps 1``: one step
  an epoch, with ``--epochs`` and so the checkpoints a later command names as written; and
  ``--eval-every 0`` unless the command asks for evaluation itself (``--eval``,
  ``--eval-every``, ``--eval-every-steps``, ``--early-stop``, ``--target-val-acc``);
* on the README, ``make setup`` runs first in the clone itself (up to date: a no-op), so
  that ``make demo`` in the copy finds ``.venv`` current; before any make target the page's
  shell checks that (``make -q setup``) and stops rather than reinstall from the copy.

A code block fenced as anything but ``bash`` that holds a shell command (a Slurm
submission, a download, the test suite itself) must follow ``<!-- not run here: REASON -->``;
``test_every_command_runs_or_says_why`` checks that, and that such blocks stay few. Python
blocks are code, not commands (the README's loop runs in tests/test_examples.py).
"""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from helpers import REPO
from test_readme import fresh_shell

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
MAX_README_LINES = 400
MAX_NOT_RUN_BLOCKS = 10  # "keep those few"

FENCE = re.compile(r"^(?:<!-- not run here: (?P<reason>.+?) -->\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)^```[ \t]*$",
                   re.M | re.S)
# a shell command's first word (after any VAR=value assignments)
SHELL_WORDS = {"python", "python3", "mpiexec", "mpirun", "srun", "sbatch", "scancel", "squeue", "make", "pip",
               "git", "bash", "sh", "curl", "wget", "tensorboard", "mkdir", "cd", "export", "for", "sudo", "source",
               ".", "pytest", "unzip", "tar"}
EVAL_FLAGS = ("--eval", "--eval-every", "--eval-every-steps", "--early-stop", "--target-val-acc")
# make's targets depend on setup: were .venv out of date, the copy would reinstall the package
# from itself (an editable install pointing into a temporary directory); refuse instead
MAKE_GUARD = ("make -q setup || { echo 'error: .venv is out of date (make setup in the clone first); "
              "make in the copy would reinstall it from there' >&2; exit 1; }")
# the runs each page's heavy part takes, measured on a 2-core machine, decide its marks
SLOW = {"README.md", "datasets.md", "tasks.md", "training.md"}


def blocks(page):
    """(lang, body, reason or None) of each fenced block of ``page``, in order."""
    return [(m["lang"], m["body"], m["reason"]) for m in FENCE.finditer(page.read_text())]


def commands(body: str) -> list[str]:
    """A bash block's commands: continuation lines joined, blank and comment-only lines left out."""
    return [line.strip() for line in body.replace("\\\n", " ").splitlines()
            if line.strip() and not line.strip().startswith("#")]


def is_command(line: str) -> bool:
    words = line.strip().removeprefix("$ ").split()
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]
    if not words:
        return bool(line.strip()) and not line.strip().startswith("#")  # an assignment alone: shell
    return words[0] in SHELL_WORDS or (("/" in words[0] or words[0].endswith(".sh")) and not words[0].startswith("#"))


def shortened(command: str) -> str:
    """The command as the test runs it: a training run cut to one step an epoch (see above)."""
    if "-m fastsample.train" not in command:
        return command
    cut = min((i for i in (command.find(s) for s in (" || ", " && ", " | ", "  #")) if i >= 0), default=len(command))
    head, tail = command[:cut], command[cut:]
    flags = ["--max-steps", "1"]
    if not any(re.search(rf"\s{re.escape(f)}(\s|=|$)", head) for f in EVAL_FLAGS):
        flags += ["--eval-every", "0"]
    return f"{head} {' '.join(flags)}{tail}"


def page_script(page) -> str:
    lines = [". .venv/bin/activate", "set -e"]
    for lang, body, _ in blocks(page):
        if lang == "bash":
            for command in commands(body):
                run = shortened(command)
                lines.append(f"printf '%s\\n' {shlex.quote('>>> ' + run)}")
                if command.startswith("make ") and not command.startswith("make setup"):
                    lines.append(MAKE_GUARD)
                lines.append(run)
    return "\n".join(lines) + "\n"


def clone_copy(where):
    """A fresh copy of the clone: links to its top-level entries (no data/, no ../shared) and .venv."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True)
    if listed.returncode == 0:
        names = {path.split("/")[0] for path in listed.stdout.splitlines() if path}
    else:  # not a git checkout: what a clone holds, less what running and building leave
        names = {p.name for p in REPO.iterdir()} - {".git", "data", "build", "logs", ".pytest_cache"}
    where.mkdir()
    for name in sorted(names | {".venv"}):
        (where / name).symlink_to(REPO / name)
    return where


def run_page(name: str, tmp_path, request) -> tuple[str, object]:
    page = README if name == "README.md" else REPO / "docs" / name
    script = page_script(page)
    env_extra = {}
    if "$PLANETOID" in script:
        env_extra["PLANETOID"] = str(request.getfixturevalue("planetoid_dir"))
    if name == "README.md":  # make demo in the copy must find .venv current (see the docstring)
        proc = fresh_shell("make setup", REPO, tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    work = clone_copy(tmp_path / "clone")
    prefix = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env_extra.items())
    proc = fresh_shell(prefix + script, work, tmp_path)
    last = [line for line in proc.stdout.splitlines() if line.startswith(">>> ")][-1:]
    assert proc.returncode == 0, f"{name}: {last}\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout, work


def page_params():
    out = []
    for page in PAGES:
        if not any(lang == "bash" for lang, _, _ in blocks(page)):
            continue
        text = "\n".join(body for lang, body, _ in blocks(page) if lang == "bash")
        marks = ([pytest.mark.mpi] if "mpiexec" in text else []) + ([pytest.mark.slow] if page.name in SLOW else [])
        out.append(pytest.param(page.name, marks=marks, id=page.name))
    return out


@pytest.mark.parametrize("name", page_params())
def test_the_page_runs_from_a_fresh_shell_in_a_fresh_clone(name, tmp_path, request):
    stdout, work = run_page(name, tmp_path, request)
    CHECKS.get(name, lambda stdout, work: None)(stdout, work)


def _readme(stdout, work):
    assert (work / "data" / "hetero-emb" / "index.json").is_file()  # typed inference wrote its outputs
    headers = [line for line in (work / "demo.jsonl").read_text().splitlines() if '"record": "run"' in line]
    assert len(headers) == 2, "the generated graph's run and Watching a run's, each with its header"
    assert (work / "report" / "curves.png").is_file() and (work / "report" / "runs.md").is_file()


def _datasets(stdout, work):
    # the tables walk-through: ids in, a node and a link run, ids out, retrieval checked
    assert "test mrr " in stdout, stdout[-3000:]
    assert (work / "data" / "shop" / "id_maps" / "user.parquet").is_file()
    assert (work / "data" / "shop-emb" / "index.json").is_file()


def _training(stdout, work):
    assert (work / "tiny-out" / "index.json").is_file()
    assert (work / "report" / "runs.md").is_file() and any((work / "tb").iterdir())
    runs = stdout.strip().splitlines()[-1]  # read_runs: the resumed run is one run, the third another
    assert runs.startswith("[(") and runs.count("(") == 2 and "', 5)" in runs, runs


def _reliability(stdout, work):
    assert "exit status 5" in stdout, stdout[-3000:]  # --target-val-acc missed: the documented status


CHECKS = {"README.md": _readme, "datasets.md": _datasets, "training.md": _training, "reliability.md": _reliability}


def test_every_command_runs_or_says_why():
    not_run = []
    for page in PAGES:
        marked = page.read_text().count("<!-- not run here:")
        assert marked == sum(reason is not None for _, _, reason in blocks(page)), \
            f"{page.name}: a <!-- not run here: REASON --> line not right above its block's fence"
        for lang, body, reason in blocks(page):
            if lang == "bash":
                assert reason is None, f"{page.name}: a bash block marked not run ({reason}): fence it otherwise"
                assert "../shared" not in body, f"{page.name}: a command assumes ../shared:\n{body}"
                for command in commands(body):
                    if "fastsample.data planetoid" in command:
                        assert '"$PLANETOID"' in command, f"{page.name}: Cora's files come from $PLANETOID: {command}"
            elif lang != "python" and any(is_command(line) for line in body.splitlines()):
                assert reason, f"{page.name}: a ```{lang} block holds commands but no <!-- not run here: REASON -->:\n{body}"
                not_run.append((page.name, reason))
            else:
                assert reason is None, f"{page.name}: <!-- not run here --> on a block without commands"
    assert len(not_run) <= MAX_NOT_RUN_BLOCKS, not_run


def test_the_readme_is_short_and_points_to_the_docs():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES, len(text.splitlines())
    for page in (REPO / "docs").glob("*.md"):
        assert f"(docs/{page.name})" in text, f"README.md does not point to docs/{page.name}"
    # the quick loop and the suite's time (as measured: it changes as tests come) come before the walk-through
    walk = text.index("## Walk-through")
    timed = re.search(r"every test: about \d+(-\d+)? minutes", text)
    assert text.index('-m "not slow"') < walk and timed and timed.start() < walk
    assert "CHANGELOG.md" in text and (REPO / "CHANGELOG.md").is_file()


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_pages_resolve():
    anchors = {}
    for page in [*PAGES, REPO / "CHANGELOG.md"]:
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)  # headings outside code
        anchors[page.resolve()] = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page.resolve()
            assert dest.exists(), f"{page.name}: link to {target}: no such file"
            if anchor:
                assert anchor in anchors.get(dest, set()), f"{page.name}: link to {target}: no such heading"
