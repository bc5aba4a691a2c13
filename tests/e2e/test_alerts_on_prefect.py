"""Alerts of a nightly run's flagged drift, through real Prefect notification blocks on a real local Prefect server,
received by a webhook receiver on loopback (ttseval.tasks.alerts); the message itself is tests/unit/test_alerts.py."""

from __future__ import annotations

import html
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


def test_the_documented_slack_and_email_recipes_deliver_the_alert_in_each_vendors_format(
    prefect_api: str, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs' Slack and e-mail recipes as written (Prefect's SlackWebhook and SendgridEmail blocks, saved on a
    real Prefect server, named in alert_blocks): each delivers the alert in its vendor's wire format. Apprise, which
    the blocks send through, posts to Slack's and SendGrid's hosts; the test points those two URLs (class
    attributes of Apprise's plugins) at the receiver on loopback, so what arrives is exactly what the vendor would
    get."""
    from apprise.plugins.sendgrid import NotifySendGrid
    from apprise.plugins.slack import NotifySlack
    from prefect.blocks.notifications import SendgridEmail, SlackWebhook
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setattr(NotifySlack, "webhook_url", f"{receiver.url}/slack/services")
    monkeypatch.setattr(NotifySendGrid, "notify_url", f"{receiver.url}/sendgrid/v3/mail/send")
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        SlackWebhook(url="https://hooks.slack.com/services/T000/B000/XXXXSECRET").save("tts-alerts", overwrite=True)
        SendgridEmail(
            api_key="SG.canary-key", sender_email="ttseval@example.org", to_emails=["oncall@example.org"]
        ).save("tts-mail", overwrite=True)
        subject, body = drift_alert(drift_rows(), "n1", "n2", ["HTML report: file:///s/n2.html"])
        before = len(receiver.received)
        outcomes = send_alert(["slack-webhook/tts-alerts", "sendgrid-email/tts-mail"], subject, body)

    assert [(o["block"], o["sent"], o["error"]) for o in outcomes] == [
        ("slack-webhook/tts-alerts", True, None),
        ("sendgrid-email/tts-mail", True, None),
    ]
    (slack_path, slack), (mail_path, mail) = receiver.received[before:]
    slack_headers, mail_headers = receiver.headers[before:]
    # Slack's incoming webhook: the tokens in the path, the message as an attachment with its title and text
    assert slack_path == "/slack/services/T000/B000/XXXXSECRET"
    [attachment] = slack["attachments"]
    # Slack's text escapes &, < and > as entities (its documented format), which Slack shows as the characters
    assert attachment["title"] == subject and html.unescape(attachment["text"]) == body
    assert "openai:alloy (whisper:tiny) wer: 0.050 -&gt; 0.125" in attachment["text"]
    # SendGrid's v3 mail send: the key as a bearer token, the recipients, the subject and the body
    assert mail_path == "/sendgrid/v3/mail/send" and mail_headers["authorization"] == "Bearer SG.canary-key"
    assert mail["personalizations"] == [{"to": [{"email": "oncall@example.org"}]}]
    assert mail["from"] == {"email": "ttseval@example.org"} and mail["subject"] == subject
    assert body.splitlines()[0] in mail["content"][0]["value"]
    assert slack_headers["content-type"].startswith("application/json")
