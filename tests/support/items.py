"""A dataset row as a JSON line, for tests that write an items file with one field changed
(tests/unit/test_refusals_cli.py, tests/e2e/test_refusals_in_runs.py)."""

from __future__ import annotations

import json


def item_line(**fields: object) -> str:
    return (
        json.dumps(
            {"item_id": "a", "text": "Hello there.", "language": "en", "category": "q", "depth": 0} | fields,
            ensure_ascii=False,
        )
        + "\n"
    )
