"""Node regression: the target type's labelled nodes, each with a float target; mean
squared error; R², MAE and RMSE (the Values mixin, fastsample/tasks/base.py).

A dataset whose labels.npy is float32 holds targets, not classes (NaN: unlabelled; meta.json
num_classes 0; python -m fastsample.data targets derives one). The model has one output;
training and the sampled or exact (--eval full) evaluation are node classification's
(node.py), with these measures in place of accuracy.
"""

from __future__ import annotations

from fastsample.tasks.base import Values
from fastsample.tasks.node import NodeTask


class NodeRegressionTask(Values, NodeTask):
    """See the module doc; ``config``: the run's TrainConfig."""

    name = "node-regression"
    help = "node regression (the target type's float labels; mean squared error; R2, MAE, RMSE)"
    options = ("eval", "eval_every_steps")
