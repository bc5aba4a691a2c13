"""Judges: pairwise (candidate vs baseline) and instruction-following, behind ttseval.judging's protocols.

objective.py needs no model (CER, then MOS); gemini.py calls Gemini through google-genai; transformers_judge.py
runs a local audio LLM. prompts.py holds the project's own prompts, rubrics and the tolerant output parser.
"""
