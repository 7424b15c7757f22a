"""Checkpoints: rank 0 saves model, optimizer and config after every epoch (atomically);
a resumed run loads the latest and continues with exactly the losses of an uninterrupted
run. Files are read with torch's weights-only unpickler: tensors and plain values only,
so a tampered file cannot run code."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from fastsample.config import from_dict, marked, to_dict

__all__ = ["CheckpointError", "Checkpoints", "load_checkpoint"]


class CheckpointError(ValueError):
    """A checkpoint that is missing, not a checkpoint, or saved with other settings."""


def load_checkpoint(path: str | Path, device="cpu") -> dict:
    """A checkpoint's contents (epoch, model, optimizer, config as a plain dict).

    Args:
        path: an epoch-N.pt file.
        device: where its tensors go.
    Returns:
        The saved dict. Raises FileNotFoundError, or CheckpointError naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint file")
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        why = next((line for line in lines if "GLOBAL" in line or "Unsupported global" in line), lines[0])
        raise CheckpointError(f"{path}: refused: not a plain checkpoint of tensors and values ({why})") from None
    if not isinstance(state, dict) or not {"epoch", "model", "optimizer", "config"} <= state.keys():
        raise CheckpointError(f"{path}: not a fastsample checkpoint (expected epoch, model, optimizer, config)")
    return state


class Checkpoints:
    """The checkpoints of one run in ``directory`` (epoch-N.pt), for a config of type ``type(config)``.

    Args:
        directory: where they are (created by the caller; see the trainer's start-up checks).
        config: this run's config; resume() compares it with the saved one.
    """

    def __init__(self, directory: str | Path, config):
        self.dir, self.config = Path(directory), config

    def save(self, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> Path:
        path = self.dir / f"epoch-{epoch}.pt"
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "config": to_dict(self.config)}, tmp)
        os.replace(tmp, path)  # never a half-written checkpoint under the real name
        return path

    def latest(self) -> Path:
        found = sorted(self.dir.glob("epoch-*.pt"), key=lambda f: int(f.stem.split("-")[1]))
        if not found:
            raise FileNotFoundError(f"resume: no checkpoint (epoch-*.pt) in {self.dir}")
        return found[-1]

    def resume(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device="cpu") -> int:
        """Load the latest checkpoint into model and optimizer; returns the epoch to start from."""
        path = self.latest()
        state = load_checkpoint(path, device)
        try:
            saved = from_dict(type(self.config), state["config"])
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: its config does not load ({e})") from None
        differ = [k for k in marked(self.config, "resume") if getattr(saved, k) != getattr(self.config, k)]
        if differ:
            raise CheckpointError(f"{path}: saved with different {', '.join(differ)}")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"] + 1
        if start >= self.config.epochs:
            raise CheckpointError(f"resume: {path.name} already ends epoch {state['epoch']}; epochs "
                                  f"{self.config.epochs} leaves nothing to train (raise it)")
        return start
