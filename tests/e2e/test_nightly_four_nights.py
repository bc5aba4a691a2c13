"""Four real `ttseval nightly` runs against two fake vendors, one of which silently speaks 30% slower from night 3
on (tests/support/week.py says what is proved): the development gate's version of the week in
tests/system/test_nightly_week.py."""

from __future__ import annotations

from pathlib import Path

from tests.support.week import check_nights


def test_four_nights_flag_the_silent_change_on_night_3_and_nothing_else(
    prefect_api: str, keyed_env: dict[str, str], tmp_path: Path
) -> None:
    check_nights(4, prefect_api, keyed_env, tmp_path)
