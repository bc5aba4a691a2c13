"""Judges: pairwise (candidate vs baseline) and instruction-following, behind ttseval.core.protocols (Judge,
PairwiseJudge, InstructionJudge).

objective.py needs no model (CER, then MOS); gemini.py calls Gemini through google-genai and openai_audio.py any
OpenAI-compatible audio chat model (GPT-4o audio, self-hosted Qwen-Omni), both on llm_judge.py's shared layout;
transformers_judge.py runs a local audio LLM. prompts.py holds the prompts, rubrics and the tolerant parser.
"""

from __future__ import annotations

from ttseval.core.protocols import InstructionJudge, Judge, PairwiseJudge
from ttseval.core.registry import Registry

JUDGES = Registry[Judge](
    "judge",
    Judge,
    {
        "objective": "ttseval.providers.judges.objective:ObjectiveJudge",
        "gemini": "ttseval.providers.judges.gemini:GeminiJudge",
        "openai": "ttseval.providers.judges.openai_audio:OpenAIJudge",
        "cascade": "ttseval.providers.judges.cascade:CascadeJudge",
        "transformers-judge": "ttseval.providers.judges.transformers_judge:TransformersAudioJudge",
    },
    any_of=(PairwiseJudge, InstructionJudge),
)
