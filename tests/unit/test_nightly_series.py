"""Nightly series in one store (ttseval.tasks.trends, ttseval.flows.nightly): which series a night belongs to, which
night a night is compared with, and what a change of the series itself reads as. The two series run through the
command on one store are tests/e2e/test_nightly_series.py."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ttseval.core.errors import ConfigError
from ttseval.core.store import ArtifactStore
from ttseval.flows.nightly import nightly_run_id, previous_nightly, series_changes
from ttseval.metrics.drift import compare_reports
from ttseval.tasks.report import drift_markdown
from ttseval.tasks.trends import check_series, nightly_runs, series_of, write_series


def night(store: ArtifactStore, run_id: str, series: str | None = None, **log: str) -> None:
    """A night as far as these functions read it: a report part, its evaluate record, and its series.json when
    `series` is given (a night without one is of the series its run id names)."""
    store.write_bytes(f"runs/{run_id}/report/part-0.parquet", b"PAR1")
    record = {"command": "evaluate", "dataset": "items.jsonl", "dataset_sha256": "a" * 64, "systems": "x, y"}
    store.write_bytes(f"runs/{run_id}/log/20261101T000000000000.json", json.dumps(record | log).encode())
    if series is not None:
        write_series(store, run_id, series)


def test_a_series_name_must_fit_in_a_run_id() -> None:
    assert check_series("team-voices_2") == "team-voices_2"
    for bad in ("", "-lead", "has space", "a/b", "x" * 65, "dots.are.not"):
        with pytest.raises(ConfigError, match=r"series .*letters, digits, '_' and '-' only.*--series team-voices"):
            check_series(bad)


def test_a_nights_series_is_its_record_else_its_run_id(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path))
    night(store, "nightly-20261122T020000Z")  # written before series had names
    night(store, "nightly-team-a-20261122T020000Z")  # stopped before its series.json
    night(store, "nightly-custom-name")  # a --run-id with no timestamp
    night(store, "nightly-20261123T020000Z", series="team-a")  # its record wins over its name
    assert series_of(store, "nightly-20261122T020000Z") == "nightly"
    assert series_of(store, "nightly-team-a-20261122T020000Z") == "team-a"
    assert series_of(store, "nightly-custom-name") == "nightly"
    assert series_of(store, "nightly-20261123T020000Z") == "team-a"


def test_run_ids_of_a_named_series_carry_its_name() -> None:
    import re

    from ttseval.tasks.trends import check_night_id

    assert re.fullmatch(r"nightly-\d{8}T\d{6}Z", nightly_run_id())
    assert re.fullmatch(r"nightly-team-a-\d{8}T\d{6}Z", nightly_run_id("team-a"))
    assert check_night_id("my-night", "nightly") == "my-night"  # the default series takes any run id, as before
    assert check_night_id("nightly-team-a-smoke", "team-a") == "nightly-team-a-smoke"
    with pytest.raises(ConfigError, match=r"a night of series 'team-a' is named nightly-team-a-<...>.*--run-id"):
        check_night_id("nightly-20261122T020000Z", "team-a")


def test_a_night_is_compared_only_with_its_own_series(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path))
    night(store, "nightly-20261121T020000Z")
    night(store, "nightly-a-20261121T030000Z", series="a")
    night(store, "nightly-b-20261122T020000Z", series="b")
    night(store, "nightly-a-20261122T030000Z", series="a")
    night(store, "nightly-20261122T020000Z")
    store.write_bytes("runs/nightly-a-20261123T030000Z/series.json", b'{"series": "a"}')  # no report: never a night
    assert nightly_runs(store, series="a") == ["nightly-a-20261121T030000Z", "nightly-a-20261122T030000Z"]
    assert nightly_runs(store) == ["nightly-20261121T020000Z", "nightly-20261122T020000Z"]
    assert previous_nightly(store, "nightly-a-20261124T030000Z", "a") == "nightly-a-20261122T030000Z"
    assert previous_nightly(store, "nightly-20261124T020000Z") == "nightly-20261122T020000Z"
    assert previous_nightly(store, "nightly-b-20261122T020000Z", "b") is None  # its first night
    assert previous_nightly(store, "nightly-c-20261124T020000Z", "c") is None  # a new series: nothing to compare


def test_a_change_of_the_series_is_said_as_one_and_never_flagged(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path))
    night(store, "n1", series="a", systems="x, y", asr='{"en": "whisper:tiny"}')
    night(store, "n2", series="a", systems="x, z", asr='{"en": "whisper:base"}', dataset_sha256="b" * 64)
    night(store, "n3", series="a", systems="z, x", asr='{"en": "whisper:base"}', dataset_sha256="b" * 64)
    night(store, "n4", series="a", systems="z, x, w", asr='{"en": "whisper:base"}', dataset_sha256="b" * 64)
    lines, explained = series_changes(store, "n1", "n2")
    assert lines == [
        f"dataset: items.jsonl ({'a' * 12}) -> items.jsonl ({'b' * 12}); the figures compare different items",
        "systems added: z",
        "systems removed: y",
        'recognisers: {"en": "whisper:tiny"} -> {"en": "whisper:base"}',
    ]
    assert explained == {"x", "y", "z"}  # other recognisers: every system's rows per recogniser may change
    assert series_changes(store, "n2", "n3") == ([], set())  # the same systems in another order
    assert series_changes(store, "n3", "n4") == (["systems added: w"], {"w"})
    predictors = {"MOS predictors": "utmos"}
    night(
        store, "n5", series="a", systems="z, x, w", asr='{"en": "whisper:base"}', dataset_sha256="b" * 64, **predictors
    )
    assert series_changes(store, "n4", "n5") == (["MOS predictors: None -> utmos"], {"x", "z", "w"})
    # in the drift page: the change above the table, its presence rows marked as it, not counted as flagged
    base = {"system_spec": "x", "system_id": "x", "asr_spec": "whisper:tiny", "asr_id": "tiny"}
    figures = {"completion_rate": 1.0, "wer": 0.1, "cer": 0.05, "mos": 3.0}
    figures |= {f"{m}_ci_{end}": figures[m] for m in ("wer", "cer", "mos") for end in ("low", "high")}
    previous = pd.DataFrame([base | figures, base | figures | {"system_spec": "y", "system_id": "y"}])
    current = pd.DataFrame([base | figures, base | figures | {"system_spec": "z", "system_id": "z"}])
    drift = compare_reports(previous, current, series_changed={"y", "z"})
    page = drift_markdown(drift, "n1", "n2", ["systems added: z", "systems removed: y"])
    assert page.startswith("# Drift: `n2` against `n1`\n\n0 flagged change(s).")
    assert (
        "The series itself changed since `n1` (not counted as drift):\n\n- systems added: z\n- systems removed: y\n"
        in page
    )
    assert "| z | whisper:tiny | presence |  |  |  |  |  |  | added | series change |" in page
    assert "| y | whisper:tiny | presence |  |  |  |  |  |  | removed | series change |" in page
    # the same rows with no series change to explain them (y produced nothing tonight): flagged changes
    page = drift_markdown(compare_reports(previous, current), "n1", "n2")
    assert page.startswith("# Drift: `n2` against `n1`\n\n2 flagged change(s).")
    assert "| y | whisper:tiny | presence |  |  |  |  |  |  | removed | **yes** |" in page


def test_a_blind_night_says_so_in_its_page_and_its_alert() -> None:
    from tests.support.alerts import drift_rows
    from ttseval.tasks.report import drift_alert

    blind = ["3 of 3 paired tests cannot flag a change of any size (...): at least 7 items are needed"]
    page = drift_markdown(drift_rows(), "n1", "n2", blind=blind)
    assert (
        "**Warning: blind tests.** A change there could not be flagged tonight, whatever its size:\n\n- " + blind[0]
    ) in page
    _, body = drift_alert(drift_rows(), "n1", "n2", [], blind=blind)
    assert "Warning: blind tests (a change there could not be flagged tonight):\n- " + blind[0] in body
