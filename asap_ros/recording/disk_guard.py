"""Free-space floor for the bag's file system."""

from __future__ import annotations

import shutil
from pathlib import Path


class DiskGuard:
    """Reports a fault once free space under ``path`` drops below ``min_free_bytes``."""

    def __init__(self, path: Path, min_free_bytes: int) -> None:
        self.path = path
        self.min_free_bytes = min_free_bytes

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.path).free

    def check(self) -> str | None:
        """``None`` while there is room, else the fault text (names the path and both figures)."""
        free = self.free_bytes()
        if free >= self.min_free_bytes:
            return None
        return (
            f"free space on {self.path} is {free / 1e6:.1f} MB, below the recorder's floor of "
            f"{self.min_free_bytes / 1e6:.1f} MB (min_free_mb): recording stopped"
        )
