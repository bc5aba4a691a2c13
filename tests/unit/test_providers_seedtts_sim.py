"""Seed-TTS-eval's SIM encoder (`seedtts-sim`) on a small checkpoint in the layout of UniSpeech's
wavlm_large_finetune.pth with random weights (tests/support/tiny_models.py): embeddings equal a forward pass written out
here from the checkpoint's tensors alone (WavLM as s3prl runs UniSpeech's code, the ECAPA_TDNN head, the layer
weighting), a batch equals each clip alone, and missing tensors and short clips are refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.support.tiny_models import SEEDTTS_SIM_SIZES, build_random_seedtts_sim
from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, SpecError
from ttseval.core.protocols import SpeakerEncoder
from ttseval.metrics.similarity import cosine_similarity
from ttseval.providers.speaker import SPEAKERS


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    return build_random_seedtts_sim(tmp_path_factory.mktemp("seedtts-sim") / "wavlm_large_finetune.pth")


@pytest.fixture(scope="module")
def sim(weights):
    return SPEAKERS.build(f"seedtts-sim:weights={weights}:device=cpu")


def _voice(rate_hz: int, seconds: float, f0: float, seed: int) -> Audio:
    rng = np.random.default_rng(seed)
    t = np.arange(int(rate_hz * seconds)) / rate_hz
    wave = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 6)) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return Audio((0.2 * wave + 0.01 * rng.standard_normal(t.size)).astype(np.float32), rate_hz)


def _by_hand(w: dict, wave):
    """The reference's embedding of one clip (1-D, 16 kHz), from the checkpoint's tensors `w` with torch functions
    only: s3prl's WavLM expert (layer norm of the wave; WavLM with layer-normed convolutions, layer-norm-first
    transformer, gated relative position bias; hidden states = each layer's input and the normed encoder output),
    then ECAPA_TDNN.get_feat and forward."""
    import torch
    import torch.nn.functional as F

    s = SEEDTTS_SIM_SIZES
    p = "feature_extract.model."
    x = F.layer_norm(wave, wave.shape)[None, None]  # (1, 1, samples)
    for i, stride in enumerate((5, 2, 2, 2, 2, 2, 2)):
        x = F.conv1d(x, w[f"{p}feature_extractor.conv_layers.{i}.0.weight"], stride=stride)
        x = F.layer_norm(
            x.transpose(1, 2),
            (x.shape[1],),
            w[f"{p}feature_extractor.conv_layers.{i}.2.1.weight"],
            w[f"{p}feature_extractor.conv_layers.{i}.2.1.bias"],
        ).transpose(1, 2)
        x = F.gelu(x)
    x = F.layer_norm(x.transpose(1, 2), (x.shape[1],), w[f"{p}layer_norm.weight"], w[f"{p}layer_norm.bias"])
    x = x @ w[f"{p}post_extract_proj.weight"].T + w[f"{p}post_extract_proj.bias"]  # (1, T, hidden)
    v, g = w[f"{p}encoder.pos_conv.0.weight_v"], w[f"{p}encoder.pos_conv.0.weight_g"]
    kernel = v * (g / v.pow(2).sum(dim=(0, 1), keepdim=True).sqrt())  # weight_norm(dim=2)
    pos = F.conv1d(
        x.transpose(1, 2),
        kernel,
        w[f"{p}encoder.pos_conv.0.bias"],
        padding=s["pos_kernel"] // 2,
        groups=s["pos_groups"],
    )[:, :, :-1]  # SamePad: an even kernel gives one frame too many
    x = x + F.gelu(pos).transpose(1, 2)
    frames, heads = x.shape[1], s["heads"]
    half = s["buckets"] // 2
    exact = half // 2
    rel = torch.arange(frames)[None, :] - torch.arange(frames)[:, None]  # key position - query position
    far = (
        (exact + torch.log(rel.abs().clamp(min=1).float() / exact) / math.log(800 / exact) * (half - exact))
        .long()
        .clamp(max=half - 1)
    )
    bucket = (rel > 0).long() * half + torch.where(rel.abs() < exact, rel.abs(), far)
    position_bias = w[f"{p}encoder.layers.0.self_attn.relative_attention_bias.weight"][bucket].permute(2, 0, 1)
    states = []
    for n in range(s["layers"]):
        states.append(x[0])
        L = f"{p}encoder.layers.{n}."

        def dense(name, t, L=L):  # this layer's weights, bound here
            return t @ w[L + name + ".weight"].T + w[L + name + ".bias"]

        y = F.layer_norm(x[0], (x.shape[2],), w[L + "self_attn_layer_norm.weight"], w[L + "self_attn_layer_norm.bias"])
        split = y.view(frames, heads, -1).transpose(0, 1)  # (heads, T, head_dim)
        gates = torch.sigmoid(dense("self_attn.grep_linear", split).view(heads, frames, 2, 4).sum(-1))
        gate = gates[..., :1] * (gates[..., 1:] * w[L + "self_attn.grep_a"][0] - 1.0) + 2.0  # (heads, T, 1)
        q, k, val = (dense(f"self_attn.{name}_proj", y).view(frames, heads, -1).transpose(0, 1) for name in "qkv")
        scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]) + gate * position_bias
        attended = (torch.softmax(scores, dim=-1) @ val).transpose(0, 1).reshape(frames, -1)
        h = x[0] + dense("self_attn.out_proj", attended)
        z = F.layer_norm(h, (h.shape[1],), w[L + "final_layer_norm.weight"], w[L + "final_layer_norm.bias"])
        x = (h + dense("fc2", F.gelu(dense("fc1", z))))[None]
    states.append(
        F.layer_norm(x[0], (x.shape[2],), w[f"{p}encoder.layer_norm.weight"], w[f"{p}encoder.layer_norm.bias"])
    )
    # ECAPA_TDNN.get_feat: softmax-weighted sum of the states, + 1e-6, instance norm over time per channel
    mixed = (torch.softmax(w["feature_weight"], 0)[:, None, None] * torch.stack(states)).sum(0).T + 1e-6
    feats = (mixed - mixed.mean(1, keepdim=True)) / (mixed.var(1, unbiased=False, keepdim=True) + 1e-5).sqrt()

    def crb(name, t, padding=0):  # Conv1dReluBn: conv, ReLU, batch norm (eval)
        return bn(name + ".bn", F.relu(F.conv1d(t, w[name + ".conv.weight"], w[name + ".conv.bias"], padding=padding)))

    def bn(name, t):
        return (t - w[name + ".running_mean"][:, None]) / (w[name + ".running_var"][:, None] + 1e-5).sqrt() * w[
            name + ".weight"
        ][:, None] + w[name + ".bias"][:, None]

    def se_res2(name, t, dilation):
        y = crb(name + ".Conv1dReluBn1", t)
        width = s["channels"] // s["scale"]
        groups, outs, carry = list(y.split(width, 0)), [], None
        for i in range(s["scale"] - 1):
            carry = groups[i] if carry is None else carry + groups[i]
            c = f"{name}.Res2Conv1dReluBn."
            carry = F.conv1d(
                carry[None], w[f"{c}convs.{i}.weight"], w[f"{c}convs.{i}.bias"], padding=dilation, dilation=dilation
            )[0]
            carry = bn(f"{c}bns.{i}", F.relu(carry))
            outs.append(carry)
        y = crb(name + ".Conv1dReluBn2", torch.cat(outs + groups[-1:]))
        squeeze = F.relu(w[name + ".SE_Connect.linear1.weight"] @ y.mean(1) + w[name + ".SE_Connect.linear1.bias"])
        excite = torch.sigmoid(w[name + ".SE_Connect.linear2.weight"] @ squeeze + w[name + ".SE_Connect.linear2.bias"])
        return t + y * excite[:, None]

    out1 = crb("layer1", feats[None], padding=2)[0]  # kernel 5
    out2 = se_res2("layer2", out1, 2)
    out3 = se_res2("layer3", out2, 3)
    out4 = se_res2("layer4", out3, 4)
    y = F.relu(w["conv.weight"][:, :, 0] @ torch.cat([out2, out3, out4]) + w["conv.bias"][:, None])
    alpha = torch.tanh(w["pooling.linear1.weight"][:, :, 0] @ y + w["pooling.linear1.bias"][:, None])
    alpha = torch.softmax(w["pooling.linear2.weight"][:, :, 0] @ alpha + w["pooling.linear2.bias"][:, None], dim=1)
    mean = (alpha * y).sum(1)
    std = ((alpha * y * y).sum(1) - mean**2).clamp(min=1e-9).sqrt()
    pooled = bn("bn", torch.cat([mean, std])[:, None])[:, 0]
    return (w["linear.weight"] @ pooled + w["linear.bias"]).numpy()


def test_embeddings_equal_a_forward_written_out_from_the_checkpoint(sim, weights) -> None:
    import sys

    import librosa
    import torch

    clips = [_voice(16000, 1.0, 120, 0), _voice(16000, 1.5, 200, 1), _voice(22050, 1.2, 140, 3)]
    got = sim.embed(clips)
    tensors = torch.load(weights, weights_only=True)["model"]
    for clip, vector in zip(clips, got):
        samples = librosa.resample(clip.samples, orig_sr=clip.sample_rate_hz, target_sr=16000)
        with torch.no_grad():
            want = _by_hand(tensors, torch.from_numpy(samples))
        assert vector.shape == (SEEDTTS_SIM_SIZES["embedding"],) and vector.dtype == np.float32
        assert np.abs(vector - want).max() < 1e-5, np.abs(vector - want).max()
    assert np.abs(got[0] - got[1]).max() > 1e-2  # different clips, different embeddings: the weights were loaded
    assert isinstance(sim, SpeakerEncoder) and "torchaudio" not in sys.modules


def test_the_key_mapping_names_every_tensor_of_transformers_wavlm_once() -> None:
    from transformers import WavLMConfig, WavLMModel

    from ttseval.providers.speaker.seedtts_wavlm import wavlm_key, wavlm_keys

    positional = (
        "encoder.pos_conv_embed.conv.parametrizations.weight.original0",
        "encoder.pos_conv_embed.conv.parametrizations.weight.original1",
    )
    for bias in (False, True):
        mapped = [wavlm_key(k, positional) for k in wavlm_keys(2, conv_bias=bias)]
        model = WavLMModel(
            WavLMConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=64,
                conv_dim=[16] * 7,
                conv_bias=bias,
                feat_extract_norm="layer",
                do_stable_layer_norm=True,
                num_conv_pos_embeddings=16,
                num_conv_pos_embedding_groups=4,
                mask_time_prob=0.0,
            )
        )
        assert len(mapped) == len(set(mapped)) == len(model.state_dict()) == 7 * (4 if bias else 3) + 9 + 2 * 19 + 1
        assert set(mapped) == set(model.state_dict())
    assert (
        wavlm_key("encoder.layers.5.self_attn.grep_linear.bias", positional)
        == "encoder.layers.5.attention.gru_rel_pos_linear.bias"
    )
    assert (
        wavlm_key("encoder.layers.0.self_attn.relative_attention_bias.weight", positional)
        == "encoder.layers.0.attention.rel_attn_embed.weight"
    )
    assert wavlm_key("encoder.layers.3.self_attn_layer_norm.weight", positional) == "encoder.layers.3.layer_norm.weight"
    assert (
        wavlm_key("feature_extractor.conv_layers.6.2.1.bias", positional)
        == "feature_extractor.conv_layers.6.layer_norm.bias"
    )
    assert wavlm_key("layer_norm.weight", positional) == "feature_projection.layer_norm.weight"
    assert wavlm_key("encoder.pos_conv.0.weight_g", positional) == positional[0]
    assert wavlm_key("mask_emb", positional) is None and wavlm_key("final_proj.weight", positional) is None


def test_a_batch_of_different_lengths_equals_each_clip_alone(sim) -> None:
    import torch

    clips = [
        _voice(16000, 1.0, 120, 0),
        _voice(16000, 1.5, 200, 1),
        _voice(16000, 1.0, 160, 2),
        _voice(22050, 1.2, 140, 3),
        _voice(16000, 0.7, 90, 4),
    ]
    together = sim.embed(clips)
    for clip, vector in zip(clips, together):
        [alone] = sim.embed([clip])
        assert np.abs(vector - alone).max() < 1e-5
    short, long = clips[0].samples, clips[1].samples  # what a zero-padded batch would have given instead
    padded = np.zeros((2, long.size), np.float32)
    padded[0, : short.size], padded[1] = short, long
    with torch.no_grad():
        assert np.abs(sim._run(padded)[0] - together[0]).max() > 1e-2


def test_missing_tensors_other_files_and_short_clips_are_refused(sim, weights, tmp_path: Path) -> None:
    import torch

    stored = torch.load(weights, weights_only=True)
    del stored["model"]["feature_extract.model.encoder.layers.1.fc2.weight"]
    del stored["model"]["layer3.SE_Connect.linear1.bias"]
    lacking = tmp_path / "lacking.pth"
    torch.save(stored, lacking)
    with pytest.raises(
        PermanentProviderError,
        match=r"lacking\.pth' lack 2 of the model's .* tensors \(first: "
        r"\['feature_extract\.model\.encoder\.layers\.1\.fc2\.weight'",
    ):
        SPEAKERS.build(f"seedtts-sim:weights={lacking}:device=cpu").embed([_voice(16000, 0.5, 120, 0)])
    del stored["model"]["feature_extract.model.encoder.layers.0.self_attn.relative_attention_bias.weight"]
    torch.save(stored, lacking)
    with pytest.raises(
        PermanentProviderError,
        match="lacking.pth' lack the tensor 'feature_extract.model.encoder"
        ".layers.0.self_attn.relative_attention_bias.weight'",
    ):
        SPEAKERS.build(f"seedtts-sim:weights={lacking}:device=cpu").embed([_voice(16000, 0.5, 120, 0)])
    torch.save(stored["model"], tmp_path / "bare.pth")  # a state dict without the {'model': ...} wrapper
    with pytest.raises(PermanentProviderError, match="bare.pth' have no 'model' state dict"):
        SPEAKERS.build(f"seedtts-sim:weights={tmp_path / 'bare.pth'}:device=cpu").embed([_voice(16000, 0.5, 120, 0)])
    (tmp_path / "text.pth").write_text("not a checkpoint")
    with pytest.raises(PermanentProviderError, match="text.pth' are not a torch checkpoint"):
        SPEAKERS.build(f"seedtts-sim:weights={tmp_path / 'text.pth'}:device=cpu").embed([_voice(16000, 0.5, 120, 0)])
    with pytest.raises(
        SpecError,
        match=r"seedtts-sim needs UniSpeech's .*; it never downloads one: "
        r"seedtts-sim:weights=/path/wavlm_large_finetune.pth",
    ):
        SPEAKERS.build("seedtts-sim")
    with pytest.raises(SpecError, match=r"seedtts-sim weights='.*absent.pth': no such file; give the path of Uni"):
        SPEAKERS.build(f"seedtts-sim:weights={tmp_path / 'absent.pth'}")

    assert sim.embed([Audio(np.full(720, 0.1, np.float32) + _voice(16000, 0.045, 120, 5).samples, 16000)])[0].shape == (
        SEEDTTS_SIM_SIZES["embedding"],
    )  # two WavLM frames: enough
    with pytest.raises(PermanentProviderError, match="clip 1 of the batch: 44.9 ms is under 45 ms"):
        sim.embed([_voice(16000, 0.5, 120, 0), Audio(np.full(719, 0.1, np.float32), 16000)])
    with pytest.raises(PermanentProviderError, match="clip 0 of the batch: 0.0 ms"):
        sim.embed([Audio(np.zeros(0, np.float32), 16000)])
    assert sim.embed([]) == []
    assert json.loads(json.dumps(sim.metadata())) == {
        "engine": "transformers",
        "version": sim.version,
        "model": "UniSpeech WavLM-Large + ECAPA-TDNN speaker verification (Seed-TTS-eval SIM)",
        "model_file": "wavlm_large_finetune.pth",
        "embedding_size": 12,
        "wavlm_layers": 2,
        "sample_rate_hz": 16000,
        "device": "cpu",
        "batching": "equal lengths only",
    }


def test_similarity_falls_as_a_clip_is_perturbed_and_is_lowest_for_another_voice(sim, weights) -> None:
    """The encoder tells clips apart, not merely repeats itself: a louder or quieter copy is the same speaker (the
    wave is layer-normed first), a noisier copy drifts further the more noise it carries, another voice (other
    pitch, other noise) is further than a lightly perturbed copy, and the figure for two voices is the cosine of the
    embeddings written out by hand from the checkpoint."""
    import torch

    a, other = _voice(16000, 1.0, 120, 0), _voice(16000, 1.0, 220, 7)
    noise = np.random.default_rng(11).standard_normal(a.samples.size)
    noisier = [Audio((a.samples + sigma * noise).astype(np.float32), 16000) for sigma in (0.002, 0.005, 0.01)]
    quieter = Audio((0.5 * a.samples).astype(np.float32), 16000)
    [ea, eo, eq, *en] = sim.embed([a, other, quieter, *noisier])
    to_other = cosine_similarity(ea, eo)
    to_noisier = [cosine_similarity(ea, e) for e in en]
    assert cosine_similarity(ea, eq) == pytest.approx(1.0, abs=1e-6)
    assert to_noisier == sorted(to_noisier, reverse=True) and len(set(to_noisier)) == 3, to_noisier
    assert to_noisier[1] > to_other, (to_noisier, to_other)  # a copy under light noise beats another voice
    assert to_other < 0.99
    tensors = torch.load(weights, weights_only=True)["model"]
    with torch.no_grad():
        ha, ho = (_by_hand(tensors, torch.from_numpy(c.samples)).astype(np.float64) for c in (a, other))
    assert to_other == pytest.approx(float(ha @ ho / (np.linalg.norm(ha) * np.linalg.norm(ho))), abs=1e-5)
