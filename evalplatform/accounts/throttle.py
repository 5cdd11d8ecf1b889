"""Sign-in throttling: after ``PER_USERNAME`` failed sign-ins for a username, or
``PER_ADDRESS`` from an address, within ``WINDOW``, sign-in is refused until the oldest of
them leaves the window. A successful sign-in clears its username's failures. The sign-in
page and the admin console use it through their forms (API tokens are not passwords)."""

from __future__ import annotations

import unicodedata
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.utils import timezone

from evalplatform.accounts.models import LoginFailure

WINDOW = timedelta(minutes=15)
PER_USERNAME = 5
PER_ADDRESS = 30
KEEP = timedelta(days=1)


def person(username: str) -> str:
    """The key a username's failures count under: as sign-in reads it (Django's form strips
    it and folds compatible characters, NFKC: " ana", "ana " and the full-width letters
    U+FF41 U+FF4E U+FF41 sign in as "ana"), case-folded: another spelling of a name buys no
    more guesses."""
    return unicodedata.normalize("NFKC", username).strip().casefold()[:150]


def address_of(request: Any) -> str:
    """The client's address as the web server saw it: the connection's peer, or what a
    trusted proxy said (``serve`` believes ``X-Forwarded-For`` only from
    ``TRUSTED_PROXIES``; uvicorn's ``--forwarded-allow-ips`` in scale mode)."""
    return str((getattr(request, "META", {}) or {}).get("REMOTE_ADDR", ""))[:45]


def wait_seconds(username: str, address: str) -> int:
    """0 when a sign-in may be tried; else how long until it may."""
    now = timezone.now()
    recent = LoginFailure.objects.filter(created_at__gt=now - WINDOW)
    waits = []
    for rows, limit in (
        (recent.filter(username=person(username)), PER_USERNAME),
        (recent.filter(address=address), PER_ADDRESS),
    ):
        times = list(rows.order_by("-created_at").values_list("created_at", flat=True)[:limit])
        if len(times) >= limit:
            waits.append((times[-1] + WINDOW - now).total_seconds())
    return max(0, int(max(waits, default=0)) + (1 if waits else 0))


def failed(username: str, address: str) -> None:
    LoginFailure.objects.create(username=person(username), address=address)
    LoginFailure.objects.filter(created_at__lt=timezone.now() - KEEP).delete()


def succeeded(username: str) -> None:
    LoginFailure.objects.filter(username=person(username)).delete()


class ThrottledFormMixin:
    """For Django's authentication forms: refuse while throttled, count failures."""

    request: Any
    cleaned_data: dict[str, Any]

    def clean(self) -> dict[str, Any]:
        username = str(getattr(self, "data", {}).get("username") or "")
        address = address_of(self.request)
        wait = wait_seconds(username, address)
        if wait:
            minutes = max(1, round(wait / 60))
            raise forms.ValidationError(
                f"Too many failed sign-ins. Try again in {minutes} minute"
                f"{'s' if minutes != 1 else ''}.",
                code="throttled",
            )
        try:
            cleaned = super().clean()  # type: ignore[misc]
        except forms.ValidationError:
            failed(username, address)
            raise
        succeeded(username)
        return cleaned


class ThrottledAuthenticationForm(ThrottledFormMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledFormMixin, AdminAuthenticationForm):
    pass
