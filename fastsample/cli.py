"""Conventions shared by the command-line tools: how they parse, fail and report.

The command lines are generated from the typed configs (fastsample/options.py: one flag per
field; bools are switches, tuples comma-separated); a bad value is one line naming the
flag, and an error of the library is worded here (flags in place of parameters).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import resource
import sys
import typing
from typing import Any

from fastsample.atomic import AlreadyExists
from fastsample.comm import CommError
from fastsample.comm.agree import WAIT_S, ErrorText, StartupError, agree
from fastsample.options import ConfigError, base_type, field_types, type_name
from fastsample.launcher import launch_rank, sleep_idle_threads_if_oversubscribed


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """--help keeps the description's layout and shows each option's default (options
    without one, or whose help already says it, are left alone)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "(default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help and errors are printed by rank 0 only (every rank of a
    job parses the same arguments, so every rank exits with the same status, but one
    message is enough), and whose errors are one line, without the usage block."""

    def __init__(self, *args, **kw):
        kw.setdefault("formatter_class", HelpFormatter)
        kw.setdefault("allow_abbrev", False)  # --epoch for --epochs would be taken silently
        super().__init__(*args, **kw)
        # "-1,-1" (--fanouts -1,-1: every neighbour) is a value, not a flag: argparse takes only
        # "-1" and "-1.5" so; no flag starts with a digit, so neither does any other such value
        self._negative_number_matcher = re.compile(r"^-\d")

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def _print_message(self, message, file=None):
        if launch_rank() == 0:
            super()._print_message(message, file)


def parser(cls, prog: str, description: str | None = None, epilog: str | None = None) -> Parser:
    """An argparse parser with one flag per field of the config class ``cls`` (its help,
    choices, default), listed under their groups where ``cls.GROUPS`` names them ((title,
    description, field names) each, in the order --help shows them)."""
    p = Parser(prog=prog, description=description, epilog=epilog)
    group_of = {}
    for title, text, names in getattr(cls, "GROUPS", ()):
        group_of.update(dict.fromkeys(names, p.add_argument_group(title, text)))
    types = field_types(cls)
    for f in dataclasses.fields(cls):
        m, flag = f.metadata, "--" + f.name.replace("_", "-")
        g = group_of.get(f.name, p)
        tp = base_type(types[f.name])
        kw = dict(help=m.get("help", ""), dest=f.name)
        if tp is bool:
            g.add_argument(flag, action="store_true", **kw)
            continue
        if m.get("positional"):
            g.add_argument(f.name, help=kw["help"], type=str)
            continue
        if f.default is dataclasses.MISSING:
            kw["required"] = True
        else:
            kw["default"] = f.default
            if typing.get_origin(tp) is tuple and f.default is not None:
                kw["default"] = ",".join(str(v) for v in f.default)
        if m.get("choices"):
            kw["choices"] = m["choices"]
        if m.get("metavar"):
            kw["metavar"] = m["metavar"]
        kw["type"] = str  # converted by from_namespace, so a bad value is one ConfigError naming the field
        g.add_argument(flag, **kw)
    return p


def _parse_value(tp, text: str):
    tp = base_type(tp)
    if typing.get_origin(tp) is tuple:
        return tuple(typing.get_args(tp)[0](v) for v in text.split(","))
    return tp(text)


def from_namespace(cls, ns) -> Any:
    """Build ``cls`` from a parsed namespace (strings converted by the field types) and check it."""
    types, values = field_types(cls), {}
    for f in dataclasses.fields(cls):
        v = getattr(ns, f.name)
        if isinstance(v, str) and types[f.name] is not str:
            try:
                v = _parse_value(types[f.name], v)
            except ValueError:
                name = type_name(types[f.name])
                expect = f.metadata.get("expect") or f"a{'n' if name[0] in 'aeiou' else ''} {name}"
                raise ConfigError(f.name, f": expected {expect} (got {v!r})") from None
        values[f.name] = v
    return cls(**values)


def parse(cls, parser, argv=None) -> Any:
    """Parse ``argv`` with ``parser`` (made by parser(cls, ...)) into a checked ``cls``; a bad
    setting exits 2 with one line naming its flag (Parser.error)."""
    try:
        return from_namespace(cls, parser.parse_args(argv))
    except ConfigError as e:
        parser.error(flag_message(e))


def given(parser, argv) -> set[str]:
    """The fields whose flags ``argv`` names (whatever their values)."""
    out = set()
    for token in map(str, argv):
        if token == "--":
            break
        action = parser._option_string_actions.get(token.split("=", 1)[0]) if token.startswith("--") else None
        if action is not None:
            out.add(action.dest)
    return out


def settle_threads(prog: str, threads: int | None) -> None:
    """Before torch loads: where this node's ranks x threads exceed its cores, idle OpenMP
    threads are made to sleep (launcher.sleep_idle_threads_if_oversubscribed); rank 0 says so."""
    note = sleep_idle_threads_if_oversubscribed(threads)
    if note and launch_rank() == 0:
        print(f"{prog}: {note}", file=sys.stderr, flush=True)


def flag_message(error: ConfigError) -> str:
    """A ConfigError in a command line's words: the field's flag in place of its name."""
    return error.worded("--" + error.field.replace("_", "-"))


def describe(error: BaseException) -> str:
    """An exception as a CLI's one-line message."""
    if isinstance(error, StartupError):
        return f"rank {error.rank}, in {error.where}: {describe(error.error)}"
    if isinstance(error, AlreadyExists):  # the library says overwrite=True; the CLI's word is a flag
        return f"{error.path}: already exists (pass --overwrite to replace it)"
    if isinstance(error, ConfigError):  # the library names the setting; the CLI's word is its flag
        return flag_message(error)
    if isinstance(error, CommError):  # the library names the backend parameter; the CLIs' flag is --backend
        return re.sub(r"\bbackend '?(\w+)'?", r"--backend \1", str(error))
    return str(error) if isinstance(error, (ValueError, OSError, ErrorText)) else f"{type(error).__name__}: {error}"


