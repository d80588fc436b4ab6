"""Who may list, get and decide an approval, and get and resume its run: every cell of the
table in docs/runs.md, through the real routes with real keys, each with its exact status.

Keys: `ops` (admin), `lead` (approve: any), `carol` (approve: own), `ci` (approve: none),
and `bob` (approve: own), whose runs are "another key's".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from chat_support import extensions, native_upstream, raw_stream, sdk
from live import LiveServer
from permission_tools import RAN
from server_support import config_with

from fakes.openai_server import FakeOpenAIServer, completion, tool_call
from store_backends import shared_store_url
from toolwire.server import create_app
from toolwire.server.configuration.loader import parse_config

MODEL = "gpt"
SECRETS = {
    "ops": "tw-ops",
    "lead": "tw-lead",
    "carol": "tw-carol",
    "ci": "tw-ci",
    "bob": "tw-bob",
}


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _keys() -> list[dict[str, Any]]:
    return [
        {"name": "ops", "sha256": _digest(SECRETS["ops"]), "admin": True, "scopes": ["secrets"]},
        {"name": "lead", "sha256": _digest(SECRETS["lead"]), "approve": "any"},
        {"name": "carol", "sha256": _digest(SECRETS["carol"])},
        {"name": "ci", "sha256": _digest(SECRETS["ci"]), "approve": "none"},
        {"name": "bob", "sha256": _digest(SECRETS["bob"])},
    ]


@pytest.fixture(scope="module", params=["sqlite", "redis", "postgres"])
def server(
    request: pytest.FixtureRequest,
    _openai_server_session: FakeOpenAIServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveServer]:
    """The same gateway on each durable store: the rules must not depend on the backend."""
    with shared_store_url(request, tmp_path_factory.mktemp("permissions")) as store:
        config = config_with(
            upstream=native_upstream(_openai_server_session.base_url),
            server_tools={"modules": ["permission_tools"]},
            keys=_keys(),
            store=store,
        )
        with LiveServer(create_app(config)) as live:
            yield live


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def _http(server: LiveServer, name: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {SECRETS[name]}"}, timeout=10
    )


def _pause(
    server: LiveServer,
    openai_server: FakeOpenAIServer,
    requester: str,
    tool: str,
    arguments: dict[str, Any],
) -> dict[str, Any]:
    """A run of `requester` waiting for approval of one call; its `toolwire` extension."""
    openai_server.reply(completion(tool_calls=[tool_call(tool, arguments, id="call_w")]))
    response = sdk(server, SECRETS[requester]).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Go."}]
    )
    extension: dict[str, Any] = (response.model_extra or {})["toolwire"]
    assert extension["status"] == "awaiting_approval", extension
    return extension


# caller, requester, tool → list+get, decide, run get+resume. "Named" means the tool names
# an approver key; only that key decides (not even an admin).
CELLS = [
    # admin: sees everything, decides every call without a named approver (or naming it)
    ("ops", "ops", "wipe", 200, 200, 200),  # own call
    ("ops", "bob", "wipe", 200, 200, 200),  # another key's call
    ("ops", "bob", "wipe_by_ops", 200, 200, 200),  # named approver: this key
    ("ops", "ops", "wipe_by_carol", 200, 403, 200),  # own call, another key named
    ("ops", "bob", "wipe_by_carol", 200, 403, 200),  # another's call, another key named
    # approve: any: sees and decides every call it may decide, never another key's run
    ("lead", "lead", "wipe", 200, 200, 200),
    ("lead", "bob", "wipe", 200, 200, 404),
    ("lead", "bob", "wipe_by_lead", 200, 200, 404),
    ("lead", "lead", "wipe_by_carol", 200, 403, 200),
    ("lead", "bob", "wipe_by_carol", 404, 404, 404),
    # approve: own (the default)
    ("carol", "carol", "wipe", 200, 200, 200),
    ("carol", "bob", "wipe", 404, 404, 404),
    ("carol", "bob", "wipe_by_carol", 200, 200, 404),
    ("carol", "carol", "wipe_by_ops", 200, 403, 200),
    ("carol", "bob", "wipe_by_lead", 404, 404, 404),
    # approve: none: decides nothing, still sees its own requests and runs
    # (a tool naming a `none` key is refused by the loader: see below)
    ("ci", "ci", "wipe", 200, 403, 200),
    ("ci", "bob", "wipe", 404, 404, 404),
    ("ci", "ci", "wipe_by_carol", 200, 403, 200),
    ("ci", "bob", "wipe_by_carol", 404, 404, 404),
]


@pytest.mark.parametrize(("caller", "requester", "tool", "see", "decide", "run"), CELLS)
def test_every_cell_of_the_permission_table(
    server: LiveServer,
    openai_server: FakeOpenAIServer,
    caller: str,
    requester: str,
    tool: str,
    see: int,
    decide: int,
    run: int,
) -> None:
    extension = _pause(server, openai_server, requester, tool, {"target": "t"})
    approval_id = extension["pending_approvals"][0]["id"]
    run_id = extension["run_id"]
    with _http(server, caller) as http:
        listed = http.get("/v1/approvals", params={"status": "pending", "limit": 1000})
        assert listed.status_code == 200
        assert (approval_id in [a["id"] for a in listed.json()["data"]]) == (see == 200)
        assert http.get(f"/v1/approvals/{approval_id}").status_code == see
        decided = http.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
        assert decided.status_code == decide, decided.text
        assert http.get(f"/v1/runs/{run_id}").status_code == run
        if run == 200 and decide == 200:
            openai_server.reply(completion("Done."))
        resumed = http.post(f"/v1/runs/{run_id}/resume")
        # A visible run not yet decided is a 409 (it still waits), never a 404.
        expected = run if run != 200 or decide == 200 else 409
        assert resumed.status_code == expected, resumed.text
    assert ([f"{tool}:t"] if expected == 200 else []) == RAN
    with _http(server, "ops") as ops:
        status = ops.get(f"/v1/approvals/{approval_id}").json()["status"]
    assert status == {200: "used" if expected == 200 else "approved", 403: "pending"}.get(
        decide, "pending"
    )


def test_a_named_approver_without_admin_decides_and_the_owner_resumes(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    extension = _pause(server, openai_server, "bob", "wipe_by_carol", {"target": "db"})
    approval_id = extension["pending_approvals"][0]["id"]
    with _http(server, "bob") as bob:
        # bob asked, so bob sees it; only carol decides it.
        assert bob.get(f"/v1/approvals/{approval_id}").json()["approver"] == "carol"
        refused = bob.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
        assert refused.status_code == 403
        assert "'carol'" in refused.json()["error"]["message"]
    with _http(server, "carol") as carol:
        decided = carol.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
        assert decided.status_code == 200
        assert decided.json()["decided_by"] == "carol"
    with _http(server, "bob") as bob:
        openai_server.reply(completion("Wiped."))
        assert bob.post(f"/v1/runs/{extension['run_id']}/resume").status_code == 200
    assert RAN == ["wipe_by_carol:db"]


def test_ordinary_keys_cannot_read_or_act_on_each_others_runs(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    extension = _pause(server, openai_server, "bob", "wipe", {"target": "x"})
    approval_id = extension["pending_approvals"][0]["id"]
    run_id = extension["run_id"]
    with _http(server, "carol") as carol:
        assert carol.get(f"/v1/runs/{run_id}").status_code == 404
        assert carol.get("/v1/approvals", params={"run_id": run_id}).json()["data"] == []
        assert (
            carol.post(f"/v1/approvals/{approval_id}", json={"decision": "deny"}).status_code == 404
        )
    with _http(server, "bob") as bob:
        assert bob.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"}).is_success
    with _http(server, "carol") as carol:
        # Decided, the run is still bob's alone: carol can neither read nor resume it.
        assert carol.post(f"/v1/runs/{run_id}/resume").status_code == 404
    with _http(server, "bob") as bob:
        assert bob.get(f"/v1/runs/{run_id}").json()["status"] == "awaiting_approval"
        openai_server.reply(completion("Done."))
        assert bob.post(f"/v1/runs/{run_id}/resume").status_code == 200
    assert RAN == ["wipe:x"]


def test_an_admin_resuming_anothers_run_uses_the_owners_scopes_and_is_audited(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    extension = _pause(server, openai_server, "carol", "wipe", {"target": "cache"})
    approval_id = extension["pending_approvals"][0]["id"]
    run_id = extension["run_id"]
    with _http(server, "ops") as ops:
        assert ops.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"}).is_success
        # After the approved call, the model asks for a tool only the admin's scopes allow.
        openai_server.reply(
            completion(tool_calls=[tool_call("read_secret", {"name": "db"}, id="call_r")])
        )
        openai_server.reply(completion("I could not read it."))
        resumed = ops.post(f"/v1/runs/{run_id}/resume")
        assert resumed.status_code == 200, resumed.text
        audit = ops.get("/v1/audit", params={"run_id": run_id}).json()["data"]
    assert RAN == ["wipe:cache"]  # read_secret did not run: carol lacks 'secrets'
    tool_message = openai_server.requests[-1].json["messages"][-1]
    assert json.loads(tool_message["content"])["error"]["code"] == "forbidden"
    [resume] = [r for r in audit if r["outcome"] == "run_resumed"]
    assert resume["key_name"] == "ops"
    ran = [r for r in audit if r["event"] == "finished" and r["outcome"] in ("ok", "forbidden")]
    assert [(r["tool"], r["key_name"]) for r in ran] == [
        ("wipe", "carol"),
        ("read_secret", "carol"),
    ]
    # The resume is recorded before the calls it led to, with the same request id.
    assert all(r["id"] > resume["id"] and r["request_id"] == resume["request_id"] for r in ran)


NESTED = {
    "name": "billing",
    "settings": {
        "region": "eu",
        "password": "hunter2",
        "api_key": "sk-live-1",
        "replicas": [{"host": "a", "token": "t-1"}],
    },
}
NESTED_SECRETS = ("hunter2", "sk-live-1", "t-1")


@pytest.mark.parametrize(
    ("tool", "shown"),
    [
        (
            "connect",
            {
                "name": "billing",
                "settings": {
                    "region": "eu",
                    "password": "[redacted]",
                    "api_key": "[redacted]",
                    "replicas": [{"host": "a", "token": "[redacted]"}],
                },
            },
        ),
        (
            "configure",
            {
                "name": "billing",
                "settings": {
                    "region": "eu",
                    "password": "[redacted]",
                    "api_key": "[redacted]",
                    "replicas": "[redacted]",
                },
            },
        ),
    ],
)
def test_nested_secrets_are_redacted_in_every_answer_and_the_audit_log(
    server: LiveServer, openai_server: FakeOpenAIServer, tool: str, shown: dict[str, Any]
) -> None:
    extension = _pause(server, openai_server, "carol", tool, NESTED)
    answers = [json.dumps(extension)]
    assert json.loads(extension["pending_approvals"][0]["arguments"]) == shown
    approval_id = extension["pending_approvals"][0]["id"]
    run_id = extension["run_id"]
    with _http(server, "carol") as carol:
        one = carol.get(f"/v1/approvals/{approval_id}").json()
        assert json.loads(one["arguments"]) == shown
        listed = carol.get("/v1/approvals", params={"run_id": run_id}).json()
        the_run = carol.get(f"/v1/runs/{run_id}").json()
        assert json.loads(the_run["pending_approvals"][0]["arguments"]) == shown
        assert json.loads(the_run["steps"][0]["tool_calls"][0]["arguments"]) == shown
        answers += [json.dumps(one), json.dumps(listed), json.dumps(the_run)]
        assert carol.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"}).is_success
        openai_server.reply(completion("Done."))
        resumed = carol.post(f"/v1/runs/{run_id}/resume")
        assert resumed.status_code == 200
        answers.append(resumed.text)
    with _http(server, "ops") as ops:
        audit = ops.get("/v1/audit", params={"run_id": run_id}).json()["data"]
    finished = [r for r in audit if r["tool"] == tool and r["event"] == "finished"]
    assert finished[0]["arguments"] == shown
    answers.append(json.dumps(audit))
    for text in answers:
        assert not any(secret in text for secret in NESTED_SECRETS), text
    assert [f"{tool}:billing"] == RAN


def _yaml(approver: str, keys: str) -> str:
    return f"""\
