"""Dia through transformers, the cloning transformers TTS: a tiny Dia built here (Dia-1.6B's token layout, random
weights), checked against the processor and model called by hand, with and without a voice prompt."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support.tiny_models import build_tiny_dia
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import TTSProvider, VoicePrompt
from ttseval.providers.tts import TTS


@pytest.fixture(scope="module")
def tiny_dia(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_dia(tmp_path_factory.mktemp("tiny-dia"))


@pytest.fixture(scope="module")
def dia(tiny_dia: Path):
    return TTS.build(f"transformers-dia:model={tiny_dia}:do_sample=false:max_new_tokens=30")


PROMPT = VoicePrompt(Audio((0.3 * np.sin(np.arange(22050) * 0.07)).astype(np.float32), 22050), "A short prompt.")


def _by_hand(directory: Path, script: str, prompt: Audio | None) -> np.ndarray:
    """The processor and model as Dia's transformers docs use them, greedy, 30 new frames."""
    import librosa
    import torch
    from transformers import DiaForConditionalGeneration, DiaProcessor

    processor = DiaProcessor.from_pretrained(directory)
    model = DiaForConditionalGeneration.from_pretrained(directory).eval()
    kwargs = {}
    if prompt is not None:
        kwargs = {
            "audio": [librosa.resample(prompt.samples, orig_sr=prompt.sample_rate_hz, target_sr=44100)],
            "sampling_rate": 44100,
        }
    inputs = processor(text=[script], padding=True, return_tensors="pt", **kwargs)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=30, guidance_scale=3.0, do_sample=False)
    length = processor.get_audio_prompt_len(inputs["decoder_attention_mask"]) if prompt is not None else None
    return processor.batch_decode(out, audio_prompt_len=length)[0].numpy()


def test_without_a_prompt_it_speaks_what_the_model_makes_by_hand(dia, tiny_dia: Path) -> None:
    clip = dia.synthesize("Hello there.", "en-US")
    assert clip.sample_rate_hz == 44100 and clip.samples.size > 0 and clip.samples.size % 512 == 0
    assert np.abs(clip.samples - _by_hand(tiny_dia, "[S1] Hello there.", None)).max() < 1e-5


def test_a_prompt_is_heard_first_and_cut_from_the_output(dia, tiny_dia: Path) -> None:
    clip = dia.synthesize("Hello there.", "en-US", prompt=PROMPT)
    want = _by_hand(tiny_dia, "[S1] A short prompt. [S1] Hello there.", PROMPT.audio)
    assert clip.samples.shape == want.shape and np.abs(clip.samples - want).max() < 1e-5
    plain = dia.synthesize("Hello there.", "en-US")
    # the prompt changes the codes (checked by hand: 15 of 15 frames differ); the tiny codec decodes them to audio
    # 6e-4 apart, 60 times the tolerance above, so a provider that dropped the prompt would fail the line above
    assert clip.samples.shape != plain.samples.shape or np.abs(clip.samples - plain.samples).max() > 1e-4
    # the prompt's own frames are not in the clip: it is no longer than what was generated after them
    assert clip.duration_s <= 30 * 512 / 44100 + 1e-9


def test_declares_cloning_and_refuses_an_empty_prompt(dia) -> None:
    assert isinstance(dia, TTSProvider) and dia.clones_voice is True
    assert dia.supports_language("en-GB") and not dia.supports_language("fr")
    with pytest.raises(PermanentProviderError, match="no samples"):
        dia.synthesize("Hi.", "en", prompt=VoicePrompt(Audio(np.zeros(0, np.float32), 16000), "x"))
    meta = json.loads(json.dumps(dia.metadata()))
    assert meta["engine"] == "transformers-dia" and meta["options"]["do_sample"] is False


def test_sampling_is_seeded_per_request(tiny_dia: Path) -> None:
    sampled = TTS.build(f"transformers-dia:model={tiny_dia}:max_new_tokens=20")
    a, b = (sampled.synthesize("Same words.", "en") for _ in range(2))
    assert np.array_equal(a.samples, b.samples)  # the same request, the same clip
    other = TTS.build(f"transformers-dia:model={tiny_dia}:max_new_tokens=20:seed=7").synthesize("Same words.", "en")
    assert a.samples.shape != other.samples.shape or not np.array_equal(a.samples, other.samples)


def test_the_synthesis_stage_hands_dia_each_items_stored_prompt(dia, tiny_dia: Path, tmp_path: Path) -> None:
    from ttseval.core.audio import sha256_hex
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.synthesize import synthesize_rows

    store = ArtifactStore(str(tmp_path / "store"))
    wav = PROMPT.audio.to_wav_bytes()
    store.put_audio(wav, sha := sha256_hex(wav))
    item = {
        "item_id": "a",
        "text": "Hello there.",
        "language": "en",
        "instruction": None,
        "prompt_audio_sha256": sha,
        "prompt_text": PROMPT.text,
    }
    spec = Spec.parse(f"transformers-dia:model={tiny_dia}:do_sample=false:max_new_tokens=30")
    [row] = synthesize_rows(dia, spec, [item], load_settings(store=store.uri), store)
    assert row["status"] == "ok"
    direct = dia.synthesize("Hello there.", "en", prompt=VoicePrompt(Audio.from_wav_bytes(wav), PROMPT.text))
    assert row["audio_sha256"] == sha256_hex(direct.to_wav_bytes())  # the stored prompt, as stored (16-bit WAV)
