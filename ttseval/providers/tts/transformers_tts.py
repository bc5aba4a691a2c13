"""Text to speech with a transformers VITS model (Meta's MMS-TTS and other VitsModel checkpoints), from a local
directory or the local Hugging Face cache: never a download."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, TransientProviderError
from ttseval.core.languages import base_language
from ttseval.core.protocols import PER_VOICE, Languages
from ttseval.providers import (
    EngineVersion,
    TorchDevice,
    canonical_spec,
    out_of_memory,
    package_version,
    parse_options,
    torch_device,
)
from ttseval.providers._local_models import resolve_local_model
from ttseval.providers.local_model import LazyModel, model_source

SUPPORTED_MODEL_TYPES = ("vits",)


class TransformersTTSOptions(BaseModel):
    """Options of `transformers-tts:<local dir or hub id>:key=value`. Unset scales use the model config's."""

    model: str | None = Field(None, description="local directory or hub id; use this when the path contains ':'")
    device: TorchDevice = "auto"
    batch_size: int = Field(8, ge=1, description="texts per forward pass in synthesize_batch")
    language: str | None = Field(None, description="the model's language when its files do not declare one")
    noise_scale: float | None = Field(None, ge=0, description="prior (voice) noise; MMS default 0.667")
    noise_scale_duration: float | None = Field(None, ge=0, description="duration noise; MMS default 0.8")
    speaking_rate: float | None = Field(None, gt=0, description="> 1 is faster; default the config's (1.0)")
    speaker_id: int | None = Field(None, ge=0, description="speaker index, for multi-speaker checkpoints")
    seed: int = Field(0, description="seed of the per-text noise: same seed and text, same clip")


