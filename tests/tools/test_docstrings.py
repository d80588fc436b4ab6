"""Descriptions from Google, NumPy and Sphinx docstrings."""

import pytest

from toolwire.tools import tool
from toolwire.tools.docstrings import parse_docstring


def google(city: str, unit: str = "c") -> str:
    """Get the weather for a city.

    Uses the demo data source; the result
    is made up.

    Args:
        city: The city
            to look up.
        unit (str): Temperature unit.

    Returns:
        A short report.

    Raises:
        ValueError: never.
    """
    return city


def numpy(city: str, unit: str = "c") -> str:
    """Get the weather for a city.

    Uses the demo data source; the result
    is made up.

    Parameters
    ----------
    city : str
        The city
        to look up.
    unit : str, optional
        Temperature unit.

    Returns
    -------
    str
        A short report.
    """
    return city


def sphinx(city: str, unit: str = "c") -> str:
    """Get the weather for a city.

    Uses the demo data source; the result
    is made up.

    :param city: The city
        to look up.
    :param str unit: Temperature unit.
    :returns: A short report.
    :raises ValueError: never.
    """
    return city


@pytest.mark.parametrize("fn", [google, numpy, sphinx], ids=["google", "numpy", "sphinx"])
def test_three_styles_give_the_same_descriptions(fn: object) -> None:
    info = parse_docstring(fn.__doc__)  # type: ignore[attr-defined]
    assert info.description == (
        "Get the weather for a city.\n\nUses the demo data source; the result\nis made up."
    )
    assert info.parameters == {"city": "The city to look up.", "unit": "Temperature unit."}
    assert info.returns == "A short report."


@pytest.mark.parametrize("fn", [google, numpy, sphinx], ids=["google", "numpy", "sphinx"])
def test_tool_schema_carries_the_descriptions(fn: object) -> None:
    t = tool(fn)  # type: ignore[call-overload]
    assert t.description.startswith("Get the weather for a city.")
    assert "Args" not in t.description
    assert "Parameters" not in t.description
    assert ":param" not in t.description
    assert "Returns" not in t.description
    assert t.input_schema["properties"]["city"]["description"] == "The city to look up."
    assert t.input_schema["properties"]["unit"]["description"] == "Temperature unit."


def test_summary_only_and_missing_docstrings() -> None:
    assert parse_docstring("Just a summary.").description == "Just a summary."
    assert parse_docstring(None).description == ""
    assert parse_docstring("   ").parameters == {}


def test_undocumented_parameters_have_no_description() -> None:
    def f(a: int, b: int) -> int:
        """Add.

        Args:
            a: First.
        """
        return a + b

    t = tool(f)
    assert t.input_schema["properties"]["a"] == {"type": "integer", "description": "First."}
    assert t.input_schema["properties"]["b"] == {"type": "integer"}


def test_description_option_overrides_docstring_but_keeps_parameter_docs() -> None:
    t = tool(description="Custom.")(google)
    assert t.description == "Custom."
    assert t.input_schema["properties"]["city"]["description"] == "The city to look up."
