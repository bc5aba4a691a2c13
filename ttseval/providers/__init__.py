"""Provider implementations, one per file, by kind: tts/ (local engines, cloud vendors, transformers models,
audio made elsewhere), asr/ (recognisers), quality/ (MOS predictors), lid/ (language identification),
speaker/ (speaker encoders for SIM), judges/ (pairwise and instruction-following judges) and llm/ (dataset
generation and captioning).

Each module wraps one external system, implements its kind's protocol (ttseval.core.protocols) and is registered
by name in its kind's registry, declared in the kind's `__init__.py` (all of them: ttseval.providers.registries).
Modules import only the core at top level; engine libraries (piper, faster_whisper, torch, transformers,
onnxruntime, speechmos, vendor SDKs) are imported inside methods, so that listing or importing providers stays
cheap.

This package also holds the helpers every provider uses: option validation, the canonical spec string that goes
into error messages, `EngineVersion` (the lazily read `version` class attribute), the torch device and the
per-worker model thread count, and the import of a package under a stand-in torchaudio.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field, SecretStr, ValidationError

from ttseval.core.registry import Spec

OptionsT = TypeVar("OptionsT", bound=BaseModel)
T = TypeVar("T")


def parse_options(model: type[OptionsT], options: dict[str, str], *, provider: str) -> OptionsT:
    """Validate a provider's string options against its pydantic model and convert them.

    Args:
        model: the provider's options model; its field names are the valid option names.
        options: option values as parsed from the spec (strings, e.g. {"speed": "140"}).
        provider: registry name, used in messages.

    Returns:
        The validated model instance.

    Raises:
        ValueError: an unknown option (the message lists the valid ones) or a value that does not convert.
    """
    valid = sorted(model.model_fields)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown {provider} option(s) {', '.join(repr(u) for u in unknown)}; "
            f"valid options: {', '.join(valid) or '(none)'}"
        )
    try:
        return model.model_validate(options)
    except ValidationError as e:
        # pydantic's own message is long; name the option, the value and the reason in one line.
        # A value refused for holding a credential is not repeated (and the chained error, which holds it, dropped).
        problems = "; ".join(
            f"{name}={'(not shown)' if 'credentials' in err['msg'] else repr(options.get(name))}: {err['msg']}"
            for err in e.errors()
            for name in [str(err["loc"][0]) if err["loc"] else "?"]
        )
        raise ValueError(f"invalid {provider} option: {problems}") from None


def canonical_spec(provider: str, voice: str | None, options: dict[str, str]) -> str:
    """The canonical spec string for a provider configuration, as the registry would write it."""
    return Spec(provider=provider, voice=voice, options=tuple(sorted(options.items()))).canonical


def package_version(distribution: str) -> str:
    """Installed version of a PyPI distribution, or 'unknown' when its metadata is missing."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class EngineVersion:
    """A provider's `version` class attribute, read on first access and then kept: `PiperTTS.version` and
    `piper_instance.version` both give '1.8.0', without building the provider.

        version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("piper-tts"))

    Declared ClassVar[EngineVersion], not ClassVar[str]: the attribute holds the descriptor, and reading it gives
    the str (it may override a base class's `version: ClassVar[str]`).

    `read` may raise (espeak-ng not installed); nothing is kept then, so the next access asks again.
    """

    def __init__(self, read: Callable[[], str]) -> None:
        self._read = read
        self._value: str | None = None

    def __get__(self, instance: object, owner: type | None = None) -> str:
        if self._value is None:
            self._value = str(self._read())
        return self._value


def endpoint_without_credentials(value: str | None) -> str | None:
    """A `base_url` option, refused when it could hold a credential: user:password@, a query string or a fragment.
    The URL is part of the spec, which is written to tables, manifests and logs, and a secret never is; the
    providers append their paths to it, so a query string would break every request anyway."""
    from urllib.parse import urlsplit

    if not value:
        return value
    parts = urlsplit(value)
    if parts.username or parts.password:
        raise ValueError(
            "base_url must not hold credentials (user:password@); pass the key through the "
            "provider's API-key environment variable"
        )
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise ValueError(
            "base_url must not hold credentials or a query string ('?...' or '#...'): the URL is stored with the "
            "run and each request appends its own path to it; give the endpoint alone, and pass a key through "
            "the provider's API-key environment variable"
        )
    return value


AllowedEndpoints = Mapping[str, Sequence[str]] | Sequence[str]
"""The setting allowed_endpoints (provider name or '*' -> endpoints), or one provider's endpoints already chosen."""


def endpoint_allowlist(allowed: AllowedEndpoints | None, *, key_given: bool, provider: str) -> tuple[str, ...] | None:
    """The endpoints besides the vendor's own that `provider` may send its key to: from `allowed` as given (a stage
    passes the run's setting allowed_endpoints: its '*' entries and the provider's own), else, for a key read from
    this process's environment, from this process's setting; None (not confined) only for a key its caller passed
    in by hand."""
    if allowed is None:
        if key_given:
            return None
        from ttseval.core.config import load_settings

        allowed = load_settings().allowed_endpoints
    if isinstance(allowed, Mapping):
        return (*allowed.get("*", ()), *allowed.get(provider, ()))
    return tuple(allowed)


