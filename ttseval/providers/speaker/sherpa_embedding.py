"""Speaker embeddings through sherpa-onnx (`sherpa-onnx:model=PATH`), without torch: the speaker models sherpa-onnx
publishes as ONNX files with its metadata (3D-Speaker's CAM++ and ERes2Net, WeSpeaker's ResNets, NeMo's TitaNet
and SpeakerNet), read from a local file, never downloaded.

sherpa-onnx ends the whole process, with no Python exception, on a model without the metadata it expects: exit(-1)
on loading one without `output_dim`, a segmentation fault on the first embedding of one without `framework` (both
measured in the tests), which would take a Dask worker down with it. So the file's metadata is read with
onnxruntime first, and a file sherpa-onnx would end the process on is refused with the keys it lacks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.protocols import ANY_LANGUAGE, Languages
from ttseval.providers import EngineVersion, canonical_spec, package_version, parse_options
from ttseval.providers.local_model import LazyModel, refuse_model_name, required_path

# The metadata keys sherpa-onnx 2.0.1 reads without a default, per `framework` (speaker-embedding-extractor-model.cc,
# -nemo-model.cc); the integer ones must parse as integers.
_REQUIRED = {
    "wespeaker": ("output_dim", "sample_rate", "normalize_samples", "language"),
    "3d-speaker": ("output_dim", "sample_rate", "normalize_samples", "language"),
    "nemo": ("output_dim", "feat_dim", "sample_rate", "window_size_ms", "window_stride_ms", "language"),
}
_INTEGERS = {"output_dim", "sample_rate", "normalize_samples", "feat_dim", "window_size_ms", "window_stride_ms"}


class SherpaOnnxOptions(BaseModel):
    """Options of `sherpa-onnx:key=value`."""

    model: str = Field(
        "",
        description="path of a sherpa-onnx speaker-embedding .onnx file (with its metadata); "
        "required, never downloaded",
    )
    num_threads: int = Field(1, ge=1, le=64, description="onnxruntime threads per embedding")


def model_metadata(path: Path) -> dict[str, str]:
    """The ONNX file's custom metadata, checked against what sherpa-onnx reads.

    Raises:
        ValueError: not an ONNX model onnxruntime can open, or metadata sherpa-onnx would exit the process on.
    """
    import onnxruntime

    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as e:
        raise ValueError(f"sherpa-onnx model {str(path)!r} is not an ONNX model onnxruntime can open: {e}") from e
    meta = dict(session.get_modelmeta().custom_metadata_map)
    framework = meta.get("framework", "")
    if framework not in _REQUIRED:
        raise ValueError(
            f"sherpa-onnx model {str(path)!r} has framework={framework!r} in its metadata; sherpa-onnx "
            f"takes {sorted(_REQUIRED)} (add the metadata with sherpa-onnx's scripts/*/add_meta_data.py)"
        )
    missing = [k for k in _REQUIRED[framework] if k not in meta]
    bad = [k for k in _REQUIRED[framework] if k in _INTEGERS and k in meta and not meta[k].lstrip("-").isdigit()]
    if missing or bad:
        raise ValueError(
            f"sherpa-onnx model {str(path)!r} ({framework}) lacks metadata {missing}"
            + (f" and has non-integer {bad}" if bad else "")
        )
    if framework != "nemo" and meta.get("feature_normalize_type", "") not in ("", "global-mean"):
        raise ValueError(
            f"sherpa-onnx model {str(path)!r}: feature_normalize_type="
            f"{meta['feature_normalize_type']!r}; sherpa-onnx takes only 'global-mean' or none"
        )
    return meta


class SherpaOnnxSpeakerEncoder:
    """sherpa-onnx's SpeakerEmbeddingExtractor: its own fbank front end (and its own resampling to the model's
    rate), one clip per stream; the embedding as the model returns it (the metric normalises)."""

    name: ClassVar[str] = "sherpa-onnx"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False
    extra: ClassVar[str | None] = "engines"
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("sherpa-onnx"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("sherpa_onnx", "onnxruntime")

    def __init__(self, voice: str | None = None, **options: str) -> None:
        refuse_model_name(self.name, voice, instead="give its model file: sherpa-onnx:model=/path/model.onnx")
        self.options = parse_options(SherpaOnnxOptions, options, provider=self.name)
        self.model = required_path(
            self.name,
            "model",
            self.options.model,
            what="a sherpa-onnx speaker-embedding .onnx file",
            example="/path/3dspeaker_speech_campplus_sv_en_voxceleb_16k.onnx",
        )
        self.meta = model_metadata(self.model)
        self.spec = canonical_spec(self.name, voice, options)
        self._model: LazyModel[Any] = LazyModel(self._build)

    def _load(self) -> Any:
        return self._model.get()

    def _build(self) -> Any:
        import sherpa_onnx

        config = sherpa_onnx.SpeakerEmbeddingExtractorConfig(
            model=str(self.model), provider="cpu", num_threads=self.options.num_threads
        )
        if not config.validate():
            raise PermanentProviderError(f"sherpa-onnx rejects the config for {str(self.model)!r}", spec=self.spec)
        return sherpa_onnx.SpeakerEmbeddingExtractor(config)

    def embed(self, batch: list[Audio]) -> list[np.ndarray]:
        """The embedding of each clip, in order.

        Raises:
            PermanentProviderError: a clip that gives no feature frame (no samples), or an embedding of the wrong size.
        """
        extractor = self._load()
        vectors = []
        for position, clip in enumerate(batch):
            stream = extractor.create_stream()
            if len(clip.samples):
                stream.accept_waveform(sample_rate=clip.sample_rate_hz, waveform=clip.samples.astype(np.float32))
            stream.input_finished()
            if not len(clip.samples) or not extractor.is_ready(stream):
                raise PermanentProviderError(
                    f"sherpa-onnx cannot embed clip {position} of the batch: its "
                    f"{clip.duration_s * 1000:.1f} ms give no feature frame",
                    spec=self.spec,
                )
            vector = np.asarray(extractor.compute(stream), dtype=np.float32)
            if vector.size != int(self.meta["output_dim"]) or not np.isfinite(vector).all():
                raise PermanentProviderError(
                    f"sherpa-onnx returned an embedding of {vector.size} values (the model "
                    f"declares {self.meta['output_dim']}), finite: "
                    f"{bool(np.isfinite(vector).all())}",
                    spec=self.spec,
                )
            vectors.append(vector)
        return vectors

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "sherpa-onnx",
            "version": self.version,
            "model_file": self.model.name,
            "framework": self.meta["framework"],
            "embedding_size": int(self.meta["output_dim"]),
            "sample_rate_hz": int(self.meta["sample_rate"]),
            "language": self.meta.get("language", ""),
            "device": "cpu",
        }
