"""Live connections per person: at most ``LIVE_SOCKETS_PER_USER`` WebSocket and Socket.IO
connections of one user open in one server process at a time (the next is refused: close
code 4429 on a WebSocket, a refused connection on Socket.IO). Each process holds its own
sockets, so each counts its own: what one person can make one process hold is bounded, and
no other person's share shrinks. Counted in the process's one event loop (no lock)."""

from __future__ import annotations

from collections import Counter

from django.conf import settings

CLOSE_TOO_MANY = 4429
TOO_MANY = "Too many live connections of yours are open: close a page or tab that watches."

_open: Counter[int] = Counter()


def take(user_id: int) -> bool:
    """Count one more connection of the user's, if under the cap (False: refuse it)."""
    if _open[user_id] >= settings.LIVE_SOCKETS_PER_USER:
        return False
    _open[user_id] += 1
    return True


def give_back(user_id: int) -> None:
    """A counted connection of the user's closed."""
    _open[user_id] -= 1
    if _open[user_id] <= 0:
        del _open[user_id]


def held(user_id: int) -> int:
    return _open[user_id]
