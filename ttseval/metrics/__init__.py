"""Pure metric functions for ttseval: no I/O, no model loading, no global state.

Modules:
    normalize: named, versioned text normalizers (``english-v1``, ``basic-v1``,
        ``perso-arabic-v1``, ``whisper-basic-v1``) and ``normalizer_for(language)``.
    registry: ``METRICS``, the direction and aggregation of every reported metric, declared
        once; summaries, drift and reports read it.
    wer: word/character error counts (jiwer), corpus and per-utterance rates, Perfect%.
    bootstrap: seeded percentile-bootstrap confidence intervals for pooled ratios
        (WER/CER) and means (MOS).
    summary: per-(system, recogniser) and per-group summary tables from the stage tables.
    winrate, instruct, agreement: judge win-rates, InstructTTSEval scores, judge agreement.
    drift: per-(system, recogniser) deltas between two runs' reports.

Nothing heavy is imported here; ``transformers`` is imported lazily by ``normalize``.
"""
