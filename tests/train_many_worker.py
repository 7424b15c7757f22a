"""Run by helpers.train_many and helpers.run_many (under mpiexec, or alone for one rank):
python -m fastsample.train's own main() once per argument list (or, for a run given as
{"module": M, "argv": [...]}, python -m M's, e.g. fastsample.infer's), one after another in
this one process, so that a test comparing several runs pays the process start-up (torch's
import, ~4 s a rank) once. Each run parses its command line, builds its trainer and writes
its --log-json as a launch of its own would, and starts when every rank has ended the run
before it, as a launch after a launch would (rank 0 may still be writing the checkpoint a
next run reads when rank 1 returns); the first run that does not exit 0 ends the process
with its status (every rank returns alike, and a rank that fails mid-run aborts the job)."""

import importlib
import json
import sys


def run_all(runs: list) -> int:
    for i, run in enumerate(runs):
        module, argv = ("fastsample.train", run) if isinstance(run, list) else (run["module"], run["argv"])
        code = importlib.import_module(module).main(argv)
        if code != 0:
            print(f"train_many_worker: {module} {argv} exited {code}", file=sys.stderr, flush=True)
            return code
        if i + 1 < len(runs):  # every rank done with this run (and its files) before the next starts
            from mpi4py import MPI

            MPI.COMM_WORLD.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(run_all(json.loads(sys.argv[1])))
