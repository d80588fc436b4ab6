"""`MarkerScanner`: what it finds and holds back, and that a parser made per generation
does not compile its markers again."""

from __future__ import annotations

from toolwire.parsing._scan import MarkerScanner
from toolwire.parsing.registry import parser_for


def test_finds_the_earliest_marker_longest_on_ties() -> None:
    scan = MarkerScanner(["<tool_call>", "<tool", "</think>"])
    found = scan.search("text <tool_call>{}")
    assert found is not None
    assert (found.start(), found.group()) == (5, "<tool_call>")


def test_holds_back_only_a_tail_that_could_grow_into_a_marker() -> None:
    scan = MarkerScanner(["<tool_call>"])
    assert scan.safe_end("abc <tool_") == 4
    assert scan.safe_end("abc <x") == 6
    assert scan.longest == len("<tool_call>")


def test_no_markers_finds_nothing_and_holds_nothing_back() -> None:
    scan = MarkerScanner(["", ""])
    assert scan.search("anything") is None
    assert scan.safe_end("anything<") == len("anything<")
    assert scan.longest == 0


def test_the_same_markers_compile_once_whatever_their_order() -> None:
    first = MarkerScanner(["<a>", "<bb>", ""])
    second = MarkerScanner(["<bb>", "<a>", "<a>"])
    assert first.markers == second.markers == ("<bb>", "<a>")
    assert first._prefixes is second._prefixes


def test_a_parser_per_generation_reuses_its_format_s_compiled_markers() -> None:
    one = parser_for("m", None, format="hermes")
    two = parser_for("m", None, format="hermes")
    assert one is not two
    assert one._content_scan._prefixes is two._content_scan._prefixes
