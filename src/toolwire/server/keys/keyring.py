"""Gateway keys: `Authorization: Bearer <key>` checked against SHA-256 digests.

The config holds only digests (or the names of environment variables holding keys, which
are hashed when the gateway starts), so no key is kept in memory in clear once loaded.
A presented key is hashed and compared with every configured digest in constant time, so
neither the timing nor the order of keys reveals how close a guess was.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolwire.server.configuration.config import KeyConfig

__all__ = ["GatewayKey", "Keyring", "bearer_token", "credentials", "hash_key", "presented_key"]

_KEY_IN_SCOPE: Final = "toolwire.key"
"""The scope's (token, key) as `Keyring.key_of` found them."""


def hash_key(key: str) -> str:
    """The hex SHA-256 digest of a key, as written in `keys[].sha256`."""
    return hashlib.sha256(key.encode()).hexdigest()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, else `None`."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None


def presented_key(authorization: str | None, api_key: str | None) -> str | None:
    """The gateway key a request presents: `Authorization: Bearer <key>`, else `x-api-key:
    <key>` (how Anthropic's clients send theirs). Every reader of a request's key (the
    in-flight limit, the per-key limits, the door) takes it from here, from the first of
    each header, so that all of them count and serve one request as one key."""
    return bearer_token(authorization) or (api_key.strip() if api_key else None) or None


_CREDENTIALS: Final = frozenset({b"authorization", b"x-api-key", b"x-forwarded-authorization"})


def credentials(headers: Iterable[tuple[bytes, bytes]]) -> dict[bytes, str]:
    """The headers that carry a key or a token, in one pass over a request's ASGI headers
    (named in lower case). A header sent twice counts by its first value, as with
    Starlette's `Headers.get`, which costs a raised `KeyError` for each header missing."""
    sent: dict[bytes, str] = {}
    for name, value in headers:
        if name in _CREDENTIALS and name not in sent:
            sent[name] = value.decode("latin-1")
    return sent


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayKey:
    """A configured key: who holds it and which tool scopes it grants."""

    name: str
    digest: bytes
    scopes: frozenset[str]
    admin: bool = False
    approve: str = "own"
    """`own`, `any` or `none`: which approvals the key may decide."""

    def __repr__(self) -> str:
        return f"GatewayKey(name={self.name!r}, scopes={sorted(self.scopes)!r})"


class Keyring:
    """The configured gateway keys. Empty means the gateway is open (no auth).

    Args:
        keys: The keys; digests are raw 32-byte SHA-256 values.
    """

    def __init__(self, keys: Iterable[GatewayKey] = ()) -> None:
        self._keys: tuple[GatewayKey, ...] = tuple(keys)

    @classmethod
    def from_config(cls, keys: Sequence[KeyConfig], environ: Mapping[str, str]) -> Keyring:
        """Build the keyring from `keys:`; `env` keys are read from `environ` and hashed.

        Raises:
            KeyError: An `env` key's variable is unset or empty (the config check reports
                this before the gateway starts).
        """
        built = []
        for key in keys:
            if key.sha256 is not None:
                digest = bytes.fromhex(key.sha256)
            else:
                assert key.env is not None
                value = environ.get(key.env)
                if not value:
                    raise KeyError(key.env)
                digest = hashlib.sha256(value.encode()).digest()
            built.append(
                GatewayKey(
                    name=key.name,
                    digest=digest,
                    scopes=frozenset(key.scopes),
                    admin=key.admin,
                    approve=key.approve,
                )
            )
        return cls(built)

    @property
    def enabled(self) -> bool:
        """Whether requests must carry a key."""
        return bool(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, name: str) -> GatewayKey | None:
        """The key named `name` (a run's owner, a tool's approver), or `None`."""
        return next((k for k in self._keys if k.name == name), None)

    def key_of(self, scope: MutableMapping[str, Any], token: str | None) -> GatewayKey | None:
        """`authenticate(token)` for the request of `scope` (whose key `token` is), once
        per request: the app's layer (its limits) and the route both need the key."""
        seen = scope.get(_KEY_IN_SCOPE)
        if seen is not None and seen[0] == token:
            found: GatewayKey | None = seen[1]
            return found
        # Not the token looked up before (every reader takes it by `presented_key`, so
        # this is a caller that found it elsewhere): looked up anew, never taken for it.
        found = self.authenticate(token)
        scope[_KEY_IN_SCOPE] = (token, found)
        return found

    def authenticate(self, token: str | None) -> GatewayKey | None:
        """The key matching `token`, or `None`."""
        if token is None:
            return None
        presented = hashlib.sha256(token.encode()).digest()
        found: GatewayKey | None = None
        for key in self._keys:
            # No early exit: every digest is compared whatever matched before.
            if hmac.compare_digest(presented, key.digest):
                found = key
        return found
