"""transformers-tts: a tiny random VITS (MMS-TTS architecture) written with save_pretrained, loaded through the
registry; batching, determinism, the synthesis stage, errors, and the placement annotations of its stages (the GPU
worker placement of its shards in a run: tests/e2e/test_gpu_placement.py).

Nothing is downloaded: the model is built from a VitsConfig with tiny dimensions and a character vocabulary
(tests/support/tiny_models.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support.tiny_models import VITS_RATE_HZ, build_tiny_vits
from ttseval.core.audio import Audio

pytest.importorskip("torch")
pytest.importorskip("transformers")

TEXTS = ["hi", "hello there my friend", "a much longer sentence, with many words in it and then some more"]
ATOL = 1e-4
"""Batched vs one-at-a-time tolerance on samples in [-1, 1]: the same float32 arithmetic, in a different
batch shape (observed differences are below 1e-5)."""


@pytest.fixture(scope="module")
def tiny_vits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_vits(tmp_path_factory.mktemp("vits") / "mms-tiny")


def build(spec: str) -> Any:
    from ttseval.providers.tts import TTS

    return TTS.build(spec)


def test_clip_has_the_config_rate_a_length_and_the_checkpoint_language(tiny_vits: Path) -> None:
    tts = build(f"transformers-tts:model={tiny_vits}")
    audio = tts.synthesize("hello there", "en-US")
    assert audio.sample_rate_hz == VITS_RATE_HZ and len(audio.samples) > 0 and audio.samples.dtype == np.float32
    assert np.isfinite(audio.samples).all() and float(np.abs(audio.samples).max()) > 0
    assert [tts.supports_language(t) for t in ("en", "en-US", "eng", "EN", "fr", "deu")] == [True] * 4 + [False] * 2
    meta = tts.metadata()
    assert (meta["language"], meta["sample_rate_hz"], meta["device"], meta["model_type"]) == (
        "eng",
        VITS_RATE_HZ,
        "cpu",
        "vits",
    )
    assert tts.batch_size == 8 and type(tts).gpu and not type(tts).accepts_instruction


def test_batched_clips_equal_one_at_a_time_clips_and_are_repeatable(tiny_vits: Path) -> None:
    tts = build(f"transformers-tts:model={tiny_vits}:batch_size=2")
    alone = [tts.synthesize(t, "en").samples for t in TEXTS]
    assert len({len(a) for a in alone}) == len(TEXTS)  # different lengths: the batch is padded
    batched = [a.samples for a in tts.synthesize_batch(TEXTS[::-1], ["en"] * 3, [None] * 3)][::-1]
    for text, a, b in zip(TEXTS, alone, batched):
        assert len(a) == len(b), text
        np.testing.assert_allclose(b, a, rtol=0, atol=ATOL, err_msg=text)
    # Deterministic across instances; the seed (and only the seed) changes the sampled noise.
    again = build(f"transformers-tts:model={tiny_vits}").synthesize(TEXTS[1], "en").samples
    np.testing.assert_allclose(again, alone[1], rtol=0, atol=ATOL)
    other_seed = build(f"transformers-tts:model={tiny_vits}:seed=7").synthesize(TEXTS[1], "en").samples
    assert len(other_seed) != len(alone[1]) or not np.allclose(other_seed, alone[1], atol=ATOL)
    # Without noise the seed does not matter at all.
    quiet = [
        build(f"transformers-tts:model={tiny_vits}:noise_scale=0:noise_scale_duration=0:seed={s}")
        .synthesize(TEXTS[2], "en")
        .samples
        for s in (0, 7)
    ]
    np.testing.assert_array_equal(quiet[0], quiet[1])


def test_multi_speaker_batches_match_too(tmp_path: Path) -> None:
    path = build_tiny_vits(tmp_path / "two-speakers", num_speakers=2)
    tts = build(f"transformers-tts:model={path}:speaker_id=1")
    alone = [tts.synthesize(t, "en").samples for t in TEXTS[:2]]
    for a, b in zip(alone, tts.synthesize_batch(TEXTS[:2], ["en"] * 2, [None] * 2)):
        np.testing.assert_allclose(b.samples, a, rtol=0, atol=ATOL)
    speaker0 = build(f"transformers-tts:model={path}:speaker_id=0").synthesize(TEXTS[0], "en").samples
    assert len(speaker0) != len(alone[0]) or not np.allclose(speaker0, alone[0], atol=ATOL)


def test_synthesis_stage_uses_synthesize_batch_and_stores_ok_rows(tiny_vits: Path, tmp_path: Path) -> None:
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.synthesize import synthesize_rows

    spec = Spec.parse(f"transformers-tts:model={tiny_vits}:batch_size=2")
    provider = build(spec.canonical)
    calls: list[int] = []
    real = provider.synthesize_batch

    def counting(texts: list[str], languages: list[str], instructions: list[str | None]) -> list[Audio]:
        calls.append(len(texts))
        return real(texts, languages, instructions)

    provider.synthesize_batch = counting
    items = [{"item_id": f"i{n}", "text": t, "language": "en-US", "category": "emotions"} for n, t in enumerate(TEXTS)]
    items.append({"item_id": "fr", "text": "bonjour", "language": "fr-FR", "category": "emotions"})
    store = ArtifactStore(str(tmp_path / "store"))
    settings = load_settings(store=str(tmp_path / "store"))
    rows = synthesize_rows(provider, spec, items, settings, store)
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "unsupported"]
    assert calls == [2, 1]  # the stage's chunks of batch_size; the French item never reaches the model
    assert {r["sample_rate_hz"] for r in rows[:3]} == {VITS_RATE_HZ}
    assert all(r["duration_s"] > 0 for r in rows[:3])
    clip = Audio.from_wav_bytes(store.get_audio(rows[1]["audio_sha256"]))
    assert clip.sample_rate_hz == VITS_RATE_HZ and len(clip.samples) == round(rows[1]["duration_s"] * VITS_RATE_HZ)


def test_missing_model_names_the_path_and_bad_input_is_permanent(tiny_vits: Path, tmp_path: Path) -> None:
    from ttseval.core.errors import PermanentProviderError, SpecError

    missing = tmp_path / "no-such-model"
    with pytest.raises(SpecError, match=str(missing)):
        build(f"transformers-tts:model={missing}")
    with pytest.raises(SpecError, match="needs a model"):
        build("transformers-tts")
    with pytest.raises(SpecError, match="device"):
        build(f"transformers-tts:model={tiny_vits}:device=tpu")
    silent = build_tiny_vits(tmp_path / "no-language", language=None)
    with pytest.raises(SpecError, match="declares no language.*language="):
        build(f"transformers-tts:model={silent}")
    assert build(f"transformers-tts:model={silent}:language=fra").supports_language("fr-CA")

    tts = build(f"transformers-tts:model={tiny_vits}")
    for text in ("", "!!! 123 ?"):  # nothing in the vocabulary
        with pytest.raises(PermanentProviderError, match="can encode"):
            tts.synthesize(text, "en")
    with pytest.raises(PermanentProviderError, match="not 'fr'"):
        tts.synthesize("bonjour", "fr")


def test_cuda_out_of_memory_is_transient(tiny_vits: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from ttseval.core.errors import TransientProviderError

    tts = build(f"transformers-tts:model={tiny_vits}")
    model = tts._load()[0]

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(model.text_encoder, "forward", out_of_memory)
    with pytest.raises(TransientProviderError, match="out of memory"):
        tts.synthesize("hello", "en")


def test_placement_of_model_and_cpu_stages() -> None:
    import dask

    from ttseval.core.config import load_settings
    from ttseval.flows.common import placement
    from ttseval.flows.runner import local_cluster_kwargs

    gpu, cpu = load_settings(gpu=True), load_settings(gpu=False)

    def annotations(where) -> dict:
        with where:
            return dict(dask.get_annotations())

    assert annotations(placement(gpu, True, True)) == {"resources": {"GPU": 1}}
    assert annotations(placement(gpu, False, True)) == {"resources": {"CPU": 1}}
    assert annotations(placement(gpu, False, False)) == {}  # no CPU workers: anywhere, never stuck
    assert annotations(placement(cpu, True, True)) == annotations(placement(cpu, False, True)) == {}
    # a LocalCluster's workers have both, so both kinds of task run there
    assert local_cluster_kwargs(load_settings(gpu=True, threads_per_worker=2))["resources"] == {"GPU": 1, "CPU": 2}
