"""Alerts of a nightly run's flagged drift, through real Prefect notification blocks on a real local Prefect server,
received by a webhook receiver on loopback (ttseval.tasks.alerts, ttseval.tasks.report.drift_alert)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from ttseval.metrics.drift import COLUMNS
from ttseval.tasks.alerts import send_alert
from ttseval.tasks.report import drift_alert

SECRET_PATH = "/hook/T000-secret-token"  # a Slack-style URL carries its token in the path


class Receiver(ThreadingHTTPServer):
    """A webhook receiver: keeps each POST's path and JSON body; answers 500 on /fail."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append((self.path, body))
        self.send_response(500 if self.path.startswith("/fail") else 200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def drift_rows() -> pd.DataFrame:
    """Two flagged changes (a paired WER rise, a system gone) and one unflagged MOS wobble."""
    rows = [
        {
            "system_spec": "openai:alloy",
            "asr_spec": "whisper:tiny",
            "metric": "wer",
            "previous": 0.05,
            "current": 0.125,
            "delta": 0.075,
            "p_adjusted": 0.0021,
            "test": "paired",
            "flagged": True,
            "direction": "worse",
        },
        {
            "system_spec": "openai:alloy",
            "asr_spec": None,
            "metric": "mos",
            "previous": 3.9,
            "current": 3.85,
            "delta": -0.05,
            "p_adjusted": 0.61,
            "test": "paired",
            "flagged": False,
            "direction": "worse",
        },
        {
            "system_spec": "elevenlabs:Rachel",
            "asr_spec": None,
            "metric": "presence",
            "flagged": True,
            "direction": "removed",
        },
    ]
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def test_the_message_names_system_metric_size_and_links() -> None:
    subject, body = drift_alert(
        drift_rows(),
        "nightly-20261122T020000Z",
        "nightly-20261123T020000Z",
        ["HTML report: file:///s/runs/n/html/index.html"],
    )
    assert subject == "ttseval nightly nightly-20261123T020000Z: 2 flagged change(s), 1 for the worse"
    assert body.splitlines() == [
        "Drift of nightly-20261123T020000Z against nightly-20261122T020000Z:",
        "- openai:alloy (whisper:tiny) wer: 0.050 -> 0.125 (delta 0.075, adjusted p 0.0021), worse",
        "- elevenlabs:Rachel: removed since nightly-20261122T020000Z",
        "",
        "HTML report: file:///s/runs/n/html/index.html",
    ]


def test_no_flagged_change_no_message() -> None:
    quiet = drift_rows().assign(flagged=False)
    assert drift_alert(quiet, "a", "b", []) is None


def test_blocks_on_a_real_prefect_server_reach_the_receiver_and_failures_are_outcomes(
    prefect_api: str, receiver: Receiver
) -> None:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.blocks.system import Secret
    from prefect.settings import PREFECT_API_URL, temporary_settings

    payload = {"text": "{{subject}}\n{{body}}"}
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        CustomWebhookNotificationBlock(name="oncall", url=receiver.url + SECRET_PATH, json_data=payload).save(
            "ttseval-oncall", overwrite=True
        )
        CustomWebhookNotificationBlock(
            name="broken", url=receiver.url + "/fail/T000-secret-token", json_data=payload
        ).save("ttseval-broken", overwrite=True)
        Secret(value="not-a-notifier").save("ttseval-not-a-notifier", overwrite=True)
        subject, body = drift_alert(drift_rows(), "n1", "n2", ["HTML report: file:///s/n2.html"])
        before = len(receiver.received)
        outcomes = send_alert(
            [
                "custom-webhook/ttseval-oncall",
                "custom-webhook/ttseval-broken",
                "custom-webhook/ttseval-nowhere",
                "secret/ttseval-not-a-notifier",
            ],
            subject,
            body,
        )

    sent = receiver.received[before:]
    assert [path for path, _ in sent] == [SECRET_PATH, "/fail/T000-secret-token"]  # one message per block
    assert sent[0][1] == {"text": f"{subject}\n{body}"}
    assert "openai:alloy (whisper:tiny) wer: 0.050 -> 0.125" in sent[0][1]["text"]
    assert [(o["block"], o["sent"]) for o in outcomes] == [
        ("custom-webhook/ttseval-oncall", True),
        ("custom-webhook/ttseval-broken", False),
        ("custom-webhook/ttseval-nowhere", False),
        ("secret/ttseval-not-a-notifier", False),
    ]
    assert outcomes[1]["error"].startswith("HTTPStatusError: Server error '500")
    assert outcomes[2]["error"].startswith(("ValueError", "ObjectNotFound"))
    assert outcomes[3]["error"] == "TypeError: Secret is not a notification block (it has no notify())"
    assert not any("secret-token" in (o["error"] or "") for o in outcomes)  # the block's URL stays in the block


def test_a_slow_drift_alone_sends_the_message() -> None:
    # WER 0.10 rising 0.01 a night, SE 0.01 each night: z_t = 0.01 t / (0.01 sqrt 2) = 0.707 t; with k 0.5 the
    # CUSUM is 0.207, 1.121, 2.743, then 2.743 + 2.828 - 0.5 = 5.071 > 5 on the fifth night (worked by hand)
    from ttseval.metrics.trends import trend_changes
    from ttseval.tasks.trends import drift_lines

    nights = pd.DataFrame(
        {
            "night": range(5),
            "run_id": [f"n{i}" for i in range(5)],
            "system_id": "a",
            "system_spec": "openai:alloy",
            "metric": "wer",
            "detail": "whisper:tiny",
            "value": [0.10, 0.11, 0.12, 0.13, 0.14],
            "ci_low": 0.0,
            "ci_high": 1.0,
            "se": 0.01,
            "n": 8,
        }
    )
    trends = trend_changes(nights, k=0.5, h=5.0)
    assert trends["drift"].tolist() == [False, False, False, False, True]
    assert drift_lines(trends, "n3", 5.0) == []
    [line] = drift_lines(trends, "n4", 5.0)
    assert line == (
        "- openai:alloy wer (whisper:tiny) slow drift: 0.100 on n0 -> 0.140 tonight (2.83 SE; CUSUM "
        "5.07 > h 5.0 over 5 nights)"
    )
    quiet = drift_rows().assign(flagged=False)
    subject, body = drift_alert(quiet, "n3", "n4", ["trends: /s/runs/n4/html/trends.html"], None, [line])
    assert subject == "ttseval nightly n4: 1 flagged change(s), 1 for the worse"
    assert body.splitlines() == ["Drift of n4 against n3:", line, "", "trends: /s/runs/n4/html/trends.html"]
