"""Directories that appear complete or not at all.

Everything is written into a hidden temporary sibling of the target; ``commit`` renames
it into place (replacing an old version if allowed). Leaving the ``with`` block by an
exception removes the temporary directory, so an interrupted write (a crash, Ctrl-C, a
full disk) never leaves something that looks like a finished dataset or partition.

One writer per target: a writer holds an exclusive lock on a hidden sibling
(``.NAME.lock``, flock: released by the kernel if the process dies) from start to end, so
a second job on the same target fails at once (Busy, naming the first's process) instead
of one silently replacing the other's result; and ``commit`` re-checks that the target
did not appear meanwhile when overwriting was not allowed. The lock is ``Lock``, which the
trainer's checkpoint directory takes too (fastsample/trainer/checkpoint.py).

A full disk is one error, DiskFull, naming the directory, what was needed (where known)
and what is free: files written through a memory map get their blocks reserved up front
(allocated_memmap: posix_fallocate), since a write into a mapped page the file system
cannot back faults (SIGBUS) instead of raising; any other write that runs out of space
inside an AtomicDirectory is reported the same way; the temporary directory goes.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def format_bytes(b: float) -> str:
    """A byte count for people: "512 B", "1.5 MiB" (DiskFull's message and the CLIs' reports)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.1f} {unit}" if unit != "B" else f"{b:.0f} B"
        b /= 1024


class DiskFull(OSError):
    """Not enough space in ``folder`` for what was being written."""

    def __init__(self, folder: Path, needed: int | None = None, what: str = "", free: int | None = None):
        if free is None:
            try:
                free = shutil.disk_usage(folder).free
            except OSError:
                pass
        need = f" needs {format_bytes(needed)}," if needed is not None else ""
        super().__init__(errno.ENOSPC, f"{folder}: no space left{' for ' + what if what else ''}:{need} "
                         f"{'?' if free is None else format_bytes(free)} free")
        self.folder, self.needed, self.what, self.free = Path(folder), needed, what, free

    def __str__(self) -> str:
        return self.strerror

    def __reduce__(self):  # crosses ranks (comm.agree) as itself
        return DiskFull, (self.folder, self.needed, self.what, self.free)


def check_space(folder, needed: int, what: str = "") -> None:
    """DiskFull unless ``folder``'s file system has ``needed`` bytes free (a check before a
    long write: it may still run out if something else fills the disk meanwhile)."""
    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))  # not made yet
    fs = os.statvfs(existing)
    if fs.f_flag & os.ST_RDONLY:
        raise NotWritable(folder / what if what else folder, f"{existing} is on a read-only file system")
    if fs.f_blocks == 0:  # a file system that does not count its space (/proc, some FUSE mounts): writing will tell
        return
    if fs.f_bavail * fs.f_frsize < needed:
        raise DiskFull(folder, needed, what)


def allocated_memmap(path, dtype, shape) -> np.memmap:
    """np.lib.format.open_memmap(path, "w+", dtype, shape) with every block of the file
    reserved first, so that a full disk is DiskFull here, not a SIGBUS mid-write."""
    path = Path(path)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
    except OSError as e:
        if e.errno not in _NO_SPACE:
            raise
        size = os.fstat(fd).st_size
        del out
        path.unlink(missing_ok=True)
        raise DiskFull(path.parent, size, path.name) from None
    finally:
        os.close(fd)
    return out


class NotWritable(OSError):
    """The target cannot be made where it is named (a file where a directory goes, a
    directory this process may not write, a read-only file system)."""

    def __init__(self, path: Path, why: str):
        super().__init__(errno.EACCES, f"{path}: cannot be written ({why})")
        self.path, self.why = Path(path), why

    def __str__(self) -> str:
        return self.strerror

    def __reduce__(self):  # crosses ranks (comm.agree) as itself
        return NotWritable, (self.path, self.why)


def not_writable(path: Path, e: OSError) -> NotWritable:
    """Why ``path`` could not be made, from the OSError making it (or its lock) raised."""
    for p in reversed(path.parents):
        if p.exists() and not p.is_dir():
            return NotWritable(path, f"{p} is a file, not a directory")
    where = Path(e.filename).parent if e.filename else path.parent
    return NotWritable(path, f"{e.strerror or e} in {where}")


class AlreadyExists(FileExistsError):
    """The target exists and overwriting was not asked for."""

    def __init__(self, path: Path):
        super().__init__(f"{path}: already exists (pass overwrite=True to replace it)")
        self.path = path


class Busy(FileExistsError):
    """Another process is writing the same target."""

    def __init__(self, path: Path, holder: str):
        super().__init__(f"{path}: another job (process {holder or 'unknown'}) is writing it now; wait for it, or "
                         "write somewhere else")
        self.path, self.holder = path, holder

    def __reduce__(self):  # crosses ranks (comm.agree: a checkpoint directory's lock is rank 0's) as itself
        return Busy, (self.path, self.holder)


