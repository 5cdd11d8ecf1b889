"""Secrets at rest: Fernet (AES-128-CBC + HMAC-SHA256) under ``settings.ENCRYPTION_KEYS``.

The first key encrypts; every key decrypts, so a key is rotated by putting a new one first:
old values stay readable and are re-encrypted under the new key when next saved.
"""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key.encode()) for key in keys])
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            "ENCRYPTION_KEYS must hold url-safe base64 Fernet keys; make one with "
            "python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'"
        ) from exc


def encrypt(plaintext: str) -> str:
    return _fernet(tuple(settings.ENCRYPTION_KEYS)).encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet(tuple(settings.ENCRYPTION_KEYS)).decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ImproperlyConfigured(
            "A stored secret cannot be decrypted with ENCRYPTION_KEYS; was the key changed?"
        ) from exc
