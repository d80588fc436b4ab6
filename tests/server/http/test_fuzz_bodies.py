"""Property: whatever body a client sends to any route, the gateway answers with a JSON
4xx in the route's protocol shape (or a success), never a 5xx and never a traceback
(issue 12). Bodies are arbitrary JSON, and valid bodies with one field replaced by
arbitrary JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from live import LiveServer
from server_support import TOOLS_MODULE, config_with

from toolwire.server import create_app

MODEL = "toolwire-offline"

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)

VALID: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is 2 + 3?"}],
    },
    "/v1/messages": {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "What is 2 + 3?"}],
    },
    "/v1/responses": {"model": MODEL, "input": "What is 2 + 3?", "store": False},
    "/v1/tools/add/invoke": {"arguments": {"a": 2, "b": 3}},
    "/v1/approvals/apr_unknown": {"decision": "approve"},
    "/v1/runs/run_unknown/resume": {"stream": False},
}
ROUTES = list(VALID)


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    config = config_with(server_tools={"modules": [TOOLS_MODULE]}, store="memory")
    with LiveServer(create_app(config, environ={})) as server:
        yield server


def _check(live: LiveServer, path: str, content: bytes) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as http:
        response = http.post(path, content=content, headers={"content-type": "application/json"})
    assert response.status_code < 500, (path, content[:300], response.text[:300])
    if response.status_code >= 400:
        body = response.json()
        if path.startswith("/v1/messages"):
            assert body["type"] == "error"
            assert isinstance(body["error"]["message"], str)
        else:
            assert isinstance(body["error"]["message"], str)
        assert "Traceback" not in response.text


@pytest.mark.parametrize("path", ROUTES)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=json_values)
def test_any_json_body_gets_a_clean_answer(live: LiveServer, path: str, body: Any) -> None:
    _check(live, path, json.dumps(body).encode())


@pytest.mark.parametrize("path", ROUTES)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_valid_body_with_one_field_replaced_gets_a_clean_answer(
    live: LiveServer, path: str, data: st.DataObject
) -> None:
    body = dict(VALID[path])
    field = data.draw(st.sampled_from([*body, "extra_field"]))
    body[field] = data.draw(json_values)
    _check(live, path, json.dumps(body).encode())


@pytest.mark.parametrize("path", ROUTES)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(max_size=200))
def test_bytes_that_are_not_json_get_a_clean_answer(
    live: LiveServer, path: str, raw: bytes
) -> None:
    _check(live, path, raw)


def test_deeply_nested_json_gets_a_clean_answer(live: LiveServer) -> None:
    for depth in (255, 300, 1100):
        nested = b"[" * depth + b"]" * depth
        for path in ROUTES:
            _check(live, path, b'{"model": "' + MODEL.encode() + b'", "messages": ' + nested + b"}")
            _check(live, path, nested)