def agreed(comm, prog: str, build, wait_s: float = WAIT_S):
    """``comm.agree.agree`` for a command line: if start-up failed on any rank, rank 0 prints
    that rank's message (one line) and every rank exits 2, so a start-up error never leaves
    other ranks waiting in a collective. Returns build()'s result. ``wait_s``: agree's."""
    try:
        return agree(comm, build, wait_s)
    except StartupError as e:
        raise SystemExit(startup_failed(prog, comm, e)) from None


def startup_failed(prog: str, comm, error: StartupError) -> int:
    """A failed start-up agreement: rank 0 prints the failing rank's message (every rank
    has it; one line is enough). Returns the exit status, 2, for every rank. A stranded
    failure (the others held in a collective) is printed by the failing rank, which then
    ends the job (exit 2 too)."""
    if comm.rank == 0 or error.stranded:
        print(f"{prog}: error: {describe(error)}", file=sys.stderr, flush=True)
    if error.stranded:
        comm.abort(2)
    return 2


def create_comm(prog: str, backend: str):
    """The job's communicator, or None after one line from the launch's rank 0 (every rank
    fails alike when a backend is not installed, so one message is enough)."""
    from fastsample.comm import create
    from fastsample.supervisor import segments_made

    try:
        comm = create(backend)
    except CommError as e:
        if launch_rank() == 0:
            print(f"{prog}: error: {describe(e)}", file=sys.stderr, flush=True)
        return None
    segments_made()  # the MPI library's shared memory, known to the supervisor before anything can kill the rank
    return comm


def progress(args) -> bool:
    """Set the process's progress display from a command's --progress, --progress-every and
    --quiet (fastsample/progress.py: a bar where the user watches a terminal, else timed
    lines); returns whether any is shown."""
    from fastsample import progress as shown

    return shown.configure(args.progress, args.progress_every, args.quiet) != "none"


def progress_flags(p) -> None:
    """--progress and --progress-every on a hand-written parser (the configs' commands get
    them as fields: PROGRESS_FIELDS)."""
    p.add_argument("--progress", choices=("bar", "lines", "none"), default=None, help=PROGRESS_HELP)
    p.add_argument("--progress-every", type=float, default=60.0, metavar="SECONDS", help=PROGRESS_EVERY_HELP)


PROGRESS_HELP = ("progress on long work: bar (redrawn in place: a terminal's), lines (one every --progress-every "
                 "seconds with the count, rate and ETA: what a file, a Slurm log or mpiexec's forwarding shows well), "
                 "none; default: bar where the user watches a terminal (mpiexec's counts), else lines")
PROGRESS_EVERY_HELP = "seconds between progress lines (--progress lines)"


def fail(prog: str, error: Exception) -> int:
    """One line on stderr naming the tool and the problem; exit status 2."""
    print(f"{prog}: error: {describe(error)}", file=sys.stderr)
    return 2


def peak_rss_mib() -> float:
    """This process's peak resident memory, MiB: Linux's VmHWM, which starts again at exec
    (ru_maxrss, the fallback, keeps a forking parent's size: a command started by a large
    process would report the parent's)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(record: dict, text: str, as_json: bool) -> int:
    """Print a run's record (as JSON, or as ``text`` plus time and peak memory)."""
    record["peak_rss_mib"] = round(peak_rss_mib(), 1)
    if as_json:
        print(json.dumps(record, indent=2))
    else:
        print(text)
        print(f"time        {record['seconds']:.1f} s, peak RSS {record['peak_rss_mib']:,.0f} MiB")
    return 0
