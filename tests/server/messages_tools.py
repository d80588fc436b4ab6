"""Server tools of the `/v1/messages` agent tests, loaded by dotted name (`messages_tools`)."""

from __future__ import annotations

from toolwire import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool
def stock_level(sku: str) -> int:
    """How many items of a product are in stock.

    Args:
        sku: The product's stock-keeping unit.
    """
    raise LookupError(f"the inventory service has no product {sku!r}")
