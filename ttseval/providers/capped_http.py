"""HTTP clients that read an answer only up to a size, for the vendor SDKs (OpenAI's, Google's) that read a body
whole: an endpoint answering without end, or with gigabytes, costs the worker at most the setting max_answer_mb.

    capped_client(max_bytes, "openai")   an httpx2.Client to hand to an SDK (openai's http_client=, google-genai's
                                         HttpOptions(httpx_client=))
    answer_too_large(error)              the AnswerTooLarge behind an SDK's error (they wrap transport errors), or None

httpx2 (the fork of httpx the openai SDK runs on, and google-genai takes) has no limit on a body's size; a transport
that wraps the response's byte stream is its documented place to add one (a declared Content-Length over the cap
is refused before anything is read).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2


class AnswerTooLarge(Exception):
    """An answer passed the setting max_answer_mb; the rest was not read. Never worth retrying."""


def _message(who: str, max_bytes: int) -> str:
    return f"{who}: the answer passed {max_bytes / 2**20:g} MiB (the setting max_answer_mb); the rest was not read"


class _CappedStream(httpx2.SyncByteStream):
    def __init__(self, stream: httpx2.SyncByteStream, max_bytes: int, who: str) -> None:
        self._stream, self._max, self._who = stream, max_bytes, who

    def __iter__(self) -> Iterator[bytes]:
        size = 0
        for chunk in self._stream:
            size += len(chunk)
            if size > self._max:
                raise AnswerTooLarge(_message(self._who, self._max))
            yield chunk

    def close(self) -> None:
        self._stream.close()


class _CappedTransport(httpx2.HTTPTransport):
    def __init__(self, max_bytes: int, who: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._max, self._who = max_bytes, who

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max:
            response.close()
            raise AnswerTooLarge(_message(self._who, self._max))
        assert isinstance(response.stream, httpx2.SyncByteStream)  # what HTTPTransport returns
        response.stream = _CappedStream(response.stream, self._max, self._who)
        return response


def capped_client(max_bytes: int, who: str, **kwargs: Any) -> httpx2.Client:
    """An httpx2.Client (with `kwargs`, e.g. follow_redirects) whose answers are read up to `max_bytes`; `who` names
    the provider in the error."""
    return httpx2.Client(transport=_CappedTransport(max_bytes, who), **kwargs)


def answer_too_large(error: BaseException | None) -> AnswerTooLarge | None:
    """The AnswerTooLarge that caused `error` (itself, or along its causes and contexts), or None."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, AnswerTooLarge):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def max_answer_bytes(max_answer_mb: float | None = None) -> int:
    """The cap in bytes: `max_answer_mb`, else the setting max_answer_mb of this process (the operator's)."""
    if max_answer_mb is None:
        from ttseval.core.config import load_settings

        max_answer_mb = load_settings().max_answer_mb
    return int(max_answer_mb * 2**20)
