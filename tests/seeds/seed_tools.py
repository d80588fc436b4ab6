"""Server ("native") tools of the seed tests, loaded by dotted name (`seed_tools`)."""

from __future__ import annotations

from toolwire import tool

SEARCHES: list[str] = []


@tool
def web_search(query: str) -> dict[str, list[dict[str, str]]]:
    """Search the web.

    Args:
        query: What to search for.
    """
    SEARCHES.append(query)
    return {"results": [{"title": f"News about {query}", "url": "https://example.org/1"}]}
