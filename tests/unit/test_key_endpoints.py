"""A worker's API keys go only to each vendor's own endpoint or one the operator allows (setting allowed_endpoints).

A spec's `base_url` is typed by whoever starts a run, a stranger on a shared server's UI included, while the keys are
the worker's. A capture server on loopback stands for a host the operator never allowed: it records every request's
headers, and the tests look for the canary key there. Built the way a stage builds providers (build_provider, with
the run's settings), every keyed provider pointed there is refused before any request, or, where a self-hosted
server needs no key (the openai TTS, LLM and judge), built without the key."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ttseval.core.config import Settings, load_settings
from ttseval.core.errors import ConfigError, SpecError
from ttseval.core.protocols import LLMRequest
from ttseval.providers import confine_key
from ttseval.tasks.provider_cache import build_provider

CANARY = "canary-key-0123456789"
KEY_VARIABLES = (
    "ELEVENLABS_API_KEY",
    "CARTESIA_API_KEY",
    "DEEPGRAM_API_KEY",
    "HUME_API_KEY",
    "AZURE_SPEECH_KEY",
    "GEMINI_API_KEY",
    "OPENAI_API_KEY",
)

KEY_REQUIRED = [
    ("tts", "elevenlabs:v1:base_url={url}"),
    ("tts", "cartesia:v1:base_url={url}"),
    ("tts", "deepgram:aura-2-thalia-en:base_url={url}"),
    ("tts", "hume:v1:base_url={url}"),
    ("tts", "azure:en-US-AvaNeural:base_url={url}"),
    ("tts", "gemini:Kore:base_url={url}"),
    ("llm", "gemini:gemini-2.5-flash:base_url={url}"),
    ("judge", "gemini:gemini-2.5-pro:base_url={url}"),
]
"""Providers whose every endpoint needs the key: pointed at a host not allowed, they are refused."""

NO_KEY_NEEDED = [
    ("tts", "openai:alloy:base_url={url}/v1"),
    ("llm", "openai:gpt-4.1-mini:base_url={url}/v1:max_attempts=1:max_retries=0"),
    ("judge", "openai:gpt-4o-audio-preview:base_url={url}/v1:max_attempts=1:max_retries=0"),
]
"""Providers whose self-hosted servers need no key: pointed at a host not allowed, they send none."""


class Capture:
    """An HTTP server that records each request's method, path and headers and answers 200 with an empty list."""

    def __init__(self) -> None:
        seen: list[dict[str, str]] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                seen.append(
                    {"method": self.command, "path": self.path, **{k.lower(): v for k, v in self.headers.items()}}
                )
                body = json.dumps({"voices": []}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keys_received(self) -> list[str]:
        return [f"{r['method']} {r['path']}" for r in self.seen if CANARY in json.dumps(r)]


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Capture]:
    for variable in KEY_VARIABLES:
        monkeypatch.setenv(variable, CANARY)
    server = Capture()
    yield server
    server.server.shutdown()


def _settings(allowed: list[str]) -> Settings:
    return load_settings(allowed_endpoints=allowed)


@pytest.mark.parametrize(("kind", "spec"), KEY_REQUIRED, ids=[s.split(":")[0] + f"-{k}" for k, s in KEY_REQUIRED])
def test_a_provider_that_needs_its_key_is_refused_before_any_request_at_a_host_not_allowed(
    capture: Capture, kind: str, spec: str
) -> None:
    with pytest.raises(SpecError) as refused:
        build_provider(kind, spec.format(url=capture.url), _settings([]))
    message = str(refused.value)
    assert "allowed_endpoints" in message and capture.url in message and CANARY not in message
    assert capture.seen == []


@pytest.mark.parametrize(("kind", "spec"), NO_KEY_NEEDED, ids=[f"openai-{k}" for k, _ in NO_KEY_NEEDED])
def test_a_provider_whose_servers_need_no_key_sends_none_to_a_host_not_allowed(
    capture: Capture, kind: str, spec: str
) -> None:
    provider = build_provider(kind, spec.format(url=capture.url), _settings([]))
    _call(kind, provider)
    assert capture.seen, "the provider made no request, so the test proves nothing"
    assert capture.keys_received() == []
    assert {r.get("authorization") for r in capture.seen} == {"Bearer EMPTY"}


@pytest.mark.parametrize(("kind", "spec"), NO_KEY_NEEDED[:1] + KEY_REQUIRED[:1], ids=["openai-tts", "elevenlabs-tts"])
def test_an_allowed_endpoint_gets_the_key(capture: Capture, kind: str, spec: str) -> None:
    """The same capture server, allowed by the operator (host and port): the key arrives (the control case)."""
    provider = build_provider(kind, spec.format(url=capture.url), _settings([capture.url]))
    _call(kind, provider)
    assert capture.keys_received(), capture.seen


def test_a_cascade_passes_the_runs_allowed_endpoints_to_its_judges(capture: Capture) -> None:
    from ttseval.core.config import Cascade

    cascades = {"c": Cascade(cheap="objective", strong=f"gemini:gemini-2.5-pro:base_url={capture.url}")}
    settings = load_settings(allowed_endpoints=[], cascades=cascades)
    with pytest.raises(SpecError, match="allowed_endpoints"):
        build_provider("judge", "cascade:c", settings)
    built = build_provider("judge", "cascade:c", load_settings(allowed_endpoints=[capture.url], cascades=cascades))
    assert built.strong._llm._api_key.get_secret_value() == CANARY


