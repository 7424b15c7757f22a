"""Edge regression: a relation's labelled edges with float targets (fastsample/data/
edge_labels.py, kind "values"), each predicted from its endpoints' embeddings; mean
squared error; R², MAE and RMSE (the Values mixin). Batches, model and the exact
evaluation are edge classification's (edge_class.py)."""

from __future__ import annotations

from fastsample.tasks.base import Values
from fastsample.tasks.edge_class import EdgeClassTask


class EdgeRegressionTask(Values, EdgeClassTask):
    """See the module doc; ``config``: the run's TrainConfig."""

    name = "edge-regression"
    help = ("edge regression on a dataset's labelled edges of one relation (float targets; mean squared error; "
            "R2, MAE, RMSE; evaluated exactly, layer-wise)")
    output = "embeddings"
