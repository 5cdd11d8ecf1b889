"""Reading configuration from the environment, and the secrets the embedded mode keeps on disk."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), not {raw!r}.")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}.") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}.") from exc
    if not value > 0 or value == float("inf"):
        raise ImproperlyConfigured(f"{name} must be a positive number, not {raw!r}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


_PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600,
            "hour": 3600, "d": 86400, "day": 86400}  # fmt: skip


def parse_rate(rate: str | None) -> tuple[int, int] | None:
    """A request rate: ``"120/min"`` → (120, 60); ``None``, ``""`` or ``"off"`` → None (no
    limit)."""
    if rate is None or rate.strip().lower() in ("", "off", "none"):
        return None
    count, _, period = rate.strip().partition("/")
    try:
        number = int(count)
        seconds = _PERIODS[period.strip().lower()]
    except (ValueError, KeyError):
        raise ImproperlyConfigured(
            f"A rate is N/s, N/min, N/hour or N/day (or off), not {rate!r}."
        ) from None
    if number < 1:
        raise ImproperlyConfigured(f"A rate allows at least 1 request, not {rate!r}.")
    return number, seconds


def env_rate(name: str, default: str) -> str:
    """A rate (see ``parse_rate``), checked when the settings load."""
    raw = os.environ.get(name)
    value = default if raw is None else raw.strip()
    try:
        parse_rate(value)
    except ImproperlyConfigured as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None
    return value


def read_or_create_secret(path: Path, make) -> str:
    """Return the secret stored at ``path``, creating it (mode 0600) the first time.

    ``O_EXCL`` makes concurrent first starts (web and worker processes) agree on one value:
    whoever loses the race reads the winner's file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        value = path.read_text().strip()
        if not value:
            raise ImproperlyConfigured(
                f"{path} is empty; delete it to generate a new one."
            ) from None
        return value
    value = make()
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    return value


def generate_secret_key() -> str:
    return secrets.token_urlsafe(50)


def validate_secret_key(value: str, *, debug: bool) -> str:
    if debug:
        return value
    if value.startswith("django-insecure") or len(value) < 32 or len(set(value)) < 5:
        raise ImproperlyConfigured(
            "SECRET_KEY is too weak for DEBUG=0: use at least 32 random characters "
            "(or unset it to let the platform generate one in the data directory)."
        )
    return value
