"""Datasets: one home for reading items files, importing published benchmarks, the catalog of frozen versions in
the store, and growing new datasets with an LLM (EmergentTTS-Eval prompts, InstructTTSEval instructions).

    items.py         read and check an items file (JSONL, CSV, Parquet); the demo benchmark
    importers.py     EmergentTTS-Eval and InstructTTSEval release files -> items
    catalog.py       frozen dataset versions in the store (NAME@VERSION, NAME@latest)
    generation.py    EmergentTTS-Eval breadth / depth / repair prompts and the category-set TOML
    instructions.py  InstructTTSEval captioning, APS rendering, DSD and RP prompts

This package imports only the `ttseval` core. This module stays cheap to import (paths and default specs only),
so the CLI's parser can read its defaults without pandas.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"
DEMO_DATASET = DATA / "demo.jsonl"
"""The bundled benchmark: two depth-0..3 lineages per category and seven non-English items."""
DEFAULT_CATEGORY_SPEC = DATA / "generation" / "emergenttts.toml"
DEFAULT_SEEDS = DATA / "generation" / "seeds.jsonl"
DEFAULT_LLM = "gemini:gemini-2.5-pro"
"""The dataset-generation LLM when --llm is not given (the paper refined with Gemini 2.5 Pro)."""
DEFAULT_CAPTION_LLM = "gemini:gemini-2.5-pro"
"""The audio LLM that captions reference clips for InstructTTSEval instructions."""
