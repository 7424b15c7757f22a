"""Directories that appear complete or not at all.

Everything is written into a hidden temporary sibling of the target; ``commit`` renames
it into place (replacing an old version if allowed). Leaving the ``with`` block by an
exception removes the temporary directory, so an interrupted write (a crash, Ctrl-C, a
full disk) never leaves something that looks like a finished dataset or partition.

One writer per target: a writer holds an exclusive lock on a hidden sibling
(``.NAME.lock``, flock: released by the kernel if the process dies) from start to end, so
a second job on the same target fails at once (Busy, naming the first's process) instead
of one silently replacing the other's result; and ``commit`` re-checks that the target
did not appear meanwhile when overwriting was not allowed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from pathlib import Path


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
        self.path = path


class AtomicDirectory:
    def __init__(self, path: str | os.PathLike, overwrite: bool = False):
        self.path, self.overwrite = Path(path), overwrite
        if self.path.exists() and not overwrite:
            raise AlreadyExists(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock()
        self.tmp = self.path.parent / f".{self.path.name}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            self.tmp.mkdir()
        except BaseException:
            self._unlock()
            raise
        self.committed = False

    def _lock(self) -> None:
        self.lock_path = self.path.parent / f".{self.path.name}.lock"
        while True:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode(errors="replace").strip()
                os.close(fd)
                raise Busy(self.path, holder) from None
            try:  # the file we locked may have been unlinked by its last holder meanwhile: then again
                if os.fstat(fd).st_ino == os.stat(self.lock_path).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} on {os.uname().nodename}".encode())
        self.lock_fd = fd

    def _unlock(self) -> None:
        if getattr(self, "lock_fd", None) is not None:
            try:
                self.lock_path.unlink(missing_ok=True)  # while still held: no other writer has it
            finally:
                os.close(self.lock_fd)
                self.lock_fd = None

    def __enter__(self) -> "AtomicDirectory":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if not self.committed:
                shutil.rmtree(self.tmp, ignore_errors=True)
        finally:
            self._unlock()

    def commit(self) -> None:
        if self.path.exists() and not self.overwrite:  # appeared while we wrote (a writer without the lock)
            raise AlreadyExists(self.path)
        if self.path.exists():
            old = self.path.parent / f".{self.path.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(self.path, old)
            os.rename(self.tmp, self.path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(self.tmp, self.path)
        self.committed = True
