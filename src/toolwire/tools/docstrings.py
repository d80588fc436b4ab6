"""Tool and parameter descriptions from Google, NumPy and Sphinx (reST) docstrings."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import docstring_parser

__all__ = ["DocstringInfo", "parse_docstring"]


@dataclass(frozen=True, kw_only=True)
class DocstringInfo:
    """What a docstring says about a function, with the sections split apart."""

    description: str = ""
    """Summary line and long description, without the Args / Returns / Raises sections."""
    parameters: dict[str, str] = field(default_factory=dict)
    """Per-parameter descriptions, each folded onto one line."""
    returns: str | None = None


def parse_docstring(doc: str | None) -> DocstringInfo:
    """Split a docstring into its description and its per-parameter descriptions.

    The style (Google `Args:`, NumPy `Parameters` underlined, Sphinx `:param x:`) is
    detected automatically.

    Args:
        doc: The raw docstring, as found on `fn.__doc__`; indentation does not matter.
    """
    if not doc or not doc.strip():
        return DocstringInfo()
    text = inspect.cleandoc(doc)
    try:
        parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError:
        # A docstring that looks like a style but is malformed is still a description.
        return DocstringInfo(description=text)
    parts = [p.strip() for p in (parsed.short_description, parsed.long_description) if p]
    params = {
        p.arg_name.lstrip("*"): _one_line(p.description)
        for p in parsed.params
        if p.description and p.description.strip()
    }
    returns = _one_line(parsed.returns.description) if parsed.returns else None
    return DocstringInfo(description="\n\n".join(parts), parameters=params, returns=returns or None)


def _one_line(text: str | None) -> str:
    # Parameter descriptions wrap for the source file's width, not for the model.
    return " ".join((text or "").split())
