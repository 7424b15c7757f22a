"""Tasks: what a training run optimises and measures, apart from the loop that runs it.

A task owns its seeds' loaders, its model's head (the encoder is the built-in model or
the user's), its loss and step statistics, its evaluation (sampled and exact layer-wise),
the fields it adds to the epoch record and what the start-up line says of it. The Trainer
(fastsample/trainer/) is the loop: epochs, steps, checkpoints, preemption, reporting.

    node  node classification (fastsample/tasks/node.py): labels of the target type's
          nodes, cross-entropy, accuracy
    link  link prediction (fastsample/tasks/link.py): a target relation's edges against
          drawn negatives, binary cross-entropy; exact ROC-AUC, MRR and Hits@K
"""

from __future__ import annotations

from fastsample.tasks.link import LinkTask
from fastsample.tasks.node import NodeTask

TASKS = {"node": NodeTask, "link": LinkTask}

__all__ = ["TASKS", "NodeTask", "LinkTask", "task_for"]


def task_for(config):
    """The task object ``config.task`` names."""
    return TASKS[config.task](config)
