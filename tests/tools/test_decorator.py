"""`@tool`: options, sync/async execution, context injection, wire forms."""

import asyncio
import dataclasses
import threading
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from toolwire.tools import (
    FunctionTool,
    Tool,
    ToolContext,
    ToolDefinitionError,
    ToolParameterError,
    tool,
)


class Forecast(BaseModel):
    city: str
    temperature: float


@dataclasses.dataclass
class Account:
    id: str
    balance: float
    owner_email: str


@tool
def get_forecast(city: str, unit: Literal["c", "f"] = "c") -> Forecast:
    """Forecast for a city.

    Args:
        city: City name.
        unit: Unit.
    """
    return Forecast(city=city, temperature=20.0 if unit == "c" else 68.0)


@tool(
    name="delete_account",
    effects="destructive",
    timeout=2.5,
    scopes=["accounts:write"],
    allow=["id"],
)
async def remove(account_id: str, ctx: ToolContext) -> Account:
    """Delete an account."""
    return Account(id=account_id, balance=0.0, owner_email=f"{ctx.principal}@example.com")


def test_bare_decorator_builds_a_tool() -> None:
    assert isinstance(get_forecast, Tool)
    assert isinstance(get_forecast, FunctionTool)
    assert get_forecast.name == "get_forecast"
    assert get_forecast.description == "Forecast for a city."
    assert get_forecast.effects == "read"
    assert get_forecast.timeout is None
    assert get_forecast.scopes == ()
    assert get_forecast.allow is None
    assert get_forecast.result_fields == ("city", "temperature")
    assert get_forecast.allowed_fields == ("city", "temperature")
    assert get_forecast.input_schema["required"] == ["city"]


def test_options_are_applied() -> None:
    assert remove.name == "delete_account"
    assert remove.effects == "destructive"
    assert remove.timeout == 2.5
    assert remove.scopes == ("accounts:write",)
    assert remove.allow == ("id",)
    assert remove.result_fields == ("id", "balance", "owner_email")
    assert remove.allowed_fields == ("id",)
    assert "ctx" not in remove.input_schema["properties"]


def test_original_function_stays_reachable_and_callable() -> None:
    assert get_forecast.fn.__name__ == "get_forecast"
    assert get_forecast("Lisbon") == Forecast(city="Lisbon", temperature=20.0)
    assert get_forecast.schema.name == "get_forecast"


async def test_invoke_validates_converts_and_injects_context() -> None:
    ctx = ToolContext(principal="alice")
    account = await remove.invoke({"account_id": "a1"}, ctx)
    assert account == Account(id="a1", balance=0.0, owner_email="alice@example.com")
    with pytest.raises(ToolParameterError, match="'account_id': missing required argument"):
        await remove.invoke({}, ctx)


async def test_nested_arguments_arrive_as_instances() -> None:
    seen: list[Any] = []

    @tool
    def save(forecast: Forecast, accounts: list[Account]) -> bool:
        seen.extend([forecast, accounts])
        return True

    args = {
        "forecast": {"city": "Porto", "temperature": 18},
        "accounts": [{"id": "x", "balance": 1, "owner_email": "a@b"}],
    }
    assert await save.invoke(args, ToolContext()) is True
    assert seen == [
        Forecast(city="Porto", temperature=18.0),
        [Account(id="x", balance=1.0, owner_email="a@b")],
    ]


async def test_sync_tools_run_in_a_worker_thread_and_never_block_the_loop() -> None:
    release = threading.Event()
    loop_thread = threading.get_ident()

    @tool
    def blocking() -> dict[str, Any]:
        # If this ran on the event loop, the coroutine that sets the event could never run.
        released = release.wait(timeout=5)
        return {"released": released, "same_thread": threading.get_ident() == loop_thread}

    async def set_soon() -> None:
        await asyncio.sleep(0)
        release.set()

    result, _ = await asyncio.gather(blocking.invoke({}, ToolContext()), set_soon())
    assert result == {"released": True, "same_thread": False}


async def test_async_tools_run_on_the_loop() -> None:
    loop_thread = threading.get_ident()

    @tool
    async def where() -> bool:
        return threading.get_ident() == loop_thread

    assert await where.invoke({}, ToolContext()) is True


async def test_methods_and_callable_objects() -> None:
    class Service:
        def __init__(self) -> None:
            self.prefix = "hi "

        def greet(self, name: str) -> str:
            """Greet someone."""
            return self.prefix + name

    greet = tool(Service().greet)
    assert greet.name == "greet"
    assert list(greet.input_schema["properties"]) == ["name"]
    assert await greet.invoke({"name": "Ana"}, ToolContext()) == "hi Ana"


def test_redecorating_a_function_tool_uses_the_original_function() -> None:
    renamed = tool(name="forecast_v2")(get_forecast)
    assert renamed.name == "forecast_v2"
    assert renamed.fn is get_forecast.fn


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"allow": "id"}, r"allow=\['id'\], not a single string"),
        ({"scopes": "admin"}, "scopes=\\['admin'\\]"),
        ({"timeout": 0}, "timeout=0.*positive number of seconds"),
        ({"cache_ttl": -1}, "cache_ttl=-1.*positive"),
        ({"effects": "write", "cache_ttl": 5}, "cache_ttl is only allowed for read tools"),
        ({"effects": "dangerous"}, "effects must be 'read', 'write' or 'destructive'"),
        ({"name": "has space"}, "Tool name 'has space' is invalid"),
    ],
)
def test_bad_options_are_definition_errors(options: dict[str, Any], message: str) -> None:
    def f(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match=message):
        tool(**options)(f)


@pytest.mark.parametrize("name", ["get_weather", "v2.lookup-order", "météo", "天气", "x9"])
def test_tool_names_of_letters_digits_underscores_dashes_and_dots(name: str) -> None:
    assert Tool(name=name).name == name


def test_a_tool_name_may_be_a_str_subclass() -> None:
    class Name(str):
        pass

    assert Tool(name=Name("lookup")).name == "lookup"


@pytest.mark.parametrize(
    "name", ["", "has space", "tab\t", "line\n", "a/b", "ü!", "a:b", "½?", None, 7, b"raw"]
)
def test_other_tool_names_are_definition_errors(name: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="use letters, digits"):
        Tool(name=name)


def test_decorating_a_plain_tool_is_an_error() -> None:
    plain = Tool(name="plain")
    with pytest.raises(ToolDefinitionError, match="already a tool"):
        tool(plain)  # type: ignore[call-overload]


def test_wire_forms() -> None:
    openai = get_forecast.to_openai()
    assert openai == {
        "type": "function",
        "function": {
            "name": "get_forecast",
            "description": "Forecast for a city.",
            "parameters": get_forecast.input_schema,
        },
    }
    anthropic = get_forecast.to_anthropic()
    assert anthropic == {
        "name": "get_forecast",
        "description": "Forecast for a city.",
        "input_schema": get_forecast.input_schema,
    }
    assert anthropic["input_schema"]["type"] == "object"
    assert "title" not in anthropic["input_schema"]
