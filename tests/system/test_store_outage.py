"""The artifact store on an S3-compatible server (moto) that stops answering: its own server frozen with SIGSTOP and
thawed, or gone. The store itself is tests/unit/test_store.py."""

from __future__ import annotations

import pytest

from ttseval.core.errors import StoreError
from ttseval.core.store import ArtifactStore


def test_an_unreachable_s3_store_is_waited_for_up_to_store_wait_s(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A store that does not answer (here: its server stopped with SIGSTOP, as a host frozen or cut off) is tried
    again until it answers: a write begun while it is stopped lands once it runs again. One that stays away (no
    server on its port) is given up after `wait_s`, naming the store and the wait. A request the server refuses (a
    bucket that does not exist) is not waited for."""
    import logging
    import os
    import signal
    import subprocess
    import threading
    import time

    import boto3

    from tests.support.harness import BIN, free_port, stop_group, wait_http

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    for k, v in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    gone = ArtifactStore("s3://frozen/x", wait_s=1.5)
    t = time.monotonic()
    with pytest.raises(StoreError, match=r"cannot reach the store s3://frozen/x \(writing a\.txt; waited 1\.5 s"):
        gone.write_bytes("a.txt", b"never")
    assert time.monotonic() - t >= 1.5  # the whole wait was given
    # once given up, the next operation fails after its one try, not another wait; which of a run's failing
    # operations reaches the user is a matter of timing, so this one names the wait and the setting too
    # (tests/system/test_faults.py saw this one in CI)
    with pytest.raises(
        StoreError,
        match=r"\(reading a\.txt; still, after an earlier operation waited 1\.5 s, the "
        r"store_wait_s setting\)",
    ):
        gone.read_bytes("a.txt")

    server = subprocess.Popen(
        [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_http(endpoint, 30)
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="frozen")
        os.kill(server.pid, signal.SIGSTOP)
        # the AWS SDK gives up on a server that does not answer after about 10 s (3 tries): then the store says it
        # waits, and only then is the server resumed, so the write is begun and waited for however slow the machine
        waiting, resumed, saw = threading.Event(), threading.Event(), []
        message = "the store s3://frozen/x cannot be reached (writing a.txt); trying again for up to 60 s"

        class Seen(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if record.getMessage() == message:
                    waiting.set()

        def resume_once_waiting() -> None:
            saw.append(waiting.wait(timeout=180))  # generous: the SDK's own tries take about 10 s
            os.kill(server.pid, signal.SIGCONT)
            resumed.set()

        seen = Seen(logging.WARNING)
        store_log = logging.getLogger("ttseval.core.store")
        store_log.addHandler(seen)
        resumer = threading.Thread(target=resume_once_waiting, daemon=True)
        try:
            store = ArtifactStore("s3://frozen/x", wait_s=60)
            caplog.clear()
            resumer.start()
            store.write_bytes("a.txt", b"landed")  # begun with the server stopped
            landed = resumed.is_set()
        finally:
            store_log.removeHandler(seen)
            waiting.set()  # a resumer still waiting (the write failed) resumes the server at once
            resumer.join(timeout=30)
        assert saw == [True], f"the store did not say it waits within 180 s; it logged:\n{caplog.text}"
        assert message in caplog.text  # the store waited for the stopped server
        assert landed  # the write ended only once the server ran again: it was waited for, not lost
        assert store.read_bytes("a.txt") == b"landed"
        assert store.exists("a.txt") and not store.exists("b.txt")
        t = time.monotonic()
        with pytest.raises(StoreError, match="NO_SUCH_BUCKET"):
            ArtifactStore("s3://no-such-bucket/x", wait_s=60).write_bytes("a.txt", b"x")
        assert time.monotonic() - t < 30  # refused at once, not waited for
    finally:
        os.kill(server.pid, signal.SIGCONT)
        stop_group(server)
