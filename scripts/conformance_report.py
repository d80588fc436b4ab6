"""Print the per-family conformance table (pass / soft pass / fail) for the README.

Usage: python scripts/conformance_report.py [--failures] [FAMILY ...]
(`--failures` also prints why each soft pass or failure happened.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "parsing"))

from conformance import FAIL, PASS, SOFT_PASS, load_fixtures, run_fixture, summary


def main(argv: list[str]) -> int:
    show_failures = "--failures" in argv
    wanted = {a for a in argv if not a.startswith("--")}
    fixtures = [fx for fx in load_fixtures() if not wanted or fx.family in wanted]
    results = [run_fixture(fx) for fx in fixtures]
    table = summary(results)
    print("| Family | Fixtures | Pass | Soft pass | Fail |")
    print("|---|---:|---:|---:|---:|")
    totals = [0, 0, 0, 0]
    for family, row in sorted(table.items()):
        counts = [len(row[PASS]), len(row[SOFT_PASS]), len(row[FAIL])]
        total = sum(counts)
        totals = [a + b for a, b in zip(totals, [total, *counts], strict=True)]
        print(f"| {family} | {total} | {counts[0]} | {counts[1]} | {counts[2]} |")
    print(f"| **all** | {totals[0]} | {totals[1]} | {totals[2]} | {totals[3]} |")
    for status, title in ((SOFT_PASS, "Soft passes"), (FAIL, "Failing fixtures")):
        listed = [r for r in results if r.status == status]
        if listed:
            print(f"\n{title}:")
        for r in listed:
            print(f"- {r.fixture.id}")
            if show_failures:
                for problem in r.problems:
                    print(f"    {problem[:600]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
