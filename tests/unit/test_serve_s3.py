"""`ttseval serve` (ttseval/infra/serve.py) from an S3 store (moto): the report written there is served, with byte
ranges of its clips. The report in Chromium and serving a local store are tests/system/test_html_report.py."""

from __future__ import annotations

from pathlib import Path

from tests.support.report_runs import SYSTEMS, http_get, serving, write_run
from ttseval.core.config import load_settings
from ttseval.core.store import ArtifactStore
from ttseval.tasks.report import write_full_report


def test_serve_streams_an_s3_store(s3_bucket: str, tmp_path: Path) -> None:
    uri = f"s3://{s3_bucket}/ttseval"
    store = ArtifactStore(uri)
    write_run(store, "s3run", 12)
    write_full_report(store, "s3run", load_settings(store=uri), list(SYSTEMS), {"run_id": "s3run", "baseline": "a"})
    report = store.read_bytes("runs/s3run/report.md").decode()
    assert f"html report: {uri}/runs/s3run/html/index.html (open with: ttseval serve --store {uri})" in report
    server, base = serving(uri)
    try:
        status, _, body = http_get(base + "/runs/s3run/html/index.html")
        assert status == 200 and b'src="data.js"' in body
        wav = store.read("s3run", "synthesis", columns=["audio_sha256"])["audio_sha256"].dropna().iloc[0]
        status, _, body = http_get(f"{base}/blobs/audio/{wav[:2]}/{wav}.wav", Range="bytes=0-43")
        assert status == 206 and body == store.get_audio(wav)[:44] and body.startswith(b"RIFF")
    finally:
        server.shutdown()
        server.server_close()
