"""DNSMOS through speechmos' bundled ONNX models, on real synthesized speech and seeded noise."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import QualityProvider
from ttseval.providers.quality.dnsmos import DNSMOSQuality
from ttseval.providers.tts.piper import PiperTTS

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def dnsmos() -> DNSMOSQuality:
    return DNSMOSQuality()


@pytest.fixture(scope="module")
def speech() -> Audio:
    return PiperTTS(noise_scale="0", noise_w_scale="0").synthesize(SENTENCE, "en-US")


def _noise(duration_s: float, rate_hz: int = 16000) -> Audio:
    rng = np.random.default_rng(1234)
    samples = np.clip(0.3 * rng.standard_normal(int(duration_s * rate_hz)), -1.0, 1.0)
    return Audio(samples=samples.astype(np.float32), sample_rate_hz=rate_hz)


def test_speech_scores_on_the_mos_scale(dnsmos: DNSMOSQuality, speech: Audio) -> None:
    [score] = dnsmos.score([speech])
    assert 1.0 <= score.mos <= 5.0
    assert set(score.details) == {"sig", "bak", "ovrl", "p808"}
    assert score.mos == score.details["ovrl"]
    assert all(1.0 <= v <= 5.0 for v in score.details.values()), score.details
    # Piper speech is clean: background is rated high
    assert score.details["bak"] > 3.5
    assert isinstance(dnsmos, QualityProvider)


def test_noise_scores_below_speech_and_order_is_kept(dnsmos: DNSMOSQuality, speech: Audio) -> None:
    noise_score, speech_score = dnsmos.score([_noise(3.0), speech])
    assert noise_score.mos < speech_score.mos - 1.0
    assert noise_score.details["bak"] < 2.0


def test_short_clip_is_tiled_like_speechmos(dnsmos: DNSMOSQuality, speech: Audio) -> None:
    one_second = Audio(samples=speech.samples[: speech.sample_rate_hz], sample_rate_hz=speech.sample_rate_hz)
    [short] = dnsmos.score([one_second])
    assert 1.0 <= short.mos <= 5.0 and np.isfinite(short.details["p808"])
    # speechmos repeats a short clip up to its 9.01 s window: scoring the tiled clip ourselves gives the same
    clip16 = one_second.resampled(16000).samples
    tiled = np.tile(clip16, 16)  # 16 s; the first 9.01 s window equals what speechmos builds by doubling
    [direct] = dnsmos.score([Audio(samples=tiled[: int(9.01 * 16000)], sample_rate_hz=16000)])
    assert short.mos == pytest.approx(direct.mos, abs=1e-6)


def test_batched_scores_equal_speechmos_own_call(dnsmos: DNSMOSQuality, speech: Audio) -> None:
    """The independent computation is speechmos' `DNSMOS.__call__`, one clip at a time (one ONNX run per window,
    librosa's power_to_db per window). Clips: 1 s (tiled), speech (~3 s), 11 s and 21 s (past speechmos' 7-window
    quirk), 5 s of noise; 2 + 3 + 7 windows and more, across more than one ONNX call of WINDOWS_PER_CALL."""
    from speechmos.dnsmos import DNSMOS

    import ttseval.providers.quality.dnsmos as module

    rate = speech.sample_rate_hz
    long = Audio(samples=np.tile(speech.samples, 8)[: 21 * rate], sample_rate_hz=rate)
    clips = [
        Audio(samples=speech.samples[:rate], sample_rate_hz=rate),
        speech,
        Audio(samples=np.tile(speech.samples, 4)[: 11 * rate], sample_rate_hz=rate),
        long,
        _noise(5.0),
    ]
    primary, p808 = dnsmos._model_paths()
    reference = DNSMOS(str(primary), str(p808))
    expected = [reference(np.clip(c.resampled(16000).samples, -1, 1).astype(np.float32), 16000, False) for c in clips]
    old, module.WINDOWS_PER_CALL = module.WINDOWS_PER_CALL, 4  # several ONNX calls per batch
    try:
        got = dnsmos.score(clips)
    finally:
        module.WINDOWS_PER_CALL = old
    for g, e in zip(got, expected):
        for ours, theirs in (("ovrl", "ovrl_mos"), ("sig", "sig_mos"), ("bak", "bak_mos"), ("p808", "p808_mos")):
            assert g.details[ours] == pytest.approx(float(e[theirs]), abs=1e-4), (ours, g.details, e)
    assert len(module._windows(long.resampled(16000).samples)) == 7  # speechmos' float arithmetic, kept
    assert [s.mos for s in dnsmos.score(clips[::-1])] == pytest.approx([s.mos for s in got][::-1], abs=1e-6)


def test_a_worker_share_of_the_cores_caps_the_onnx_threads(monkeypatch, speech: Audio) -> None:
    """The flows' LocalCluster gives each worker cores / workers threads (ttseval.flows.runner.local_cluster_kwargs);
    the sessions take it, and the scores do not change with it."""
    from ttseval.core.config import Settings
    from ttseval.flows.runner import local_cluster_kwargs
    from ttseval.providers import MODEL_THREADS_VARIABLE

    share = local_cluster_kwargs(Settings(n_workers=2))["env"][MODEL_THREADS_VARIABLE]
    import os

    assert share == str(max(1, (os.cpu_count() or 1) // 2))
    assert local_cluster_kwargs(Settings(n_workers=64))["env"][MODEL_THREADS_VARIABLE] == "1"
    free = DNSMOSQuality()
    assert free._load().onnx_sess.get_session_options().intra_op_num_threads == 0  # ORT's default: all cores
    monkeypatch.setenv(MODEL_THREADS_VARIABLE, "1")
    capped = DNSMOSQuality()
    options = capped._load().onnx_sess.get_session_options()
    assert options.intra_op_num_threads == 1 and options.inter_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert capped.score([speech])[0].details == pytest.approx(free.score([speech])[0].details, abs=1e-5)
    from ttseval.providers.tts.piper import PiperTTS

    piper = PiperTTS(noise_scale="0", noise_w_scale="0")
    assert piper._load().session.get_session_options().intra_op_num_threads == 1


def test_sessions_are_built_once(dnsmos: DNSMOSQuality, speech: Audio) -> None:
    dnsmos.score([speech])
    model = dnsmos._load()
    sessions = (model.onnx_sess, model.p808_onnx_sess)
    dnsmos.score([speech, speech])
    assert (dnsmos._load().onnx_sess, dnsmos._load().p808_onnx_sess) == sessions


def test_empty_clip_and_bad_config_raise(dnsmos: DNSMOSQuality) -> None:
    with pytest.raises(PermanentProviderError, match="no samples"):
        dnsmos.score([Audio(samples=np.zeros(0, dtype=np.float32), sample_rate_hz=16000)])
    with pytest.raises(ValueError, match="'window'"):
        DNSMOSQuality(window="9")
    with pytest.raises(ValueError, match=r"dnsmos takes no model name \(got 'slt'\); options: personalized"):
        DNSMOSQuality("slt")


def test_metadata(dnsmos: DNSMOSQuality) -> None:
    meta = json.loads(json.dumps(dnsmos.metadata()))
    assert meta["version"] == "0.0.1.1" and meta["sample_rate_hz"] == 16000
    assert meta["model_files"] == ["dnsmos_models/sig_bak_ovr.onnx", "dnsmos_models/model_v8.onnx"]
    assert DNSMOSQuality(personalized="true").metadata()["model_files"][0] == "pdnsmos_models/sig_bak_ovr.onnx"


def test_a_score_off_the_mos_scale_is_a_final_row_not_a_failed_run() -> None:
    """The quality stage's row for a predictor's answer (tasks/quality.mos_row): a score outside MOS_BOUNDS, or not a
    finite number, is the model's own answer, the same on every try: a final failed row that names the value. Before,
    the table's expectation (mos on the scale) failed the whole run (NISQA with random weights on espeak-ng clips)."""
    from ttseval.core.config import Settings
    from ttseval.core.protocols import MOS_BOUNDS
    from ttseval.tasks.quality import mos_row

    key = ("item-1", "sys", "nisqa")

    def row(mos: float) -> dict:
        return mos_row({}, {"mos": mos, "details": {"noi": 2.0}}, Settings(), "quality[nisqa]", key)

    assert row(3.25) == {"mos": 3.25, "details": '{"noi": 2.0}', "status": "ok", "retryable": False, "attempt": 1}
    assert row(MOS_BOUNDS[0])["status"] == row(MOS_BOUNDS[1])["status"] == "ok"  # the bounds are on the scale
    for mos in (7.2, 0.2, float("nan"), float("inf")):
        found = row(mos)
        assert (found["status"], found["retryable"], found["error_type"]) == ("failed", False, "PermanentProviderError")
        assert found["error_message"].startswith(f"the predictor's score {mos!r} is off the MOS scale (0.5-5.5)")
