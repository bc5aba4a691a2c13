"""`ttseval trends` on a store without nightly runs is exit 2 (in-process, no server). The simulated week of nightly
runs whose trends page it draws is tests/e2e/test_nightly_week.py."""

from __future__ import annotations

from pathlib import Path


def test_trends_of_a_store_without_nightly_runs_is_exit_2(tmp_path: Path, capsys) -> None:
    from ttseval.cli import main
    from ttseval.core.store import ArtifactStore

    assert main(["trends", "--store", str(tmp_path / "none")]) == 2
    assert f"no store at {tmp_path / 'none'}" in capsys.readouterr().err
    ArtifactStore(str(tmp_path / "s")).write_bytes("runs/demo/report.md", b"# a run that is not a nightly one\n")
    assert main(["trends", "--store", str(tmp_path / "s")]) == 2
    assert "no night of series 'nightly' with a report in" in capsys.readouterr().err
    assert not (tmp_path / "s" / "runs" / "demo" / "html").exists()  # nothing written
