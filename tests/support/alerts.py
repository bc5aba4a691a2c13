"""What the alert tests share (tests/unit/test_alerts.py, tests/e2e/test_alerts_on_prefect.py, the nightly e2e tests):
a webhook receiver on loopback that keeps each POST's path and JSON body and answers 500 on /fail, and a drift table
with one flagged change."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd

from ttseval.metrics.drift import COLUMNS


class Receiver(ThreadingHTTPServer):
    """A webhook receiver: keeps each POST's path, JSON body and headers; answers 500 on /fail, else 200 "ok"."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict]] = []
        self.headers: list[dict[str, str]] = []  # of each POST, in the order of `received`
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append((self.path, body))
        self.server.headers.append({k.lower(): v for k, v in self.headers.items()})
        failing = self.path.startswith("/fail")
        answer = b"" if failing else b"ok"  # Slack's incoming webhooks answer "ok", and Apprise checks it
        self.send_response(500 if failing else 200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


def drift_rows() -> pd.DataFrame:
    """One flagged change (a paired WER rise), one unflagged MOS wobble and a system gone (a presence row: a change of
    the series, which compare_reports never flags)."""
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
            "flagged": False,
            "direction": "removed",
        },
    ]
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def webhook_receiver(prefect_api: str, block: str, path: str) -> Receiver:
    """A Receiver serving in a thread, and a Prefect custom-webhook block named `block` on the server at `prefect_api`
    that posts each alert's subject and body to the receiver's `path`."""
    import threading

    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.settings import PREFECT_API_URL, temporary_settings

    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        CustomWebhookNotificationBlock(
            name="tts", url=receiver.url + path, json_data={"subject": "{{subject}}", "body": "{{body}}"}
        ).save(block, overwrite=True)
    return receiver
