"""Run by helpers.train_many, run_many and run_commands (under mpiexec, or alone for one
rank): several command lines, python -m M's own main() for each (M, [arguments]), one after
another in this one process, so that a test comparing several runs pays the process
start-up (torch's import, ~4 s a rank) once. Each command parses its command line and
writes its files as a launch of its own would, and starts once every rank has ended the one
before, as a launch after a launch would (rank 0 may still be writing the checkpoint a next
run reads when rank 1 returns).

    python tests/commands_worker.py COMMANDS_JSON [OUT]

Without OUT, output passes through and the first command that does not exit 0 ends the
process with its status (every rank returns alike; a rank that fails mid-run aborts the
job). With OUT, each command is seen as its own launch would be: its exit status (an
argparse exit's included) and what it wrote to stdout and stderr (file descriptors 1 and 2,
captured per command and rank into OUT/I-RANK.out, .err; the status into .code), and one
that fails does not stop the next (a test of a refusal wants its one line). A rank that
fails inside a collective while another waits leaves the launch hanging into helpers.run's
timeout, which fails the test.
"""

import importlib
import json
import os
import sys
import traceback

from fastsample.launcher import launch_rank


def status(module: str, argv: list[str]) -> int:
    """``python -m module argv...``'s exit status, its output going where fds 1 and 2 point."""
    try:
        return importlib.import_module(module).main(argv)
    except SystemExit as e:  # as the interpreter turns it into a status
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except Exception:  # as the interpreter reports an uncaught exception
        traceback.print_exc()
        return 1


def captured(module: str, argv: list[str], path: str) -> int:
    """status() with fds 1 and 2 written to path.out and path.err."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(f"{path}.out", "w") as o, open(f"{path}.err", "w") as e:
        os.dup2(o.fileno(), 1)
        os.dup2(e.fileno(), 2)
        try:
            return status(module, argv)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)


def main() -> int:
    commands, out = json.loads(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None
    rank = launch_rank()
    for i, (module, argv) in enumerate(commands):
        if out is None:
            code = importlib.import_module(module).main(argv)
            if code != 0:
                print(f"commands_worker: {module} {argv} exited {code}", file=sys.stderr, flush=True)
                return code
        else:
            code = captured(module, argv, f"{out}/{i}-{rank}")
            with open(f"{out}/{i}-{rank}.code", "w") as f:
                f.write(str(code))
        if i + 1 < len(commands):  # every rank done with this command (and its files) before the next starts
            from mpi4py import MPI

            MPI.COMM_WORLD.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
