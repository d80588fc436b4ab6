"""The real `toolwire` command in a pseudo-terminal: the demo and the y/N confirmation."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pexpect
import pytest

TOOLWIRE = str(Path(sys.executable).parent / "toolwire")
HERE = Path(__file__).parent


def spawn(args: list[str], cwd: Path, term: str = "dumb") -> pexpect.spawn:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWIRE_")}
    env.update(TERM=term, COLUMNS="200", NO_COLOR="1")
    return pexpect.spawn(
        TOOLWIRE,
        args,
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(50, 200),
        preexec_fn=_as_in_a_terminal,
    )


def _as_in_a_terminal() -> None:
    """Ctrl-C as a terminal's foreground job gets it: a test run started in the background
    of a non-interactive shell (`cmd &`, as some CI scripts do) ignores SIGINT, its
    children inherit that, and Python then leaves it ignored, so Ctrl-C did nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(HERE / "sample_tools.py", tmp_path / "sample_tools.py")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "groceries.txt").write_text("eggs")
    return tmp_path


def test_chat_demo_in_a_terminal(tmp_path: Path) -> None:
    child = spawn(["chat", "What's the weather in Lisbon?"], tmp_path)
    child.expect("offline stand-in model")
    child.expect("TOOLWIRE_API_KEY")
    child.expect_exact('→ get_weather(city="Lisbon")')
    child.expect_exact("✓ get_weather:")
    child.expect("demo data")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in (child.before or "")


def test_interactive_confirmation(workdir: Path) -> None:
    child = spawn(["chat", "--tools", "sample_tools"], workdir)
    child.expect_exact("you> ")

    child.sendline("delete the note 'groceries'")
    child.expect_exact('Run destructive tool delete_note(title="groceries")? [y/N] ')
    child.sendline("n")
    child.expect_exact("✗ delete_note failed, denied")
    child.expect_exact("you> ")
    assert (workdir / "notes" / "groceries.txt").exists()

    child.sendline("delete the note 'groceries'")
    child.expect_exact("[y/N] ")
    child.sendline("y")
    child.expect_exact("✓ delete_note: Deleted the note 'groceries'.")
    child.expect_exact("you> ")
    assert not (workdir / "notes" / "groceries.txt").exists()

    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ctrl_d_leaves_the_conversation(workdir: Path) -> None:
    child = spawn(["chat"], workdir)
    child.expect_exact("you> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ctrl_c_at_the_prompt_leaves_cleanly(workdir: Path) -> None:
    child = spawn(["chat", "--tools", "sample_tools"], workdir)
    child.expect_exact("you> ")
    child.sendline("/tools")
    child.expect_exact("list_notes")
    child.expect_exact("you> ")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in (child.before or "")


def test_a_slow_tool_shows_progress_until_its_result(workdir: Path) -> None:
    child = spawn(
        ["tools", "call", "slow_report", "--tools", "sample_tools", "--no-audit"],
        workdir,
        term="xterm-256color",
    )
    child.expect_exact("running slow_report…")
    child.expect_exact("succeeded")
    child.expect_exact("report ready")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_chat_shows_progress_while_a_tool_runs(workdir: Path) -> None:
    child = spawn(["chat", "--tools", "sample_tools", "build the slow report"], workdir, "xterm")
    child.expect_exact("running slow_report…")
    child.expect_exact("✓ slow_report: report ready")
    child.expect_exact("From slow_report: report ready.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
