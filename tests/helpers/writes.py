"""Another team's write while one team's long write runs (issue 35's short transactions)."""

from __future__ import annotations

import threading

from django.db import connections

from evalplatform.accounts.models import ApiToken
from evalplatform.accounts.services import token_create


def other_team_writes(user) -> bool:
    """A write of ``user`` (of another team) from its own connection, as another web worker
    would make it, giving up after a second: False when the database stayed locked all that
    time (SQLite has one writer: a long transaction keeps every other out)."""
    done: list[bool] = []

    def write() -> None:
        connection = connections["default"]
        try:
            if connection.vendor == "sqlite":
                connection.ensure_connection()
                connection.connection.execute("PRAGMA busy_timeout = 1000")
            token, _ = token_create(user=user, name="other")
            ApiToken.objects.filter(pk=token.pk).delete()
            done.append(True)
        except Exception:
            done.append(False)
        finally:
            connection.close()

    thread = threading.Thread(target=write)
    thread.start()
    thread.join()
    return done == [True]
