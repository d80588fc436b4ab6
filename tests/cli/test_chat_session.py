"""The interactive chat with injected input and a captured console."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import sample_tools
from rich.console import Console

from toolwire import (
    Agent,
    AssistantMessage,
    Model,
    OfflineModel,
    ScriptedModel,
    ToolCall,
    ToolMessage,
)
from toolwire.cli.chat_cmd import ChatSession, console_approver


class Typist:
    """Answers prompts from a script and records them, like a person at the keyboard."""

    def __init__(self, lines: list[str]) -> None:
        self.lines: Iterator[str] = iter(lines)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        try:
            return next(self.lines)
        except StopIteration:
            raise EOFError from None


def session(model: Model, typist: Typist) -> tuple[ChatSession, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False)
    tools = [sample_tools.delete_note, sample_tools.list_notes, sample_tools.add]
    agent = Agent(model, tools, approver=console_approver(console, typist))
    return ChatSession(agent, console, typist), out


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "groceries.txt").write_text("eggs")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "notes"


def test_no_is_a_denied_result_and_yes_runs_it(notes: Path) -> None:
    typist = Typist(
        [
            "delete the note 'groceries'",
            "n",
            "delete the note 'groceries'",
            "y",
            "/exit",
        ]
    )
    chat, out = session(OfflineModel(), typist)
    chat.repl()

    confirm = [p for p in typist.prompts if p.endswith("[y/N] ")]
    assert confirm == ['Run destructive tool delete_note(title="groceries")? [y/N] '] * 2
    text = out.getvalue()
    assert "✗ delete_note failed, denied" in text
    assert "✓ delete_note: Deleted the note 'groceries'." in text
    assert not (notes / "groceries.txt").exists()
    denied = [m for m in chat.messages if isinstance(m, ToolMessage) and m.is_error]
    assert len(denied) == 1
    assert '"denied"' in denied[0].content


def test_anything_but_yes_is_no(notes: Path) -> None:
    typist = Typist(["delete the note 'groceries'", "sure"])
    chat, out = session(OfflineModel(), typist)
    chat.repl()  # ends at end of input
    assert "denied" in out.getvalue()
    assert (notes / "groceries.txt").exists()


def test_end_of_input_at_the_question_is_no(notes: Path) -> None:
    typist = Typist(["delete the note 'groceries'"])
    chat, out = session(OfflineModel(), typist)
    chat.repl()
    assert "treated as no" in out.getvalue()
    assert (notes / "groceries.txt").exists()


def test_the_conversation_is_kept_between_messages() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                tool_calls=(ToolCall(id="a1", name="add", arguments='{"a": 1, "b": 2}'),)
            ),
            "3",
            "You asked me to add 1 and 2.",
        ]
    )
    typist = Typist(["add 1 and 2", "", "what did I ask?", "/exit", "never read"])
    chat, out = session(model, typist)
    chat.repl()

    assert [r.messages[-1].role for r in model.requests] == ["user", "tool", "user"]
    assert [m.role for m in model.requests[2].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert typist.prompts.count("you> ") == 4  # the empty line asks again; /exit stops
    assert "You asked me to add 1 and 2." in out.getvalue()
    model.assert_complete()


def test_reset_starts_a_new_conversation() -> None:
    model = ScriptedModel(["one", "two"])
    typist = Typist(["first", "/reset", "second"])
    chat, out = session(model, typist)
    chat.repl()
    assert [m.role for m in model.requests[1].messages] == ["user"]
    assert "conversation cleared" in out.getvalue()


def test_a_model_error_keeps_the_session_going() -> None:
    model = ScriptedModel(["fine"])  # the second message finds the script exhausted
    typist = Typist(["one", "two", "/exit"])
    chat, out = session(model, typist)
    chat.repl()
    text = out.getvalue()
    assert "Error: ScriptedModel" in text
    assert typist.prompts.count("you> ") == 3
    assert [m.role for m in chat.messages] == ["user", "assistant"]


def test_commands_are_handled_locally_and_never_sent_to_the_model() -> None:
    model = ScriptedModel(["an answer"])
    typist = Typist(["/help", "/tools", "/frobnicate now", "//etc is a folder", "/exit"])
    chat, out = session(model, typist)
    chat.repl()

    text = out.getvalue()
    for command in ("/help", "/tools", "/reset", "/exit"):
        assert command in text
    # /tools lists what the model may call, with a destructive tool marked.
    assert "delete_note [destructive]" in text
    assert "list_notes" in text
    assert "Unknown command /frobnicate" in text
    # Only the escaped line reached the model, with one slash removed.
    [request] = model.requests
    assert request.messages[-1].content == "/etc is a folder"
    model.assert_complete()


def test_an_unknown_command_leaves_the_conversation_unchanged() -> None:
    model = ScriptedModel(["first answer", "second answer"])
    typist = Typist(["hello", "/what", "again"])
    chat, out = session(model, typist)
    chat.repl()
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "user"]
    assert "Unknown command /what" in out.getvalue()
