"""One rank of tests/test_inference.py: layer-wise inference of a saved model on a partition.

    mpiexec -n P python tests/inference_worker.py PARTITION KIND STATE OUT_PREFIX BATCH [MODE]

MODE vanilla opens each rank's vanilla share (its own rows' in-edges, no whole topology).

Each rank writes OUT_PREFIX-RANK.npy and then says so (helpers.passed), for test_inference.py.
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
    from fastsample.comm import create
    from fastsample.loading.layerwise import layerwise
    from helpers import passed

    part, kind, state, out, batch = sys.argv[1:6]
    model = make_model(kind)
    model.load_state_dict(torch.load(state, weights_only=True))
    comm = create("mpi")
    if sys.argv[6:] == ["vanilla"]:
        from fastsample.partition import load_partition

        part = load_partition(part, comm.rank, comm.size, mode="vanilla")
    np.save(f"{out}-{comm.rank}.npy", layerwise(model, part, comm, batch_size=int(batch)))
    passed(comm.rank, "layerwise_saved")
