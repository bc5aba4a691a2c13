"""DistillMOS (`distillmos`): a small MOS predictor distilled from XLS-R SQA, weights inside the distillmos wheel.

distillmos 0.9.1 imports torchaudio at the top of its module, for its command line's file loading only, and
torchaudio has no build for torch 2.13 (requirements-nodeps.txt installs distillmos and its model package
xls-r-sqa without dependencies). `_model_class` imports it with an empty stand-in module named torchaudio that
is removed right after, so nothing else in the process ever sees a torchaudio.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages, QualityScore
from ttseval.providers import (
    EngineVersion,
    TorchDevice,
    canonical_spec,
    import_without_torchaudio,
    out_of_memory,
    package_version,
    parse_options,
    torch_device,
)
from ttseval.providers.local_model import LazyModel, refuse_model_name

SAMPLE_RATE_HZ = 16000
WINDOW = 122880  # distillmos.sqa.SEQ_LEN: 7.68 s at 16 kHz


class DistillMOSOptions(BaseModel):
    """Options of `distillmos:key=value`."""

    device: TorchDevice = "auto"


def _model_class() -> Any:
    """distillmos.ConvTransformerSQAModel, imported with a stand-in torchaudio module that is removed after."""

    def load() -> Any:
        from distillmos import ConvTransformerSQAModel

        return ConvTransformerSQAModel

    return import_without_torchaudio(
        load,
        missing="the distillmos predictor needs distillmos and xls-r-sqa: run "
        "scripts/setup.sh install (it installs requirements-nodeps.txt)",
    )


class DistillMOSQuality:
    """DistillMOS's MOS (1-5) for each clip, resampled to 16 kHz and clipped to [-1, 1].

    The model pads a clip shorter than its 7.68 s window with zeros to the window, and cuts a longer clip into
    windows hopped by at most 1 s whose scores it averages; in a batch it would cut every clip by the batch's
    padded length. So clips of at most one window are batched together, each padded to exactly one window (what
    the model does to it alone; the tests check batch and single scores agree), and longer clips are scored one at
    a time. Each window is peak-normalised by the model, so loudness does not move the score."""

    name: ClassVar[str] = "distillmos"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # device=auto / cuda
    extra: ClassVar[str | None] = "engines"
    output_sample_rate_hz: ClassVar[int | None] = None  # returns scores
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("distillmos"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("distillmos", "xls_r_sqa", "torch")
    batch_size: ClassVar[int] = 16

    def __init__(self, voice: str | None = None, **options: str) -> None:
        refuse_model_name(self.name, voice, instead="its weights ship in the wheel")
        self.options = parse_options(DistillMOSOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        self.device = self.options.device
        self._model: LazyModel[Any] = LazyModel(self._build)

    def _load(self) -> Any:
        return self._model.get()

    def _build(self) -> Any:
        model_class = _model_class()
        self.device = torch_device(self.options.device)
        with contextlib.redirect_stdout(io.StringIO()):  # it prints the weights' path on load
            return model_class().to(self.device).eval()

    def _run(self, rows: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            scores: np.ndarray = self._load()(torch.from_numpy(rows).to(self.device)).float().cpu().numpy().reshape(-1)
        return scores

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """The predicted MOS of each clip, in order.

        Raises:
            PermanentProviderError: a clip has no samples, torch fails, or the model returns a non-finite score.
        """
        self._load()
        samples = []
        for clip in batch:
            if not len(clip.samples):
                raise PermanentProviderError("distillmos cannot score a clip with no samples", spec=self.spec)
            samples.append(np.clip(clip.resampled(SAMPLE_RATE_HZ).samples, -1.0, 1.0).astype(np.float32))
        mos = np.full(len(batch), np.nan)
        short = [i for i, s in enumerate(samples) if len(s) <= WINDOW]
        try:
            for start in range(0, len(short), self.batch_size):
                chunk = short[start : start + self.batch_size]
                rows = np.stack([np.pad(samples[i], (0, WINDOW - len(samples[i]))) for i in chunk])
                mos[chunk] = self._run(rows)
            for i in (i for i, s in enumerate(samples) if len(s) > WINDOW):
                mos[i] = self._run(samples[i][None, :])[0]
        except RuntimeError as e:  # torch reports shape, device and memory failures as RuntimeError
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(f"distillmos failed on a batch of {len(batch)}: {e}", spec=self.spec) from e
        if not np.isfinite(mos).all():
            raise PermanentProviderError(f"distillmos returned a non-finite score {mos.tolist()}", spec=self.spec)
        return [QualityScore(mos=float(m), details={"distillmos": float(m)}) for m in mos]

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "distillmos",
            "version": self.version,
            "model_file": "distillmos/weights/distill_mos_v7.pt",
            "sample_rate_hz": SAMPLE_RATE_HZ,
            "device": str(self.device),
        }
