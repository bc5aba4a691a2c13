"""The fake vendors' keys the tests use, declared once: the fake servers on loopback accept them, and the keyed
shared cluster (tests/conftest.py: `keyed_dask`) starts its worker with TEST_KEYS."""

from __future__ import annotations

OPENAI_KEY = "sk-fake-openai-0123456789abcdef"

GEMINI_KEY = "fake-key"

TEST_KEYS = {"OPENAI_API_KEY": OPENAI_KEY, "GEMINI_API_KEY": GEMINI_KEY}
"""Key variables a keyed run's workers and command have."""
