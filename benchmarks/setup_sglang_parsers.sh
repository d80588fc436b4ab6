#!/usr/bin/env bash
# Install SGLang's tool-call parsers for bench_parsing.py's side-by-side table.
#
# Run from anywhere: `bash benchmarks/setup_sglang_parsers.sh`. The parsers come from
# `llm-router-utils` (SGLang's function_call package extracted, with its serving-layer
# FunctionCallParser). Its declared dependencies pin openai, transformers and xgrammar
# versions that would clash with toolwire's, and the parsers need none of them, so it
# goes in with --no-deps into benchmarks/.sglang-parsers (ignored by git), which
# bench_parsing.py puts on sys.path; what the parsers import (pydantic, orjson,
# partial-json-parser) comes from toolwire's own environment ("[dev,bench]" extras).
# Pass a version to pin it, e.g. `bash benchmarks/setup_sglang_parsers.sh 0.8.1`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="$here/.sglang-parsers"
python="${PYTHON:-$here/../.venv/bin/python}"
version="${1:-0.8.1}"

rm -rf "$target"
"$python" -m pip install --quiet --no-deps --target "$target" "llm-router-utils==$version"
PYTHONPATH="$target" "$python" -c '
from llm_router_utils.sglang.srt.function_call.function_call_parser import FunctionCallParser
print("SGLang parsers (llm-router-utils '"$version"') installed in '"$target"'")
'
