"""The server tool of the end-to-end agent loop (loaded by the gateway from this path)."""

from __future__ import annotations

from toolwire import tool


@tool
def get_weather(city: str) -> dict[str, object]:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    return {"city": city, "temperature": 21, "sky": "sunny"}
