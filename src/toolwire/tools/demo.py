"""Built-in demo tools for `toolwire chat`: a real clock, fake weather, a safe calculator.

`get_weather` returns made-up, deterministic data and says so in every result.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import math
import operator
import zoneinfo
from collections.abc import Callable
from functools import cache
from typing import Any, Literal

from typing_extensions import TypedDict

from toolwire.tools.decorator import FunctionTool, tool
from toolwire.tools.errors import ToolExecutionError, ToolParameterError
from toolwire.tools.toolbox import Toolbox

__all__ = [
    "DEMO_TOOLS",
    "CalculationResult",
    "CurrentTime",
    "WeatherReport",
    "calculate",
    "demo_toolbox",
    "evaluate_arithmetic",
    "get_current_time",
    "get_weather",
]

DEMO_WEATHER_SOURCE = "toolwire demo data (not real weather)"


class CurrentTime(TypedDict):
    timezone: str
    iso: str
    date: str
    time: str
    weekday: str
    utc_offset: str


class WeatherReport(TypedDict):
    city: str
    temperature: float
    unit: Literal["celsius", "fahrenheit"]
    condition: str
    humidity_percent: int
    wind_kmh: int
    source: str


class CalculationResult(TypedDict):
    expression: str
    result: int | float


@tool
def get_current_time(timezone: str = "UTC") -> CurrentTime:
    """Get the current date and time in a time zone.

    Args:
        timezone: An IANA time zone such as 'Europe/Lisbon' or 'America/New_York', or a
            major city name such as 'Tokyo'. Defaults to UTC.
    """
    zone_name = _find_zone(timezone)
    zone: datetime.tzinfo = datetime.UTC if zone_name == "UTC" else zoneinfo.ZoneInfo(zone_name)
    now = datetime.datetime.now(zone)
    offset = now.strftime("%z") or "+0000"
    return CurrentTime(
        timezone=zone_name,
        iso=now.isoformat(timespec="seconds"),
        date=now.date().isoformat(),
        time=now.strftime("%H:%M"),
        weekday=now.strftime("%A"),
        utc_offset=f"{offset[:3]}:{offset[3:]}",
    )


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> WeatherReport:
    """Get the current weather for a city (demo data: made up, not real weather).

    Args:
        city: The city name, e.g. 'Lisbon'.
        unit: Temperature unit.
    """
    name = " ".join(city.split())
    if not name:
        raise ToolParameterError("'city' must not be empty; give a city name such as 'Lisbon'.")
    # Deterministic per city, so demos and tests are repeatable; never a real reading.
    digest = hashlib.sha256(name.lower().encode()).digest()
    celsius = -5 + digest[0] % 36 + (digest[1] % 10) / 10
    conditions = ("sunny", "partly cloudy", "cloudy", "light rain", "rain", "windy", "foggy")
    temperature = celsius if unit == "celsius" else celsius * 9 / 5 + 32
    return WeatherReport(
        city=name.title(),
        temperature=round(temperature, 1),
        unit=unit,
        condition=conditions[digest[2] % len(conditions)],
        humidity_percent=30 + digest[3] % 61,
        wind_kmh=digest[4] % 41,
        source=DEMO_WEATHER_SOURCE,
    )


@tool
def calculate(expression: str) -> CalculationResult:
    """Evaluate an arithmetic expression exactly, e.g. '(2 + 3) * 4' or 'sqrt(2) ** 2'.

    Supports + - * / // % ** (also ^ for powers), parentheses, the constants pi, e and
    tau, and the functions sqrt, abs, round, floor, ceil, exp, log, log10, log2, sin,
    cos, tan, min and max.

    Args:
        expression: The arithmetic expression to evaluate.
    """
    return CalculationResult(expression=expression, result=evaluate_arithmetic(expression))


DEMO_TOOLS: tuple[FunctionTool[..., Any], ...] = (get_current_time, get_weather, calculate)
"""The built-in demo tools, in the order `toolwire chat` lists them."""


def demo_toolbox() -> Toolbox:
    """A fresh `Toolbox` of the demo tools."""
    return Toolbox(DEMO_TOOLS)


# --- time zones -------------------------------------------------------------------------

_UTC_ALIASES = {"utc", "gmt", "z", "zulu", "universal", "etc/utc"}


def _find_zone(text: str) -> str:
    wanted = "_".join(text.strip().split())
    if wanted.lower() in _UTC_ALIASES or not wanted:
        return "UTC"
    zones = _zones_by_key()
    found = zones.get(wanted.lower())
    if found is None:
        raise ToolParameterError(
            f"Unknown time zone {text!r}. Use an IANA name such as 'Europe/Lisbon', "
            "'America/New_York' or 'Asia/Tokyo', a major city name, or 'UTC'.",
            field="timezone",
        )
    return found


@cache
def _zones_by_key() -> dict[str, str]:
    # Full names first, then the city part ('tokyo' -> 'Asia/Tokyo'); a full name wins.
    try:
        names = sorted(zoneinfo.available_timezones())
    except Exception:
        names = []
    keys: dict[str, str] = {}
    for name in names:
        if name.startswith(("posix/", "right/")):
            continue
        keys.setdefault(name.rsplit("/", 1)[-1].lower(), name)
    for name in names:
        keys[name.lower()] = name
    return keys


# --- arithmetic -------------------------------------------------------------------------

_MAX_LENGTH = 500
_MAX_EXPONENT = 1000
_MAX_INT_DIGITS = 1000

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": lambda x, ndigits=0: _round(x, ndigits),
    "floor": math.floor,
    "ceil": math.ceil,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "min": min,
    "max": max,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def evaluate_arithmetic(expression: str) -> int | float:
    """Evaluate an arithmetic expression without `eval`: only numbers, operators and a
    few math functions are accepted, and exponents are bounded.

    Args:
        expression: The expression, e.g. `"2 ** 10 - sqrt(16)"`; `^` means power.

    Raises:
        ToolParameterError: The expression is not valid arithmetic.
        ToolExecutionError: It is valid but cannot be computed (division by zero, too large).
    """
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not text:
        raise ToolParameterError("'expression' is empty; give one such as '2 + 2'.")
    if len(text) > _MAX_LENGTH:
        raise ToolParameterError(f"'expression' is too long (max {_MAX_LENGTH} characters).")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ToolParameterError(
            f"{expression!r} is not a valid arithmetic expression; use numbers, "
            "+ - * / // % ** and parentheses."
        ) from None
    try:
        value = _eval(tree.body)
    except ZeroDivisionError:
        raise ToolExecutionError("Division by zero.") from None
    except OverflowError:
        raise ToolExecutionError("The result is too large to compute.") from None
    except RecursionError:
        raise ToolParameterError("The expression is nested too deeply.") from None
    except (ValueError, TypeError) as exc:
        raise ToolExecutionError(f"Cannot compute {expression!r}: {exc}.") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolExecutionError("The result is not a finite number.")
    return value


def _eval(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return node.value
        raise ToolParameterError(f"Only numbers are allowed, not {node.value!r}.")
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ToolParameterError(_unknown_name(node.id))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ToolExecutionError(f"Exponents are limited to ±{_MAX_EXPONENT}.")
        if isinstance(node.op, ast.Pow) and left == 0 and right < 0:
            raise ZeroDivisionError
        result = _BINARY[type(node.op)](left, right)
        if isinstance(result, complex):
            raise ValueError("the result is a complex number")
        return _check(result)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        fn = _FUNCTIONS.get(node.func.id)
        if fn is None:
            raise ToolParameterError(_unknown_name(node.func.id))
        if node.keywords or not node.args:
            raise ToolParameterError(f"Call {node.func.id}() with positional numbers only.")
        return _check(fn(*(_eval(arg) for arg in node.args)))
    raise ToolParameterError(
        f"Unsupported syntax {ast.unparse(node)!r}; use numbers, + - * / // % ** and parentheses."
    )


def _round(value: float, ndigits: float = 0) -> int | float:
    # round(x, -10**9) would compute 10**(10**9); keep ndigits small.
    if not isinstance(ndigits, int) or abs(ndigits) > 100:
        raise ValueError("round() takes a whole number of digits between -100 and 100")
    return round(value) if ndigits == 0 else round(value, ndigits)


def _check(value: Any) -> int | float:
    if isinstance(value, int) and value.bit_length() > _MAX_INT_DIGITS * 3.33:
        raise OverflowError
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"unexpected result type {type(value).__name__}")
    return value


def _unknown_name(name: str) -> str:
    functions = ", ".join(_FUNCTIONS)
    constants = ", ".join(_CONSTANTS)
    return f"Unknown name {name!r}. Functions: {functions}. Constants: {constants}."
