#!/usr/bin/env bash
# Install the LiteLLM proxy into its own virtualenv for bench_gateway.py.
#
# Run from anywhere: `bash benchmarks/setup_litellm.sh`. LiteLLM has a large dependency
# tree that would clash with toolwire's, so it lives in benchmarks/.venv-litellm (ignored
# by git) and bench_gateway.py starts it from there as a separate process.
# Pass a version to pin it, e.g. `bash benchmarks/setup_litellm.sh 1.76.0`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-litellm"
python="${PYTHON:-python3}"
spec="litellm[proxy]"
if [[ $# -ge 1 ]]; then
    spec="litellm[proxy]==$1"
fi

if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "$spec"
"$venv/bin/python" -c 'import importlib.metadata as m; print("litellm", m.version("litellm"), "installed in '"$venv"'")'
test -x "$venv/bin/litellm" || { echo "the litellm command is missing from $venv/bin" >&2; exit 1; }
