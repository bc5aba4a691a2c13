"""The fake vendors' keys the tests use, declared once: the fake servers on loopback accept them, the keyed shared
cluster (tests/conftest.py: `keyed_dask`) starts its worker with TEST_KEYS, and ALLOWED lets the keys go to them."""

from __future__ import annotations

OPENAI_KEY = "sk-fake-openai-0123456789abcdef"

GEMINI_KEY = "fake-key"

TEST_KEYS = {"OPENAI_API_KEY": OPENAI_KEY, "GEMINI_API_KEY": GEMINI_KEY}
"""Key variables a keyed run's workers and command have."""

FAKE_VENDORS = "http://127.0.0.1"
"""Where every fake vendor listens (any port): the tests' operator allows the keys there (setting allowed_endpoints)."""

ALLOWED = {"TTSEVAL_ALLOWED_ENDPOINTS": f'["{FAKE_VENDORS}"]'}
"""The environment that allows the fake vendors: set in the pytest process (tests/conftest.py) and in every
command's environment (tests.support.harness.cli_env)."""
