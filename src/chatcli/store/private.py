"""File permissions of the store: transcripts hold pasted secrets and tool output, so only
the user may read them. Directories 0700, files 0600; existing ones are tightened on open
(POSIX; elsewhere chmod does what the platform allows)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "private_directory", "private_file"]

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_directory(path: Path) -> None:
    """Create `path` (and missing parents) for the user only, or tighten it."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_DIR_MODE)


def private_file(path: Path, *, create: bool = True) -> None:
    """Create `path` empty for the user only (when `create`), or tighten it if it exists.
    SQLite gives a database's -wal and -shm files the database file's mode."""
    if create:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, PRIVATE_FILE_MODE))
    if path.exists():
        os.chmod(path, PRIVATE_FILE_MODE)
