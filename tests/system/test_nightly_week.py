"""A simulated week: seven real `ttseval nightly` runs against two fake vendors, one of which silently speaks 30%
slower from night 3 on (tests/support/week.py says what is proved). The four-night version that the development
gate runs is tests/e2e/test_nightly_four_nights.py; the false-alarm rate over many weeks and the nights a slow slide
takes are measured on the pure function (tests/unit/test_metrics_trends.py), not by running nightly hundreds of
times."""

from __future__ import annotations

from pathlib import Path

from tests.support.week import check_nights


def test_a_week_flags_the_silent_change_on_night_3_and_nothing_else(
    prefect_api: str, keyed_env: dict[str, str], tmp_path: Path
) -> None:
    check_nights(7, prefect_api, keyed_env, tmp_path)
