"""The batch-size service's shared token: what counts as one, and which headers carry it.

A token is a shared secret of at least :data:`MIN_TOKEN_LENGTH` characters; an empty or
whitespace-only token counts as no token at all (so ``--token "$UNSET_VARIABLE"`` does not start
an open server that believes it is protected). Clients send it as ``Authorization: Bearer <token>``
(the suite's client), or as the password of HTTP basic auth (``http://zeus:<token>@host:8000``,
which lets Zeus 0.16's client, which sends no headers of its own, reach a protected server).

Example:
    >>> normalize_token("   ") is None
    True
    >>> authorized("Bearer 0123456789abcdef", "0123456789abcdef")
    True
"""

from __future__ import annotations

import base64
import binascii
import secrets

from zeus_core.exceptions import ZeusConfigError

__all__ = ["MIN_TOKEN_LENGTH", "TOKEN_HINT", "normalize_token", "authorized"]

MIN_TOKEN_LENGTH = 16
"""Fewest characters of a token (16 hex characters = 64 random bits)."""

TOKEN_HINT = 'generate one with `openssl rand -hex 16` and pass --token "$ZEUS_BSO_TOKEN"'


def normalize_token(token: str | None, *, where: str = "bso-server") -> str | None:
    """The token to require, or ``None`` for no token.

    Args:
        token: The configured token; ``None``, empty or whitespace-only means no token.
        where: Who asks, for the error message.

    Returns:
        ``token`` unchanged, or ``None``.

    Raises:
        ZeusConfigError: The token is not a string, or shorter than :data:`MIN_TOKEN_LENGTH`.
    """
    if token is None:
        return None
    if not isinstance(token, str):
        raise ZeusConfigError(f"{where}: the token must be a string, got {type(token).__name__}.")
    if not token.strip():
        return None
    if len(token) < MIN_TOKEN_LENGTH:
        raise ZeusConfigError(
            f"{where}: the token has {len(token)} characters; use at least {MIN_TOKEN_LENGTH} "
            f"(a short token can be guessed): {TOKEN_HINT}."
        )
    return token


def authorized(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` (bearer, or basic-auth password)."""
    if not authorization:
        return False
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        return secrets.compare_digest(value.strip().encode(), token.encode())
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        password = decoded.partition(":")[2]
        return secrets.compare_digest(password.encode(), token.encode())
    return False
