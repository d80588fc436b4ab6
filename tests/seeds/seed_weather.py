"""The provider-protocol seed's `WeatherToolProvider` (002, "Implementation Example"):
the same class, methods, arguments and results, in this project's style (builtin generics).

It is written exactly as a seed user would: `execute_tool(tool_name, parameters)` takes no
context, `ToolParameter`s are declared by name, results carry no call id. The gateway tests
load it by factory (`seed_weather:WeatherToolProvider`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from toolwire import Tool, ToolParameter, ToolResult


class WeatherToolProvider:
    """Example tool provider for weather information"""

    def __init__(self, config: dict[str, Any]) -> None:
        self.api_key = config.get("api_key")
        self.base_url = config.get("base_url", "https://api.weather.com")

    async def list_tools(self) -> list[Tool]:
        """Return available weather tools"""
        return [
            Tool(
                name="get_current_weather",
                description="Get current weather conditions for a city",
                parameters={
                    "city": ToolParameter(type="string", description="City name", required=True),
                    "units": ToolParameter(
                        type="string",
                        description="Temperature units",
                        required=False,
                        default="celsius",
                        enum=["celsius", "fahrenheit", "kelvin"],
                    ),
                },
            ),
            Tool(
                name="get_weather_forecast",
                description="Get weather forecast for multiple days",
                parameters={
                    "city": ToolParameter(type="string", description="City name", required=True),
                    "days": ToolParameter(
                        type="integer",
                        description="Number of days to forecast",
                        required=False,
                        default=5,
                    ),
                },
            ),
        ]

    async def execute_tool(self, tool_name: str, parameters: dict[str, Any]) -> ToolResult:
        """Execute a weather tool"""
        try:
            if tool_name == "get_current_weather":
                return await self._get_current_weather(parameters)
            elif tool_name == "get_weather_forecast":  # noqa: RET505 -- as the seed writes it
                return await self._get_weather_forecast(parameters)
            else:
                return ToolResult(success=False, error=f"Unknown tool: {tool_name}")
        except Exception as e:
            return ToolResult(success=False, error=f"Tool execution failed: {e!s}")

    async def _get_current_weather(self, parameters: dict[str, Any]) -> ToolResult:
        """Get current weather for a city"""
        city = parameters.get("city")
        units = parameters.get("units", "celsius")
        if not city:
            return ToolResult(success=False, error="City parameter is required")
        await asyncio.sleep(0.1)  # Simulate network delay
        weather_data = {
            "city": city,
            "temperature": 22.5 if units == "celsius" else 72.5,
            "units": units,
            "humidity": 65,
            "conditions": "partly cloudy",
            "wind_speed": 10,
        }
        return ToolResult(success=True, result=weather_data)

    async def _get_weather_forecast(self, parameters: dict[str, Any]) -> ToolResult:
        """Get weather forecast for a city"""
        city = parameters.get("city")
        days = parameters.get("days", 5)
        if not city:
            return ToolResult(success=False, error="City parameter is required")
        await asyncio.sleep(0.2)
        forecast = {
            "city": city,
            "forecast": [
                {
                    "date": f"2024-01-{i + 1:02d}",
                    "high": 25 + i,
                    "low": 15 + i,
                    "conditions": "sunny" if i % 2 == 0 else "cloudy",
                }
                for i in range(days)
            ],
        }
        return ToolResult(success=True, result=forecast)


def make_provider() -> WeatherToolProvider:
    """A factory that takes no config (the gateway calls it with no arguments)."""
    return WeatherToolProvider({})


CONFIGS: list[dict[str, Any]] = []
"""The config each `recording_factory` call received."""


def recording_factory(config: dict[str, Any]) -> WeatherToolProvider:
    """A factory function (not the class) that records the config it was given."""
    CONFIGS.append(config)
    return WeatherToolProvider(config)
