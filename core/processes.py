"""Whether a process of this host still runs: the one answer for locks, jobs and the chat model's health."""

from __future__ import annotations

import os
from pathlib import Path


def process_alive(pid: int | None) -> bool:
    """Whether the process runs. One that has ended but is not reaped yet (a zombie: a worker killed with its
    sentinel before init reaps it, a model server its supervisor has not waited for) does not."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True
