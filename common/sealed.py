"""Secrets at rest: seal a token or a webhook secret before it is stored, unseal it when a
provider call or a signature check needs it, and show only a short hint of it.

Sealing is Fernet (AES-128-CBC with an HMAC-SHA256, from ``cryptography``). The Fernet key
is derived with HKDF-SHA256 from the setting ``QUORUM_SECRETS_KEY`` (any string; environment
variable of the same name) or, when that is empty, from ``SECRET_KEY``.

Rotating the key (changing ``QUORUM_SECRETS_KEY``, or ``SECRET_KEY`` while the former is
unset) makes every stored token and webhook secret unreadable: ``unseal`` raises
``UnsealError``, the connection's page says so and asks for the value again. Nothing is
re-encrypted automatically. Set ``QUORUM_SECRETS_KEY`` once, so that rotating ``SECRET_KEY``
(sessions, signing) does not also lose the stored secrets.

Plain Python apart from reading the setting lazily; no text this module raises contains the
secret or the key.
"""

from __future__ import annotations

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["UnsealError", "hint", "seal", "unseal"]

_INFO = b"quorum sealed secrets v1"
HINT_MIN_LENGTH = 12  # a shorter secret gets no hint at all: four characters would be too much


class UnsealError(Exception):
    """A sealed value cannot be read: sealed with another key (rotated), or damaged."""


def _key_material() -> str:
    from django.conf import settings  # lazily: the module stays importable without Django

    material = getattr(settings, "QUORUM_SECRETS_KEY", "") or settings.SECRET_KEY
    if not material:
        raise UnsealError("No key to seal secrets with: set QUORUM_SECRETS_KEY or SECRET_KEY.")
    return material


@functools.lru_cache(maxsize=4)
def _fernet(material: str) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
        material.encode("utf-8"))
    return Fernet(base64.urlsafe_b64encode(derived))


def seal(secret: str, *, key: str | None = None) -> str:
    """The secret, encrypted and authenticated, as ASCII text to store."""
    return _fernet(key or _key_material()).encrypt(secret.encode("utf-8")).decode("ascii")


def unseal(sealed: str, *, key: str | None = None) -> str:
    """The secret back. Raises ``UnsealError`` (with no secret in it) when the value was
    sealed with another key or is damaged."""
    try:
        return _fernet(key or _key_material()).decrypt(sealed.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError, ValueError, TypeError):
        raise UnsealError("The stored value cannot be read with the current key (was "
                          "QUORUM_SECRETS_KEY or SECRET_KEY changed?): enter it again.") from None


def hint(secret: str) -> str:
    """"…" and the last four characters, for a secret of at least 12 characters; nothing for
    a shorter one."""
    if not secret or len(secret) < HINT_MIN_LENGTH:
        return ""
    return "…" + secret[-4:]
