"""Providers as stages build them: plugins, keys from Prefect Secret blocks, the run's settings they declare, one
object per (kind, spec) per worker process so models load once, and keyless building for a dry run's estimate."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from ttseval.core.config import Settings
from ttseval.core.errors import ConfigError, MissingKeyError
from ttseval.core.memory import give_back_freed_memory
from ttseval.core.registry import Spec
from ttseval.providers.registries import REGISTRIES


def secret_from_block(variable: str | None, blocks: dict[str, str]) -> Any:
    """The API key named `variable` from the Prefect Secret block the setting `secret_blocks` names for it, when
    the environment does not set the variable; None otherwise. The value stays a SecretStr, never logged."""
    if not variable or os.environ.get(variable) or variable not in blocks:
        return None
    from prefect.blocks.system import Secret
    from pydantic import SecretStr

    try:
        # Prefect types load() as Block | Coroutine (async_dispatch); called from sync code it returns the block
        value = Secret.load(blocks[variable]).get()  # type: ignore[union-attr]
    except ValueError as e:
        raise ConfigError(
            f"setting secret_blocks.{variable}: no Prefect Secret block {blocks[variable]!r} ({e}); "
            f"create it (prefect block create secret) or set {variable} in the environment"
        ) from e
    return SecretStr(str(value))


_KEYLESS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("ttseval_keyless", default=None)
PLACEHOLDER_KEY = "ttseval-estimate-only-no-key"
"""The key a provider is built with inside `estimate_only` when it has none of its own; never sent anywhere."""


@contextlib.contextmanager
def estimate_only() -> Iterator[list[str]]:
    """Inside, a provider that refuses to be built for want of an API key is built with a placeholder key instead
    (and marked `estimate_only`), so `evaluate --dry-run` can price a vendor before the user has signed up with
    it. Nothing built here may call its vendor; the flows never enter it. Yields the specs built keyless."""
    keyless: list[str] = []
    token = _KEYLESS.set(keyless)
    try:
        yield keyless
    finally:
        _KEYLESS.reset(token)


def build_provider(kind: str, spec: str, settings: Settings) -> Any:
    """Build a provider (no cache): its plugins, its API key from a Prefect Secret block when the key's variable is
    not in the environment (settings `secret_blocks`), and the run's settings it declares (`run_settings`)."""
    return _build(kind, spec, settings, _KEYLESS.get() is not None)


def _build(kind: str, spec: str, settings: Settings, keyless: bool = False) -> Any:
    registry = REGISTRIES[kind]
    plugins = settings.plugins.get(kind, {})
    cls = registry.resolve(Spec.parse(spec).provider, plugins)
    key = secret_from_block(getattr(cls, "key_variable", None), settings.secret_blocks)
    # A provider built from part of the run's settings names those fields (`run_settings`: pushed:<label> and a
    # staged files:<label> read the run's store, a cascade its judges): it gets them from the settings object the
    # task was given, never through the spec, nor from the environment of the worker that builds it.
    context: dict[str, Any] = {name: getattr(settings, name) for name in getattr(cls, "run_settings", ())}
    try:
        return registry.build(spec, extra=plugins, **context, **({"api_key": key} if key is not None else {}))
    except MissingKeyError:
        if not (keyless and key is None and "api_key" in inspect.signature(cls.__init__).parameters):
            raise
    from pydantic import SecretStr

    provider = registry.build(spec, extra=plugins, api_key=SecretStr(PLACEHOLDER_KEY))
    provider.estimate_only = True
    if (built := _KEYLESS.get()) is not None and Spec.parse(spec).canonical not in built:
        built.append(Spec.parse(spec).canonical)
    return provider


_PROVIDERS: OrderedDict[str, Any] = OrderedDict()  # cache key (get_provider) -> provider, most recently used last
_PROVIDERS_LOCK = threading.Lock()
MAX_PROVIDERS = 32
METRIC_KINDS = frozenset({"asr", "quality", "speaker", "lid"})  # the model stages' kinds (setting models_in_memory)


def get_provider(kind: str, spec: str, settings: Settings) -> Any:
    """One provider object per (kind, spec) per process, so models load once per worker: keyed by the spec and
    every part of the run's settings that builds it (plugins, secret blocks, its `run_settings`), so runs of
    different settings on one worker never share a provider built for the other."""
    parsed = Spec.parse(spec)
    plugins = settings.plugins.get(kind, {})
    cls = REGISTRIES[kind].resolve(parsed.provider, plugins)
    key = json.dumps(
        [
            kind,
            parsed.canonical,
            plugins,
            settings.secret_blocks,
            _KEYLESS.get() is not None,
            settings.model_dump(mode="json", include=set(getattr(cls, "run_settings", ()))),
        ],
        sort_keys=True,
        default=str,
    )
    with _PROVIDERS_LOCK:
        if key in _PROVIDERS:
            _PROVIDERS.move_to_end(key)
            return _PROVIDERS[key]
    limit = settings.models_in_memory if kind in METRIC_KINDS else 0
    if limit:  # make room before loading: the models given up are freed before this one takes their memory
        _forget_metric_models(keep=limit - 1)
    provider = _build(kind, parsed.canonical, settings, _KEYLESS.get() is not None)
    with _PROVIDERS_LOCK:
        provider = _PROVIDERS.setdefault(key, provider)  # a thread that built it first wins
        while len(_PROVIDERS) > MAX_PROVIDERS:
            _PROVIDERS.popitem(last=False)
    return provider


def _forget_metric_models(keep: int) -> None:
    """Drop all but the `keep` most recently used metric models from this process's cache, and free what they held
    (a task still using one keeps it until it finishes): setting models_in_memory."""
    with _PROVIDERS_LOCK:
        metric = [k for k in _PROVIDERS if json.loads(k)[0] in METRIC_KINDS]
        dropped = [_PROVIDERS.pop(k) for k in metric[: max(0, len(metric) - keep)]]
    if not dropped:
        return
    del dropped
    import sys

    give_back_freed_memory()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def model_output_id(kind: str, spec: Spec, settings: Settings) -> str:
    """The id that keys a model stage's rows ('asr' -> asr_id, 'quality' -> quality_id): the spec's id with the
    provider's `output_revision` (ttseval.core.registry.Registry.output_id)."""
    return REGISTRIES[kind].output_id(spec, settings.plugins.get(kind, {}))
