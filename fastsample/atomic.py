"""Directories that appear complete or not at all.

Everything is written into a hidden temporary sibling of the target; ``commit`` renames
it into place (replacing an old version if allowed). Leaving the ``with`` block by an
exception removes the temporary directory, so an interrupted write (a crash, Ctrl-C, a
full disk) never leaves something that looks like a finished dataset or partition.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path


class AlreadyExists(FileExistsError):
    """The target exists and overwriting was not asked for."""

    def __init__(self, path: Path):
        super().__init__(f"{path}: already exists (pass overwrite=True to replace it)")
        self.path = path


class AtomicDirectory:
    def __init__(self, path: str | os.PathLike, overwrite: bool = False):
        self.path = Path(path)
        if self.path.exists() and not overwrite:
            raise AlreadyExists(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.parent / f".{self.path.name}.tmp-{uuid.uuid4().hex[:8]}"
        self.tmp.mkdir()
        self.committed = False

    def __enter__(self) -> "AtomicDirectory":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.committed:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def commit(self) -> None:
        if self.path.exists():
            old = self.path.parent / f".{self.path.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(self.path, old)
            os.rename(self.tmp, self.path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(self.tmp, self.path)
        self.committed = True
