"""Redaction: only allowed result fields reach the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel
from runner_support import RaisingProvider, call

from toolwire.runner import Policy, ToolRunner
from toolwire.tools import Tool, Toolbox, ToolResult, tool


class User(BaseModel):
    name: str
    email: str


class Row(TypedDict):
    id: int
    title: str


@dataclass
class Point:
    x: int
    y: int


@tool(allow=["name", "plan"])
def account() -> dict[str, Any]:
    """An account with a secret field."""
    return {"name": "Ana", "plan": "pro", "api_key": "sk-secret", "ssn": "123"}


@tool(allow=["id"])
def rows() -> list[dict[str, Any]]:
    """A list of rows with secret fields."""
    return [{"id": 1, "token": "t1"}, {"id": 2, "token": "t2"}, "note"]  # type: ignore[list-item]


@tool
def user() -> User:
    """A typed result; its declared fields are the allowlist."""
    return User(name="Ana", email="ana@example.com")


@tool
def raw_user() -> dict[str, Any]:
    """An untyped dict with no allowlist."""
    return {"name": "Ana", "password": "hunter2"}


@tool
def typed_row() -> Row:
    """A TypedDict result; extra keys returned at runtime are dropped."""
    return {"id": 1, "title": "t", "internal": "x"}  # type: ignore[typeddict-unknown-key]


@tool
def point() -> Point:
    """A dataclass result."""
    return Point(x=1, y=2)


@tool
def text() -> str:
    """A scalar result."""
    return "plain"


ALL = [account, rows, user, raw_user, typed_row, point, text]


@pytest.fixture
def runner() -> ToolRunner:
    return ToolRunner(Toolbox(ALL))


@pytest.fixture
def strict() -> ToolRunner:
    return ToolRunner(Toolbox(ALL), policy=Policy(require_allowlist=True))


async def test_allow_keeps_only_listed_fields(runner: ToolRunner) -> None:
    result = await runner.exec(call("account"))
    assert result.result == {"name": "Ana", "plan": "pro"}
    assert "sk-secret" not in result.to_model_text()


async def test_allow_applies_to_each_dict_in_a_list(runner: ToolRunner) -> None:
    result = await runner.exec(call("rows"))
    assert result.result == [{"id": 1}, {"id": 2}, "note"]


async def test_declared_result_fields_are_the_default_allowlist(strict: ToolRunner) -> None:
    assert (await strict.exec(call("user"))).result == {"name": "Ana", "email": "ana@example.com"}
    assert (await strict.exec(call("typed_row"))).result == {"id": 1, "title": "t"}
    assert (await strict.exec(call("point"))).result == {"x": 1, "y": 2}


async def test_untyped_dict_passes_through_by_default(runner: ToolRunner) -> None:
    result = await runner.exec(call("raw_user"))
    assert result.result == {"name": "Ana", "password": "hunter2"}


async def test_strict_mode_refuses_every_tool_without_an_allowlist(strict: ToolRunner) -> None:
    for name in ("raw_user", "text"):  # an untyped dict and plain text alike
        result = await strict.exec(call(name))
        assert result.error is not None, name
        assert result.error.code == "execution_error"
        assert f"Tool {name!r} cannot be used here: it declares no result allowlist" in (
            result.error.message
        )
        assert "hunter2" not in result.error.message
        assert "plain" not in result.error.message


async def test_strict_mode_does_not_run_a_tool_without_an_allowlist() -> None:
    ran: list[str] = []

    @tool(effects="write")
    def save(note: str) -> str:
        """Save a note."""
        ran.append(note)
        return "saved"

    strict = ToolRunner(Toolbox([save]), policy=Policy(require_allowlist=True))
    result = await strict.exec(call("save", {"note": "x"}))
    assert result.error is not None
    assert ran == []  # no side effect for a result nobody may see


async def test_an_allowlist_applies_to_every_result_shape() -> None:
    @tool(allow=["id"])
    def shapes() -> Any:
        """Nested lists, objects and text."""
        return [[{"id": 1, "secret": "s"}], {"id": 2, "secret": "s"}, "text", 3]

    @tool(allow=[])
    def words() -> str:
        """Text: nothing to filter, and allow=[] declares it reviewed."""
        return "plain words"

    strict = ToolRunner(Toolbox([shapes, words]), policy=Policy(require_allowlist=True))
    assert (await strict.exec(call("shapes"))).result == [[{"id": 1}], {"id": 2}, "text", 3]
    assert (await strict.exec(call("words"))).result == "plain words"


async def test_models_returned_by_a_provider_are_redacted() -> None:
    t = Tool(name="who", result_fields=("name",))
    provider = RaisingProvider([t], returns=ToolResult.ok("", "who", [User(name="A", email="e")]))
    result = await ToolRunner(provider).exec(call("who"))
    assert result.result == [{"name": "A"}]
