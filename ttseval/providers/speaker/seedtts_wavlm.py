"""Seed-TTS-eval's SIM encoder (`seedtts-sim:weights=PATH`): UniSpeech's speaker-verification model, WavLM-Large with
an ECAPA-TDNN head (`ECAPA_TDNN_SMALL`, 256-d), from the checkpoint `wavlm_large_finetune.pth` of UniSpeech's
downstreams/speaker_verification README, read from a local file; nothing is downloaded.

What the reference does (microsoft/UniSpeech downstreams/speaker_verification: models/ecapa_tdnn.py, verification.py,
run by bytedance/seed-tts-eval's cal_sim.sh through verification_pair_list_v2.py), followed here step by step:

- the checkpoint is `{"model": state_dict}`; WavLM's tensors sit under `feature_extract.model.` (s3prl's
  `wavlm_large` upstream, UniSpeech's fairseq-style WavLM), the head's at the top level (`feature_weight`,
  `layer1`..`layer4`, `conv`, `pooling`, `bn`, `linear`); the training loss (`loss_calculator.*`) is unused. The
  reference loads it with strict=False, which would keep random weights for any tensor the file lacks: here a
  missing tensor is refused, naming the file.
- each clip alone, at 16 kHz (Seed-TTS-eval resamples with torchaudio; here `Audio.resampled`, soxr, so a clip at
  another rate may differ in the last digits), is layer-normalised over its samples (s3prl's WavLM expert, as
  WavLM-Large's config sets `normalize`);
- WavLM runs without a padding mask; its "hidden states" are s3prl's hooks: the input of each transformer layer
  (the first is the convolutional features, projected, plus the positional convolution) and the encoder's output
  after its final layer norm, 25 for WavLM-Large;
- the head takes their sum weighted by softmax(`feature_weight`), adds 1e-6, instance-normalises each channel over
  time, runs the ECAPA-TDNN and returns the 256-d `linear` output; SIM is the cosine of two such embeddings
  (ttseval.metrics normalises).

WavLM is transformers' `WavLMModel`, its config read off the checkpoint's tensor shapes (layers, width, heads from
the relative position embedding, feed-forward size, convolution channels and kernels, positional convolution) and the
fairseq key names mapped onto transformers' by `wavlm_key` below. What the shapes do not say is WavLM-Large's: the
layer-norm-first ("stable") transformer, layer-normalised convolutions (required: a checkpoint without them is
refused), the wav2vec 2.0 strides and max_distance 800 of the relative position buckets. The ECAPA head is written
here in torch with the reference's module names, so its tensors load strictly. The tests build a small checkpoint
of the same layout and compare with a forward pass written out from its tensors.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages
from ttseval.providers import (
    EngineVersion,
    TorchDevice,
    canonical_spec,
    out_of_memory,
    package_version,
    parse_options,
    torch_device,
)
from ttseval.providers.local_model import LazyModel, refuse_model_name, required_path

SAMPLE_RATE_HZ = 16000
MIN_SAMPLES = 720  # 45 ms: two WavLM frames (400 samples, then 320 a frame); instance norm needs more than one
WAVLM_PREFIX = "feature_extract.model."
CONV_KERNELS = (10, 3, 3, 3, 3, 2, 2)  # wav2vec 2.0's convolutional front end, as in every WavLM
CONV_STRIDES = (5, 2, 2, 2, 2, 2, 2)
MAX_DISTANCE = 800  # WavLM's relative position buckets (its config's max_distance); not in the tensors
HEAD_ROOTS = ("feature_weight", "layer1.", "layer2.", "layer3.", "layer4.", "conv.", "pooling.", "bn.", "linear.")
DILATIONS = (2, 3, 4)  # layer2..layer4's Res2 convolutions (kernel 3, padding = dilation)


class SeedTTSSimOptions(BaseModel):
    """Options of `seedtts-sim:key=value`."""

    weights: str = Field(
        "",
        description="path of UniSpeech's wavlm_large_finetune.pth (WavLM-Large + ECAPA-TDNN "
        "speaker verification); required, never downloaded",
    )
    device: TorchDevice = "auto"


CODE_REVISION = "seedtts-sim-1"  # bump when the head, the key mapping or the preprocessing changes


def wavlm_key(key: str, positional_weight: tuple[str, str]) -> str | None:
    """The transformers WavLMModel key of a UniSpeech/fairseq WavLM key (without `feature_extract.model.`), or None
    for a tensor inference does not use (`mask_emb`, pre-training heads). `positional_weight` names transformers'
    keys of the weight-normed positional convolution's g and v (they depend on the torch version)."""
    if m := re.fullmatch(r"feature_extractor\.conv_layers\.(\d+)\.0\.(weight|bias)", key):
        return f"feature_extractor.conv_layers.{m[1]}.conv.{m[2]}"
    if m := re.fullmatch(r"feature_extractor\.conv_layers\.(\d+)\.2\.1\.(weight|bias)", key):  # Fp32LayerNorm
        return f"feature_extractor.conv_layers.{m[1]}.layer_norm.{m[2]}"
    if m := re.fullmatch(r"(layer_norm|post_extract_proj)\.(weight|bias)", key):
        return f"feature_projection.{'projection' if m[1] == 'post_extract_proj' else 'layer_norm'}.{m[2]}"
    if key == "encoder.pos_conv.0.weight_g":
        return positional_weight[0]
    if key == "encoder.pos_conv.0.weight_v":
        return positional_weight[1]
    if key == "encoder.pos_conv.0.bias":
        return "encoder.pos_conv_embed.conv.bias"
    if re.fullmatch(r"encoder\.layer_norm\.(weight|bias)", key):
        return key
    if m := re.fullmatch(r"encoder\.layers\.(\d+)\.(.+)", key):
        renamed = {
            "self_attn.relative_attention_bias.weight": "attention.rel_attn_embed.weight",
            "self_attn.grep_a": "attention.gru_rel_pos_const",
        }
        tail = renamed.get(m[2])
        for old, new in (
            ("self_attn.grep_linear.", "attention.gru_rel_pos_linear."),
            ("self_attn_layer_norm.", "layer_norm."),
            ("self_attn.", "attention."),
            ("fc1.", "feed_forward.intermediate_dense."),
            ("fc2.", "feed_forward.output_dense."),
            ("final_layer_norm.", "final_layer_norm."),
        ):
            if tail is None and m[2].startswith(old):
                tail = new + m[2].removeprefix(old)
        return None if tail is None else f"encoder.layers.{m[1]}.{tail}"
    return None


