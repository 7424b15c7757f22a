"""python -m fastsample.train: synchronous data-parallel GNN training on a partitioned graph.

Launch under mpirun / mpiexec / srun (or as one process). Each step, on every rank:
sample L layers around this rank's next training seeds (hybrid: locally on the replicated
topology; vanilla: 2 rounds per lower layer), gather the input features (2 rounds),
forward/backward, all-reduce the gradients (one flat bucket), optimizer step.
The settings are fastsample/trainer/config.py's TrainConfig; the loop is fastsample.trainer.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

from fastsample import cli, phases
from fastsample.launcher import say
from fastsample.options import ConfigError
from fastsample.trainer.config import TrainConfig  # no torch: a bad flag is refused before torch loads

PROG = "python -m fastsample.train"
TARGET_MISSED = 5  # --target-val-acc not reached (MLPerf: the run failed)


def build_parser() -> cli.Parser:
    return cli.parser(TrainConfig, PROG, __doc__)


def parse_args(argv=None) -> TrainConfig:
    """The command line as a checked TrainConfig; a bad setting exits 2 with one line naming its flag."""
    parser = build_parser()
    config = cli.parse(TrainConfig, parser, argv)
    try:  # a flag typed that would do nothing, though its value is the default (--scorer mlp on a node task)
        config.refuse_inert(cli.given(parser, sys.argv[1:] if argv is None else argv))
    except ConfigError as e:
        parser.error(cli.flag_message(e))
    cli.settle_threads(PROG, config.threads)
    import torch

    if config.device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda: no CUDA device is available (torch {torch.__version__}, "
                     f"{'built without CUDA' if torch.version.cuda is None else f'CUDA {torch.version.cuda}'})")
    return config


_PREEMPT = (signal.SIGTERM, signal.SIGUSR1)  # scancel, a time limit, mpiexec's forwarding; Slurm's --signal


_interrupted_in: list[str] = []


def _interrupt(signum, frame):
    _interrupted_in.append(phases.where())  # now: the phases unwind as the exception rises
    raise KeyboardInterrupt


def main(argv=None) -> int:
    # a preemption during start-up (loading a large graph takes minutes) is kept, and acted on
    # at the first step (it used to kill the rank: exit 143, which train.sbatch does not requeue)
    early: list[int] = []
    before = {s: signal.signal(s, lambda s, _: early.append(s)) for s in _PREEMPT}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where it is ignored (nohup)
        before[signal.SIGINT] = signal.signal(signal.SIGINT, _interrupt)
    try:
        return _main(argv, early)
    except KeyboardInterrupt:
        # Ctrl-C (mpiexec forwards it to every rank): a line, not a traceback per rank and then the
        # supervisor's "killed by SIGINT"; exit at once (MPI's finalize would wait for the others)
        from fastsample.launcher import launch_rank

        phases.ending()
        at = _interrupted_in[0] if _interrupted_in else phases.where()
        say(f"{PROG}: interrupted (SIGINT) on rank {launch_rank()}, in {at}")
        sys.stdout.flush()
        mpi = sys.modules.get("mpi4py.MPI")
        if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
            from fastsample.comm.mpi import abort

            abort(mpi.COMM_WORLD, 130)  # every rank ends 130 (the launcher would kill the others: 9)
        os._exit(130)
    finally:
        for s, handler in before.items():  # a test calls main() again in this process
            signal.signal(s, handler)


def _main(argv, early: list) -> int:
    config = parse_args(argv)
    from fastsample.allocator import retain_freed_memory
    from fastsample.comm.watchdog import watched

    if config.allocator == "retain":
        retain_freed_memory()
    comm = cli.create_comm(PROG, config.backend)
    if comm is None:
        return 2
    if config.net_model:
        from fastsample.comm.netmodel import ModeledNetwork

        comm = ModeledNetwork(comm, *config.net_model)
    phases.reset()
    with watched(comm, config.stall_timeout, PROG) as comm:
        return _train(config, comm, early)


def _train(config: TrainConfig, comm, early: list = ()) -> int:
    from fastsample.atomic import DiskFull
    from fastsample.comm.agree import StartupError
    from fastsample.phases import blame, where
    from fastsample.trainer.checkpoint import ShardsNotSaved
    from fastsample.trainer.trainer import NonFiniteLoss, Preempted, TargetMissed, startup

    try:
        trainer = startup(config, comm)
    except StartupError as e:
        return cli.startup_failed(PROG, comm, e)
    # SIGTERM and SIGUSR1: finish the step on every rank, save where to resume, exit 75 (trainer's PREEMPTED)
    for signum in _PREEMPT:
        signal.signal(signum, lambda s, _: trainer.request_stop(s))
    if early:  # one came during start-up
        trainer.request_stop(early[0])
    intact = "; the checkpoints before it are intact" if config.checkpoint_dir else ""
    try:
        trainer.run()
        phases.done()
    except NonFiniteLoss as e:  # every rank raises it at the same step: no abort needed
        if comm.rank == 0:
            print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
        return 3
    except Preempted as e:  # likewise
        if comm.rank == 0:
            print(f"{PROG}: {e}", file=sys.stderr, flush=True)
        return e.status
    except TargetMissed as e:  # likewise
        if comm.rank == 0:
            print(f"{PROG}: {e}", file=sys.stderr, flush=True)
        return TARGET_MISSED
    except ShardsNotSaved as e:  # likewise: named by the rank that failed
        if comm.rank == 0:
            print(f"{PROG}: error: rank {e.rank}, in {where()}: {e}{intact}", file=sys.stderr, flush=True)
        return 1
    except Exception as e:
        # A rank that fails mid-run would leave the others blocked in a collective: one line
        # naming it, where it was and why (a bug's traceback before it), then end the whole job.
        if isinstance(e, DiskFull):  # a file that did not fit: nothing half-written, the checkpoints before it stand
            why = f"{e}{intact}"
        elif isinstance(e, ConfigError):  # the user's model or data, found at a step: said, not a bug's traceback
            why = cli.describe(e)
        else:
            sys.stderr.write(traceback.format_exc())
            why = cli.describe(e)
        say(f"{PROG}: error: {blame(comm.rank)}: {why}")
        if comm.size > 1:
            comm.abort(1)
        return 1
    return 0


if __name__ == "__main__":
    from fastsample.supervisor import supervised

    sys.exit(supervised(main, PROG))
