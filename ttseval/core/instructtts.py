"""InstructTTSEval's fixed vocabulary, declared once: the three tasks, the twelve style features, the category.

Read by dataset import and instruction generation (corpus/), the instruction judges' prompts (providers/) and
the scores (metrics/instruct.py).
"""

from __future__ import annotations

TASKS = ("APS", "DSD", "RP")
"""Acoustic-Parameter Specification, Descriptive-Style Directive, Role-Play (section 3.1)."""

CATEGORY = "instruction_following"
"""The item category of InstructTTSEval items (ttseval.core.categories describes it)."""

FEATURES = (
    "gender",
    "pitch",
    "speed",
    "volume",
    "age",
    "clarity",
    "fluency",
    "accent",
    "texture",
    "emotion",
    "tone",
    "personality",
)
"""The 12 style features in the order of InstructTTSEval's caption JSON and Table 8."""

FEATURES_BY_TIER = (
    "gender",
    "pitch",
    "texture",
    "clarity",
    "fluency",
    "speed",
    "accent",
    "age",
    "volume",
    "emotion",
    "tone",
    "personality",
)
"""The same 12 features in the paper's four tiers (physiological, linguistic, social, psychological/pragmatic):
the order the instruction judges' prompt lists them in (changing it changes that prompt)."""

if sorted(FEATURES) != sorted(FEATURES_BY_TIER):  # one set, two orders: a typo here would change a prompt
    raise ImportError("ttseval.core.instructtts: FEATURES and FEATURES_BY_TIER must hold the same 12 features")