class TransformersTTS:
    """A transformers VITS speech synthesizer (MMS-TTS), loaded once per instance with local_files_only=True.

    The model comes from the spec's voice or option `model=`: a directory written by save_pretrained (model and
    tokenizer), or a hub id already in the local Hugging Face cache (e.g. facebook/mms-tts-eng). Nothing is
    downloaded; a missing model is a SpecError naming the path. Only VITS checkpoints (config model_type 'vits')
    are supported. device=auto runs on cuda when torch sees a GPU, else on the CPU.

    Language: an MMS-TTS checkpoint speaks one language, which its tokenizer_config.json declares ('eng', 'fra';
    ISO 639-3). `supports_language` compares base languages, so 'en', 'en-US' and 'eng' all match 'eng'. The
    option `language=` overrides it, and is required for a checkpoint that declares none (building fails and
    says so). Texts in a non-Latin script need the `uroman` package for MMS checkpoints with is_uroman set; a
    text the tokenizer cannot encode at all (empty, or only characters outside the vocabulary) is a
    PermanentProviderError.

    Determinism: VITS samples Gaussian noise twice per call (durations and the prior latents, scaled by
    noise_scale_duration and noise_scale, defaults from the config). Here that noise does not come from torch's
    global generator: while this provider runs the model it draws each text's noise from a numpy generator
    seeded by (seed, text), in an order that does not depend on the padded length. So a text gets the same
    noise on every call, in any batch, next to any other texts, on CPU or GPU, and the same seed, text and
    options give the same clip (but see Batches for a GPU); noise_scale=0 and noise_scale_duration=0 remove the
    sampling altogether. (Mechanism: the `torch` name inside transformers' modeling_vits module is replaced once by a
    proxy that delegates everything except randn/randn_like, and changes those only on a thread running this
    provider; any other use of VitsModel in the process is unchanged.)

    Batches (`synthesize_batch`, used by the synthesis stage in chunks of `batch_size`): texts are padded into
    one forward pass for the text encoder, duration predictor and flow, which padding does not change; the
    HiFi-GAN decoder, whose convolution biases would leak padding into the last milliseconds of shorter clips,
    runs on each clip's own frames. Each waveform is cut to its own length (`sequence_lengths`). On the CPU a
    clip from a batch equals the clip made alone (to float rounding: < 1e-5 of full scale on the tests' tiny
    model, 2e-4 on an MMS-sized one). On CUDA it does not always:
    cuDNN picks convolution kernels per batch shape, and VITS rounds each phoneme's duration up to whole frames,
    so a rounding difference can add or drop a frame (hop length). Measured on an H100 (torch 2.11, a random
    MMS-sized model, 48 texts): with TF32 convolutions (torch's default) up to 9 of 48 clips changed length in a
    batch; with TF32 off and deterministic cuDNN, which this provider sets while VITS runs
    (`_exact_convolutions`), none did at batch sizes 2-48, except at 24, where every clip of the batch did.
    The synthesis stage stores each request's clip once and reuses it, so a re-run does not re-draw; use
    batch_size=1 where clips must match single calls exactly on a GPU. A CUDA out-of-memory error is a
    TransientProviderError (the stage then retries the texts one at a time).
    """

    name: ClassVar[str] = "transformers-tts"
    languages: ClassVar[Languages] = PER_VOICE  # the checkpoint's, one per MMS-TTS model
    accepts_instruction: ClassVar[bool] = False  # VITS takes no description (docs/systems.md)
    gpu: ClassVar[bool] = True  # device=auto / cuda
    extra: ClassVar[str | None] = "models"  # torch; transformers itself is a base dependency
    output_sample_rate_hz: ClassVar[int | None] = None  # the config's sampling_rate; MMS-TTS: 16000
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("transformers"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torch", "transformers")

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(TransformersTTSOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        source = model_source(self.name, voice, self.options.model)
        self.voice = voice or source
        self.model_path = resolve_local_model(source, who="transformers-tts")  # ValueError naming `source`
        self.batch_size = self.options.batch_size  # read by the synthesis stage
        # config.json and tokenizer_config.json are small: read them now, so language and rate are known unloaded.
        config = _read_json(self.model_path / "config.json")
        self.model_type = str(config.get("model_type", ""))
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"transformers-tts supports VITS (MMS-TTS) models; {str(self.model_path)!r} holds "
                f"model_type {self.model_type or '(none)'!r}"
            )
        self.sample_rate_hz = int(config.get("sampling_rate", 16000))
        tokenizer_config = _read_json(self.model_path / "tokenizer_config.json", missing_ok=True)
        self.language = self.options.language or tokenizer_config.get("language") or config.get("language")
        if not self.language:
            raise ValueError(
                f"transformers-tts model {str(self.model_path)!r} declares no language (MMS-TTS "
                "checkpoints name it in tokenizer_config.json); pass the option language=, e.g. eng"
            )
        self._model: LazyModel[tuple[Any, Any, str]] = LazyModel(self._build)
        self._run_lock = threading.Lock()  # one forward pass at a time: the decoder is swapped during a batch

    def _load(self) -> tuple[Any, Any, str]:
        """(model, tokenizer, device), loaded once."""
        return self._model.get()

    def _build(self) -> tuple[Any, Any, str]:
        try:
            import torch  # noqa: F401 - transformers needs it for VitsModel
            from transformers import AutoTokenizer, VitsModel
        except ImportError as e:
            raise ImportError(
                "transformers-tts needs the transformers and torch packages: pip install 'ttseval[models]'"
            ) from e
        path = str(self.model_path)
        try:
            model = VitsModel.from_pretrained(path, local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError, KeyError) as e:
            raise PermanentProviderError(
                f"transformers could not load a VITS model from {path!r}: {e}", spec=self.spec
            ) from e
        device = torch_device(self.options.device)
        for option in ("noise_scale", "noise_scale_duration"):  # read by VitsModel.forward
            if getattr(self.options, option) is not None:
                setattr(model, option, getattr(self.options, option))
        # transformers wraps PreTrainedModel.to in functools.wraps(Module.to), which mypy types as an unbound function
        model.to(device).eval()  # type: ignore[arg-type]
        _install_item_noise()
        return model, tokenizer, device

    def supports_language(self, language: str) -> bool:
        """Whether `language` has the checkpoint's base language ('en-US' and 'eng' match 'eng')."""
        return base_language(language) == base_language(str(self.language))

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        """Speak `text` with the loaded model; `instruction` is ignored (VITS has no style input).

        Raises:
            PermanentProviderError: another voice or language was asked for, the text has nothing the tokenizer
                can encode, the model cannot be loaded or inference fails.
            TransientProviderError: CUDA ran out of memory.
        """
        if voice is not None and voice != self.voice:
            raise PermanentProviderError(
                f"transformers-tts instance holds model {self.voice!r}; build another provider for {voice!r}",
                spec=self.spec,
            )
        return self.synthesize_batch([text], [language], [instruction])[0]

    def synthesize_batch(self, texts: list[str], languages: list[str], instructions: list[str | None]) -> list[Audio]:
        """One clip per text, in order, in forward passes of `batch_size` texts; each clip equals what
        `synthesize` returns for its text alone (see the class docstring). Raises as `synthesize` does, for the
        whole batch."""
        if not len(texts) == len(languages) == len(instructions):
            raise ValueError(f"{len(texts)} texts, {len(languages)} languages, {len(instructions)} instructions")
        for language in set(languages):
            if not self.supports_language(language):
                raise PermanentProviderError(
                    f"transformers-tts model {self.voice!r} speaks {self.language!r}, not {language!r}", spec=self.spec
                )
        size = self.batch_size
        return [audio for start in range(0, len(texts), size) for audio in self._run(texts[start : start + size])]

    def _run(self, texts: list[str]) -> list[Audio]:
        import torch

        model, tokenizer, device = self._load()
        encoded = [tokenizer(text).input_ids for text in texts]
        for text, ids in zip(texts, encoded):
            if not ids:
                raise PermanentProviderError(
                    f"text {text[:40]!r} has no characters the tokenizer of {self.voice!r} can encode", spec=self.spec
                )
        inputs = tokenizer(texts, return_tensors="pt", padding=True)
        inputs = {k: v.to(device) for k, v in inputs.items()}
        hop = int(np.prod(model.config.upsample_rates))
        oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
        try:
            with self._run_lock, torch.inference_mode(), _exact_convolutions(device):
                with _item_noise(self.options.seed, texts), _without_decoder(model):
                    out = model(**inputs, speaking_rate=self.options.speaking_rate, speaker_id=self._speaker_id(model))
                spectrograms, lengths = out.spectrogram, out.sequence_lengths
                speaker = self._speaker_embedding(model, device)
                waves = []
                for i, length in enumerate(lengths.tolist()):
                    frames = spectrograms[i : i + 1, :, : int(length) // hop]
                    waves.append(model.decoder(frames, speaker)[0, 0, : int(length)].float().cpu().numpy())
        except oom as e:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            raise TransientProviderError(f"CUDA out of memory on a batch of {len(texts)}: {e}", spec=self.spec) from e
        except RuntimeError as e:  # torch reports shape and device failures as RuntimeError
            if out_of_memory(e):  # transient: the row stays retryable (a later try, a freer device)
                raise
            raise PermanentProviderError(
                f"transformers-tts failed on a batch of {len(texts)}: {e}", spec=self.spec
            ) from e
        return [Audio(samples=w.astype(np.float32), sample_rate_hz=self.sample_rate_hz) for w in waves]

    def _speaker_id(self, model: Any) -> int | None:
        if self.options.speaker_id is None:
            return None
        if model.config.num_speakers <= 1:
            raise PermanentProviderError(f"model {self.voice!r} has one speaker; drop speaker_id", spec=self.spec)
        if self.options.speaker_id >= model.config.num_speakers:
            raise PermanentProviderError(
                f"speaker_id={self.options.speaker_id}: model {self.voice!r} has {model.config.num_speakers} speakers",
                spec=self.spec,
            )
        return self.options.speaker_id

    def _speaker_embedding(self, model: Any, device: str) -> Any:
        """What VitsModel.forward passes its decoder for the speaker: None for a one-speaker model."""
        import torch

        speaker_id = self._speaker_id(model)
        if speaker_id is None:
            return None
        return model.embed_speaker(torch.full((1,), speaker_id, device=device)).unsqueeze(-1)

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "transformers-tts",
            "version": self.version,
            "torch_version": package_version("torch"),
            "model": self.voice,
            "model_path": str(self.model_path),
            "model_type": self.model_type,
            "language": self.language,
            "sample_rate_hz": self.sample_rate_hz,
            "device": self._load()[2] if self._model.loaded else None,
            "options": self.options.model_dump(),
        }


def _read_json(path: Path, *, missing_ok: bool = False) -> dict[str, Any]:
    if missing_ok and not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"transformers-tts cannot read {str(path)!r}: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"transformers-tts cannot read {str(path)!r}: not a JSON object")
    return data


# -- decoder per clip ------------------------------------------------------------------------------------------------


class _Passthrough:
    """Stands in for VitsModel.decoder during the batched pass: returns the spectrogram undecoded."""

    def __call__(self, spectrogram: Any, global_conditioning: Any = None) -> Any:
        return spectrogram


@contextlib.contextmanager
def _without_decoder(model: Any) -> Iterator[None]:
    """Run `model` with its decoder replaced by a pass-through (caller holds the provider's run lock)."""
    # nn.Module keeps submodules in _modules and finds them only when normal lookup fails, so an entry in the
    # instance __dict__ shadows the decoder without touching the module tree (weights, .to(), state_dict).
    object.__setattr__(model, "decoder", _Passthrough())
    try:
        yield
    finally:
        object.__delattr__(model, "decoder")


@contextlib.contextmanager
def _exact_convolutions(device: str) -> Iterator[None]:
    """On CUDA: full-precision (no TF32), deterministic cuDNN convolutions while VITS runs, so a batch gives the
    same clips every time and TF32's rounding does not move duration frames (see TransformersTTS). cuDNN's
    flags are process-wide; they are restored on leaving."""
    if not device.startswith("cuda"):
        yield
        return
    import torch

    with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True, allow_tf32=False):
        yield


