"""Judge requests and scripted answers shared by the judge tests (test_judge_gemini, test_judge_openai,
test_judge_robustness, test_judging_cli): a pair of tones, an instruction request, a GeminiJudge on a fake server,
and a pairwise answer in the judges' JSON."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.support.fake_gemini import PAIRWISE_OK, FakeGemini
from ttseval.core.audio import Audio
from ttseval.core.protocols import InstructionRequest, PairwiseRequest
from ttseval.providers.judges.gemini import GeminiJudge

KEY = "AIzaFAKE-secret-key-0123456789"


def tone(freq_hz: float, duration_s: float = 0.25, sample_rate_hz: int = 16000) -> Audio:
    t = np.arange(int(duration_s * sample_rate_hz)) / sample_rate_hz
    return Audio((0.3 * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32), sample_rate_hz)


def pair(i: int) -> PairwiseRequest:
    return PairwiseRequest(
        item_id=f"item-{i}",
        text=f"<item-{i}> Is it raining?",
        language="en",
        category="questions",
        rubric="intonation",
        first=tone(440),
        second=tone(660),
    )


def instruction(i: int) -> InstructionRequest:
    return InstructionRequest(
        item_id=f"ins-{i}",
        text=f"<ins-{i}> Good morning.",
        language="en",
        instruction="Speak slowly, in a calm low voice.",
        task="APS",
        audio=tone(220),
    )


def judge(fake: FakeGemini, **options: str) -> GeminiJudge:
    opts = {"backoff_s": "0.01", "base_url": fake.base_url} | options
    return GeminiJudge(voice="gemini-2.5-pro", api_key=KEY, **opts)


def answer(winner: str, s1: float, s2: float) -> dict[str, Any]:
    return PAIRWISE_OK | {"winner": winner, "clip_1_score": s1, "clip_2_score": s2}
