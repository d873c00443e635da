"""Prints one closing line for a test run made of several pytest passes: ``Total: N passed, N failed,
N skipped``, summed over the passes' JUnit XML reports (``python -m tests.summary report.xml ...``)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def totals(paths: list[str]) -> tuple[int, int, int]:
    passed = failed = skipped = 0
    for path in paths:
        if not Path(path).exists():
            continue
        for suite in ET.parse(path).getroot().iter("testsuite"):
            tests, errors = int(suite.get("tests", 0)), int(suite.get("errors", 0))
            failures, skips = int(suite.get("failures", 0)), int(suite.get("skipped", 0))
            failed += failures + errors
            skipped += skips
            passed += tests - failures - errors - skips
    return passed, failed, skipped


def main(argv: list[str]) -> int:
    passed, failed, skipped = totals(argv)
    print(f"Total: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
