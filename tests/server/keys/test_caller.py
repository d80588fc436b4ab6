"""`authenticate`: which header carries the gateway key, and which token is forwarded."""

from __future__ import annotations

import hashlib

import pytest
from starlette.applications import Starlette
from starlette.requests import Request

from toolwire.server import GatewayConfig, create_app
from toolwire.server.http.errors import GatewayError
from toolwire.server.keys.caller import authenticate

ALICE = "sk-alice-0123456789"
BOB = "sk-bob-0123456789"


def _app(*, keys: bool) -> Starlette:
    config: dict[str, object] = {"store": "memory"}
    if keys:
        config["keys"] = [
            {"name": name, "sha256": hashlib.sha256(token.encode()).hexdigest()}
            for name, token in (("alice", ALICE), ("bob", BOB))
        ]
    return create_app(GatewayConfig.model_validate(config), access_log=False)


def _request(app: Starlette, *headers: tuple[str, str]) -> Request:
    return Request(
        {
            "type": "http",
            "method": "POST",
            "path": "/v1/chat/completions",
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
            "app": app,
        }
    )


@pytest.fixture(scope="module")
def keyed() -> Starlette:
    return _app(keys=True)


@pytest.fixture(scope="module")
def open_gateway() -> Starlette:
    return _app(keys=False)


def test_the_bearer_key_is_read_before_x_api_key(keyed: Starlette) -> None:
    caller = authenticate(_request(keyed, ("authorization", f"Bearer {ALICE}"), ("x-api-key", BOB)))
    assert caller.name == "alice"


def test_x_api_key_is_read_when_no_bearer_key_is_sent(keyed: Starlette) -> None:
    caller = authenticate(_request(keyed, ("x-api-key", f"  {BOB} ")))
    assert caller.name == "bob"
    assert caller.ctx.auth_token is None  # an API key is never forwarded


def test_a_header_sent_twice_counts_by_its_first_value(keyed: Starlette) -> None:
    caller = authenticate(
        _request(
            keyed,
            ("authorization", f"Bearer {BOB}"),
            ("authorization", f"Bearer {ALICE}"),
        )
    )
    assert caller.name == "bob"


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ((), "Missing gateway key"),
        ((("authorization", "Basic abc"),), "Missing gateway key"),
        ((("authorization", "Bearer sk-nobody"),), "Invalid gateway key"),
        ((("x-api-key", "   "),), "Missing gateway key"),
    ],
)
def test_no_or_an_unknown_key_is_a_401(
    keyed: Starlette, headers: tuple[tuple[str, str], ...], message: str
) -> None:
    with pytest.raises(GatewayError) as raised:
        authenticate(_request(keyed, *headers))
    assert raised.value.status == 401
    assert message in raised.value.message


def test_the_callers_own_token_is_forwarded_apart_from_the_gateway_key(
    keyed: Starlette,
) -> None:
    caller = authenticate(
        _request(
            keyed,
            ("authorization", f"Bearer {ALICE}"),
            ("x-forwarded-authorization", "Bearer user-token-1"),
        )
    )
    assert caller.name == "alice"
    assert caller.ctx.auth_token == "user-token-1"  # never the gateway key


def test_an_open_gateway_forwards_the_bearer_token(open_gateway: Starlette) -> None:
    caller = authenticate(_request(open_gateway, ("authorization", "Bearer user-token-2")))
    assert caller.key is None
    assert caller.ctx.auth_token == "user-token-2"
    forwarded = authenticate(
        _request(
            open_gateway,
            ("authorization", "Bearer user-token-2"),
            ("x-forwarded-authorization", "Bearer user-token-3"),
        )
    )
    assert forwarded.ctx.auth_token == "user-token-3"