class Lock:
    """One writer of ``target``: an exclusive flock on the file ``path`` (created; its text
    names the holder), taken at once or Busy naming the holder's process. Held until
    release(), which removes the file while still holding it; if the process dies first,
    the kernel releases it (the file stays, and the next writer takes it over)."""

    def __init__(self, path: str | os.PathLike, target: str | os.PathLike):
        self.path, self.target = Path(path), Path(target)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode(errors="replace").strip()
                os.close(fd)
                raise Busy(self.target, holder) from None
            try:  # the file we locked may have been unlinked by its last holder meanwhile: then again
                if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} on {os.uname().nodename}".encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                self.path.unlink(missing_ok=True)  # while still held: no other writer has it
            finally:
                os.close(self.fd)
                self.fd = None


def as_disk_full(exc: BaseException, target: Path, tmp: Path) -> DiskFull | None:
    """``exc``, raised writing into ``tmp`` (the temporary directory of ``target``), as the
    DiskFull naming ``target`` where it is a full disk, else None."""
    if isinstance(exc, DiskFull) and tmp in (exc.folder, *exc.folder.parents):  # name the target
        return DiskFull(target.parent, exc.needed, f"{target.name} ({exc.what})", exc.free)
    if isinstance(exc, OSError) and not isinstance(exc, DiskFull):
        try:  # numpy's writers say "N requested and M written" with no errno: look at the disk
            free = shutil.disk_usage(tmp).free
            if exc.errno in _NO_SPACE or free < 1 << 20:
                return DiskFull(target.parent, what=target.name, free=free)  # one line naming where
        except OSError:
            pass
    return None


class WouldDelete(FileExistsError):
    """Overwriting the target would delete what the job reads or runs in."""


def refuse_to_delete(path: Path, inputs=()) -> None:
    """Refuse to replace ``path`` where it is, or holds, the working directory or one of
    ``inputs`` (a spec, its tables, the dataset a partition is made from)."""
    target = path.resolve()
    for what, p in (("the working directory", Path.cwd()), *((f"the input {i}", Path(i)) for i in inputs)):
        p = p.resolve()
        if p == target or target in p.parents:
            raise WouldDelete(f"{path}: {'is' if p == target else 'holds'} {what}; replacing it would delete "
                              "that: write to another directory")


# what marks a directory as one of fastsample's outputs (a dataset, a partition, an export):
# the only kind an overwrite replaces (or an empty directory), so a mistyped path loses nothing
OUTPUT_MARKERS = ("meta.json", "partition.json", "index.json")


def refuse_to_replace_others(path: Path) -> None:
    """Refuse to overwrite ``path`` unless it is an output of ours or an empty directory."""
    if path.is_symlink() or not path.is_dir():
        raise WouldDelete(f"{path}: a file, not an output of fastsample; overwriting would delete it: remove it "
                          "yourself, or write to another path")
    if any(path.iterdir()) and not any((path / m).is_file() for m in OUTPUT_MARKERS):
        raise WouldDelete(f"{path}: a directory that is not an output of fastsample (it holds no "
                          f"{', '.join(OUTPUT_MARKERS[:-1])} or {OUTPUT_MARKERS[-1]}); overwriting would delete "
                          "what it holds: remove it yourself, or write to another path")


class AtomicDirectory:
    def __init__(self, path: str | os.PathLike, overwrite: bool = False, inputs=()):
        """``inputs``: files or directories the writer reads, which an overwrite must not delete.
        An overwrite replaces only an output of fastsample (OUTPUT_MARKERS) or an empty directory."""
        self.path, self.overwrite = Path(path), overwrite
        if self.path.exists() and not overwrite:
            raise AlreadyExists(self.path)
        refuse_to_delete(self.path, inputs)
        if self.path.exists() or self.path.is_symlink():
            refuse_to_replace_others(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock()
        except (Busy, DiskFull):
            raise
        except OSError as e:
            if e.errno in _NO_SPACE:
                raise DiskFull(self.path.parent, what=self.path.name) from None
            raise not_writable(self.path, e) from None
        for stale in self.path.parent.glob(f".{self.path.name}.tmp-*"):  # a killed writer's: we are the one writer now
            shutil.rmtree(stale, ignore_errors=True)
        self.tmp = self.path.parent / f".{self.path.name}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            self.tmp.mkdir()
        except BaseException as e:
            self._unlock()
            if isinstance(e, OSError) and e.errno not in _NO_SPACE:
                raise not_writable(self.path, e) from None
            raise
        self.committed = False

    def _lock(self) -> None:
        self.lock = Lock(self.path.parent / f".{self.path.name}.lock", self.path)

    def _unlock(self) -> None:
        if getattr(self, "lock", None) is not None:
            self.lock.release()
            self.lock = None

    def __enter__(self) -> "AtomicDirectory":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        full = self.disk_full(exc)
        try:
            if not self.committed:
                shutil.rmtree(self.tmp, ignore_errors=True)
        finally:
            self._unlock()
        if full is not None:
            raise full from exc

    def disk_full(self, exc) -> "DiskFull | None":
        return as_disk_full(exc, self.path, self.tmp)

    def commit(self) -> None:
        if self.path.exists() and not self.overwrite:  # appeared while we wrote (a writer without the lock)
            raise AlreadyExists(self.path)
        if self.path.exists():
            old = self.path.parent / f".{self.path.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(self.path, old)
            os.rename(self.tmp, self.path)
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:  # a file or a link where the directory goes
                old.unlink()
        else:
            os.rename(self.tmp, self.path)
        self.committed = True
