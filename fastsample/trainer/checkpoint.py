"""Checkpoints: rank 0 saves model, optimizer and config after every epoch (atomically);
a resumed run loads the latest and continues with exactly the losses of an uninterrupted
run. Sharded embeddings (typed data) are saved beside it, each rank its own shard and
optimizer state (epoch-N.embed-R-of-P.pt), all before rank 0 writes epoch-N.pt, so an
epoch-N.pt implies its shards were written; the directory must then be one every rank
can write (a shared file system across machines). Files are read with torch's
weights-only unpickler: tensors and plain values only, so a tampered file cannot run code.

A checkpoint is a set: epoch-N.pt and, with embeddings, this job's P shards, each
written atomically but not together, so any one of them can be lost or damaged on its own
(a disk that filled, a copy cut short, a crash between a shard and epoch-N.pt when an
epoch is saved again). epoch-N.pt names its shards (a random token each), so a shard of
another save of epoch N is not taken for its own. resume() takes the newest complete set
and says which newer ones it skipped and why; none complete (e.g. shards of a job of
another size) is one error naming each. Every rank must start from the same set, and
resume runs inside the start-up agreement, where a collective could meet a rank that
failed earlier: so every rank checks every shard itself (memory-mapped, reading little
but its own) and all decide alike from the same files.

One job writes a directory: start-up (the trainer's check_outputs, rank 0) takes a lock
on its .lock file (fastsample/atomic.py's Lock: flock, released by the kernel if the
process dies), so a second job on it fails at once (Busy, naming the first's process)
instead of the two interleaving their epochs; the rank-0 Checkpoints holds it until it
is gone or the process ends, which removes the file.
"""

from __future__ import annotations

import atexit
import dataclasses
import errno
import os
import re
import shutil
import uuid
import weakref
from pathlib import Path

import torch

from fastsample import faults
from fastsample.nn import matmul
from fastsample.atomic import DiskFull, Lock
from fastsample.options import from_dict, marked, to_dict
from fastsample.phases import phase

__all__ = ["CheckpointError", "Checkpoints", "load_checkpoint", "lock_directory", "unlock_directory"]

# settings a resume may change without a note: under any of them a run trains alike (the
# kernels, modes, cache and backends give the same numbers), or where files go; the data is
# checked by its identity. A schedule's length is --epochs: noted only with a schedule.
_NOT_NOTED = {"data", "resume", "sampler", "prefetch", "cache_fraction", "cache_policy", "backend", "net_model",
              "keep_checkpoints"}
_NAME = re.compile(r"epoch-(\d+)(?:\.step-(\d+))?\.pt")


def _position(path: Path) -> tuple[int, int]:
    """Where a checkpoint resumes: (epoch, step); a whole epoch E's is (E + 1, 0)."""
    m = _NAME.fullmatch(path.name)
    return (int(m.group(1)), int(m.group(2))) if m.group(2) else (int(m.group(1)) + 1, 0)


LOCK = ".lock"  # in the checkpoint directory: its one writer's lock (fastsample/atomic.py's Lock)


class _Held:
    """A checkpoint directory's lock held by this process: ``claimed`` by start-up until a
    Checkpoints takes it over, then held while any of ``users`` (Checkpoints) lives."""

    def __init__(self, lock: Lock):
        self.lock, self.claimed, self.users = lock, True, 0


_held: dict[str, _Held] = {}  # resolved directory -> this process's lock on it


def lock_directory(directory: str | Path) -> None:
    """Make this process the one writer of checkpoint directory ``directory`` (existing),
    or raise fastsample.atomic.Busy naming the process that is. Held until the rank-0
    Checkpoints of this directory (which takes it over) is gone, or the process ends; a
    process that holds it already may ask again (a second Trainer in one program)."""
    key = str(Path(directory).resolve())
    if key in _held:
        _held[key].claimed = True
    else:
        _held[key] = _Held(Lock(Path(directory) / LOCK, directory))
        # a write a killed job left half-done (its hidden temporary): this job is the one
        # writer now and has not started writing, so any there is stale
        for stale in Path(directory).glob(".epoch-*.tmp-*"):
            stale.unlink(missing_ok=True)


