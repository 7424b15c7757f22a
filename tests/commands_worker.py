"""Run by helpers.run_commands under mpiexec: several command lines (python -m M's own main()
for each (M, [arguments])) one after another in this one process, each as a launch of its
own would be seen: its exit status (an argparse exit's included) and what it wrote to stdout
and stderr (file descriptors 1 and 2, captured per command and rank into OUT/I-RANK.out,
.err; the status into .code). A command starts once every rank has ended the one before, as
a launch after a launch would; one that fails does not stop the next (a test of a refusal
wants its one line). A rank that fails inside a collective while another waits leaves the
launch hanging into helpers.run's timeout, which fails the test.

    mpiexec -n P python tests/commands_worker.py COMMANDS_JSON OUT
"""

import importlib
import json
import os
import sys
import traceback

from fastsample.launcher import launch_rank


def run(module: str, argv: list[str]) -> int:
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


def main() -> None:
    commands, out = json.loads(sys.argv[1]), sys.argv[2]
    rank = launch_rank()
    for i, (module, argv) in enumerate(commands):
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        with open(f"{out}/{i}-{rank}.out", "w") as o, open(f"{out}/{i}-{rank}.err", "w") as e:
            os.dup2(o.fileno(), 1)
            os.dup2(e.fileno(), 2)
            try:
                code = run(module, argv)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
        with open(f"{out}/{i}-{rank}.code", "w") as f:
            f.write(str(code))
        from mpi4py import MPI

        MPI.COMM_WORLD.Barrier()  # every rank done with this command before the next starts


if __name__ == "__main__":
    main()
