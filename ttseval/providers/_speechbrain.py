"""What the SpeechBrain providers share (speaker/speechbrain_ecapa.py, lid/speechbrain_lid.py): SpeechBrain's classes
imported under a stand-in torchaudio, the ECAPA-TDNN front end of both model cards, and batching by equal length.

SpeechBrain 1.1 declares torchaudio (no build exists for torch 2.13) and imports it at the top of some modules, for
file loading and resampling only; encode_batch and classify_batch are pure torch. requirements-nodeps.txt installs
speechbrain and hyperpyyaml without their dependencies. hyperpyyaml 1.2 does not load YAML beside ruamel.yaml 0.19
(Prefect's), so a model card's hyperparams.yaml is not read: the modules it declares are built here, with its sizes,
and the checkpoints loaded into them strictly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ttseval.core.errors import PermanentProviderError
from ttseval.providers import import_without_torchaudio

T = TypeVar("T")

SAMPLE_RATE_HZ = 16000
MIN_SAMPLES = 640  # 40 ms: five 10 ms frames; the dilation-4 convolution pads 4 frames by reflection, which needs more
ECAPA_SIZES = {
    "channels": [1024, 1024, 1024, 1024, 3072],
    "kernel_sizes": [5, 3, 3, 3, 1],
    "dilations": [1, 2, 3, 4, 1],
    "attention_channels": 128,
}
"""ECAPA-TDNN's sizes in both spkrec-ecapa-voxceleb and lang-id-voxlingua107-ecapa (they differ in mels and output)."""


def speechbrain_modules() -> dict[str, Any]:
    """SpeechBrain's classes, imported with a stand-in torchaudio module that is removed after."""

    def load() -> dict[str, Any]:
        from speechbrain.dataio.encoder import CategoricalEncoder
        from speechbrain.inference.classifiers import EncoderClassifier
        from speechbrain.lobes.features import Fbank
        from speechbrain.lobes.models.ECAPA_TDNN import ECAPA_TDNN
        from speechbrain.lobes.models.Xvector import Classifier
        from speechbrain.processing.features import InputNormalization

        return {
            "EncoderClassifier": EncoderClassifier,
            "Fbank": Fbank,
            "ECAPA_TDNN": ECAPA_TDNN,
            "InputNormalization": InputNormalization,
            "Classifier": Classifier,
            "CategoricalEncoder": CategoricalEncoder,
        }

    return import_without_torchaudio(
        load,
        missing="the SpeechBrain providers need speechbrain and hyperpyyaml: run "
        "scripts/setup.sh install (it installs requirements-nodeps.txt)",
    )


def load_checkpoint(module: Any, path: Path, *, what: str, spec: str) -> Any:
    """`module` with the state dict in `path` loaded strictly.

    Raises:
        PermanentProviderError: the file is not a state dict of that module.
    """
    import torch

    try:
        module.load_state_dict(torch.load(path, map_location="cpu", weights_only=True), strict=True)
    except Exception as e:
        raise PermanentProviderError(f"{str(path)!r} is not {what}: {str(e)[:500]}", spec=spec) from e
    return module.eval()


def by_equal_length(samples: list[np.ndarray], batch_size: int, run: Callable[[np.ndarray], Iterable[T]]) -> list[T]:
    """`run` on batches of clips of exactly one length (rows of its result, one per clip, in order). ECAPA pads its
    convolutions by reflection at the ends, so a clip zero-padded in a batch would get another output even with
    SpeechBrain's relative lengths (measured in the tests)."""
    out: list[Any] = [None] * len(samples)
    groups: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(samples):
        groups[len(s)].append(i)
    for same in groups.values():
        for start in range(0, len(same), batch_size):
            chunk = same[start : start + batch_size]
            for i, row in zip(chunk, run(np.stack([samples[i] for i in chunk]))):
                out[i] = row
    return out
