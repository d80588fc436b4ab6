"""Fixtures of the end-to-end suite: real model servers, `toolwire serve` in front of them.

The engines and the model are built once per machine by `scripts/e2e_engines.py` (cached
in `~/.cache/toolwire-e2e`). With `CI=true` a missing engine is built here, never
skipped; otherwise the suite is skipped with the command that builds them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_processes import (
    EngineProcess,
    Engines,
    GatewayProcess,
    find_engines,
    llama_cpp_python_server,
    llama_server,
    upstream,
)
from engine_support import Target

TOOLS_MODULE = str(Path(__file__).with_name("e2e_tools.py"))

_skips: list[str] = []


@pytest.fixture(scope="session")
def engines() -> tuple[Engines, list[str], str]:
    """The engines' paths, what is missing, and how to build it."""
    return find_engines(build=os.environ.get("CI", "").lower() == "true")


def _require(engines: tuple[Engines, list[str], str], *items: str) -> Engines:
    paths, missing, advice = engines
    absent = [item for item in items if item in missing]
    if not absent:
        return paths
    reason = f"real model servers not built ({', '.join(absent)}): {advice}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI=true builds them, and the build did not", pytrace=False)
    if reason not in _skips:
        _skips.append(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llama_cpp(engines: tuple[Engines, list[str], str]) -> Iterator[EngineProcess]:
    """llama.cpp's `llama-server` (one slot, Hermes template)."""
    server = llama_server(_require(engines, "model", "llama_server"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_cpp_python(engines: tuple[Engines, list[str], str]) -> Iterator[EngineProcess]:
    """llama-cpp-python's server (`smollm2-fc`: chatml-function-calling; `smollm2-chatml`)."""
    server = llama_cpp_python_server(_require(engines, "model", "llama_cpp_python"))
    yield server
    server.stop()


LLAMA_CPP_MODELS = {"plain": "smollm2", "prompted": "smollm2"}
LLAMA_CPP_PYTHON_MODELS = {
    "plain": "smollm2-chatml",
    "prompted": "smollm2-chatml",
    "parse": "smollm2-chatml",
    "native": "smollm2-fc",
}
_MODES = {"prompted": "prompted:hermes", "parse": "parse:hermes"}


def _routes(models: dict[str, str]) -> dict[str, object]:
    return {
        public: {"model": name, "tool_calls": _MODES.get(public, "native")}
        for public, name in models.items()
    }


@pytest.fixture(scope="session")
def llama_cpp_target(llama_cpp: EngineProcess) -> Iterator[Target]:
    config = {"upstream": upstream(llama_cpp, _routes(LLAMA_CPP_MODELS), engine="llama.cpp")}
    gateway = GatewayProcess(config)
    yield Target("llama.cpp", llama_cpp, gateway, LLAMA_CPP_MODELS)
    gateway.stop()


@pytest.fixture(scope="session")
def llama_cpp_python_target(llama_cpp_python: EngineProcess) -> Iterator[Target]:
    routes = _routes(LLAMA_CPP_PYTHON_MODELS)
    config = {"upstream": upstream(llama_cpp_python, routes, engine="llama-cpp-python")}
    gateway = GatewayProcess(config)
    yield Target("llama-cpp-python", llama_cpp_python, gateway, LLAMA_CPP_PYTHON_MODELS)
    gateway.stop()


@pytest.fixture(params=["llama.cpp", "llama-cpp-python"])
def target(request: pytest.FixtureRequest) -> Target:
    """Each engine in turn, behind its gateway."""
    name = "llama_cpp_target" if request.param == "llama.cpp" else "llama_cpp_python_target"
    found: Target = request.getfixturevalue(name)
    return found


@pytest.fixture(scope="session")
def agent_target(llama_cpp: EngineProcess) -> Iterator[Target]:
    """llama-server behind a gateway with a server tool (`get_weather`), two turns at most."""
    config = {
        "upstream": upstream(llama_cpp, _routes(LLAMA_CPP_MODELS), engine="llama.cpp"),
        "server_tools": {"modules": [TOOLS_MODULE]},
        "limits": {"max_iterations": 2},
    }
    gateway = GatewayProcess(config)
    yield Target("llama.cpp", llama_cpp, gateway, LLAMA_CPP_MODELS)
    gateway.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for reason in _skips:
        terminalreporter.write_line(f"End-to-end tests skipped: {reason}", yellow=True)
