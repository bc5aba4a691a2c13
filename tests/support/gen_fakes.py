"""A scripted 'model' for dataset-generation tests: answers breadth, refinement, repair and tongue-twister
requests deterministically from the request text, so either fake server (Gemini or OpenAI wire format) can
serve a whole generation run. Items differ enough that none is a near-duplicate of another."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from tests.support.keys import OPENAI_KEY

WORDS = (
    "amber",
    "basalt",
    "cobalt",
    "dune",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "indigo",
    "juniper",
    "kelp",
    "lantern",
    "meadow",
    "nectar",
    "orchid",
    "pebble",
    "quartz",
    "raven",
    "saffron",
    "thistle",
    "umber",
    "violet",
    "willow",
    "yarrow",
    "zephyr",
    "acorn",
    "bramble",
    "cinder",
    "drizzle",
    "falcon",
)


def _words(key: str, n: int) -> list[str]:
    h = hashlib.sha256(key.encode()).digest()
    return [WORDS[b % len(WORDS)] for b in h[:n]]


def sentence(key: str, n: int = 9) -> str:
    w = _words(key, n)
    return f"{w[0].capitalize()} {' '.join(w[1:])}, said the {key.split('|')[-1]} voice?"


def kind_of(text: str, system: str | None) -> str:
    if system and "copy editor" in system:
        return "repair"
    if "tongue twisters" in text:
        return "twister"
    if "Rewrite it once" in text:
        return "refine"
    if "new, different items" in text:
        return "breadth"
    return "other"


def answer(text: str, system: str | None = None) -> dict[str, Any] | None:
    """The JSON a cooperative model would return for a generation request, or None for anything else."""
    kind = kind_of(text, system)
    if kind == "breadth":
        count = int(re.search(r"Write (\d+) new", text).group(1))
        category = re.search(r"Category: (\w+)\.", text).group(1)
        lead = re.search(r"criterion: (.+?)\.\n", text).group(1)
        return {
            "items": [
                {"text": sentence(f"{category}|{lead}|{j}|{category}"), "diversity_aspect": lead} for j in range(count)
            ]
        }
    if kind == "refine":
        current = re.search(r"<<<\n(.*)\n>>>", text, re.S).group(1)
        depth = int(re.search(r"refinement step (\d+)", text).group(1)) + 1
        return {
            "tts_synthesis_diversity": f"adds a clause at step {depth}",
            "text_to_synthesize": f"{current} And then, at step {depth}, {' '.join(_words(current, 4))}?",
        }
    if kind == "repair":
        return {"text_to_synthesize": text.strip().replace("  ", " ") + " (repaired)"}
    if kind == "twister":
        count = int(re.search(r"Write (\d+) short", text).group(1))
        return {"tongue_twisters": [f"Six {w} sheep shear {w} sheets" for w in WORDS[:count]]}
    return None


KEY = OPENAI_KEY
"""The API key the generation tests' fake OpenAI-compatible server expects: the keyed cluster's (tests/conftest.py
`keyed_dask`), so a generation run needs no cluster of its own to pass it."""


def responder(request: Any) -> dict[str, Any] | None:
    """`answer` as a fake server's responder: a request in, the scripted model's reply out."""
    return answer(request.text(), request.system_text())


def llm_spec(fake: Any, **extra: str) -> str:
    """The `openai:` LLM spec that points at a fake server, with fast retries."""
    opts = {"base_url": fake.base_url, "backoff_s": "0.01", "max_retries": "2"} | extra
    return "openai:fake-gen-model:" + ":".join(f"{k}={v}" for k, v in opts.items())
