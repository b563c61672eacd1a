"""django-q2 entry points of agent sessions."""

from __future__ import annotations

from agent_sessions.services import sessions_cleanup


def session_cleanup_task() -> int:
    """Hourly (the schedule: migration agent_sessions 0002): sessions ended or expired a day ago are deleted."""
    return sessions_cleanup()
