"""Caps the operator sets on what an endpoint can make a worker hold: a vendor's answer is read up to max_answer_mb
(an endpoint streaming without end is cut off, a failed row), and a clip longer than max_clip_s is not stored (a
failed row naming its length). Both are the run's settings, never a spec's option, so a UI user cannot raise them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from tests.support import instant
from tests.support.healing import items_frame
from ttseval.core.config import Settings, load_settings
from ttseval.core.errors import PermanentProviderError
from ttseval.core.registry import Spec
from ttseval.tasks.parts import get_store
from ttseval.tasks.plan import plan_synthesis
from ttseval.tasks.provider_cache import build_provider
from ttseval.tasks.synthesize import synthesize_items


class EndlessAnswer:
    """A server whose every answer is a 200 streamed in 64 KiB chunks for as long as the client reads (with a
    Content-Length of `declared` bytes, if given); it counts the requests and the bytes it got to send."""

    def __init__(self, declared: int | None = None) -> None:
        sent, asked = [0], [0]
        self.sent, self.asked = sent, asked

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                asked[0] += 1
                self.send_response(200)
                self.send_header("Content-Type", "audio/mpeg")
                if declared is not None:  # a length said up front
                    self.send_header("Content-Length", str(declared))
                self.end_headers()
                chunk = b"\xff" * 65536
                try:
                    while sent[0] < 1 << 30:  # a gibibyte at most, should the client never stop
                        self.wfile.write(chunk)
                        sent[0] += len(chunk)
                except OSError:  # the client closed the connection: it read no further
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def endless(monkeypatch: pytest.MonkeyPatch) -> Iterator[EndlessAnswer]:
    monkeypatch.setenv("ELEVENLABS_API_KEY", "k")
    server = EndlessAnswer()
    yield server
    server.server.shutdown()


def test_an_answer_past_max_answer_mb_is_a_permanent_failure_and_is_not_read_further(endless: EndlessAnswer) -> None:
    settings = load_settings(max_answer_mb=1)
    provider = build_provider("tts", f"elevenlabs:v1:base_url={endless.url}", settings)
    with pytest.raises(PermanentProviderError, match=r"passed 1 MiB \(the setting max_answer_mb\)"):
        provider.synthesize("Hello there.", "en")
    # the client stopped at the cap: the server got to send little more than what the socket buffers hold
    assert endless.sent[0] < 64 * 2**20, endless.sent[0]


SDK_CLIENTS = [
    ("llm", "openai:gpt-4.1-mini:base_url={url}/v1"),
    ("llm", "gemini:gemini-2.5-flash:base_url={url}"),
    ("judge", "openai:gpt-4o-audio-preview:base_url={url}/v1"),
    ("judge", "gemini:gemini-2.5-pro:base_url={url}"),
    ("tts", "gemini:Kore:base_url={url}"),
]
"""The providers whose answers a vendor SDK reads (OpenAI's, Google's), through ttseval's capped HTTP client."""


@pytest.mark.parametrize(("kind", "spec"), SDK_CLIENTS)
@pytest.mark.parametrize("declared", [None, 2**31], ids=["streamed", "declared"])
def test_an_sdk_answer_past_max_answer_mb_fails_once_for_good_and_is_not_read_further(
    monkeypatch: pytest.MonkeyPatch, kind: str, spec: str, declared: int | None
) -> None:
    """An LLM, judge or TTS answer read by a vendor SDK stops at the worker's max_answer_mb: a failure naming the
    setting, not retried (one request), the worker holding no more than the cap; a Content-Length over it is
    refused before the body is read."""
    from ttseval.core.protocols import LLMRequest

    server = EndlessAnswer(declared)
    try:
        monkeypatch.setenv("GEMINI_API_KEY", "k")
        monkeypatch.setenv("TTSEVAL_MAX_ANSWER_MB", "1")  # the worker's setting, read where the SDK client is made
        monkeypatch.setenv("TTSEVAL_ALLOWED_ENDPOINTS", f'{{"gemini": ["{server.url}"]}}')
        provider = build_provider(kind, spec.format(url=server.url), load_settings())
        if kind == "tts":
            with pytest.raises(PermanentProviderError, match=r"passed 1 MiB \(the setting max_answer_mb\)"):
                provider.synthesize("Hello there.", "en")
        else:
            llm = provider if kind == "llm" else provider._llm  # a judge asks through its LLM client
            [result] = llm.generate([LLMRequest(parts=("Say hello.",))])
            assert not result.ok and "passed 1 MiB (the setting max_answer_mb)" in result.error, result.error
        assert server.asked[0] == 1
        assert server.sent[0] < 64 * 2**20, server.sent[0]
    finally:
        server.server.shutdown()


@pytest.mark.parametrize("option", ["max_answer_mb=1000", "allowed_endpoints=http://evil.example"])
def test_a_spec_cannot_set_what_is_the_workers_to_set(endless: EndlessAnswer, option: str) -> None:
    from ttseval.core.errors import SpecError
    from ttseval.providers.tts import TTS

    for build in (
        lambda: build_provider("tts", f"elevenlabs:v1:base_url={endless.url}:{option}", load_settings()),
        lambda: TTS.build(f"elevenlabs:v1:{option}"),  # the registry alone, without a run's settings
    ):
        with pytest.raises(SpecError, match="is a setting of whoever runs the worker"):
            build()


def test_a_clip_over_max_clip_s_is_a_failed_row_naming_its_length_and_is_not_stored(tmp_path: Path) -> None:
    """The instant voice speaks 0.02 s per byte and word gap: 'one two three' is 0.28 s, 'one' 0.08 s."""
    settings = Settings(store=str(tmp_path), plugins=instant.PLUGINS, max_clip_s=0.2, shard_size=4)
    spec = Spec.parse("instant")
    plan = plan_synthesis(
        get_store(settings.store), "r", items_frame([("short", "one"), ("long", "one two three")]), [spec], settings
    )
    for shard in plan.shards:
        synthesize_items(settings, "r", shard)
    rows = get_store(settings.store).read("r", "synthesis").set_index("item_id")
    assert rows.loc["short", "status"] == "ok"
    long = rows.loc["long"]
    assert long["status"] == "failed" and not long["retryable"] and pd.isna(long["audio_uri"])
    assert "the clip is 0.3 s long, over the setting max_clip_s (0.2 s)" in long["error_message"]
    blobs = list((tmp_path / "blobs").rglob("*.wav")) if (tmp_path / "blobs").exists() else []
    assert len(blobs) == 1  # the short clip's only
