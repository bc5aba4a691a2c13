"""What the paid-provider tests share (tests/e2e/test_paid_run.py, tests/unit/test_paid_refusals.py): the fake
OpenAI key and a small English dataset."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.keys import OPENAI_KEY

KEY = OPENAI_KEY
TEXTS = ["Is the kettle on yet?", "The quick brown fox jumps over the lazy dog.", "Tell me what you saw, please."]


def dataset(tmp: Path, n: int = len(TEXTS)) -> Path:
    path = tmp / "items.jsonl"
    path.write_text(
        "".join(
            json.dumps({"item_id": f"p{i}", "text": t, "language": "en-US", "category": "questions", "depth": 0}) + "\n"
            for i, t in enumerate(TEXTS[:n])
        ),
        encoding="utf-8",
    )
    return path
