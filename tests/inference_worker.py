"""One rank of tests/test_inference.py: layer-wise inference of saved models on partitions.

    mpiexec -n P python tests/inference_worker.py JOBS

JOBS: a JSON list of jobs, run in turn in this one launch, each {"part": PARTITION, "kind":
KIND, "state": STATE, "out": OUT_PREFIX, "batch": BATCH, "mode": MODE}; MODE vanilla opens
each rank's vanilla share (its own rows' in-edges, no whole topology), hybrid the partition.

For job i each rank writes OUT_PREFIX-RANK.npy and then says so (helpers.passed, check
"layerwise_saved.i"), for test_inference.py.
"""

import sys
from pathlib import Path

import numpy as np
import torch

DIMS = dict(in_dim=12, hidden=16, classes=4, layers=3)


def make_model(kind: str) -> torch.nn.Module:
    if kind == "sage":
        from fastsample.nn.sage import GraphSAGE

        return GraphSAGE(DIMS["in_dim"], DIMS["hidden"], DIMS["classes"], DIMS["layers"], dropout=0.5)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import pyg_sage

    return pyg_sage.SAGE(DIMS["in_dim"], DIMS["hidden"], DIMS["classes"], DIMS["layers"])


if __name__ == "__main__":
    import json

    from fastsample.comm import create
    from fastsample.loading.layerwise import layerwise
    from helpers import passed

    comm = create("mpi")
    for i, job in enumerate(json.loads(sys.argv[1])):
        model = make_model(job["kind"])
        model.load_state_dict(torch.load(job["state"], weights_only=True))
        part = job["part"]
        if job["mode"] == "vanilla":
            from fastsample.partition import load_partition

            part = load_partition(part, comm.rank, comm.size, mode="vanilla")
        np.save(f"{job['out']}-{comm.rank}.npy", layerwise(model, part, comm, batch_size=int(job["batch"])))
        passed(comm.rank, f"layerwise_saved.{i}")
