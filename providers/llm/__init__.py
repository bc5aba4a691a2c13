"""Text (and audio-in) LLM clients behind one small protocol, for dataset generation and captioning.

    llm = LLMS.build("openai:gpt-4.1-mini:base_url=http://127.0.0.1:8000/v1")
    [result] = llm.generate([LLMRequest(parts=("Write three questions.",), schema=Questions)])
    result.ok, result.data, result.error, result.input_tokens, result.cost_usd

A request is plain data (text parts, WAV bytes, an output schema, a temperature, a sample number), so its
identity can be hashed for the call cache (`tasks/llm.py`). A result never raises: a failed call is a result
with `ok=False`, `failure` one of FAILURES and `error` saying why.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

FAILURES = ("transport", "refusal", "unparseable")
"""Why a call produced no answer: the HTTP exchange failed, the model declined, or its output did not parse."""


@dataclass(frozen=True)
class LLMRequest:
    """One prompt.

    Args:
        parts: the user turn in order; `str` is text, `bytes` is a WAV clip sent inline.
        schema: pydantic model the answer must match (sent as the structured-output schema); None = free text.
        system: system instruction, if any.
        temperature: overrides the client's default temperature.
        sample: tells apart otherwise identical requests whose answers should differ (cache and seed key).
    """

    parts: tuple[str | bytes, ...]
    schema: type[BaseModel] | None = None
    system: str | None = None
    temperature: float | None = None
    sample: int = 0

    @property
    def text(self) -> str:
        return "\n".join(p for p in self.parts if isinstance(p, str))

    def identity(self) -> dict[str, Any]:
        """Everything that defines the request, audio by SHA-256: the call cache's key."""
        return {
            "parts": [p if isinstance(p, str) else {"wav_sha256": hashlib.sha256(p).hexdigest()} for p in self.parts],
            "schema": self.schema.model_json_schema() if self.schema is not None else None,
            "system": self.system,
            "temperature": self.temperature,
            "sample": self.sample,
        }


@dataclass
class LLMResult:
    """What one request came to. `data` is the validated schema instance (or the text when no schema)."""

    ok: bool
    data: Any = None
    raw: str | None = None
    failure: str | None = None
    error: str | None = None
    finish_reason: str | None = None
    attempts: int = 0
    retries: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    model: str | None = None
    cached: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class LLM(Protocol):
    """A chat model answering batches of requests; `llm_id` changes whenever answers could change."""

    name: ClassVar[str]
    model: str
    spec: str
    llm_id: str

    def generate(self, batch: list[LLMRequest]) -> list[LLMResult]: ...

    def metadata(self) -> dict[str, Any]: ...
