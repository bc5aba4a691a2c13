"""`ttseval serve` (ttseval/infra/serve.py) from an S3 store (moto): the report written there is served, with byte
ranges of its clips; from a local store, nothing a symbolic link points at outside it. The report in Chromium and
serving a local store are tests/system/test_html_report.py."""

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


def test_serve_refuses_a_link_in_a_local_store_that_points_out_of_it(tmp_path: Path) -> None:
    """A symbolic link inside a local store (a report file or an audio blob) to a file outside is not served,
    though its name is one serve serves; a real file beside it is."""
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0\n")
    html_dir = tmp_path / "store" / "runs" / "r" / "html"
    html_dir.mkdir(parents=True)
    (html_dir / "index.html").write_text("<!doctype html><title>r</title>")
    (html_dir / "data.js").symlink_to(secret)
    sha = "ab" + "0" * 62
    blob = tmp_path / "store" / "blobs" / "audio" / "ab" / f"{sha}.wav"
    blob.parent.mkdir(parents=True)
    blob.symlink_to(secret)
    server, base = serving(str(tmp_path / "store"))
    try:
        assert http_get(base + "/runs/r/html/index.html")[0] == 200
        for path in ("/runs/r/html/data.js", f"/blobs/audio/ab/{sha}.wav"):
            status, _, body = http_get(base + path)
            assert status == 404 and b"root:" not in body, path
    finally:
        server.shutdown()
        server.server_close()