def wavlm_keys(layers: int, conv_bias: bool) -> list[str]:
    """The UniSpeech names (without the prefix) of every WavLM tensor inference uses."""
    keys = [
        f"feature_extractor.conv_layers.{i}.{part}"
        for i in range(len(CONV_KERNELS))
        for part in ("0.weight", *(("0.bias",) if conv_bias else ()), "2.1.weight", "2.1.bias")
    ]
    keys += [
        "layer_norm.weight",
        "layer_norm.bias",
        "post_extract_proj.weight",
        "post_extract_proj.bias",
        "encoder.pos_conv.0.weight_g",
        "encoder.pos_conv.0.weight_v",
        "encoder.pos_conv.0.bias",
        "encoder.layer_norm.weight",
        "encoder.layer_norm.bias",
    ]
    for n in range(layers):
        keys += [
            f"encoder.layers.{n}.{part}"
            for part in (
                *(f"self_attn.{p}_proj.{w}" for p in "kvq" for w in ("weight", "bias")),
                "self_attn.out_proj.weight",
                "self_attn.out_proj.bias",
                "self_attn.grep_linear.weight",
                "self_attn.grep_linear.bias",
                "self_attn.grep_a",
                *(("self_attn.relative_attention_bias.weight",) if n == 0 else ()),
                "self_attn_layer_norm.weight",
                "self_attn_layer_norm.bias",
                "fc1.weight",
                "fc1.bias",
                "fc2.weight",
                "fc2.bias",
                "final_layer_norm.weight",
                "final_layer_norm.bias",
            )
        ]
    return keys