def unlock_directory(directory: str | Path) -> None:
    """Let go of lock_directory's lock at once (a start-up that failed after taking it)."""
    held = _held.pop(str(Path(directory).resolve()), None)
    if held is not None:
        held.lock.release()


def _take_over(key: str) -> bool:
    held = _held.get(key)
    if held is None:
        return False
    held.claimed, held.users = False, held.users + 1
    return True


def _let_go(key: str) -> None:
    held = _held.get(key)
    if held is not None:
        held.users -= 1
        if held.users <= 0 and not held.claimed:
            _held.pop(key).lock.release()


@atexit.register
def _release_all() -> None:
    while _held:
        _held.popitem()[1].lock.release()


class CheckpointError(ValueError):
    """A checkpoint that is missing, not a checkpoint, or saved with other settings."""


class ShardsNotSaved(CheckpointError):
    """Rank ``rank`` could not write its embedding shard (a full disk): raised on every rank alike."""

    def __init__(self, rank: int, message: str):
        super().__init__(message)
        self.rank = rank


def _first(error: Exception) -> str:
    """A loader's error in a few words: its first line's first sentence (torch's go on with advice)."""
    line = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
    return line.split(". ")[0].rstrip(".")


def load_checkpoint(path: str | Path, device="cpu") -> dict:
    """A checkpoint's contents (epoch, model, optimizer, config as a plain dict).

    Args:
        path: an epoch-N.pt file.
        device: where its tensors go.
    Returns:
        The saved dict. Raises FileNotFoundError, or CheckpointError naming the file.
    """
    path = Path(path)
    if path.is_dir():
        raise FileNotFoundError(f"{path}: a directory; give a checkpoint file in it (epoch-N.pt)")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such checkpoint file")
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        code = next((line for line in lines if "GLOBAL" in line or "Unsupported global" in line), None)
        if code is not None:
            raise CheckpointError(f"{path}: refused: not a plain checkpoint of tensors and values ({code})") from None
        raise CheckpointError(f"{path}: unreadable, truncated or corrupt ({_first(e)})") from None
    if not isinstance(state, dict) or not {"epoch", "model", "optimizer", "config"} <= state.keys():
        raise CheckpointError(f"{path}: not a fastsample checkpoint (expected epoch, model, optimizer, config)")
    return state


def shard_path(checkpoint: str | Path, rank: int, num_parts: int) -> Path:
    """Where rank ``rank`` of ``num_parts`` keeps its embedding shard of ``checkpoint``."""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(f"{checkpoint.name.removesuffix('.pt')}.embed-{rank}-of-{num_parts}.pt")


def read_shard(checkpoint: str | Path, rank: int, num_parts: int, token: str | None = None,
               mapped: bool = False) -> dict:
    """Rank ``rank`` of ``num_parts``'s embedding shard of ``checkpoint``; a CheckpointError
    naming the shard file if it is missing, unreadable, not a shard, or (given ``token``,
    the one ``checkpoint`` records for that rank) another save's. ``mapped``: its tensors
    mapped from the file, read only if used (a check of another rank's shard that costs
    little; not for loading: a mapped file another node removes faults when touched)."""
    checkpoint = Path(checkpoint)
    shard = shard_path(checkpoint, rank, num_parts)
    if not shard.is_file():
        stem = checkpoint.name.removesuffix(".pt")
        sizes = sorted({int(m.group(1)) for f in checkpoint.parent.glob(f"{stem}.embed-*-of-*.pt")
                        if (m := re.fullmatch(rf"{re.escape(stem)}\.embed-\d+-of-(\d+)\.pt", f.name))} - {num_parts})
        why = (f"{checkpoint.name}'s embedding shards are of a job of {' or '.join(map(str, sizes))} ranks, this "
               f"one has {num_parts}" if sizes else
               f"{checkpoint.name} has no embedding shard for rank {rank} of {num_parts}")
        raise CheckpointError(f"{shard}: missing: {why}")
    try:
        state = torch.load(shard, map_location="cpu", weights_only=True, mmap=mapped)
    except Exception as e:
        why = "not a zip file torch wrote" if "mmap can only be used" in str(e) else _first(e)
        raise CheckpointError(f"{shard}: unreadable, truncated or corrupt ({why})") from None
    if not isinstance(state, dict) or not {"tables", "optimizer"} <= state.keys():
        raise CheckpointError(f"{shard}: not an embedding shard (expected tables, optimizer)")
    if token is not None and state.get("token") != token:
        raise CheckpointError(f"{shard}: not {checkpoint.name}'s shard (left by another save of that epoch, "
                              "e.g. one cut short)")
    return state


