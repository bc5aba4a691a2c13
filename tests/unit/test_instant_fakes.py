"""The instant providers (tests/support/instant.py) that the mechanics tests run on: what they claim holds through
the store's 16-bit WAV, so a test on them can rely on it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.fake_tts import tone
from tests.support.instant import InstantASR, InstantMOS, InstantTTS, hear, speak
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError

TEXT = "Où est la gare? The 3 quick foxes — مننه ډېره"


def stored(audio: Audio) -> Audio:
    """The clip as a worker reads it back from the store."""
    return Audio.from_wav_bytes(audio.to_wav_bytes())


def test_a_clip_is_heard_as_exactly_its_words_through_the_stored_wav() -> None:
    clip = stored(InstantTTS().synthesize(TEXT, "fr"))
    [transcript] = InstantASR().transcribe([clip], ["fr"])
    assert transcript.text == " ".join(TEXT.split())


def test_a_cut_clip_loses_exactly_the_words_it_cuts() -> None:
    words = ["one", "two", "three", "four", "five"]
    clip = speak(" ".join(words))
    block = round(0.02 * 16000)
    # the first three words and their silences are (3+1) + (3+1) + (5+1) blocks; cut inside the fourth word
    cut = Audio(clip.samples[: 14 * block + 2 * block], clip.sample_rate_hz)
    assert hear(stored(cut)) == "one two three"
    # a cut at the end of a word's last byte, before the silence after it, loses that word too
    assert hear(stored(Audio(clip.samples[: 13 * block], clip.sample_rate_hz))) == "one two"


def test_a_slower_voice_makes_longer_clips_by_its_pace_and_says_the_same() -> None:
    plain, slow = InstantTTS().synthesize(TEXT, "en"), InstantTTS(pace="1.3").synthesize(TEXT, "en")
    assert slow.duration_s == pytest.approx(1.3 * plain.duration_s, rel=1e-3)
    assert hear(stored(slow)) == hear(stored(plain)) == " ".join(TEXT.split())


def test_audio_that_is_not_the_instant_voice_is_heard_as_nothing() -> None:
    rng = np.random.default_rng(0)
    noise = Audio((0.1 * rng.standard_normal(16000)).astype(np.float32), 16000)
    assert hear(stored(Audio(tone(1.0, 16000), 16000))) == ""
    assert hear(stored(noise)) == ""
    assert hear(Audio(np.zeros(16000, dtype=np.float32), 16000)) == ""


def test_the_mos_is_one_plus_four_times_the_share_that_is_not_silence() -> None:
    # "ab cd": 2 + 2 byte blocks and 2 silences; 4 of 6 blocks sound
    silence = Audio(np.zeros(1600, dtype=np.float32), 16000)
    [voiced, quiet] = InstantMOS().score([stored(speak("ab cd")), silence])
    assert voiced.mos == pytest.approx(1 + 4 * 4 / 6) and quiet.mos == 1.0


def test_refuse_fails_the_texts_with_that_word_and_no_other() -> None:
    tts = InstantTTS(refuse="Wow")
    with pytest.raises(PermanentProviderError, match="Wow"):
        tts.synthesize("Wow, what a day", "en")
    assert tts.synthesize("What a day", "en").duration_s > 0


def test_drop_leaves_out_every_nth_word_and_only_limits_the_languages() -> None:
    mumbling = InstantTTS(drop="3")
    assert hear(stored(mumbling.synthesize("one two three four five six seven", "en"))) == "one two four five seven"
    english = InstantTTS(only="en")
    assert english.supports_language("en-GB") and not english.supports_language("fr")
    assert InstantTTS(only="en+fr").supports_language("fr-FR") and InstantTTS().supports_language("ps")


def test_log_gets_one_line_per_call(tmp_path) -> None:
    log = tmp_path / "calls.txt"
    tts = InstantTTS(log=str(log))
    tts.synthesize("a b", "en")
    tts.synthesize("c", "en")
    assert log.read_text().splitlines() == ["a b", "c"]
