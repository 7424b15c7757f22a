"""Checkpoints: rank 0 saves model, optimizer and config after every epoch (atomically);
a resumed run loads the latest and continues with exactly the losses of an uninterrupted
run. Sharded embeddings (typed data) are saved beside it, each rank its own shard and
optimizer state (epoch-N.embed-R-of-P.pt), all before rank 0 writes epoch-N.pt, so an
epoch-N.pt implies its shards are complete; the directory must then be one every rank
can write (a shared file system across machines). Files are read with torch's
weights-only unpickler: tensors and plain values only, so a tampered file cannot run code."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import torch

from fastsample.atomic import DiskFull
from fastsample.options import from_dict, marked, to_dict

__all__ = ["CheckpointError", "Checkpoints", "load_checkpoint"]

_NAME = re.compile(r"epoch-(\d+)(?:\.step-(\d+))?\.pt")


def _position(path: Path) -> tuple[int, int]:
    """Where a checkpoint resumes: (epoch, step); a whole epoch E's is (E + 1, 0)."""
    m = _NAME.fullmatch(path.name)
    return (int(m.group(1)), int(m.group(2))) if m.group(2) else (int(m.group(1)) + 1, 0)


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
        code = next((line for line in lines if "GLOBAL" in line or "Unsupported global" in line), None)
        if code is not None:
            raise CheckpointError(f"{path}: refused: not a plain checkpoint of tensors and values ({code})") from None
        raise CheckpointError(f"{path}: unreadable, truncated or corrupt ({lines[0]})") from None
    if not isinstance(state, dict) or not {"epoch", "model", "optimizer", "config"} <= state.keys():
        raise CheckpointError(f"{path}: not a fastsample checkpoint (expected epoch, model, optimizer, config)")
    return state


def shard_path(checkpoint: str | Path, rank: int, num_parts: int) -> Path:
    """Where rank ``rank`` of ``num_parts`` keeps its embedding shard of ``checkpoint``."""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(f"{checkpoint.name.removesuffix('.pt')}.embed-{rank}-of-{num_parts}.pt")


def load_shard(checkpoint: str | Path, embeddings, rank: int, num_parts: int) -> None:
    """Rank ``rank``'s embedding shard of ``checkpoint`` into ``embeddings`` (a
    ShardedEmbeddings of this job's shape); a CheckpointError naming the shard file if it
    is missing or not this job's."""
    shard = shard_path(checkpoint, rank, num_parts)
    if not shard.is_file():
        raise CheckpointError(f"{shard}: missing: {Path(checkpoint).name} has no embedding shard for rank {rank} of "
                              f"{num_parts} (saved by a job of another size?)")
    try:
        embeddings.load_state_dict(torch.load(shard, map_location="cpu", weights_only=True))
    except Exception as e:
        raise CheckpointError(f"{shard}: not this job's embedding shard ({type(e).__name__}: {e})") from None


def _write(path: Path, state: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)  # never a half-written checkpoint under the real name
    except BaseException as e:
        written = tmp.stat().st_size if tmp.exists() else None
        tmp.unlink(missing_ok=True)
        if isinstance(e, (OSError, RuntimeError)) and shutil.disk_usage(path.parent).free < (written or 0) + (1 << 20):
            raise DiskFull(path.parent, what=f"{path.name} (at least {written:,} bytes were written)") from None
        raise


class Checkpoints:
    """The checkpoints of one run in ``directory`` (epoch-N.pt), for a config of type ``type(config)``.

    Args:
        directory: where they are (created by the caller; see the trainer's start-up checks).
        config: this run's config; resume() compares it with the saved one.
    """

    def __init__(self, directory: str | Path, config):
        self.dir, self.config = Path(directory), config

    def save(self, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, comm=None,
             embeddings=None, step: int | None = None) -> Path:
        """Write epoch ``epoch``'s checkpoint (rank 0, or a job of one process without comm);
        with ``step``, one taken inside the epoch that resumes at that step
        (epoch-E.step-S.pt). Collective over ``comm`` (every rank calls it): with
        ``embeddings``, each rank first writes its shard, and a rank that failed raises on
        every rank."""
        rank = comm.rank if comm is not None else 0
        name = f"epoch-{epoch}" if step is None else f"epoch-{epoch}.step-{step}"
        path = self.dir / f"{name}.pt"
        if embeddings is not None and embeddings.tables:
            error = None
            try:
                _write(shard_path(path, rank, comm.size if comm is not None else 1),
                       {"epoch": epoch, **embeddings.state_dict()})
            except OSError as e:
                error = f"rank {rank}: {e}"
            errors = [e for e in (comm.allgather_object(error) if comm is not None else [error]) if e]
            if errors:
                raise CheckpointError(f"{self.dir}: saving epoch {epoch}'s embedding shards failed: {errors[0]}")
        if rank == 0:
            _write(path, {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "config": to_dict(self.config), **({} if step is None else {"step": step})})
            self._prune()
        return path

    def _prune(self) -> None:
        """Remove all but the newest keep_checkpoints checkpoints (with their embedding
        shards); called once the newest is complete."""
        keep = getattr(self.config, "keep_checkpoints", 0)
        if not keep:
            return
        for path in self.found()[keep:]:
            for f in [path, *self.dir.glob(f"{path.name.removesuffix('.pt')}.embed-*-of-*.pt")]:
                f.unlink(missing_ok=True)

    def found(self) -> list[Path]:
        """The checkpoints in the directory, the one resuming furthest first (epoch-E.pt,
        epoch-E.step-S.pt; never a temporary or a shard)."""
        return sorted((f for f in self.dir.glob("epoch-*.pt") if _NAME.fullmatch(f.name)),
                      key=lambda f: tuple(-x for x in _position(f)))

    def newest_readable(self, device="cpu") -> tuple[Path, dict, list[str]]:
        """(the newest checkpoint that loads, its contents, why each newer one was skipped)."""
        found = self.found()
        if not found:
            raise FileNotFoundError(f"resume: no checkpoint (epoch-*.pt) in {self.dir}")
        skipped = []
        for path in found:
            try:
                return path, load_checkpoint(path, device), skipped
            except CheckpointError as e:
                skipped.append(str(e))
        raise CheckpointError(f"resume: no readable checkpoint in {self.dir}: {'; '.join(skipped)}")

    def resume(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device="cpu", embeddings=None,
               rank: int = 0, num_parts: int = 1) -> tuple[int, int, str]:
        """Load the newest readable checkpoint into model and optimizer (and this rank's
        embedding shard into ``embeddings``); returns (the epoch and the step to start
        from, a line saying which checkpoint it is and which newer ones were skipped, and why)."""
        path, state, skipped = self.newest_readable(device)
        try:
            saved = from_dict(type(self.config), state["config"])
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: its config does not load ({e})") from None
        differ = [k for k in marked(self.config, "resume") if getattr(saved, k) != getattr(self.config, k)]
        if differ:
            raise CheckpointError(f"{path}: saved with different {', '.join(differ)}")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if embeddings is not None and embeddings.tables:
            load_shard(path, embeddings, rank, num_parts)
        start, step = (state["epoch"], int(state["step"])) if "step" in state else (state["epoch"] + 1, 0)
        if start >= self.config.epochs:
            raise CheckpointError(f"resume: {path.name} already ends epoch {state['epoch']}; epochs "
                                  f"{self.config.epochs} leaves nothing to train (raise it)")
        note = f"resume: from {path}" + "".join(f"; skipped {why}" for why in skipped)
        return start, step, note
