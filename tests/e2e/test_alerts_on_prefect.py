"""Alerts of a nightly run's flagged drift, through real Prefect notification blocks on a real local Prefect server,
received by a webhook receiver on loopback (ttseval.tasks.alerts); the message itself is tests/unit/test_alerts.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.support.alerts import Receiver, drift_rows
from ttseval.tasks.alerts import send_alert
from ttseval.tasks.report import drift_alert

SECRET_PATH = "/hook/T000-secret-token"  # a Slack-style URL carries its token in the path


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


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