def _admits(entry: str, url: str) -> bool:
    """Whether the allowlist entry `entry` (scheme://host[:port][/path]; no port: every port) admits `url`."""
    from urllib.parse import urlsplit

    want, got = urlsplit(entry), urlsplit(url)
    default = {"http": 80, "https": 443}
    if (want.scheme, want.hostname) != (got.scheme, got.hostname):
        return False
    if want.port is not None and want.port != (got.port or default.get(got.scheme)):
        return False
    prefix = want.path.rstrip("/")
    return not prefix or got.path == prefix or got.path.startswith(prefix + "/")


def confine_key(
    key: SecretStr,
    endpoint: str | None,
    *,
    vendor: str,
    allowed: tuple[str, ...] | None,
    provider: str,
    variable: str,
    key_required: bool,
) -> SecretStr:
    """The key a provider may send to `endpoint` (its base_url; None: the vendor's own): the key itself at the
    vendor's endpoint (`vendor`, same scheme, host and port) or one the setting allowed_endpoints admits; an empty
    key (none sent) at any other endpoint of a provider whose self-hosted servers need none (`key_required` False).

    Raises:
        ValueError: a provider that needs its key, pointed at an endpoint not allowed; the message names the
            setting and never the key.
    """
    from urllib.parse import urlsplit

    if allowed is None or not endpoint or not key.get_secret_value():
        return key
    parts = urlsplit(vendor)
    own = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "") if vendor else ""
    if any(_admits(entry, endpoint) for entry in (own, *allowed) if entry):
        return key
    if not key_required:
        return SecretStr("")
    got = urlsplit(endpoint)
    origin = f"{got.scheme}://{got.netloc}"
    raise ValueError(
        f"base_url {origin} is neither {provider}'s own endpoint ({own or 'none without region'}) nor in the setting "
        f"allowed_endpoints, so the worker's {variable} is never sent there; whoever runs the worker may add {origin} "
        f"to allowed_endpoints.{provider} (ttseval.toml, or TTSEVAL_ALLOWED_ENDPOINTS as JSON)"
    )


def json_safe(value: Any) -> Any:
    """Convert paths and other objects in option dumps to JSON-safe values."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


MODEL_THREADS_VARIABLE = "TTSEVAL_MODEL_THREADS"


def model_threads() -> int:
    """Intra-op threads a CPU model may use in this process; 0 = the library's default (all cores). The flows'
    LocalCluster sets TTSEVAL_MODEL_THREADS on each worker to cores / workers, so two workers on two cores run
    one thread each instead of four threads fighting over two cores (flows/runner.py)."""
    try:
        return max(0, int(os.environ.get(MODEL_THREADS_VARIABLE, "0") or 0))
    except ValueError:
        return 0


def onnx_session_options() -> Any:
    """onnxruntime SessionOptions honouring `model_threads()`: that many intra-op threads, one inter-op thread
    and no spin-waiting when it is set (spinning threads burn the cores another worker needs); ORT's defaults
    otherwise."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads := model_threads():
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def onnx_providers() -> list[str]:
    """onnxruntime execution providers, best first: CUDA when this onnxruntime build has it (the onnxruntime-gpu
    wheel on a GPU worker), then the CPU. A CPU build lists only the CPU."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    return [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]


TorchDevice = Annotated[
    str,
    Field(
        pattern=r"^(auto|cpu|cuda(:\d+)?)$",
        description="auto (cuda when torch sees a GPU, else cpu), cpu, cuda or cuda:N",
    ),
]
"""The `device` option of the torch-backed providers."""


def torch_device(device: str) -> str:
    """A TorchDevice with auto resolved: cuda when torch sees a GPU, else cpu."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def out_of_memory(error: BaseException) -> bool:
    """Whether a torch error is a device (or host) running out of memory: transient, unlike the shape and dtype
    failures torch also reports as RuntimeError, so a provider lets it through as a retryable failure instead of
    a permanent one (a later try, a smaller batch or a freer GPU may pass)."""
    return type(error).__name__ == "OutOfMemoryError" or "out of memory" in str(error).lower()


def import_without_torchaudio(importer: Callable[[], T], *, missing: str) -> T:
    """`importer()`, run with an empty stand-in module named torchaudio that is removed right after, so nothing else
    in the process ever sees a torchaudio. For packages that import torchaudio at the top of a module but use it only
    for file loading or resampling (DistillMOS, SpeechBrain): torchaudio has no build for torch 2.13.

    Raises:
        ImportError: the package is missing; `missing` says how to install it.
    """
    import sys
    import types

    import transformers  # noqa: F401 - imported first, so it records the real absence of torchaudio

    stand_in = "torchaudio" not in sys.modules
    if stand_in:
        sys.modules["torchaudio"] = types.ModuleType("torchaudio")
    try:
        return importer()
    except ImportError as e:
        raise ImportError(missing) from e
    finally:
        if stand_in:
            del sys.modules["torchaudio"]