@functools.cache
def head_class() -> type:
    """UniSpeech's ECAPA_TDNN head as a torch module, with the reference's module names (its tensors' names)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class ConvReluBn(nn.Module):  # Conv1dReluBn: convolution, ReLU, then batch norm
        def __init__(self, cin: int, cout: int, kernel: int = 1, dilation: int = 1) -> None:
            super().__init__()
            self.conv = nn.Conv1d(cin, cout, kernel, padding=dilation * (kernel // 2), dilation=dilation)
            self.bn = nn.BatchNorm1d(cout)

        def forward(self, x: Any) -> Any:
            return self.bn(F.relu(self.conv(x)))

    class Res2(nn.Module):  # Res2Conv1dReluBn: `scale` channel groups, each but the last convolved after the one before
        def __init__(self, channels: int, scale: int, dilation: int) -> None:
            super().__init__()
            self.width = channels // scale
            self.convs = nn.ModuleList(
                nn.Conv1d(self.width, self.width, 3, padding=dilation, dilation=dilation) for _ in range(scale - 1)
            )
            self.bns = nn.ModuleList(nn.BatchNorm1d(self.width) for _ in range(scale - 1))

        def forward(self, x: Any) -> Any:
            groups, out, carry = torch.split(x, self.width, dim=1), [], None
            for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
                carry = groups[i] if carry is None else carry + groups[i]
                carry = bn(F.relu(conv(carry)))
                out.append(carry)
            return torch.cat([*out, groups[len(self.convs)]], dim=1)

    class SqueezeExcite(nn.Module):  # SE_Connect
        def __init__(self, channels: int, bottleneck: int) -> None:
            super().__init__()
            self.linear1 = nn.Linear(channels, bottleneck)
            self.linear2 = nn.Linear(bottleneck, channels)

        def forward(self, x: Any) -> Any:
            return x * torch.sigmoid(self.linear2(F.relu(self.linear1(x.mean(dim=2)))))[:, :, None]

    class SERes2Block(nn.Module):  # SE_Res2Block with equal in and out channels (no shortcut convolution)
        def __init__(self, channels: int, scale: int, dilation: int, bottleneck: int) -> None:
            super().__init__()
            self.Conv1dReluBn1 = ConvReluBn(channels, channels)
            self.Res2Conv1dReluBn = Res2(channels, scale, dilation)
            self.Conv1dReluBn2 = ConvReluBn(channels, channels)
            self.SE_Connect = SqueezeExcite(channels, bottleneck)

        def forward(self, x: Any) -> Any:
            return x + self.SE_Connect(self.Conv1dReluBn2(self.Res2Conv1dReluBn(self.Conv1dReluBn1(x))))

    class AttentiveStatsPool(nn.Module):  # attention over frames (tanh, softmax per channel): weighted mean and std
        def __init__(self, channels: int, attention: int) -> None:
            super().__init__()
            self.linear1 = nn.Conv1d(channels, attention, 1)
            self.linear2 = nn.Conv1d(attention, channels, 1)

        def forward(self, x: Any) -> Any:
            alpha = torch.softmax(self.linear2(torch.tanh(self.linear1(x))), dim=2)
            mean = (alpha * x).sum(dim=2)
            std = ((alpha * x * x).sum(dim=2) - mean * mean).clamp(min=1e-9).sqrt()
            return torch.cat([mean, std], dim=1)

    class SpeakerHead(nn.Module):
        def __init__(
            self,
            *,
            states: int,
            features: int,
            channels: int,
            scale: int,
            bottleneck: int,
            aggregate: int,
            attention: int,
            embedding: int,
        ) -> None:
            super().__init__()
            self.feature_weight = nn.Parameter(torch.zeros(states))
            self.instance_norm = nn.InstanceNorm1d(features)  # no affine, no running statistics: no tensors
            self.layer1 = ConvReluBn(features, channels, kernel=5)
            self.layer2, self.layer3, self.layer4 = (SERes2Block(channels, scale, d, bottleneck) for d in DILATIONS)
            self.conv = nn.Conv1d(channels * 3, aggregate, 1)
            self.pooling = AttentiveStatsPool(aggregate, attention)
            self.bn = nn.BatchNorm1d(aggregate * 2)
            self.linear = nn.Linear(aggregate * 2, embedding)

        def forward(self, hidden_states: list[Any]) -> Any:
            """The embedding (batch, embedding) of WavLM's hidden states, each (batch, frames, features)."""
            weights = torch.softmax(self.feature_weight, dim=-1)
            mixed = (weights[:, None, None, None] * torch.stack(hidden_states)).sum(dim=0)
            x = self.instance_norm(mixed.transpose(1, 2) + 1e-6)
            out2 = self.layer2(self.layer1(x))
            out3 = self.layer3(out2)
            out4 = self.layer4(out3)
            pooled = self.pooling(F.relu(self.conv(torch.cat([out2, out3, out4], dim=1))))
            return self.linear(self.bn(pooled))

    return SpeakerHead


