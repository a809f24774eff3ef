"""zeusd's bearer tokens: HS256 JWTs with ``sub``, ``scopes`` and an optional ``exp``, signed with a key file.

Tokens issued here and by ``zeusd token issue`` are interchangeable when both use the same signing
key file (its bytes, as they are, are the HMAC key). The daemon never logs a token.

Example:
    >>> from zeus_core.daemon import issue_token, verify_token
    >>> token = issue_token(b"secret-key-of-32-bytes-or-more!!", "alice", ["gpu-read"], None)
    >>> verify_token(token, b"secret-key-of-32-bytes-or-more!!").sub
    'alice'
"""

from __future__ import annotations

import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import jwt

from zeus_core.daemon._config import ApiGroup
from zeus_core.exceptions import ZeusConfigError

__all__ = ["Claims", "TokenError", "issue_token", "verify_token", "read_signing_key", "parse_expires"]

_ALGORITHM = "HS256"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class Claims:
    """A verified token's claims: subject, scopes and expiry (Unix seconds, ``None``: never)."""

    sub: str
    scopes: tuple[ApiGroup, ...]
    exp: int | None


class TokenError(Exception):
    """A token that is missing, malformed, badly signed or expired (the message says which)."""


def read_signing_key(path: str | Path) -> bytes:
    """The signing key: the file's bytes, as zeusd reads them.

    Raises:
        ZeusConfigError: The file cannot be read or is empty.
    """
    try:
        key = Path(path).read_bytes()
        mode = Path(path).stat().st_mode
    except OSError as e:
        raise ZeusConfigError(f"signing key {path}: cannot read it ({e}).") from e
    if not key:
        raise ZeusConfigError(
            f"signing key {path} is empty. Make one: `openssl rand -base64 32 > {path}; chmod 600 {path}`."
        )
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        import logging

        logging.getLogger(__name__).warning(
            "Signing key %s is readable by other users; anyone who reads it can issue tokens. "
            "Fix: chmod 600 %s",
            path,
            path,
        )
    return key


def parse_expires(text: str, now: float | None = None) -> int | None:
    """The expiry of ``--expires``: ``"never"``/``"0"`` -> None; ``"1h"``, ``"7d"``, ``"1h30m"`` -> Unix s.

    Raises:
        ZeusConfigError: Not a duration.
    """
    s = text.strip().lower()
    if s in ("never", "0"):
        return None
    parts = re.fullmatch(r"(?:\d+[smhdw])+", s)
    if not parts:
        raise ZeusConfigError(f"--expires {text!r}: use e.g. '1h', '7d', '30d', '1h30m' or 'never'.")
    seconds = sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)([smhdw])", s))
    return int((time.time() if now is None else now) + seconds)


def issue_token(key: bytes, sub: str, scopes: Sequence[ApiGroup | str], expires_at: int | None) -> str:
    """A token for ``sub`` with ``scopes``, valid until ``expires_at`` (Unix s; ``None``: no expiry).

    Raises:
        ZeusConfigError: An unknown scope or an empty subject.
    """
    if not sub:
        raise ZeusConfigError("issue_token: give the user a name (--user).")
    try:
        groups = [ApiGroup(s).value for s in scopes]
    except ValueError as e:
        raise ZeusConfigError(f"issue_token: {e}; scopes are {[g.value for g in ApiGroup]}.") from e
    claims: dict[str, object] = {"sub": sub, "scopes": groups}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    return jwt.encode(claims, key, algorithm=_ALGORITHM)


def verify_token(token: str, key: bytes) -> Claims:
    """The claims of ``token`` if it is signed with ``key`` and not expired.

    Raises:
        TokenError: With zeusd's words: ``"Token has expired."`` or ``"Invalid token: ..."``.
    """
    try:
        raw = jwt.decode(token, key, algorithms=[_ALGORITHM], options={"require": ["sub"]})
    except jwt.ExpiredSignatureError:
        raise TokenError("Token has expired.") from None
    except jwt.PyJWTError as e:
        raise TokenError(f"Invalid token: {e}") from None
    try:
        scopes = tuple(ApiGroup(s) for s in raw.get("scopes", []))
    except (ValueError, TypeError) as e:
        raise TokenError(f"Invalid token: scopes ({e})") from None
    exp = raw.get("exp")
    return Claims(sub=str(raw["sub"]), scopes=scopes, exp=int(exp) if exp is not None else None)
