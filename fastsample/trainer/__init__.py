"""Training as a library: the config, the trainer, its checkpoints, epoch records and reports.

    from fastsample.trainer import TrainConfig, startup
    trainer = startup(TrainConfig(data="data/cora-2", fanouts=(10, 10), batch_size=64), comm,
                      model=my_model, optimizer=my_optimizer, loss=my_loss, reporter=my_reporter)
    history = trainer.run()     # [EpochRecord]

``python -m fastsample.train`` is this, driven by the command line.
"""

import importlib

# Loaded on first use, so the command line parses (and refuses a bad flag) before torch loads.
_LAZY = {
    "TrainConfig": "config", "Trainer": "trainer", "startup": "trainer", "build_model": "trainer",
    "EpochRecord": "metrics", "read_log": "runlog", "read_runs": "runlog", "read_records": "runlog", "Run": "runlog", "Checkpoints": "checkpoint", "CheckpointError": "checkpoint",
    "load_checkpoint": "checkpoint", "Reporter": "report", "ConsoleReporter": "report",
}
__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_LAZY})
