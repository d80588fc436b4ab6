"""Finding markers in streamed text while holding back as little as possible."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["MarkerScanner"]


class MarkerScanner:
    """Searches text for any of a set of marker strings.

    `search` finds the earliest (longest on ties) marker; `safe_end` tells how much of the
    text can be released now: everything except the shortest tail that could still grow
    into a marker. Both are linear in the text they are given, so a parser that only hands
    them unexamined text stays linear overall. With no markers it finds nothing and holds
    nothing back.
    """

    __slots__ = ("_max", "_pattern", "_prefixes", "markers")

    markers: tuple[str, ...]
    _pattern: re.Pattern[str]
    _max: int
    _prefixes: tuple[frozenset[str], ...]

    def __init__(self, markers: Iterable[str]) -> None:
        # A parser is made per generation, with the same few marker sets each time: what
        # they compile to is shared (it is never changed after this).
        self.markers, self._pattern, self._max, self._prefixes = _compile(
            frozenset(m for m in markers if m)
        )

    @property
    def longest(self) -> int:
        return self._max

    def search(self, text: str, start: int = 0) -> re.Match[str] | None:
        """The first marker in `text[start:]`, or None."""
        return self._pattern.search(text, start)

    def safe_end(self, text: str, start: int = 0) -> int:
        """The index up to which `text` cannot be the beginning of a marker.

        Assumes `text[start:]` holds no complete marker (call `search` first).
        """
        n = len(text)
        if self._max < 2:
            return n  # no marker has a proper prefix to wait for
        for k in range(min(self._max - 1, n - start), 0, -1):
            if text[n - k :] in self._prefixes[k]:
                return n - k
        return n


@lru_cache(maxsize=1024)
def _compile(
    markers: frozenset[str],
) -> tuple[tuple[str, ...], re.Pattern[str], int, tuple[frozenset[str], ...]]:
    ordered = tuple(sorted(markers, key=len, reverse=True))
    # `(?!)` never matches: a scanner without markers.
    pattern = re.compile("|".join(re.escape(m) for m in ordered) or "(?!)")
    longest = len(ordered[0]) if ordered else 0
    # Proper prefixes of every marker, by length, for the hold-back test.
    prefixes = (
        frozenset[str](),
        *(frozenset(m[:k] for m in ordered if len(m) > k) for k in range(1, longest)),
    )
    return ordered, pattern, longest, prefixes
