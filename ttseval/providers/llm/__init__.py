"""Text (and audio-in) LLM clients for dataset generation and captioning, behind ttseval.core.protocols.LLM.

base.py holds the shared loop (transport retries, re-asks, refusals, tokens, cost); gemini.py and
openai_compat.py each make one HTTP exchange. The contract and its records (LLM, LLMRequest, LLMResult,
FAILURES) live in ttseval.core.protocols with every other provider contract.
"""

from __future__ import annotations

from ttseval.core.protocols import LLM
from ttseval.core.registry import Registry

LLMS = Registry[LLM](
    "llm",
    LLM,
    {
        "gemini": "ttseval.providers.llm.gemini:GeminiLLM",
        "openai": "ttseval.providers.llm.openai_compat:OpenAICompatLLM",
    },
)
