"""Transcripts and MOS are reused across runs by (clip SHA-256, model output id, engine version, language), as
synthesis reuses audio; a recogniser whose decoding changed gets a new asr_id (its `output_revision`)."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from tests.support.healing import CALLS, SPEC, CountedASR, run_synthesis, settings_for, synthesis
from ttseval.core.audio import Audio
from ttseval.core.registry import Spec
from ttseval.providers.registries import REGISTRIES
from ttseval.tasks.parts import get_store
from ttseval.tasks.provider_cache import model_output_id
from ttseval.tasks.stages import QUALITY, TRANSCRIPTS, run_stage

ITEMS = [("p", "plain"), ("q", "plain plain"), ("r", "plain plain plain")]


def setup(tmp_path: Path, asr: str = "tests.support.healing:EchoASR", **extra: Any):
    settings = settings_for(
        tmp_path,
        "FixedTTS",
        asr={"en": "heal-asr", "*": "heal-asr"},
        quality="count-mos",
        plugins={"asr": {"heal-asr": asr}, "quality": {"count-mos": "tests.support.healing:CountingMOS"}},
        **extra,
    )
    run_synthesis(settings, ITEMS)
    clips = synthesis(tmp_path)
    work = [
        {
            "item_id": i,
            "system_id": SPEC.id,
            "audio_sha256": clips.loc[i, "audio_sha256"],
            "language": "en-US",
            "text": t,
        }
        for i, t in ITEMS
    ]
    CALLS.clear()
    return settings, work


def table(settings, run: str, name: str):
    return get_store(settings.store).read(run, name).set_index("item_id").sort_index()


def test_a_second_run_reuses_transcripts_and_scores_and_recomputes_wer_against_its_own_text(tmp_path: Path) -> None:
    settings, work = setup(tmp_path)
    run_stage(TRANSCRIPTS, settings, "run1", work[:2])
    run_stage(QUALITY, settings, "run1", work[:2])
    assert CALLS == ["asr 2", "mos 2"]
    CALLS.clear()
    # run 2: the same clips and one new one; 'q' is now an item whose text differs from what was said
    work2 = [work[0], work[1] | {"text": "plain words"}, work[2]]
    run_stage(TRANSCRIPTS, settings, "run2", work2)
    run_stage(QUALITY, settings, "run2", work2)
    assert CALLS == ["asr 1", "mos 1"]  # only the new clip reached the models
    t1, t2 = table(settings, "run1", "transcripts"), table(settings, "run2", "transcripts")
    assert t2["cache_hit"].to_dict() == {"p": True, "q": True, "r": False}
    assert not t1["cache_hit"].any()
    assert t2.loc["p", "hypothesis"] == t1.loc["p", "hypothesis"] == "plain"
    # the transcript is reused; the WER is computed again against run 2's reference (1 of 2 words wrong)
    assert (t1.loc["q", "wer"], t2.loc["q", "wer"]) == (0.0, 0.5)
    q1, q2 = table(settings, "run1", "quality"), table(settings, "run2", "quality")
    assert q2["cache_hit"].to_dict() == {"p": True, "q": True, "r": False}
    assert q2["mos"].to_dict() == {"p": 1.5, "q": 2.0, "r": 2.5} and q1["mos"].to_dict() == {"p": 1.5, "q": 2.0}
    assert q2.loc["q", "details"] == q1.loc["q", "details"] == '{"words": 2.0}'


def test_reuse_off_recomputes_and_a_new_engine_version_misses(tmp_path: Path, monkeypatch) -> None:
    settings, work = setup(tmp_path)
    run_stage(TRANSCRIPTS, settings, "run1", work)
    off = settings.model_copy(update={"reuse_scores": False})
    CALLS.clear()
    run_stage(TRANSCRIPTS, off, "run2", work)
    assert CALLS == ["asr 3"] and not table(settings, "run2", "transcripts")["cache_hit"].any()
    from tests.support import healing

    monkeypatch.setattr(healing.EchoASR, "version", "2.0", raising=False)
    CALLS.clear()
    run_stage(TRANSCRIPTS, settings, "run3", work)
    assert CALLS == ["asr 3"]  # version 2.0 never ran on these clips
    CALLS.clear()
    run_stage(TRANSCRIPTS, settings, "run4", work)
    assert CALLS == [] and table(settings, "run4", "transcripts")["cache_hit"].all()


def test_a_changed_decoding_is_a_new_asr_id_and_the_planner_uses_it(tmp_path: Path) -> None:
    import hashlib

    from ttseval.core.config import Settings

    whisper = Spec.parse("faster-whisper:tiny.en")
    revised = REGISTRIES["asr"].output_id(whisper)
    assert revised != whisper.id and revised.startswith("faster-whisper-tiny-en-")
    # independent: the id is the slug of the spec plus 8 hex digits of sha256 over the canonical JSON (sorted keys, no
    # spaces) of the spec's parameters and the declared revision, written out by hand and hashed with hashlib
    canonical = (
        '{"options":{},"provider":"faster-whisper",'
        '"revision":"temperature 0, no fallback unless temperature_fallback=true","voice":"tiny.en"}'
    )
    assert revised == "faster-whisper-tiny-en-" + hashlib.sha256(canonical.encode()).hexdigest()[:8]
    dnsmos = Spec.parse("dnsmos")
    assert REGISTRIES["quality"].output_id(dnsmos) == dnsmos.id  # declares no revision: ids unchanged
    settings = Settings(store=str(tmp_path))
    [(spec, asr_id)] = TRANSCRIPTS.models_for(settings)("en-US")
    assert (spec, asr_id) == ("faster-whisper:tiny.en", model_output_id("asr", Spec.parse(spec), settings))
    assert asr_id == REGISTRIES["asr"].output_id(Spec.parse(settings.asr_for("en-US")))
    assert QUALITY.models_for(settings)("fr") == [("dnsmos", dnsmos.id)]


def test_whisper_decodes_at_temperature_zero_unless_fallback_is_asked(monkeypatch) -> None:
    import numpy as np

    from ttseval.providers.asr.faster_whisper import WHISPER_TEMPERATURES, FasterWhisperASR

    seen: list[Any] = []
    for options, expected in (({}, 0.0), ({"temperature_fallback": "true"}, WHISPER_TEMPERATURES)):
        asr = FasterWhisperASR("tiny.en", **options)
        model = asr._load()
        real = model.transcribe

        def spy(audio, *, _real=real, **kw):  # this model's own transcribe, bound here
            seen.append(kw["temperature"])
            return _real(audio, **kw)

        monkeypatch.setattr(model, "transcribe", spy)
        t = np.arange(16000) / 16000
        [out] = asr.transcribe([Audio((0.1 * np.sin(2 * np.pi * 300 * t)).astype(np.float32), 16000)], ["en"])
        assert isinstance(out.text, str) and seen[-1] == expected
    assert Spec.parse("faster-whisper:tiny.en:temperature_fallback=true").id != Spec.parse("faster-whisper:tiny.en").id
    with pytest.raises(ValueError, match="temperature_fallback"):
        FasterWhisperASR("tiny.en", temperature_fallback="maybe")


@pytest.mark.parametrize("in_memory", [0, 1])
def test_models_in_memory_one_frees_each_model_before_the_next_loads(
    tmp_path: Path, monkeypatch, in_memory: int
) -> None:
    """Setting models_in_memory = 1: a worker running the transcripts, then the MOS, then the transcripts stage
    again holds one metric model at a time: the recogniser is gone (freed, not only forgotten) once the MOS model
    is asked for, and is built again; the TTS engine stays cached. 0 keeps both. The tables are the same."""
    import gc

    from ttseval.tasks import provider_cache

    monkeypatch.setattr(provider_cache, "_PROVIDERS", OrderedDict())
    CountedASR.built.clear()
    settings, work = setup(tmp_path, "tests.support.healing:CountedASR", models_in_memory=in_memory)
    settings = settings.model_copy(update={"reuse_scores": False})
    run_stage(TRANSCRIPTS, settings, "run1", work)
    assert len(CountedASR.built) == 1 and CountedASR.built[0]() is not None
    run_stage(QUALITY, settings, "run1", work)
    gc.collect()
    assert (CountedASR.built[0]() is None) == (in_memory == 1)
    kinds = sorted(json.loads(k)[0] for k in provider_cache._PROVIDERS)
    assert kinds == (["quality", "tts"] if in_memory == 1 else ["asr", "quality", "tts"])
    run_stage(TRANSCRIPTS, settings, "run2", work)
    assert len(CountedASR.built) == (2 if in_memory == 1 else 1)
    assert CALLS == ["asr 3", "mos 3", "asr 3"]  # reuse_scores off: every clip each time
    assert table(settings, "run2", "transcripts")["hypothesis"].to_dict() == {
        "p": "plain",
        "q": "plain plain",
        "r": "plain plain plain",
    }
    assert table(settings, "run1", "quality")["mos"].to_dict() == {"p": 1.5, "q": 2.0, "r": 2.5}
