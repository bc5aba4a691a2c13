"""Text (and audio-in) LLM clients for dataset generation and captioning, behind ttseval.core.protocols.LLM.

base.py holds the shared loop (transport retries, re-asks, refusals, tokens, cost); gemini.py and
openai_compat.py each make one HTTP exchange. The contract and its records (LLM, LLMRequest, LLMResult,
FAILURES) live in ttseval.core.protocols with every other provider contract.
"""
