"""The canitoolcall conformance fixtures, replayed against toolwire's parsers.

One test per fixture (`-k <family>` selects a family). A fixture passes when its status
is pass or soft pass; see conformance.py for the splits and checks.
"""

from __future__ import annotations

import pytest
from conformance import FAIL, Fixture, load_fixtures, run_fixture


@pytest.mark.parametrize("fx", load_fixtures(), ids=lambda fx: fx.id)
def test_fixture(fx: Fixture) -> None:
    result = run_fixture(fx)
    assert result.status != FAIL, "\n".join(result.problems)


def test_every_family_is_replayed() -> None:
    families = {fx.family for fx in load_fixtures()}
    assert len(load_fixtures()) >= 469
    assert {"qwen3-hermes", "qwen3-xml", "llama", "mistral", "gpt-oss", "deepseek"} <= families
