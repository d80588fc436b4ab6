"""A user's tool module, as `toolwire --tools sample_tools` loads it in the CLI tests."""

from __future__ import annotations

from pathlib import Path

from toolwire import tool


def notes_dir() -> Path:
    return Path.cwd() / "notes"


@tool
def list_notes() -> list[str]:
    """List the titles of the saved notes."""
    return sorted(p.stem for p in notes_dir().glob("*.txt"))


@tool(effects="destructive")
def delete_note(title: str) -> str:
    """Delete the saved note with the given title.

    Args:
        title: The note's title, without extension.
    """
    path = notes_dir() / f"{title}.txt"
    if not path.exists():
        return f"There is no note titled {title!r}."
    path.unlink()
    return f"Deleted the note {title!r}."


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool
def crash() -> str:
    """A tool that always fails."""
    raise RuntimeError("disk on fire")


@tool
def product_catalog() -> list[dict[str, object]]:
    """List every product in the catalog with its price and stock."""
    return [
        {"sku": f"SKU-{n:04d}", "name": f"Product number {n}", "price": n * 1.5, "stock": n}
        for n in range(1, 41)
    ]


@tool
def slow_report(seconds: float = 1.5) -> str:
    """Build the slow report (takes a while).

    Args:
        seconds: How long it takes.
    """
    import time

    time.sleep(seconds)
    return "report ready"
