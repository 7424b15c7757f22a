"""Training as a library: the config, the trainer, its checkpoints, epoch records and reports.

    from fastsample.trainer import TrainConfig, startup
    trainer = startup(TrainConfig(data="data/cora-2", fanouts=(10, 10), batch_size=64), comm,
                      model=my_model, optimizer=my_optimizer, loss=my_loss, reporter=my_reporter)
    history = trainer.run()     # [EpochRecord]

``python -m fastsample.train`` is this, driven by the command line.
"""

from fastsample.trainer.checkpoint import CheckpointError, Checkpoints, load_checkpoint
from fastsample.trainer.config import TrainConfig
from fastsample.trainer.metrics import EpochRecord, read_log
from fastsample.trainer.report import ConsoleReporter, Reporter
from fastsample.trainer.trainer import Trainer, build_model, startup

__all__ = ["TrainConfig", "Trainer", "startup", "build_model", "EpochRecord", "read_log", "Checkpoints",
           "CheckpointError", "load_checkpoint", "Reporter", "ConsoleReporter"]