upstream: {{kind: offline}}
server_tools:
  http:
    - name: drop_table
      endpoint: https://db.example/drop
      effects: destructive
      approver: {approver}
{keys}"""


_KEYS = f"""\
keys:
  - {{name: alice, sha256: "{_digest("a")}"}}
  - {{name: ci, sha256: "{_digest("c")}", approve: none}}
"""


def test_the_loader_refuses_an_approver_that_names_no_key_with_its_line() -> None:
    doc = parse_config(_yaml("dba", _KEYS), source="toolwire.yaml")
    [problem] = doc.errors
    assert (problem.line, problem.path) == (7, "server_tools.http[0].approver")
    assert "'dba'" in problem.message
    assert "'alice', 'ci'" in problem.message
    assert doc.config is None


def test_the_loader_refuses_an_approver_whose_key_decides_nothing() -> None:
    doc = parse_config(_yaml("ci", _KEYS), source="toolwire.yaml")
    [problem] = doc.errors
    assert problem.line == 7
    assert "approve: none" in problem.message


def test_an_approver_on_an_open_gateway_is_a_warning() -> None:
    doc = parse_config(_yaml("dba", ""), source="toolwire.yaml")
    assert doc.ok
    [warning] = doc.problems
    assert warning.severity == "warning"
    assert "no keys" in warning.message


def test_a_module_tool_naming_no_key_stops_the_gateway() -> None:
    from toolwire.server.configuration.loader import ConfigError
    from toolwire.server.gateway import Gateway

    config = config_with(
        upstream={"kind": "offline"},
        server_tools={"modules": ["permission_tools"]},
        keys=[{"name": "ops", "sha256": _digest("o"), "admin": True}],
        store="memory",
    )
    with pytest.raises(ConfigError) as info:
        Gateway(config)
    text = str(info.value)
    assert "wipe_by_carol" in text
    assert "wipe_by_lead" in text
    assert "'carol'" in text


def test_every_door_shows_pending_calls_redacted(
    server: LiveServer, openai_server: FakeOpenAIServer
) -> None:
    shown: list[str] = []
    # Chat Completions, streamed: the tool_call, approval_required and run_status payloads.
    openai_server.reply(completion(tool_calls=[tool_call("connect", NESTED, id="call_c")]))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Go."}]}
    _, chunks = raw_stream(server, {**body, "stream": True}, key=SECRETS["carol"])
    payloads = extensions(chunks)
    assert [p["type"] for p in payloads][:3] == ["tool_call", "tool_result", "approval_required"]
    assert json.loads(payloads[2]["arguments"])["settings"]["password"] == "[redacted]"
    shown.append(json.dumps(payloads))
    # Responses: the mcp_approval_request item, then the mcp_call item once resumed.
    openai_server.reply(completion(tool_calls=[tool_call("connect", NESTED, id="call_r")]))
    with _http(server, "carol") as carol:
        first = carol.post("/v1/responses", json={"model": MODEL, "input": "Go."}).json()
        [request] = [i for i in first["output"] if i["type"] == "mcp_approval_request"]
        assert json.loads(request["arguments"])["settings"]["api_key"] == "[redacted]"
        openai_server.reply(completion("Connected."))
        answer = {"type": "mcp_approval_response", "approval_request_id": request["id"]}
        second = carol.post(
            "/v1/responses",
            json={
                "model": MODEL,
                "previous_response_id": first["id"],
                "input": [{**answer, "approve": True}],
            },
        )
        assert second.status_code == 200, second.text
        [call] = [i for i in second.json()["output"] if i["type"] == "mcp_call"]
        assert json.loads(call["arguments"])["settings"]["region"] == "eu"
        shown += [json.dumps(first), second.text]
        # Anthropic Messages: the toolwire field of the message.
        openai_server.reply(completion(tool_calls=[tool_call("connect", NESTED, id="call_m")]))
        message = carol.post(
            "/v1/messages",
            json={
                "model": MODEL,
                "max_tokens": 100,
                "messages": [{"role": "user", "content": "Go."}],
            },
        )
        assert message.status_code == 200, message.text
        pending = message.json()["toolwire"]["pending_approvals"]
        assert json.loads(pending[0]["arguments"])["settings"]["password"] == "[redacted]"
        shown.append(message.text)
    for text in shown:
        assert not any(secret in text for secret in NESTED_SECRETS), text
    assert RAN == ["connect:billing"]
