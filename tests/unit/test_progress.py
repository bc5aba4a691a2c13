"""The run's progress artifact in the Prefect UI is best effort (ttseval.flows.progress.StageProgress): a Prefect API
that does not answer (a server restarting, its host cut off) leaves the artifact behind, never ends the run, and
is said once per outage."""

from __future__ import annotations

import logging

import httpx
import pytest

from ttseval.flows.progress import StageProgress


def test_an_unreachable_prefect_api_never_ends_the_run_and_is_said_once_per_outage(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import prefect.artifacts

    answers = iter([None, "down", "down", None, "down", None])  # up, an outage of two updates, up, one more, up
    sent: list[float] = []

    def update(artifact_id: object, progress: float, description: str | None = None) -> None:
        if next(answers) == "down":
            raise httpx.ConnectError("[Errno 111] Connection refused")
        sent.append(progress)

    monkeypatch.setattr(prefect.artifacts, "update_progress_artifact", update)
    log = logging.getLogger("test-progress")
    progress = StageProgress("evaluate", "k", log)
    progress._artifact = "artifact-id"  # as inside a flow run, where __enter__ creates it
    progress.add("synthesis", 6)
    with caplog.at_level(logging.WARNING, logger="test-progress"):
        for _ in range(6):
            progress.advance("synthesis", 1)  # never raises
    warned = [r for r in caplog.records if "progress in the Prefect UI not updated" in r.getMessage()]
    assert len(warned) == 2 and "ConnectError" in warned[0].getMessage()
    # the updates that got through show the progress of their moment; the last one caught up to 100%
    assert sent == [16.7, 66.7, 100.0]
