"""The server tool of the hot-path benchmarks (`bench_hot_path.py`,
`bench_app_instructions.py`): async, so no thread hop, and a read tool (no `started`
audit record)."""

from toolwire import tool


@tool
async def lookup(key: str) -> dict[str, str]:
    """Look a key up."""
    return {"key": key, "value": key.upper()}
