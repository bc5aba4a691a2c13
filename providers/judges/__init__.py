"""Judges: pairwise (candidate vs baseline) and instruction-following, behind ttseval.protocols (Judge,
PairwiseJudge, InstructionJudge).

objective.py needs no model (CER, then MOS); gemini.py calls Gemini through google-genai; transformers_judge.py
runs a local audio LLM. prompts.py holds the project's own prompts, rubrics and the tolerant output parser.
"""
