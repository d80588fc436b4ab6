"""Arguments as records and answers show them: secrets redacted at every depth, the tool's
allowlist by dotted path, and nothing a caller sends can make redaction raise."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from runner_support import call

from toolwire.runner import ToolRunner
from toolwire.runner.audit import REDACTED, redact_arguments, redact_arguments_json
from toolwire.store.base import AuditQuery
from toolwire.store.sqlite import SqliteStore
from toolwire.tools import Tool, Toolbox, tool

NESTED = {
    "name": "web",
    "settings": {
        "region": "eu",
        "password": "hunter2",
        "api_key": "sk-live-1",
        "nested": {"Authorization": "Bearer abc", "depth": 3},
    },
    "hosts": [
        {"name": "a", "token": "t-1"},
        {"name": "b", "client_secret": "s-2"},
        [{"session_id": "x"}],
    ],
    "headers": [{"name": "Authorization", "value": "Bearer sk-hidden"}],
}
SECRETS = ("hunter2", "sk-live-1", "Bearer abc", "t-1", "s-2", "sk-hidden")


@tool(effects="write")
def configure(name: str, settings: dict[str, Any], hosts: list[Any], headers: list[Any]) -> str:
    """Configure a service."""
    return "ok"


@tool(effects="write", audit_arguments=["name", "settings.region", "hosts.name"])
def configure_listed(
    name: str, settings: dict[str, Any], hosts: list[Any], headers: list[Any]
) -> str:
    """Configure a service; the audit log keeps only the listed paths."""
    return "ok"


def test_secret_looking_names_are_redacted_at_every_depth() -> None:
    shown = redact_arguments(configure, NESTED)
    assert shown == {
        "name": "web",
        "settings": {
            "region": "eu",
            "password": REDACTED,
            "api_key": REDACTED,
            "nested": {"Authorization": REDACTED, "depth": 3},
        },
        "hosts": [
            {"name": "a", "token": REDACTED},
            {"name": "b", "client_secret": REDACTED},
            [{"session_id": REDACTED}],
        ],
        # A credential under a harmless name is still a credential.
        "headers": [{"name": "Authorization", "value": REDACTED}],
    }
    assert not any(s in json.dumps(shown) for s in SECRETS)


def test_the_allowlist_names_dotted_paths_and_arrays_add_no_segment() -> None:
    shown = redact_arguments(configure_listed, NESTED)
    assert shown == {
        "name": "web",
        "settings": {
            "region": "eu",
            "password": REDACTED,
            "api_key": REDACTED,
            "nested": REDACTED,
        },
        "hosts": [
            {"name": "a", "token": REDACTED},
            {"name": "b", "client_secret": REDACTED},
            [{"session_id": REDACTED}],
        ],
        "headers": REDACTED,
    }


def test_a_listed_path_keeps_its_subtree_but_not_the_secrets_in_it() -> None:
    listed = Tool(name="t", audit_arguments=("settings", "token_count"))
    shown = redact_arguments(listed, {"settings": NESTED["settings"], "token_count": 5})
    assert shown is not None
    assert shown["settings"]["region"] == "eu"
    assert shown["settings"]["password"] == REDACTED
    # Named by the author: kept though its name looks like a secret.
    assert shown["token_count"] == 5


@pytest.mark.parametrize("odd", [None, 3, "text", ["a"], b"bytes"])
def test_arguments_that_are_not_an_object_show_nothing(odd: object) -> None:
    assert redact_arguments(configure, odd) is None
    assert redact_arguments(None, odd) is None


def test_deep_nesting_and_odd_keys_never_raise() -> None:
    deep: Any = {"password": "p"}
    for _ in range(5000):
        deep = {"a": [deep]}
    shown = redact_arguments(None, deep)
    assert '"p"' not in json.dumps(shown)
    assert redact_arguments(None, {1: {"secret": "s"}, "ok": (1, 2)}) == {
        "1": {"secret": REDACTED},
        "ok": [1, 2],
    }
    assert redact_arguments(configure_listed, {"settings": "flat"}) == {"settings": REDACTED}


class _Text(str):
    """A string that is not exactly `str` (a library may hand one over)."""


def test_mappings_and_strings_that_are_not_dict_and_str_are_redacted_too() -> None:
    # Values of JSON's own types take a quicker way; other mappings and strings still
    # have their secrets found.
    shown = redact_arguments(
        None,
        MappingProxyType(
            {
                "outer": MappingProxyType({"password": "hunter2", "region": "eu"}),
                "header": _Text("Bearer sk-hidden"),
                "fine": _Text("plain"),
            }
        ),
    )
    assert shown == {
        "outer": {"password": REDACTED, "region": "eu"},
        "header": REDACTED,
        "fine": "plain",
    }


def test_json_text_is_redacted_to_canonical_json() -> None:
    text = json.dumps(NESTED)
    shown = json.loads(redact_arguments_json(configure, text))
    assert shown == redact_arguments(configure, NESTED)
    assert redact_arguments_json(None, "{not json") == json.dumps(REDACTED)
    assert redact_arguments_json(None, "[1, 2]") == json.dumps(REDACTED)
    assert redact_arguments_json(None, "  ") == "{}"
    # Redacting twice changes nothing (records written redacted are shown redacted again).
    once = redact_arguments_json(configure_listed, text)
    assert redact_arguments_json(configure_listed, once) == once


async def test_the_audit_log_on_sqlite_keeps_no_nested_secret(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    await store.open()
    try:
        runner = ToolRunner(Toolbox([configure, configure_listed]), audit=store)
        assert (await runner.exec(call("configure", NESTED))).success
        assert (await runner.exec(call("configure_listed", NESTED))).success
        records = await store.list_audit(AuditQuery())
    finally:
        await store.aclose()
    assert {r.tool for r in records} == {"configure", "configure_listed"}
    assert all(r.arguments_hash.startswith("sha256:") for r in records)
    text = json.dumps([r.arguments for r in records])
    assert not any(s in text for s in SECRETS)
    listed = next(r for r in records if r.tool == "configure_listed")
    assert listed.arguments is not None
    assert listed.arguments["settings"]["region"] == "eu"
