"""The README's Python examples run as written."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


GATEWAY_URL = "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(code: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    if GATEWAY_URL in code:
        # The gateway examples talk to `toolwire serve` with its defaults: serve exactly
        # that app, on a free port instead of 8000.
        with _default_gateway() as url:
            script.write_text(code.replace(GATEWAY_URL, url))
            done = subprocess.run(
                [sys.executable, str(script)],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=tmp_path,
            )
        assert done.returncode == 0, done.stderr
        assert "Lisbon" in done.stdout
        return
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def _default_gateway() -> Iterator[str]:
    sys.path.insert(0, str(Path(__file__).parent / "server"))
    try:
        from live import LiveServer
    finally:
        sys.path.pop(0)
    from toolwire.cli.serve_cmd import default_config
    from toolwire.server import create_app

    with LiveServer(create_app(default_config())) as server:
        yield f"{server.url}/v1"


def test_readme_agent_example_prints_its_answer(tmp_path: Path) -> None:
    code = next(b for b in BLOCKS if "asyncio.run(main())" in b)
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.stdout.strip() == "completed 2 + 3 = 5"
