"""Judges: pairwise (candidate vs baseline) and instruction-following, behind ttseval.core.protocols (Judge,
PairwiseJudge, InstructionJudge).

objective.py needs no model (CER, then MOS); gemini.py calls Gemini through google-genai and openai_audio.py any
OpenAI-compatible audio chat model (GPT-4o audio, self-hosted Qwen-Omni), both on llm_judge.py's shared layout;
transformers_judge.py runs a local audio LLM. prompts.py holds the prompts, rubrics and the tolerant parser.
"""