# -- per-text noise --------------------------------------------------------------------------------------------------


class _ItemNoiseTorch:
    """The `torch` seen by transformers' modeling_vits: torch itself, except that randn and randn_like draw each
    batch row's noise from its own numpy generator while a thread is inside `_item_noise` (see TransformersTTS).

    numpy's standard_normal draws values one after another, so the first n values of a (T, C) draw do not
    depend on T: noise is drawn time-major and transposed, and a text's noise is the same padded or not."""

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module
        self._local = threading.local()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def randn(self, *size: Any, **kwargs: Any) -> Any:
        if getattr(self._local, "seeds", None) is None:
            return self._torch.randn(*size, **kwargs)
        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
        return self._draw(shape, kwargs.get("device"), kwargs.get("dtype"))

    def randn_like(self, tensor: Any, **kwargs: Any) -> Any:
        if getattr(self._local, "seeds", None) is None:
            return self._torch.randn_like(tensor, **kwargs)
        return self._draw(tuple(tensor.shape), kwargs.get("device", tensor.device), kwargs.get("dtype", tensor.dtype))

    def _draw(self, shape: tuple[int, ...], device: Any, dtype: Any) -> Any:
        seeds: list[int] = self._local.seeds
        if len(shape) != 3 or shape[0] != len(seeds):
            raise RuntimeError(
                f"transformers-tts: VITS drew noise of shape {shape} for a batch of {len(seeds)}; "
                "this transformers version samples differently from the one this provider knows"
            )
        call = self._local.calls
        self._local.calls += 1
        rows = [
            np.random.default_rng([seed, call]).standard_normal((shape[2], shape[1]), dtype=np.float32).T
            for seed in seeds
        ]
        noise = self._torch.from_numpy(np.ascontiguousarray(np.stack(rows)))
        return noise.to(device=device, dtype=dtype or self._torch.float32)


_PROXY_LOCK = threading.Lock()


def _install_item_noise() -> _ItemNoiseTorch:
    """Put the proxy in place of `torch` inside transformers' modeling_vits, once per process."""
    from transformers.models.vits import modeling_vits

    namespace = vars(modeling_vits)  # the module's globals, where its functions look `torch` up
    with _PROXY_LOCK:
        current = namespace["torch"]
        if isinstance(current, _ItemNoiseTorch):
            return current
        proxy = _ItemNoiseTorch(current)
        namespace["torch"] = proxy
        return proxy


def _text_seed(seed: int, text: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}\x00{text}".encode()).digest()[:8], "little")


@contextlib.contextmanager
def _item_noise(seed: int, texts: list[str]) -> Iterator[None]:
    """Within this block, this thread's VITS noise for batch row i comes from (seed, texts[i])."""
    proxy = _install_item_noise()
    proxy._local.seeds, proxy._local.calls = [_text_seed(seed, t) for t in texts], 0
    try:
        yield
    finally:
        proxy._local.seeds = None
