"""`toolwire.__all__` is the documented public surface; keep it honest."""

from __future__ import annotations

import inspect

import toolwire
import toolwire.agent.events
import toolwire.models.base
import toolwire.models.events
import toolwire.parsing
import toolwire.runner
import toolwire.tools.errors

# The names DESIGN.md promises at the top level (its "Public contracts" section).
DOCUMENTED = {
    "tool",
    "Tool",
    "ToolParameter",
    "ToolCall",
    "ToolResult",
    "ToolContext",
    "ToolProvider",
    "ToolProviderProtocol",
    "Toolbox",
    "MockTools",
    "ToolNotFoundError",
    "ToolParameterError",
    "ToolExecutionError",
    "ToolError",
    "ToolRunner",
    "Policy",
    "Agent",
    "RunResult",
    "TextDelta",
    "ReasoningDelta",
    "ToolCallStart",
    "ToolCallResult",
    "ApprovalRequired",
    "Done",
    "OpenAIChatModel",
    "AnthropicModel",
    "PromptedModel",
    "OfflineModel",
    "ScriptedModel",
}


def test_all_names_are_importable_and_unique() -> None:
    assert len(toolwire.__all__) == len(set(toolwire.__all__))
    for name in toolwire.__all__:
        assert getattr(toolwire, name, None) is not None, name


def test_documented_names_are_exported() -> None:
    assert DOCUMENTED - set(toolwire.__all__) == set()


def test_every_exported_name_is_documented() -> None:
    for name in toolwire.__all__:
        obj = getattr(toolwire, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"toolwire.{name} has no docstring"


def test_public_classes_are_not_left_out() -> None:
    """Every exception, and every agent event, defined in the package is exported."""
    exported = {getattr(toolwire, n) for n in toolwire.__all__}
    for module in (toolwire.tools.errors, toolwire.models.base):
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Exception)
                and obj.__module__ == module.__name__
            ):
                assert obj in exported, f"{module.__name__}.{name} is not in toolwire.__all__"
    for name in toolwire.agent.events.__all__:
        assert getattr(toolwire.agent.events, name) in exported or name == "AgentEvent", name
    assert "AgentEvent" in toolwire.__all__


def test_no_private_names_leak() -> None:
    assert all(not n.startswith("_") or n == "__version__" for n in toolwire.__all__)


def test_one_name_means_one_thing_across_the_runtime_layers() -> None:
    """A name exported by two of `toolwire`, `toolwire.agent`, `toolwire.models`,
    `toolwire.runner` and `toolwire.tools` is the same object in both (issue 24: the model
    stream's events are `Model...`, not a second `ReasoningDelta` / `ToolCallStart`)."""
    seen: dict[str, object] = {}
    for module in (toolwire, toolwire.agent, toolwire.models, toolwire.runner, toolwire.tools):
        for name in module.__all__:
            obj = getattr(module, name)
            assert seen.setdefault(name, obj) is obj, f"{module.__name__}.{name} differs"


def test_model_stream_events_are_the_models_own() -> None:
    parser_events = {getattr(toolwire.parsing, n) for n in toolwire.parsing.__all__}
    for name in toolwire.models.events.__all__:
        obj = getattr(toolwire.models, name)
        assert obj is getattr(toolwire.models.events, name)
        assert obj not in parser_events, name