def load_shard(checkpoint: str | Path, embeddings, rank: int, num_parts: int, token: str | None = None,
               state: dict | None = None) -> None:
    """Rank ``rank``'s embedding shard of ``checkpoint`` (read_shard's, or ``state``, what it
    read) into ``embeddings`` (a ShardedEmbeddings of this job's shape); a CheckpointError
    naming the shard file if read_shard finds it bad or it is not this job's."""
    state = read_shard(checkpoint, rank, num_parts, token) if state is None else state
    try:
        embeddings.load_state_dict(state)
    except Exception as e:
        raise CheckpointError(f"{shard_path(checkpoint, rank, num_parts)}: not this job's embedding shard "
                              f"({type(e).__name__}: {e})") from None


def _write(path: Path, state: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        torch.save(state, tmp)
        faults.written(tmp)
        os.replace(tmp, path)  # never a half-written checkpoint under the real name
    except BaseException as e:
        written = tmp.stat().st_size if tmp.exists() else None
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) or \
                isinstance(e, (OSError, RuntimeError)) and shutil.disk_usage(path.parent).free < (written or 0) + (1 << 20):
            raise DiskFull(path.parent, what=f"{path.name} (at least {written or 0:,} bytes were written)") from None
        raise


class Checkpoints:
    """The checkpoints of one run in ``directory`` (epoch-N.pt), for a config of type ``type(config)``.

    Args:
        directory: where they are (created by the caller; see the trainer's start-up checks).
        config: this run's config; resume() compares it with the saved one.
        dataset: the run's dataset meta (``meta.json``'s, or a partition's ``dataset``): its
            identity (dataset_identity) is saved, and resume() refuses a checkpoint of another.
    """

    def __init__(self, directory: str | Path, config, dataset: dict | None = None):
        self.dir, self.config = Path(directory), config
        self.dataset = dataset_identity(dataset) if dataset is not None else None
        self.kept: set[str] = set()  # checkpoints pruning leaves (--early-stop's best epoch)
        self.progress: dict = {}  # the run's own state, saved with each checkpoint and read back by resume()
        key = str(self.dir.resolve())
        self._hold = None
        if _take_over(key):  # start-up locked the directory in this process (rank 0): hold it while we live
            self._hold = weakref.finalize(self, _let_go, key)

    def release(self) -> None:
        """Let go of the directory's lock (if start-up took it in this process): the job is
        over. Otherwise it goes with this object, or at exit."""
        if self._hold is not None:
            self._hold()  # a finalizer runs once

    def save(self, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, comm=None,
             embeddings=None, step: int | None = None, steps_per_epoch: int | None = None) -> Path:
        """Write epoch ``epoch``'s checkpoint (rank 0, or a job of one process without comm);
        with ``step`` (of the epoch's ``steps_per_epoch``), one taken inside the epoch that
        resumes at that step (epoch-E.step-S.pt). Collective over ``comm`` (every rank calls
        it): with ``embeddings``, each rank first writes its shard, and a rank that failed
        raises on every rank."""
        with phase("checkpoint"):
            return self._save(epoch, model, optimizer, comm, embeddings, step, steps_per_epoch)

    def _save(self, epoch, model, optimizer, comm, embeddings, step, steps_per_epoch=None) -> Path:
        rank = comm.rank if comm is not None else 0
        name = f"epoch-{epoch}" if step is None else f"epoch-{epoch}.step-{step}"
        path = self.dir / f"{name}.pt"
        shards = {}
        if embeddings is not None and embeddings.tables:
            error, token = None, uuid.uuid4().hex  # epoch-N.pt lists its shards' tokens: the set is one save's
            try:
                _write(shard_path(path, rank, comm.size if comm is not None else 1),
                       {"epoch": epoch, "token": token, **embeddings.state_dict()})
            except OSError as e:
                error = str(e)
            gathered = comm.allgather_object((error, token)) if comm is not None else [(error, token)]
            failed = [r for r, (e, _) in enumerate(gathered) if e]
            if failed:
                if error is None:  # an epoch-N.pt will not name it: nothing would ever remove it
                    shard_path(path, rank, comm.size if comm is not None else 1).unlink(missing_ok=True)
                raise ShardsNotSaved(failed[0], f"saving epoch {epoch}'s embedding shards failed: "
                                                f"{gathered[failed[0]][0]}")
            shards = {"shards": [t for _, t in gathered]}
        if rank == 0:
            try:
                _write(path, {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                              "config": to_dict(self.config), **shards,
                              **({} if self.dataset is None else {"dataset": self.dataset}),
                              "cwd": os.getcwd(),  # where a relative --model FILE.py is (infer: model_where_trained)
                              # where the step sits: the epoch's batches are those of this many ranks
                              **({} if step is None else {"step": step, "step_of": {
                                  "ranks": comm.size if comm is not None else 1, "steps_per_epoch": steps_per_epoch}}),
                              "products": matmul.as_saved(matmul.current()),  # how infer computes as this run did
                              **({"progress": self.progress} if self.progress else {})})
            except BaseException as e:
                parts = comm.size if comm is not None else 1
                for r in range(parts if shards else 0):  # the set's shards, which no epoch-N.pt names
                    shard_path(path, r, parts).unlink(missing_ok=True)
                if isinstance(e, DiskFull):
                    self.release()  # the job ends here (the command line aborts it): no lock file left behind
                raise
            self._prune()
        return path

    def _prune(self) -> None:
        """Remove all but the newest keep_checkpoints checkpoints (with their embedding
        shards), and shards whose epoch-N.pt is not there (a save a killed rank cut short:
        no set names them); called once the newest is complete."""
        for shard in self.dir.glob("epoch-*.embed-*-of-*.pt"):
            if not (self.dir / f"{shard.name.split('.embed-')[0]}.pt").exists():
                shard.unlink(missing_ok=True)
        keep = getattr(self.config, "keep_checkpoints", 0)
        if not keep:
            return
        for path in self.found()[keep:]:
            if path.name in self.kept:
                continue
            for f in [path, *self.dir.glob(f"{path.name.removesuffix('.pt')}.embed-*-of-*.pt")]:
                f.unlink(missing_ok=True)

    def found(self) -> list[Path]:
        """The checkpoints in the directory, the one resuming furthest first (epoch-E.pt,
        epoch-E.step-S.pt; never a temporary or a shard)."""
        return sorted((f for f in self.dir.glob("epoch-*.pt") if _NAME.fullmatch(f.name)),
                      key=lambda f: tuple(-x for x in _position(f)))

    def resume(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device="cpu", embeddings=None,
               rank: int = 0, num_parts: int = 1, steps_per_epoch: int | None = None) -> tuple[int, int, str]:
        """Load the newest complete checkpoint into model and optimizer (and this rank's
        embedding shard into ``embeddings``); returns (the epoch and the step to start
        from, a line saying which checkpoint it is and which newer ones were skipped, and why).
        A checkpoint taken inside an epoch by a job whose epoch was other batches (another
        rank count, another number of steps: ``num_parts``, ``steps_per_epoch`` here) resumes
        at the next epoch, and the line says so: its step would name other batches.

        Complete: epoch-N.pt loads and, with ``embeddings``, each of the job's ``num_parts``
        shards of it loads and is the one epoch-N.pt names. Every rank checks every shard
        (memory-mapped, so it reads little but its own), so every rank decides alike from
        the same files without a collective (this runs inside the start-up agreement,
        where a rank that failed earlier waits in its allgather). A set that is complete
        but whose shard does not fit this rank's tables (settings of another job) is an
        error, not a skip: only its owner could tell."""
        found = self.found()
        if not found:
            raise FileNotFoundError(f"resume: no checkpoint (epoch-*.pt) in {self.dir}")
        sharded = embeddings is not None and bool(embeddings.tables)
        skipped = []  # (file, why) of each newer set that is not complete
        for path in found:
            state, why = self._load_set(path, device, sharded, rank, num_parts)
            if state is not None:
                break
            skipped.append(why)
        else:
            grouped = {}  # one reason, e.g. a job of another size, said once for every file it holds for
            for file, why in skipped:
                grouped.setdefault(why, []).append(file)
            raise CheckpointError(f"resume: no complete checkpoint in {self.dir}: "
                                  + "; ".join(f"{', '.join(files)}: {why}" for why, files in grouped.items()))
        state, shard = state
        try:
            saved = from_dict(type(self.config), state["config"])
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: its config does not load ({e})") from None
        other = other_dataset(state.get("dataset"), self.dataset)
        if other:  # first: on other data the settings' differences are beside the point
            raise CheckpointError(f"{path}: saved training on other data ({other}): resume on the dataset it "
                                  "trained on (a partition of it into any number of parts serves)")
        differ = [k for k in marked(self.config, "resume") if getattr(saved, k) != getattr(self.config, k)
                  and not (k == "model" and _same_model_file(saved.model, self.config.model, state.get("cwd")))]
        show = lambda v: ",".join(map(str, v)) if isinstance(v, tuple) else v
        if differ:  # both values: the user sees what to pass (or that the checkpoint is another run's)
            raise CheckpointError(f"{path}: saved with different " + ", ".join(
                f"{k} ({show(getattr(saved, k))} there, {show(getattr(self.config, k))} here)" for k in differ))
        changed = [k for k in marked(self.config, "shared") if k not in _NOT_NOTED and k not in marked(self.config, "resume")
                   and getattr(saved, k) != getattr(self.config, k)
                   and (k != "epochs" or getattr(self.config, "lr_schedule", "none") != "none")]
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        self.progress = dict(state.get("progress", {}))
        if sharded:
            load_shard(path, embeddings, rank, num_parts, state=shard)
        start, step = (state["epoch"], int(state["step"])) if "step" in state else (state["epoch"] + 1, 0)
        moved = _other_batches(state, num_parts, steps_per_epoch) if "step" in state else None
        if moved:
            start, step = start + 1, 0
        if start >= self.config.epochs:
            ends = f"{moved}, so it continues from epoch {start}" if moved else f"already ends epoch {state['epoch']}"
            raise CheckpointError(f"resume: {path.name} {ends}; epochs {self.config.epochs} leaves nothing to "
                                  "train (raise it)")
        note = f"resume: from {path}" + "".join(f"; skipped {file}: {why}" for file, why in skipped)
        if changed:  # allowed (a lower rate, more epochs), but the run is no longer the one it was: said
            note += "; with other settings than its: " + ", ".join(
                f"{k} ({show(getattr(saved, k))} there, {show(getattr(self.config, k))} here)" for k in changed)
        if moved:
            note += f"; {moved}: continuing from epoch {start}"
        return start, step, note

    @staticmethod
    def _load_set(path: Path, device, sharded: bool, rank: int, num_parts: int) -> tuple[tuple | None, tuple | None]:
        """((epoch-N.pt's contents, this rank's shard as read_shard reads it or None), None)
        if the set is complete; else (None, (the first file at fault, why))."""
        try:
            state = load_checkpoint(path, device)
        except (CheckpointError, FileNotFoundError) as e:  # FileNotFoundError: removed since it was listed
            return None, (str(path), str(e).removeprefix(f"{path}: "))
        held = (state["epoch"], int(state["step"])) if "step" in state else (state["epoch"] + 1, 0)
        if held != _position(path):  # renamed or copied over: its name would decide where the run goes on
            inside = f"epoch {held[0]}, step {held[1]}" if "step" in state else f"the end of epoch {state['epoch']}"
            return None, (str(path), f"holds the state of {inside}, not what its name says (renamed or copied?)")
        if not sharded:
            return (state, None), None
        tokens = state.get("shards")  # None: saved before checkpoints named their shards
        if tokens is not None and len(tokens) != num_parts:
            ranks = f"{len(tokens)} rank{'s' * (len(tokens) != 1)}"
            return None, (str(path), f"saved by a job of {ranks} (an embedding shard each), this one has "
                                     f"{num_parts}: resume with {ranks}")
        mine, bad = None, []
        for r in range(num_parts):
            try:
                shard = read_shard(path, r, num_parts, None if tokens is None else tokens[r], mapped=r != rank)
            except CheckpointError as e:
                file = shard_path(path, r, num_parts)
                bad.append((str(file), str(e).removeprefix(f"{file}: ")))
                continue
            if r == rank:
                mine = shard
        if bad:
            file, why = bad[0]
            return None, (file, why + (f" (and {len(bad) - 1} more of its shards)" if len(bad) > 1 else ""))
        return (state, mine), None


