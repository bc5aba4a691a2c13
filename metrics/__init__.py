"""Pure metric functions for ttseval: no I/O, no model loading, no global state.

Modules:
    normalize: named, versioned text normalizers (``english-v1``, ``basic-v1``,
        ``perso-arabic-v1``, ``whisper-basic-v1``) and ``normalizer_for(language)``.
    wer: word/character error counts (jiwer), corpus and per-utterance rates,
        Perfect%, and ``METRICS`` (direction and aggregation of each metric).
    bootstrap: seeded percentile-bootstrap confidence intervals for pooled ratios
        (WER/CER) and means (MOS).
    summary: per-system and per-group summary tables from the stage tables.

Nothing heavy is imported here; ``transformers`` is imported lazily by ``normalize``.
"""
