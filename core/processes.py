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
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X") or int(fields[6]) & PF_EXITING:
            return False
        return not _kill_pending(Path(f"/proc/{pid}/status").read_text())
    except (OSError, IndexError, ValueError):
        return True


PF_EXITING = 0x4  # the kernel's flag of a task in do_exit: a process with a large mapping (a model) takes a while


def _kill_pending(status: str) -> bool:
    """Whether a SIGKILL is on its way (sent, not yet taken): a killed process counts as ended from the moment
    kill() returns, not from when the scheduler lets it die."""
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("SigPnd", "ShdPnd") and int(value.strip() or "0", 16) & (1 << (9 - 1)):
            return True
    return False
