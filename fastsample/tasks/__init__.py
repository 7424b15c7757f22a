"""Tasks: what a training run optimises and measures, apart from the loop that runs it.

Each task is one file holding a fastsample.tasks.base.Task (the protocol: its seed kind,
defaults, options, head, loss, step, evaluation, record fields and lines), registered
here by name. The Trainer (fastsample/trainer/) is the loop: epochs, steps, checkpoints,
preemption, reporting; it asks the task for everything else.

    node             node classification (node.py): labels of the target type's nodes,
                     cross-entropy, accuracy
    node-regression  node regression (node_regression.py): float targets of the target
                     type's nodes, mean squared error, R², MAE, RMSE
    link             link prediction (link.py): a target relation's edges against drawn negatives,
                     binary cross-entropy; exact ROC-AUC, MRR and Hits@K
    edge-class       edge classification (edge_class.py): a relation's labelled edges, an
                     encoder and a head over both endpoints; cross-entropy, accuracy
    edge-regression  edge regression (edge_regression.py): the same with float targets

The task modules import no torch at the top (the settings read their class-level parts
before torch loads).
"""

from __future__ import annotations

from fastsample.tasks.base import Task
from fastsample.tasks.edge_class import EdgeClassTask
from fastsample.tasks.edge_regression import EdgeRegressionTask
from fastsample.tasks.link import LinkTask
from fastsample.tasks.node import NodeTask
from fastsample.tasks.node_regression import NodeRegressionTask

TASKS: dict[str, type[Task]] = {t.name: t for t in (NodeTask, NodeRegressionTask, LinkTask, EdgeClassTask,
                                                     EdgeRegressionTask)}

__all__ = ["TASKS", "Task", "NodeTask", "LinkTask", "task_class", "task_for", "task_options"]


def task_class(name: str) -> type[Task]:
    """The registered task ``name``; ValueError naming the known ones otherwise."""
    if name not in TASKS:
        raise ValueError(f"task {name!r} is not one of {', '.join(TASKS)}")
    return TASKS[name]


def task_for(config) -> Task:
    """The task object ``config.task`` names."""
    return task_class(config.task)(config)


def task_options() -> dict[str, tuple[str, ...]]:
    """{TrainConfig field: the tasks it serves} for every field some task declares its own."""
    out: dict[str, list[str]] = {}
    for name, t in TASKS.items():
        for option in t.options:
            out.setdefault(option, []).append(name)
    return {k: tuple(v) for k, v in out.items()}
