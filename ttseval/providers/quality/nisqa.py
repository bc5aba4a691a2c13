"""NISQA v2.0 (`nisqa:weights=PATH`): the overall MOS and its four dimensions (noisiness, discontinuity, coloration,
loudness) from `nisqa.tar`, or the TTS naturalness from `nisqa_tts.tar`, through torchmetrics 1.9's port of the
model (`torchmetrics.functional.audio.nisqa`: pure torch and librosa). The checkpoint is read from the local file
`weights=` names; torchmetrics' own loader would fetch it from GitHub into ~/.torchmetrics, so it is not used.

The weights are CC BY-NC-SA 4.0 (non-commercial); the code is MIT (NISQA) and Apache-2.0 (torchmetrics).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages, QualityScore
from ttseval.providers import EngineVersion, canonical_spec, out_of_memory, package_version, parse_options
from ttseval.providers.local_model import LazyModel, refuse_model_name, required_path

DEFAULT_SAMPLE_RATE_HZ = 48000  # NISQA is trained on fullband speech; a checkpoint's ms_sr, when it names one, wins
DIMENSIONS = ("mos", "noi", "dis", "col", "loud")  # the NISQA_DIM model's output order (torchmetrics' note on it)


class NISQAOptions(BaseModel):
    """Options of `nisqa:key=value`."""

    weights: str = Field(
        "",
        description="path of a NISQA checkpoint: nisqa.tar (MOS and four dimensions) or "
        "nisqa_tts.tar (TTS naturalness); required, never downloaded",
    )


def _single_head_model(args: dict[str, Any]) -> Any:
    """NISQA's MOS-only model (class NISQA of the original code: one attention pooling, `pool.*` weights), built
    from torchmetrics' modules; nisqa_tts.tar holds its weights."""
    import torch
    from torchmetrics.functional.audio.nisqa import _Framewise, _Pooling, _TimeDependency

    class NISQA(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = _Framewise(args)
            self.time_dependency = _TimeDependency(args)
            self.pool = _Pooling(args)

        def forward(self, x: torch.Tensor, n_wins: torch.Tensor) -> torch.Tensor:
            x = self.cnn(x, n_wins)
            x, n_wins = self.time_dependency(x, n_wins)
            pooled: torch.Tensor = self.pool(x, n_wins)
            return pooled

    return NISQA()


# What torchmetrics' port implements; a checkpoint that names another part (an LSTM, a second time-dependency
# stage, max pooling) is refused rather than loaded into the wrong modules.
_SUPPORTED = {"cnn_model": "adapt", "td": "self_att", "td_2": "skip", "pool": "att"}


class NISQAQuality:
    """NISQA's MOS (1-5) per clip, resampled to 48 kHz; with nisqa.tar also its four dimensions in `details`."""

    name: ClassVar[str] = "nisqa"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False  # a 200k-weight CNN; torchmetrics' port builds its masks on the CPU
    extra: ClassVar[str | None] = "models"
    output_sample_rate_hz: ClassVar[int | None] = None  # returns scores
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("torchmetrics"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torchmetrics", "librosa", "torch")
    batch_size: ClassVar[int] = 8

    def __init__(self, voice: str | None = None, **options: str) -> None:
        refuse_model_name(self.name, voice, instead="give its weights file: nisqa:weights=/path/nisqa.tar")
        self.options = parse_options(NISQAOptions, options, provider=self.name)
        self.weights = required_path(
            self.name,
            "weights",
            self.options.weights,
            example="/path/nisqa.tar",
            what="a NISQA checkpoint (nisqa.tar, or nisqa_tts.tar for TTS naturalness)",
        )
        self.spec = canonical_spec(self.name, voice, options)
        self._model: LazyModel[Any] = LazyModel(self._build)
        self._args: dict[str, Any] = {}
        self.kind = ""  # "dimensions" (nisqa.tar) or "naturalness" (nisqa_tts.tar), known once loaded

    @property
    def sample_rate_hz(self) -> int:
        return int(self._args.get("ms_sr") or DEFAULT_SAMPLE_RATE_HZ)

    def _load(self) -> Any:
        return self._model.get()

    def _build(self) -> Any:
        import torch
        from torchmetrics.functional.audio.nisqa import _NISQADIM

        try:
            checkpoint = torch.load(self.weights, map_location="cpu", weights_only=True)
            args, state = dict(checkpoint["args"]), checkpoint["model_state_dict"]
        except Exception as e:
            raise PermanentProviderError(
                f"nisqa weights {str(self.weights)!r} are not a NISQA checkpoint "
                f"(a dict with 'args' and 'model_state_dict'): {e}",
                spec=self.spec,
            ) from e
        unsupported = {k: args[k] for k, v in _SUPPORTED.items() if args.get(k, v) != v}
        if unsupported:
            raise PermanentProviderError(
                f"nisqa weights {str(self.weights)!r} need parts torchmetrics' "
                f"port does not have: {unsupported} (it has {_SUPPORTED})",
                spec=self.spec,
            )
        dimensions = any(k.startswith("pool_layers.") for k in state)
        model = _NISQADIM(args) if dimensions else _single_head_model(args)
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as e:
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(
                f"nisqa weights {str(self.weights)!r} do not fit NISQA's model: {str(e)[:500]}", spec=self.spec
            ) from e
        self._args, self.kind = args, "dimensions" if dimensions else "naturalness"
        return model.eval()

    def _limits(self, samples: int) -> str | None:
        """Why a clip of `samples` at the model's rate cannot be scored, or None: NISQA needs one 15-frame
        mel segment (140 ms) and takes at most `ms_max_segments` segments (under 52.14 s)."""
        args, rate = self._args, self.sample_rate_hz
        hop = int(rate * args["ms_hop_length"])
        frames = 1 + samples // hop  # librosa's centred STFT
        windows = frames - (args["ms_seg_length"] - 1)
        if windows < 1:
            shortest = (args["ms_seg_length"] - 1) * hop
            return (
                f"nisqa needs at least {shortest / rate * 1000:g} ms of audio (one {args['ms_seg_length']}-frame "
                f"mel segment); the clip has {samples / rate * 1000:.2f} ms"
            )
        if math.ceil(windows / args["ms_seg_hop_length"]) > args["ms_max_segments"]:
            longest = (args["ms_max_segments"] * args["ms_seg_hop_length"] + args["ms_seg_length"] - 1) * hop
            return (
                f"nisqa takes less than {longest / rate:.2f} s of audio ({args['ms_max_segments']} mel segments); "
                f"the clip has {samples / rate:.2f} s: cut it"
            )
        return None

    def _run(self, rows: np.ndarray) -> np.ndarray:
        """torchmetrics' functional call on a batch of equal-length clips, with this model and its args."""
        import torch
        from torchmetrics.functional.audio.nisqa import _get_librosa_melspec, _segment_specs

        mel = _get_librosa_melspec(rows, self.sample_rate_hz, self._args)
        x, n_wins = _segment_specs(torch.from_numpy(mel), self._args)
        with torch.inference_mode():
            scores: np.ndarray = self._load()(x, n_wins.expand(x.shape[0])).float().numpy().reshape(len(rows), -1)
        return scores

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """The predicted MOS of each clip (and with nisqa.tar its dimensions), in order; a clip too short or too
        long for the model gets a refusal (no score).

        Raises:
            PermanentProviderError: the weights file is not a NISQA checkpoint torchmetrics' port can run, or
                the model fails or returns a non-finite score.
        """
        self._load()
        samples = [clip.resampled(self.sample_rate_hz).samples.astype(np.float32) for clip in batch]
        refusals = [self._limits(len(s)) for s in samples]
        outputs: dict[int, np.ndarray] = {}
        by_length: dict[int, list[int]] = defaultdict(list)  # the mel segments are counted per batch: equal lengths
        for i, s in enumerate(samples):
            if refusals[i] is None:
                by_length[len(s)].append(i)
        try:
            for same in by_length.values():
                for start in range(0, len(same), self.batch_size):
                    chunk = same[start : start + self.batch_size]
                    outputs.update(zip(chunk, self._run(np.stack([samples[i] for i in chunk]))))
        except RuntimeError as e:  # torch reports shape and memory failures as RuntimeError
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(f"nisqa failed on a batch of {len(batch)}: {e}", spec=self.spec) from e
        scores = []
        for i, refusal in enumerate(refusals):
            if refusal is not None:
                scores.append(QualityScore(mos=float("nan"), refused=refusal))
                continue
            values = [float(v) for v in outputs[i]]
            if not np.isfinite(values).all():
                raise PermanentProviderError(f"nisqa returned a non-finite score {values}", spec=self.spec)
            details = dict(zip(DIMENSIONS, values)) if self.kind == "dimensions" else {"naturalness": values[0]}
            scores.append(QualityScore(mos=values[0], details=details))
        return scores

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "torchmetrics",
            "version": self.version,
            "model": f"NISQA v2.0 ({self.kind or 'not loaded'})",
            "model_file": self.weights.name,
            "sample_rate_hz": self.sample_rate_hz,
            "outputs": list(DIMENSIONS) if self.kind == "dimensions" else ["naturalness"],
            "weights_licence": "CC BY-NC-SA 4.0 (non-commercial)",
            "device": "cpu",
        }
