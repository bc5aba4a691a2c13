"""What every part of a listening test shares: the test kinds and their rating scales, the MUSHRA-DG formula's
weights from the settings, and one test's rows of a listening table."""

from __future__ import annotations

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.errors import ConfigError
from ttseval.core.store import ArtifactStore
from ttseval.metrics.listening import DGWeights

KINDS = ("mushra", "mushra-nmr", "mushra-dg", "mushra-dg-nmr", "mos", "cmos")
MUSHRA_KINDS = KINDS[:4]
SCALES = {"mushra": (0.0, 100.0), "mos": (1.0, 5.0), "cmos": (-3.0, 3.0)}


def scale_of(kind: str) -> tuple[float, float]:
    """The lowest and highest score of a test kind's rating scale."""
    return SCALES["mushra" if kind in MUSHRA_KINDS else kind]


def dg_weights(settings: Settings) -> DGWeights:
    """ttseval.metrics.listening.DGWeights from settings.listening (dg_weights overrides, dg_clip)."""
    known = set(DGWeights.__dataclass_fields__) - {"clip"}
    if unknown := sorted(set(settings.listening.dg_weights) - known):
        raise ConfigError(f"listening.dg_weights: unknown name(s) {unknown}; known: {sorted(known)}")
    return DGWeights(**settings.listening.dg_weights, clip=settings.listening.dg_clip)


def of_test(store: ArtifactStore, run_id: str, table: str, test_id: str) -> pd.DataFrame:
    """A listening table's rows of one test (the filter pushed down to the Parquet scan; test_id is in the key)."""
    import pyarrow.compute as pc

    return store.read(run_id, table, where=pc.field("test_id") == test_id)
