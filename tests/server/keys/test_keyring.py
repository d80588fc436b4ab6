"""`Keyring.key_of`: a request's key is looked up once, whoever asks (the app's layer for
its limits, then the route), and never taken for another token's."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from toolwire.server.keys.keyring import GatewayKey, Keyring


def _key(name: str, token: str) -> GatewayKey:
    return GatewayKey(name=name, digest=hashlib.sha256(token.encode()).digest(), scopes=frozenset())


class CountingKeyring(Keyring):
    lookups = 0

    def authenticate(self, token: str | None) -> GatewayKey | None:
        self.lookups += 1
        return super().authenticate(token)


@pytest.fixture
def keyring() -> CountingKeyring:
    return CountingKeyring([_key("alice", "sk-alice"), _key("bob", "sk-bob")])


def test_a_request_is_looked_up_once_whoever_asks(keyring: CountingKeyring) -> None:
    scope: dict[str, Any] = {}
    first = keyring.key_of(scope, "sk-alice")
    again = keyring.key_of(scope, "sk-alice")
    assert first is not None
    assert first.name == "alice"
    assert again is first
    assert keyring.lookups == 1


def test_an_unknown_token_is_remembered_as_no_key(keyring: CountingKeyring) -> None:
    scope: dict[str, Any] = {}
    assert keyring.key_of(scope, "sk-mallory") is None
    assert keyring.key_of(scope, "sk-mallory") is None
    assert keyring.lookups == 1


def test_another_token_in_the_same_request_is_looked_up_anew(keyring: CountingKeyring) -> None:
    # Two `Authorization` headers: the limits read the last, the route the first.
    scope: dict[str, Any] = {}
    assert keyring.key_of(scope, "sk-mallory") is None
    bob = keyring.key_of(scope, "sk-bob")
    assert bob is not None
    assert bob.name == "bob"
    assert keyring.key_of(scope, None) is None
    assert keyring.lookups == 3


def test_requests_do_not_share_their_keys(keyring: CountingKeyring) -> None:
    alice = keyring.key_of({}, "sk-alice")
    nobody = keyring.key_of({}, "sk-bob-typo")
    assert alice is not None
    assert nobody is None
