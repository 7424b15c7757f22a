"""Run by helpers.train_many (under mpiexec, or alone for one rank): python -m
fastsample.train's own main() once per argument list, one after another in this one process,
so that a test comparing several runs pays the process start-up (torch's import, ~4 s a
rank) once. Each run parses its command line, builds its trainer and writes its --log-json
as a launch of its own would; the first run that does not exit 0 ends the process with its
status (every rank returns alike, and a rank that fails mid-run aborts the job)."""

import json
import sys

from fastsample.train import main


def run_all(runs: list[list[str]]) -> int:
    for argv in runs:
        code = main(argv)
        if code != 0:
            print(f"train_many_worker: {argv} exited {code}", file=sys.stderr, flush=True)
            return code
    return 0


if __name__ == "__main__":
    sys.exit(run_all(json.loads(sys.argv[1])))
