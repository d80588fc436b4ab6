"""`Toolbox`: building, listing, executing, duplicate names, module loading."""

import dataclasses
import datetime
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolwire.tools import (
    MockTools,
    Tool,
    Toolbox,
    ToolContext,
    ToolDefinitionError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolParameter,
    ToolParameterError,
    ToolProvider,
    ToolResult,
    tool,
)


class Item(BaseModel):
    name: str
    added: datetime.datetime


@dataclasses.dataclass
class Box:
    items: list[Item]
    tags: set[str]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def shout(text: str) -> str:
    """Shout it."""
    return text.upper()


def ctx() -> ToolContext:
    return ToolContext()


class RemoteTools:
    """A provider that only lists its tools asynchronously, like an HTTP or MCP one."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.executed: list[str] = []

    async def list_tools(self) -> list[Tool]:
        return [Tool(name=n, description=f"remote {n}") for n in self.names]

    async def execute_tool(
        self, name: str, arguments: dict[str, Any], ctx: ToolContext
    ) -> ToolResult:
        self.executed.append(name)
        return ToolResult.ok("", name, {"remote": name, **arguments})


async def test_functions_decorated_and_plain_are_tools() -> None:
    box = Toolbox([add, shout])
    assert isinstance(box, ToolProvider)
    assert [t.name for t in await box.list_tools()] == ["add", "shout"]
    assert box.get("shout").description == "Shout it."
    assert "add" in box
    assert len(box) == 2
    assert [t.name for t in box] == ["add", "shout"]
    result = await box.execute_tool("add", {"a": 2, "b": 3}, ctx())
    assert result == ToolResult(
        call_id="", name="add", success=True, result=5, duration_ms=result.duration_ms
    )
    assert (await box.execute_tool("shout", {"text": "hey"}, ctx())).result == "HEY"


async def test_return_values_become_json_able() -> None:
    when = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)

    @tool
    def pack() -> Box:
        return Box(items=[Item(name="a", added=when)], tags={"x"})

    @tool
    def ident() -> uuid.UUID:
        return uuid.UUID(int=1)

    box = Toolbox([pack, ident])
    packed = await box.execute_tool("pack", {}, ctx())
    assert packed.result == {
        "items": [{"name": "a", "added": "2024-05-01T12:30:00Z"}],
        "tags": ["x"],
    }
    assert (await box.execute_tool("ident", {}, ctx())).result == str(uuid.UUID(int=1))


async def test_non_serialisable_return_names_the_type() -> None:
    class Opaque:
        pass

    @tool
    def leak() -> dict[str, Any]:
        return {"ok": 1, "inner": [Opaque()]}

    with pytest.raises(ToolExecutionError) as exc:
        await Toolbox([leak]).execute_tool("leak", {}, ctx())
    assert str(exc.value) == (
        "Tool 'leak' returned a value of type "
        "'test_non_serialisable_return_names_the_type.<locals>.Opaque' "
        "that is not JSON-serialisable."
    )


async def test_unknown_tool_lists_available_names() -> None:
    with pytest.raises(ToolNotFoundError) as exc:
        await Toolbox([add, shout]).execute_tool("ad", {}, ctx())
    assert str(exc.value) == "Unknown tool 'ad'. Available tools: 'add', 'shout'."
    with pytest.raises(ToolNotFoundError):
        Toolbox([add]).get("nope")


async def test_invalid_arguments_raise_parameter_errors() -> None:
    with pytest.raises(ToolParameterError, match="'b': missing required argument"):
        await Toolbox([add]).execute_tool("add", {"a": 1}, ctx())


async def test_exceptions_from_tools_propagate_for_the_runner() -> None:
    @tool
    def broken() -> None:
        raise RuntimeError("database password is hunter2")

    with pytest.raises(RuntimeError):
        await Toolbox([broken]).execute_tool("broken", {}, ctx())


def test_duplicate_names_name_both_sources() -> None:
    def add(x: int) -> int:  # same name as the module-level tool
        return x

    with pytest.raises(ToolDefinitionError) as exc:
        Toolbox([globals()["add"], add])
    message = str(exc.value)
    assert message.startswith("Duplicate tool name 'add': defined by function ")
    assert "test_toolbox.add and by function " in message
    assert "test_duplicate_names_name_both_sources.<locals>.add" in message
    assert "Rename one of them" in message


def test_duplicates_across_tools_and_static_providers() -> None:
    with pytest.raises(
        ToolDefinitionError, match=r"'add': defined by .* and by provider MockTools"
    ):
        Toolbox([add, MockTools({"add": 1})])
    with pytest.raises(ToolDefinitionError, match="'x': defined by Tool 'x' and by Tool 'x'"):
        Toolbox([Tool(name="x"), Tool(name="x")])
    with pytest.raises(ToolDefinitionError, match=r"'add': defined by .* and by provider Toolbox"):
        Toolbox([add, Toolbox([add])])


async def test_duplicates_with_remote_providers_are_found_when_listed() -> None:
    box = Toolbox([add, RemoteTools(["add"])])
    with pytest.raises(
        ToolDefinitionError, match=r"'add': defined by .* and by provider RemoteTools"
    ):
        await box.list_tools()


async def test_nested_providers_are_delegated_to() -> None:
    mock = MockTools({"lookup": {"hit": True}})
    remote = RemoteTools(["search"])
    box = Toolbox([add, Toolbox([shout]), mock, remote])
    # Statically known tools are available synchronously; remote ones when listed.
    assert [t.name for t in box.tools] == ["add", "shout", "lookup"]
    assert [t.name for t in await box.list_tools()] == ["add", "shout", "lookup", "search"]
    assert (await box.execute_tool("lookup", {"q": 1}, ctx())).result == {"hit": True}
    mock.assert_called_with("lookup", q=1)
    assert (await box.execute_tool("search", {"q": "x"}, ctx())).result == {
        "remote": "search",
        "q": "x",
    }
    assert (await box.execute_tool("shout", {"text": "a"}, ctx())).result == "A"


async def test_remote_tools_are_found_without_listing_first() -> None:
    remote = RemoteTools(["search"])
    box = Toolbox([remote])
    assert (await box.execute_tool("search", {}, ctx())).success
    assert remote.executed == ["search"]
    with pytest.raises(ToolNotFoundError, match="Available tools: 'search'"):
        await box.execute_tool("other", {}, ctx())


async def test_tool_parameter_based_tools() -> None:
    calls: list[dict[str, Any]] = []

    def handler(**arguments: Any) -> dict[str, Any]:
        calls.append(arguments)
        return {"ok": True}

    send = Tool.from_parameters(
        "send_email",
        "Send an email.",
        [
            ToolParameter(name="to", type="string", description="Recipient", required=True),
            ToolParameter(
                name="priority", type="string", enum=["low", "high"], required=False, default="low"
            ),
            ToolParameter(name="cc", type="array", items={"type": "string"}, required=False),
        ],
        handler=handler,
        effects="write",
    )
    assert send.input_schema == {
        "type": "object",
        "properties": {
            "to": {"type": "string", "description": "Recipient"},
            "priority": {"type": "string", "enum": ["low", "high"], "default": "low"},
            "cc": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["to"],
    }
    assert send.to_openai()["function"]["parameters"] == send.input_schema
    box = Toolbox([send])
    result = await box.execute_tool("send_email", {"to": "a@b"}, ctx())
    assert result.result == {"ok": True}
    assert calls == [{"to": "a@b", "priority": "low", "cc": None}]


async def test_definition_only_tools_cannot_run() -> None:
    box = Toolbox([Tool(name="client_side")])
    with pytest.raises(ToolExecutionError, match="has no implementation in this process"):
        await box.execute_tool("client_side", {}, ctx())


def test_bad_items_are_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match="not int"):
        Toolbox([42])  # type: ignore[list-item]


def test_plain_functions_with_bad_signatures_fail_at_build_time() -> None:
    def bad(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(ToolDefinitionError, match="parameter 'x' has no type annotation"):
        Toolbox([bad])


# --- from_module ----------------------------------------------------------------------


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return tmp_path


def write_module(directory: Path, source: str) -> str:
    name = f"user_tools_{uuid.uuid4().hex[:8]}"
    (directory / f"{name}.py").write_text(textwrap.dedent(source))
    return name


async def test_from_module_collects_module_level_tools(module_dir: Path) -> None:
    name = write_module(
        module_dir,
        """
        from __future__ import annotations

        from pydantic import BaseModel
        from toolwire.tools import tool


        class Greeting(BaseModel):
            text: str


        @tool
        def greet(name: str) -> Greeting:
            '''Greet someone.

            Args:
                name: Who to greet.
            '''
            return Greeting(text=f"Hello, {name}!")


        @tool(effects="write")
        async def save(note: str) -> bool:
            return True


        def helper() -> None:
            '''Not a tool.'''
        """,
    )
    box = Toolbox.from_module(name)
    assert [t.name for t in box.tools] == ["greet", "save"]
    assert box.get("greet").input_schema["properties"]["name"]["description"] == "Who to greet."
    assert box.get("greet").result_fields == ("text",)
    assert (await box.execute_tool("greet", {"name": "Ana"}, ctx())).result == {
        "text": "Hello, Ana!"
    }


def test_from_module_missing_module_is_one_line() -> None:
    with pytest.raises(ToolDefinitionError) as exc:
        Toolbox.from_module("myapp_does_not_exist.tools")
    assert str(exc.value) == (
        "Could not import tool module 'myapp_does_not_exist.tools': "
        "ModuleNotFoundError: No module named 'myapp_does_not_exist'"
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("raise RuntimeError('config missing')\n", "RuntimeError: config missing"),
        ("def broken(:\n", "SyntaxError: "),
        ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    ],
)
def test_from_module_import_errors_name_module_and_error(
    module_dir: Path, source: str, expected: str
) -> None:
    name = write_module(module_dir, source)
    with pytest.raises(ToolDefinitionError) as exc:
        Toolbox.from_module(name)
    message = str(exc.value)
    assert message.startswith(f"Could not import tool module {name!r}: {expected}")
    assert "\n" not in message
    assert "Traceback" not in message


def test_from_module_with_a_bad_tool_keeps_the_details(module_dir: Path) -> None:
    name = write_module(
        module_dir, "from toolwire.tools import tool\n@tool\ndef f(x):\n    return x\n"
    )
    with pytest.raises(ToolDefinitionError) as exc:
        Toolbox.from_module(name)
    assert str(exc.value).splitlines() == [
        f"Could not import tool module {name!r}: Cannot make a tool from function {name}.f:",
        "  - parameter 'x' has no type annotation; add one, e.g. `x: str`",
    ]


def test_from_module_without_tools(module_dir: Path) -> None:
    name = write_module(module_dir, "X = 1\n")
    with pytest.raises(ToolDefinitionError, match="defines no tools; decorate its functions"):
        Toolbox.from_module(name)


def test_from_module_file_path(tmp_path: Path) -> None:
    path = tmp_path / "my_tools.py"
    path.write_text(
        "from toolwire.tools import tool\n\n@tool\ndef ping() -> str:\n    return 'pong'\n"
    )
    assert [t.name for t in Toolbox.from_module(str(path)).tools] == ["ping"]
    with pytest.raises(ToolDefinitionError, match="FileNotFoundError"):
        Toolbox.from_module(str(tmp_path / "missing.py"))


def test_from_module_searches_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "cwdapp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text(
        "from toolwire.tools import tool\n\n@tool\ndef here() -> str:\n    return 'yes'\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert [t.name for t in Toolbox.from_module("cwdapp.tools").tools] == ["here"]
