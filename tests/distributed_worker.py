"""Run under mpiexec by test_distributed.py: gather_worker.py's cases, then vanilla_worker.py's
steps, on one communicator of the given backend, in one launch (a process starts one gloo
group; the start-up, ~5 s a rank, is paid once). The checks' lines are the two workers'.

    mpiexec -n P python tests/distributed_worker.py DATASET PARTITION BACKEND
"""

import sys

import gather_worker
import vanilla_worker
from fastsample.comm import create

if __name__ == "__main__":
    dataset, partition, backend = sys.argv[1:4]
    comm = create(backend)
    gather_worker.check(comm, dataset, partition)
    vanilla_worker.check(comm, partition)
