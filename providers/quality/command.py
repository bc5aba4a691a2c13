"""A MOS predictor in an environment of its own (`command:<label>:run=COMMAND`): ttseval runs COMMAND (typically
a Python of another venv and a scorer script) and speaks the scorer protocol with it, so a metric whose pins cannot
sit beside ours (UTMOSv2, TTSDS2, anything needing torchaudio or an old torch) still runs as a quality stage, with
the same caching, reuse, failure rows and Dask placement as the built-in predictors.

The protocol, `ttseval-scorer/1` (docs/cloning-and-quality.md has it with two recipes). Each call starts COMMAND
once, writes one JSON request to its stdin and closes it; the scorer answers on stdout, one JSON object per line,
and writes anything else (logs, progress) to stderr:

    {"protocol": "ttseval-scorer/1", "op": "describe"}
        -> {"version": "...", "model": "..."}                    once per worker, before any clip: the version is
                                                                  part of every score's cache key
    {"protocol": "ttseval-scorer/1", "op": "score", "device": "auto|cpu|cuda",
     "clips": [{"id": "0", "path": "/tmp/.../0.wav", "sample_rate_hz": 16000, "duration_s": 2.1}, ...]}
        -> {"id": "0", "score": 3.9, "details": {"name": 1.0, ...}}  one line per clip, any order; the score is
                                                                      a MOS (1-5), other scales go in details
        -> {"id": "1", "error": "why this clip has no score"}       the scorer refuses a clip: a final failed row

Clips are 16-bit PCM mono WAV files in a temporary folder the call removes. A scorer that exits non-zero, runs past
`timeout_s` (its whole process group is killed) or breaks the protocol (a line that is not JSON, a clip missing or
answered twice, a score that is not a finite number on the MOS scale) fails the call's clips as retryable rows whose reason ends
with the last lines of its stderr: the next run asks again, as for any failure that is not the clip's own.

The scorer runs without our PYTHONPATH, PYTHONHOME and VIRTUAL_ENV, so another venv's Python sees only its own
packages. The spec (and so the quality_id) holds the command; the scorer's version and model, from `describe`,
go into the cache key and the run's metadata.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import TransientProviderError
from ttseval.core.protocols import ANY_LANGUAGE, MOS_BOUNDS, Languages, QualityScore
from ttseval.providers import TorchDevice, canonical_spec, parse_options

PROTOCOL = "ttseval-scorer/1"
STDERR_LINES = 12  # the last lines of a failed scorer's stderr kept in its rows' reason
log = logging.getLogger(__name__)
_HIDDEN_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")


class CommandOptions(BaseModel):
    """Options of `command:<label>:key=value`."""

    run: str = Field("", description="the command to start, split as a shell would (no shell runs it), e.g. "
                                     "'/venvs/utmosv2/bin/python /opt/scorers/utmosv2_score.py'; required")
    timeout_s: float = Field(600.0, gt=0, description="seconds one call (describe, or a batch of clips) may take "
                                                      "before the scorer's process group is killed")
    batch_size: int = Field(32, ge=1, description="clips per call: each call starts the command once")
    sample_rate_hz: int = Field(0, ge=0, description="resample clips to this rate before the scorer reads them; "
                                                     "0 keeps each clip's own rate")
    device: TorchDevice = Field("auto", description="passed to the scorer in each request, for it to honour")


class _ScorerVersion:
    """`version`: on the class (the registry's listing, nothing built) a description; on an instance, the version
    the scorer's `describe` answered (asked once)."""

    def __get__(self, instance: CommandQuality | None, owner: type | None = None) -> str:
        if instance is None:
            return "the scorer's own (its describe answer)"
        return instance.describe()["version"]


class CommandQuality:
    """The scores a scorer command in another environment gives each clip, through the ttseval-scorer/1 protocol."""

    name: ClassVar[str] = "command"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # a GPU run places its shards on GPU workers; `device` tells the scorer
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = None  # returns scores
    version: ClassVar[str] = _ScorerVersion()  # type: ignore[assignment]
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ()

    def __init__(self, voice: str | None = None, **options: str) -> None:
        if not voice:
            raise ValueError("command needs a label, the metric's name in reports: "
                             "command:utmosv2:run=/venvs/utmosv2/bin/python /opt/scorers/utmosv2_score.py")
        self.label = voice
        self.options = parse_options(CommandOptions, options, provider=self.name)
        try:
            self.argv = shlex.split(self.options.run)
        except ValueError as e:
            raise ValueError(f"command run={self.options.run!r} does not split into words ({e}); quote it as a "
                             "shell would") from e
        if not self.argv:
            raise ValueError("command needs the command to run: command:LABEL:run=/venvs/x/bin/python /path/score.py")
        program = self.argv[0]
        found = shutil.which(program) if os.sep not in program else (program if os.access(program, os.X_OK) else None)
        if not found:
            raise ValueError(f"command run={self.options.run!r}: {program!r} is not an executable file on this host "
                             "(give the full path of the other environment's python, present on every worker)")
        self.spec = canonical_spec(self.name, voice, options)
        self._described: dict[str, str] | None = None
        self._lock = threading.Lock()

    # -- one call -----------------------------------------------------------------------------------------------

    def _call(self, request: dict[str, Any], what: str) -> list[dict[str, Any]]:
        """Start the command, send `request`, and return the JSON objects it printed, one per stdout line.

        Raises:
            TransientProviderError: it exited non-zero, ran past timeout_s or printed a line that is not a JSON
                object; the message ends with its stderr's last lines.
        """
        env = {k: v for k, v in os.environ.items() if k not in _HIDDEN_ENV}
        process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=env, start_new_session=True, text=True, encoding="utf-8", errors="replace")
        try:
            out, err = process.communicate(json.dumps(request), timeout=self.options.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it exited as the timeout fired
                os.killpg(process.pid, signal.SIGKILL)  # the scorer and anything it started
            out, err = process.communicate()
            raise TransientProviderError(f"{self.label} scorer ran past timeout_s={self.options.timeout_s:g} on {what} "
                                         f"and was killed{_tail(err)}")
        if process.returncode != 0:
            raise TransientProviderError(f"{self.label} scorer exited with code {process.returncode} on {what}"
                                         f"{_tail(err)}")
        answers = []
        for number, line in enumerate(out.splitlines(), 1):
            if not line.strip():
                continue
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                answer = None
            if not isinstance(answer, dict):
                raise TransientProviderError(f"{self.label} scorer broke {PROTOCOL} on {what}: stdout line {number} is "
                                             f"not a JSON object ({line[:120]!r}); print logs to stderr{_tail(err)}")
            answers.append(answer)
        return answers

    def describe(self) -> dict[str, str]:
        """The scorer's version and model, asked once (`op: describe`).

        Raises:
            TransientProviderError: the scorer failed or its answer lacks a string version.
        """
        with self._lock:
            if self._described is None:
                answers = self._call({"protocol": PROTOCOL, "op": "describe"}, "describe")
                answer = answers[0] if len(answers) == 1 else {}
                if not isinstance(answer.get("version"), str) or not answer["version"]:
                    raise TransientProviderError(f"{self.label} scorer broke {PROTOCOL}: describe must print one line "
                                                 f"{{\"version\": \"...\", \"model\": \"...\"}}, got {answers!r:.200}")
                self._described = {"version": answer["version"], "model": str(answer.get("model", ""))}
                log.info("scorer %s (%s): version %s, model %s", self.label, self.argv[0], answer["version"],
                         self._described["model"] or "not given")
            return self._described

    # -- the protocol ---------------------------------------------------------------------------------------------

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """The scorer's score of each clip, in order; a clip it refuses gets a refusal (no score).

        Raises:
            TransientProviderError: the scorer crashed, hung or broke the protocol on a call.
        """
        self.describe()
        scores: list[QualityScore] = []
        for start in range(0, len(batch), self.options.batch_size):
            scores += self._score_call(batch[start:start + self.options.batch_size])
        return scores

    def _score_call(self, clips: list[Audio]) -> list[QualityScore]:
        with tempfile.TemporaryDirectory(prefix="ttseval-scorer-") as folder:
            listed = []
            for i, clip in enumerate(clips):
                if self.options.sample_rate_hz:
                    clip = clip.resampled(self.options.sample_rate_hz)
                path = Path(folder) / f"{i}.wav"
                path.write_bytes(clip.to_wav_bytes())
                listed.append({"id": str(i), "path": str(path), "sample_rate_hz": clip.sample_rate_hz,
                               "duration_s": round(clip.duration_s, 6)})
            what = f"a batch of {len(clips)} clip(s)"
            answers = self._call({"protocol": PROTOCOL, "op": "score", "device": self.options.device,
                                  "clips": listed}, what)
        by_id: dict[str, dict[str, Any]] = {}
        for answer in answers:
            key = str(answer.get("id"))
            if key in by_id or key not in {c["id"] for c in listed}:
                raise TransientProviderError(f"{self.label} scorer broke {PROTOCOL} on {what}: clip id {key!r} "
                                             f"{'answered twice' if key in by_id else 'was not asked for'}")
            by_id[key] = answer
        missing = [c["id"] for c in listed if c["id"] not in by_id]
        if missing:
            raise TransientProviderError(f"{self.label} scorer broke {PROTOCOL} on {what}: no line for clip id(s) "
                                         f"{missing[:5]}")
        return [self._one(by_id[c["id"]]) for c in listed]

    def _one(self, answer: dict[str, Any]) -> QualityScore:
        if answer.get("error") is not None:  # the scorer's verdict on this clip: final
            return QualityScore(mos=float("nan"), refused=f"{self.label}: {str(answer['error'])[:500]}")
        score, details = answer.get("score"), answer.get("details", {})
        if not _finite(score) or not isinstance(details, dict) or not all(_finite(v) for v in details.values()):
            raise TransientProviderError(f"{self.label} scorer broke {PROTOCOL}: clip {answer.get('id')!r} needs a "
                                         f"finite number 'score' and 'details' of finite numbers, got {answer!r:.200}")
        if not MOS_BOUNDS[0] <= score <= MOS_BOUNDS[1]:
            raise TransientProviderError(f"{self.label} scorer broke {PROTOCOL}: clip {answer.get('id')!r} scored "
                                         f"{score!r}, off the MOS scale 1-5 (the quality table takes "
                                         f"{MOS_BOUNDS[0]:g}-{MOS_BOUNDS[1]:g}); give other scales in 'details'")
        return QualityScore(mos=float(score), details={self.label: float(score)} |
                            {str(k): float(v) for k, v in details.items()})

    def metadata(self) -> dict[str, Any]:
        described = self.describe()
        return {"engine": "command", "protocol": PROTOCOL, "label": self.label, "version": described["version"],
                "model": described["model"], "timeout_s": self.options.timeout_s,
                "batch_size": self.options.batch_size}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _tail(stderr: str | None) -> str:
    lines = [line for line in (stderr or "").splitlines() if line.strip()][-STDERR_LINES:]
    return "; its stderr ends:\n" + "\n".join(lines) if lines else "; its stderr was empty"