def dataset_identity(meta: dict) -> dict:
    """What names a dataset whatever its partition: name, node and edge counts, types, feature
    widths and classes (from ``meta.json``, or a partition's copy of it). Moved, or partitioned
    again, a dataset keeps it; another graph (or the same one rebuilt with other nodes or edges) has another."""
    keys = ("name", "num_nodes", "num_edges", "feature_dim", "num_classes", "node_types", "edge_types", "target_type")
    identity = {k: meta[k] for k in keys if k in meta}
    if isinstance(meta.get("features"), dict):  # widths per type (not dtypes: float16 copies are the same data)
        identity["features"] = {t: f["dim"] if f else None for t, f in meta["features"].items()}
    tables = meta.get("tables") or {}
    if tables.get("transforms") is not None:  # what the features' numbers mean (data tables' fits)
        identity["transforms"] = transforms_digest(tables["transforms"])
    if tables.get("class_names"):  # what the logits' columns are
        identity["class_names"] = list(tables["class_names"])
    return identity


def transforms_digest(transforms: dict) -> str:
    """A short digest of a dataset's fitted table transforms (meta.json's tables.transforms)."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(transforms, sort_keys=True).encode()).hexdigest()[:16]


def model_where_trained(config, state: dict, checkpoint) -> object:
    """``config`` (a checkpoint's) with a user's model file given relative to where the
    training ran (``state``'s "cwd") made absolute, where it is not found from here; a
    ValueError naming the checkpoint where it is in neither place."""
    file, _, name = config.model.rpartition(":")
    if not file.endswith(".py") or Path(file).is_absolute() or Path(file).is_file():
        return config
    trained = state.get("cwd")
    if trained is not None and (Path(trained) / file).is_file():
        return dataclasses.replace(config, model=f"{Path(trained) / file}:{name}")
    raise ValueError(f"{checkpoint}: its model {config.model}: {file} is not in the working directory"
                     + (f" nor in {trained}, where it trained" if trained is not None else ""))


def _same_model_file(there: str, here: str, cwd: str | None) -> bool:
    """Whether two --model FILE.py:FUNCTION name one function of one file: ``there`` (a
    checkpoint's) relative to where it trained (``cwd``), ``here`` to this directory."""
    (a, _, f), (b, _, g) = there.rpartition(":"), here.rpartition(":")
    if not (a.endswith(".py") and b.endswith(".py")) or f != g:
        return False
    return (Path(cwd or ".") / a).resolve() == Path(b).resolve()


def other_dataset(there: dict | None, here: dict | None) -> str | None:
    """How the dataset a checkpoint trained on (``there``) differs from this run's (``here``),
    both dataset_identity()'s, e.g. "num_edges 10556 there, 10000 here"; None where they agree
    or one is not known (a checkpoint saved before they named their data). Only keys both
    hold are compared: a partition keeps fewer than the dataset's meta.json."""
    if there is None or here is None:
        return None
    differ = [k for k in here if k in there and there[k] != here[k]]
    return "; ".join(f"{k} {there[k]!r} there, {here[k]!r} here" for k in differ) or None


def _other_batches(state: dict, ranks: int, steps_per_epoch: int | None) -> str | None:
    """Why a checkpoint taken at a step inside an epoch cannot resume at that step here (the
    epoch's batches here are others: another rank count or number of steps), or None where it
    can. A checkpoint that does not say (older ones) is taken at its word where its step exists here."""
    step, was = int(state["step"]), state.get("step_of") or {}
    if step == 0:  # nothing of the epoch done: it starts whole here
        return None
    at = f"saved at step {step} of epoch {state['epoch']}"
    if was.get("ranks") not in (None, ranks):
        return f"{at} by {was['ranks']} rank{'s' * (was['ranks'] != 1)}, and {ranks} here draw other batches"
    if steps_per_epoch is not None and was.get("steps_per_epoch") not in (None, steps_per_epoch):
        return f"{at} (of {was['steps_per_epoch']}), and an epoch here is {steps_per_epoch} steps"
    if steps_per_epoch is not None and step >= steps_per_epoch:
        return f"{at}, and an epoch here is {steps_per_epoch} steps"
    return None