class SeedTTSSimEncoder:
    """The 256-d embedding of UniSpeech's WavLM-Large + ECAPA-TDNN verifier (Seed-TTS-eval's SIM) for each clip,
    resampled to 16 kHz. Clips are batched only with clips of exactly the same length: the reference runs each clip
    alone, without a padding mask, and WavLM's attention and the head's pooling would count zero padding."""

    name: ClassVar[str] = "seedtts-sim"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=auto / cuda
    extra: ClassVar[str | None] = "models"
    output_sample_rate_hz: ClassVar[int | None] = None
    # the head and the key mapping are this file's code: a change to either is a new CODE_REVISION, so cached
    # embeddings are not reused across it (the rest of the version is transformers', which runs WavLM)
    version: ClassVar[EngineVersion] = EngineVersion(
        lambda: f"{CODE_REVISION}+transformers-{package_version('transformers')}"
    )
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torch", "transformers")
    batch_size: ClassVar[int] = 8

    def __init__(self, voice: str | None = None, **options: str) -> None:
        refuse_model_name(
            self.name, voice, instead="give its checkpoint: seedtts-sim:weights=/path/wavlm_large_finetune.pth"
        )
        self.options = parse_options(SeedTTSSimOptions, options, provider=self.name)
        self.weights = required_path(
            self.name,
            "weights",
            self.options.weights,
            what="UniSpeech's speaker-verification checkpoint (wavlm_large_finetune.pth)",
            example="/path/wavlm_large_finetune.pth",
        )
        self.spec = canonical_spec(self.name, voice, options)
        self.device = self.options.device
        self.sizes: dict[str, Any] = {}
        self._model: LazyModel[tuple[Any, Any]] = LazyModel(self._read_and_build)

    def _refuse(self, what: str) -> PermanentProviderError:
        return PermanentProviderError(
            f"seedtts-sim weights {str(self.weights)!r} {what}; expected UniSpeech's "
            "wavlm_large_finetune.pth ({'model': state dict})",
            spec=self.spec,
        )

    def _read(self) -> dict[str, Any]:
        import torch

        try:
            stored = torch.load(self.weights, map_location="cpu", weights_only=True)
        except Exception as e:
            raise self._refuse(f"are not a torch checkpoint: {str(e)[:300]}") from e
        state = stored.get("model") if isinstance(stored, dict) else None
        if not isinstance(state, dict):
            raise self._refuse("have no 'model' state dict")
        return state

    def _shape(self, state: dict[str, Any], key: str, dims: int) -> tuple[int, ...]:
        if key not in state:
            raise self._refuse(f"lack the tensor {key!r}")
        shape = tuple(state[key].shape)
        if len(shape) != dims:
            raise self._refuse(f"hold {key!r} of shape {shape}, not {dims}-dimensional")
        return shape

    def _sizes(self, state: dict[str, Any]) -> dict[str, Any]:
        """The model's sizes, read off the tensors' shapes."""
        p = WAVLM_PREFIX
        layers = len({int(m[1]) for k in state if (m := re.match(re.escape(p) + r"encoder\.layers\.(\d+)\.", k))})
        convs = [
            self._shape(state, f"{p}feature_extractor.conv_layers.{i}.0.weight", 3) for i in range(len(CONV_KERNELS))
        ]
        if tuple(c[2] for c in convs) != CONV_KERNELS:
            raise self._refuse(f"have convolution kernels {[c[2] for c in convs]}, not WavLM's {list(CONV_KERNELS)}")
        if f"{p}feature_extractor.conv_layers.1.2.1.weight" not in state:
            raise self._refuse("have no layer norm in every convolution (WavLM-Large's extractor_mode layer_norm)")
        hidden, _ = self._shape(state, f"{p}post_extract_proj.weight", 2)
        buckets, heads = self._shape(state, f"{p}encoder.layers.0.self_attn.relative_attention_bias.weight", 2)
        positional = self._shape(state, f"{p}encoder.pos_conv.0.weight_v", 3)
        channels, features, _ = self._shape(state, "layer1.conv.weight", 3)
        width = self._shape(state, "layer2.Res2Conv1dReluBn.convs.0.weight", 3)[0]
        aggregate = self._shape(state, "conv.weight", 3)[0]
        if not layers or features != hidden or hidden % heads or channels % width:
            raise self._refuse(
                f"do not fit together ({layers} WavLM layers of {hidden} features, {heads} heads; "
                f"a head on {features} features)"
            )
        return {
            "layers": layers,
            "hidden": hidden,
            "heads": heads,
            "buckets": buckets,
            "ffn": self._shape(state, f"{p}encoder.layers.0.fc1.weight", 2)[0],
            "conv_dim": [c[0] for c in convs],
            "conv_bias": f"{p}feature_extractor.conv_layers.0.0.bias" in state,
            "pos_kernel": positional[2],
            "pos_groups": hidden // positional[1],
            "channels": channels,
            "scale": channels // width,
            "bottleneck": self._shape(state, "layer2.SE_Connect.linear1.weight", 2)[0],
            "aggregate": aggregate,
            "attention": self._shape(state, "pooling.linear1.weight", 3)[0],
            "embedding": self._shape(state, "linear.weight", 2)[0],
        }

    def _build(self, state: dict[str, Any]) -> tuple[Any, Any]:
        from transformers import WavLMConfig, WavLMModel

        sizes = self._sizes(state)
        config = WavLMConfig(
            hidden_size=sizes["hidden"],
            num_hidden_layers=sizes["layers"],
            num_attention_heads=sizes["heads"],
            intermediate_size=sizes["ffn"],
            conv_dim=sizes["conv_dim"],
            conv_kernel=list(CONV_KERNELS),
            conv_stride=list(CONV_STRIDES),
            conv_bias=sizes["conv_bias"],
            feat_extract_norm="layer",
            do_stable_layer_norm=True,
            num_conv_pos_embeddings=sizes["pos_kernel"],
            num_conv_pos_embedding_groups=sizes["pos_groups"],
            num_buckets=sizes["buckets"],
            max_bucket_distance=MAX_DISTANCE,
            hidden_act="gelu",
            feat_extract_activation="gelu",
            layer_norm_eps=1e-5,
            mask_time_prob=0.0,
            mask_feature_prob=0.0,
            layerdrop=0.0,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            feat_proj_dropout=0.0,
        )
        wavlm = WavLMModel(config).eval()  # type: ignore[no-untyped-call]  # PreTrainedModel.eval is unannotated
        target = wavlm.state_dict()
        positional = next(
            (f"encoder.pos_conv_embed.conv.{g}", f"encoder.pos_conv_embed.conv.{v}")
            for g, v in (
                ("parametrizations.weight.original0", "parametrizations.weight.original1"),
                ("weight_g", "weight_v"),
            )
            if f"encoder.pos_conv_embed.conv.{g}" in target
        )
        head = head_class()(
            states=sizes["layers"] + 1,
            features=sizes["hidden"],
            channels=sizes["channels"],
            scale=sizes["scale"],
            bottleneck=sizes["bottleneck"],
            aggregate=sizes["aggregate"],
            attention=sizes["attention"],
            embedding=sizes["embedding"],
        ).eval()
        head_target = head.state_dict()
        needed = [WAVLM_PREFIX + k for k in wavlm_keys(sizes["layers"], sizes["conv_bias"])]
        needed += [k for k in head_target if not k.endswith("num_batches_tracked")]
        missing = [k for k in needed if k not in state]
        if missing:
            raise self._refuse(f"lack {len(missing)} of the model's {len(needed)} tensors (first: {missing[:3]})")
        mapped = {
            wavlm_key(k.removeprefix(WAVLM_PREFIX), positional): state[k] for k in needed if k.startswith(WAVLM_PREFIX)
        }
        heads = {k: state.get(k, head_target[k]) for k in head_target}  # num_batches_tracked: unused in eval
        try:
            wavlm.load_state_dict(mapped, strict=True)
            head.load_state_dict(heads, strict=True)
        except RuntimeError as e:  # shapes that disagree with the sizes read off the others
            raise self._refuse(f"do not load: {str(e)[:500]}") from e
        self.sizes = sizes
        return wavlm.to(self.device), head.to(self.device)

    def _load(self) -> tuple[Any, Any]:
        """(WavLM, speaker head), loaded once."""
        return self._model.get()

    def _read_and_build(self) -> tuple[Any, Any]:
        self.device = torch_device(self.options.device)
        return self._build(self._read())  # the state dict is dropped once the modules hold their copies

    def _run(self, rows: np.ndarray) -> np.ndarray:
        """The embeddings of equal-length clips (batch, samples) at 16 kHz."""
        import torch
        import torch.nn.functional as F

        wavlm, head = self._load()
        with torch.inference_mode():
            wave = torch.from_numpy(rows).to(self.device)
            wave = F.layer_norm(wave, wave.shape[-1:])  # s3prl: F.layer_norm(wav, wav.shape), each clip
            x, _ = wavlm.feature_projection(wavlm.feature_extractor(wave).transpose(1, 2))
            x = x + wavlm.encoder.pos_conv_embed(x)
            states, bias = [], None
            for layer in wavlm.encoder.layers:  # s3prl's hooks: the input of each layer, then the encoder's output
                states.append(x)
                x, bias = layer(x, position_bias=bias)
            states.append(wavlm.encoder.layer_norm(x))
            embeddings: np.ndarray = head(states).float().cpu().numpy()
        return embeddings

    def embed(self, batch: list[Audio]) -> list[np.ndarray]:
        """The embedding of each clip, in order.

        Raises:
            PermanentProviderError: a clip under 45 ms at 16 kHz, a checkpoint that is not the model's, or torch
                fails on a batch.
        """
        samples = [clip.resampled(SAMPLE_RATE_HZ).samples.astype(np.float32) for clip in batch]
        for position, s in enumerate(samples):
            if len(s) < MIN_SAMPLES:
                raise PermanentProviderError(
                    f"seedtts-sim cannot embed clip {position} of the batch: {len(s) / SAMPLE_RATE_HZ * 1000:.1f} ms "
                    "is under 45 ms (two WavLM frames)",
                    spec=self.spec,
                )
        if not samples:
            return []
        self._load()
        out: list[Any] = [None] * len(samples)
        by_length: dict[int, list[int]] = defaultdict(list)
        for i, s in enumerate(samples):
            by_length[len(s)].append(i)
        try:
            for same in by_length.values():  # equal lengths only: no padding ever reaches the model
                for start in range(0, len(same), self.batch_size):
                    chunk = same[start : start + self.batch_size]
                    for i, row in zip(chunk, self._run(np.stack([samples[i] for i in chunk]))):
                        out[i] = row
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(f"seedtts-sim failed on a batch of {len(batch)}: {e}", spec=self.spec) from e
        return out

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "transformers",
            "version": self.version,
            "model": "UniSpeech WavLM-Large + ECAPA-TDNN speaker verification (Seed-TTS-eval SIM)",
            "model_file": self.weights.name,
            "embedding_size": self.sizes.get("embedding"),
            "wavlm_layers": self.sizes.get("layers"),
            "sample_rate_hz": SAMPLE_RATE_HZ,
            "device": str(self.device),
            "batching": "equal lengths only",
        }
