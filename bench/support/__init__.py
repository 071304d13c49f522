"""Shared set-up of the bench scripts (this package is not a bench: `make bench` runs bench/*.py).

Call :func:`temporary_app` before importing anything from `backend`: it points the settings at
a throw-away SQLite file and data folder and makes the project importable.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
_kept: list[tempfile.TemporaryDirectory] = []


def temporary_app(prefix: str) -> Path:
    """Configure the app on a temporary folder (removed at exit); returns the folder."""
    folder = tempfile.TemporaryDirectory(prefix=f"poweron-bench-{prefix}-")
    _kept.append(folder)
    root = Path(folder.name)
    os.environ["POWERON_DATA_DIR"] = str(root / "data")
    os.environ["POWERON_DB_URL"] = f"sqlite:///{root / 'bench.db'}"
    os.environ["POWERON_ADMIN_USER"] = "admin"
    os.environ["POWERON_ADMIN_PASSWORD"] = "bench-admin-pass-123"
    if str(PROJECT_ROOT) not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT))
    return root