def test_built_by_hand_a_provider_reads_the_allowlist_of_this_process_for_a_key_from_the_environment(
    capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Code that builds a provider itself (no run settings) gets the process's setting for a key the provider
    reads from the environment; a key the code passes in is the code's to send."""
    from ttseval.providers.tts.elevenlabs import ElevenLabsTTS

    monkeypatch.setenv("TTSEVAL_ALLOWED_ENDPOINTS", "[]")
    with pytest.raises(ValueError, match="allowed_endpoints"):
        ElevenLabsTTS("v1", base_url=capture.url)
    assert ElevenLabsTTS("v1", base_url=capture.url, api_key="the-callers-own")._api_key.get_secret_value()
    monkeypatch.setenv("TTSEVAL_ALLOWED_ENDPOINTS", json.dumps([capture.url]))
    assert ElevenLabsTTS("v1", base_url=capture.url)._api_key.get_secret_value() == CANARY


@pytest.mark.parametrize(
    ("endpoint", "allowed", "kept"),
    [
        ("https://api.elevenlabs.io", [], True),  # the vendor's own, named explicitly
        ("https://api.elevenlabs.io:443/v1", [], True),
        ("http://api.elevenlabs.io", [], False),  # another scheme is another endpoint
        ("https://api.elevenlabs.io.evil.example", [], False),
        ("http://10.0.0.5:8000", ["http://10.0.0.5"], True),  # no port in the entry: every port of the host
        ("http://10.0.0.5:8000", ["http://10.0.0.5:9000"], False),
        ("https://proxy.example/tts/v1", ["https://proxy.example/tts"], True),  # a path prefix
        ("https://proxy.example/ttsx", ["https://proxy.example/tts"], False),
        ("https://proxy.example:443/tts", ["https://proxy.example:443"], True),
    ],
)
def test_which_endpoints_an_entry_admits(endpoint: str, allowed: list[str], kept: bool) -> None:
    from pydantic import SecretStr

    def confined() -> SecretStr:
        return confine_key(
            SecretStr(CANARY),
            endpoint,
            vendor="https://api.elevenlabs.io",
            allowed=tuple(allowed),
            provider="elevenlabs",
            variable="ELEVENLABS_API_KEY",
            key_required=True,
        )

    if kept:
        assert confined().get_secret_value() == CANARY
    else:
        with pytest.raises(ValueError, match="allowed_endpoints"):
            confined()


@pytest.mark.parametrize(
    "entry", ["proxy.example", "ftp://proxy.example", "https://u:p@proxy.example", "https://p.example/?k=1"]
)
def test_a_bad_allowed_endpoint_is_refused_by_its_index(entry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTSEVAL_ALLOWED_ENDPOINTS", json.dumps(["https://ok.example", entry]))
    with pytest.raises(ConfigError, match=r"allowed_endpoints\.\*\[1\]") as refused:
        load_settings()
    assert "u:p" not in str(refused.value) and "k=1" not in str(refused.value)


def test_an_endpoint_allowed_for_one_provider_gets_only_that_providers_key(capture: Capture) -> None:
    """allowed_endpoints per provider name: the OpenAI key may go to a proxy that the ElevenLabs key may not."""
    settings = load_settings(allowed_endpoints={"openai": [capture.url]})
    openai = build_provider("tts", f"openai:alloy:base_url={capture.url}/v1", settings)
    _call("tts", openai)
    assert capture.keys_received()
    with pytest.raises(SpecError, match=r"allowed_endpoints\.elevenlabs"):
        build_provider("tts", f"elevenlabs:v1:base_url={capture.url}", settings)


def test_the_command_line_and_a_deployment_run_refuse_before_any_request(
    capture: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ttseval evaluate` (in-process, its real parser and exit code) and the evaluate flow as a deployment runs it
    (its settings the worker's, its parameters the UI's): a system and a judge pointed at the capture server are
    refused before any request and before anything is written."""
    from ttseval.cli import main
    from ttseval.flows.evaluate import evaluate

    monkeypatch.setenv("TTSEVAL_ALLOWED_ENDPOINTS", "[]")
    monkeypatch.setenv("TTSEVAL_STORE", str(tmp_path / "store"))
    dataset = tmp_path / "one.jsonl"
    dataset.write_text('{"item_id": "a", "text": "Hello there.", "language": "en", "category": "c", "depth": 0}\n')
    system, judge = f"elevenlabs:v1:base_url={capture.url}", f"gemini:gemini-2.5-pro:base_url={capture.url}"
    for argv in (["--systems", f"espeak-ng,{system}"], ["--systems", "espeak-ng,flite", "--judges", judge]):
        code = main(["evaluate", "--dataset", str(dataset), *argv, "--run-id", "r"])
        err = capsys.readouterr().err
        assert code == 2 and "allowed_endpoints" in err and CANARY not in err, err
    monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__ID", "5f1c3a52-0000-4000-8000-000000000053")
    with pytest.raises(SpecError, match="allowed_endpoints"):
        evaluate.fn(dataset=str(dataset), systems=["espeak-ng", system], run_id="d")
    assert capture.seen == []
    assert not (tmp_path / "store").exists()


def _call(kind: str, provider: object) -> None:
    """One request of the provider to its endpoint, whatever it answers."""
    if kind == "tts":
        with contextlib.suppress(NotImplementedError):  # a server that lists no voices still got the request
            provider.voices()  # type: ignore[attr-defined]
    elif kind == "llm":
        provider.complete(LLMRequest(parts=("hello",)))  # type: ignore[attr-defined]
    else:
        provider._llm.complete(LLMRequest(parts=("hello",)))  # type: ignore[attr-defined]
