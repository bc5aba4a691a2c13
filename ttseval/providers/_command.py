"""What the command providers share (quality/command.py, asr/command.py): a model in an environment of its own,
run as a command that speaks the protocol `ttseval-scorer/1` (docs/cloning-and-quality.md has it, with recipes).

Each call starts the command once, writes one JSON request to its stdin and closes it; the command answers on
stdout, one JSON object per line, and writes anything else (logs, progress) to stderr:

    {"protocol": "ttseval-scorer/1", "op": "describe"}
        -> {"version": "...", "model": "..."}      once per worker, before any clip: the version is part of every
                                                    answer's cache key
    {"protocol": "ttseval-scorer/1", "op": "score" | "transcribe", "device": "auto|cpu|cuda",
     "clips": [{"id": "0", "path": "/tmp/.../0.wav", "sample_rate_hz": 16000, "duration_s": 2.1,
                "language": "zh" (transcribe only)}, ...]}
        -> one line per clip, in any order, with its "id"; what else it holds is the op's (the providers say)

Clips are 16-bit PCM mono WAV files in a temporary folder the call removes. A command that exits non-zero, runs past
`timeout_s` (its whole process group is killed) or breaks the protocol (a line that is not a JSON object, a clip
missing, answered twice or not asked for) fails the call's clips as retryable rows whose reason ends with the last
lines of its stderr: the next run asks again, as for any failure that is not the clip's own.

The command runs without our PYTHONPATH, PYTHONHOME and VIRTUAL_ENV, so another venv's Python sees only its own
packages, and without the worker's credentials (variables named like `*_API_KEY`, `*_KEY`, `*_SECRET*`, `*_TOKEN`,
`*PASSWORD*`: the vendors' keys, the store's secret): a scorer reads clips and writes scores, and a key it never holds
cannot end up in its logs. The spec (and so the output id) holds the command; its version and model, from `describe`,
go into the cache key and the log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import TransientProviderError
from ttseval.providers import MODEL_THREADS_VARIABLE, TorchDevice

PROTOCOL = "ttseval-scorer/1"
STDERR_LINES = 12  # the last lines of a failed command's stderr kept in its rows' reason
log = logging.getLogger(__name__)
_PASSED_ENV = re.compile(
    r"PATH|HOME|USER|LOGNAME|SHELL|TERM|LANG|LANGUAGE|LC_[A-Z]+|TZ|TMPDIR|TEMP|TMP|LD_LIBRARY_PATH"
    r"|CUDA_[A-Z_]+|NVIDIA_[A-Z_]+|HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES"
    r"|OMP_NUM_THREADS|MKL_NUM_THREADS|OPENBLAS_NUM_THREADS|"
    + MODEL_THREADS_VARIABLE
    + r"|HF_HOME|HF_HUB_CACHE|HF_HUB_OFFLINE|TRANSFORMERS_CACHE|TRANSFORMERS_OFFLINE|TORCH_HOME"
    r"|XDG_CACHE_HOME|XDG_RUNTIME_DIR|CONDA_PREFIX|CONDA_DEFAULT_ENV"
)
"""The variables a command gets, and no others: where things are (paths, caches, locale, time zone), which devices
and how many threads it may use. Anything else of the worker's (vendor keys, `PREFECT_API_AUTH_STRING`, database
URLs, `*_APIKEY`, our Python's PYTHONPATH) stays behind."""
_CREDENTIAL = re.compile(r"(_KEY|_SECRET|SECRET_|_TOKEN|PASSWORD|PASSWD|APIKEY|AUTH)", re.IGNORECASE)


def command_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment a command runs with: `environ`'s variables that _PASSED_ENV names and that do not look like
    a credential."""
    return {k: v for k, v in environ.items() if _PASSED_ENV.fullmatch(k) and not _CREDENTIAL.search(k)}


class CommandOptions(BaseModel):
    """Options of `command:<label>:key=value` (a MOS predictor or a recogniser)."""

    run: str = Field(
        "",
        description="the command to start, split as a shell would (no shell runs it), e.g. "
        "'/venvs/utmosv2/bin/python /opt/scorers/utmosv2_score.py'; required",
    )
    timeout_s: float = Field(
        600.0,
        gt=0,
        description="seconds one call (describe, or a batch of clips) may take "
        "before the command's process group is killed",
    )
    batch_size: int = Field(32, ge=1, description="clips per call: each call starts the command once")
    sample_rate_hz: int = Field(
        0, ge=0, description="resample clips to this rate before the command reads them; 0 keeps each clip's own rate"
    )
    device: TorchDevice = Field("auto", description="passed to the command in each request, for it to honour")


class _CommandProvider(Protocol):
    """A provider that runs a command (asr/command.py, quality/command.py)."""

    command: ProtocolCommand


class Described:
    """A command provider's `version`: on the class (the registry's listing, nothing built) a description; on an
    instance, the version the command's `describe` answered (asked once)."""

    def __get__(self, instance: _CommandProvider | None, owner: type | None = None) -> str:
        if instance is None:
            return "the command's own (its describe answer)"
        return instance.command.describe()["version"]


class ProtocolCommand:
    """One command in another environment: built from the spec's label and options, asked `describe` once and
    then batches of clips."""

    def __init__(self, provider: str, label: str | None, options: CommandOptions) -> None:
        if not label:
            raise ValueError(
                f"{provider} needs a label, the model's name in reports: "
                f"{provider}:utmosv2:run=/venvs/utmosv2/bin/python /opt/scorers/utmosv2_score.py"
            )
        self.label, self.options = label, options
        try:
            self.argv = shlex.split(options.run)
        except ValueError as e:
            raise ValueError(
                f"{provider} run={options.run!r} does not split into words ({e}); quote it as a shell would"
            ) from e
        if not self.argv:
            raise ValueError(
                f"{provider} needs the command to run: {provider}:LABEL:run=/venvs/x/bin/python /path/score.py"
            )
        program = self.argv[0]
        found = shutil.which(program) if os.sep not in program else (program if os.access(program, os.X_OK) else None)
        if not found:
            raise ValueError(
                f"{provider} run={options.run!r}: {program!r} is not an executable file on this host "
                "(give the full path of the other environment's python, present on every worker)"
            )
        self._described: dict[str, str] | None = None
        self._lock = threading.Lock()

    def _call(self, request: dict[str, Any], what: str) -> list[dict[str, Any]]:
        """Start the command, send `request`, and return the JSON objects it printed, one per stdout line.

        Raises:
            TransientProviderError: it exited non-zero, ran past timeout_s or printed a line that is not a JSON
                object; the message ends with its stderr's last lines.
        """
        env = command_env(dict(os.environ))
        process = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        try:
            out, err = process.communicate(json.dumps(request), timeout=self.options.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it exited as the timeout fired
                os.killpg(process.pid, signal.SIGKILL)  # the command and anything it started
            out, err = process.communicate()
            raise TransientProviderError(
                f"{self.label} scorer ran past timeout_s={self.options.timeout_s:g} on {what} "
                f"and was killed{_tail(err)}"
            ) from None
        if process.returncode != 0:
            raise TransientProviderError(
                f"{self.label} scorer exited with code {process.returncode} on {what}{_tail(err)}"
            )
        answers = []
        for number, line in enumerate(out.splitlines(), 1):
            if not line.strip():
                continue
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                answer = None
            if not isinstance(answer, dict):
                raise TransientProviderError(
                    f"{self.label} scorer broke {PROTOCOL} on {what}: stdout line {number} is "
                    f"not a JSON object ({line[:120]!r}); print logs to stderr{_tail(err)}"
                )
            answers.append(answer)
        return answers

    def describe(self) -> dict[str, str]:
        """The command's version and model, asked once (`op: describe`).

        Raises:
            TransientProviderError: the command failed or its answer lacks a string version.
        """
        with self._lock:
            if self._described is None:
                answers = self._call({"protocol": PROTOCOL, "op": "describe"}, "describe")
                answer = answers[0] if len(answers) == 1 else {}
                if not isinstance(answer.get("version"), str) or not answer["version"]:
                    raise TransientProviderError(
                        f"{self.label} scorer broke {PROTOCOL}: describe must print one line "
                        f'{{"version": "...", "model": "..."}}, got {answers!r:.200}'
                    )
                self._described = {"version": answer["version"], "model": str(answer.get("model", ""))}
                log.info(
                    "command %s (%s): version %s, model %s",
                    self.label,
                    self.argv[0],
                    answer["version"],
                    self._described["model"] or "not given",
                )
            return self._described

    def ask(self, op: str, clips: list[Audio], extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The command's answer for each clip, in order, in calls of batch_size clips; `extra[i]` joins clip i's
        entry in the request (a language hint).

        Raises:
            TransientProviderError: the command crashed, hung or broke the protocol on a call.
        """
        self.describe()
        answers: list[dict[str, Any]] = []
        for start in range(0, len(clips), self.options.batch_size):
            answers += self._ask_once(
                op,
                clips[start : start + self.options.batch_size],
                (extra or [{}] * len(clips))[start : start + self.options.batch_size],
            )
        return answers

    def _ask_once(self, op: str, clips: list[Audio], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with tempfile.TemporaryDirectory(prefix="ttseval-scorer-") as folder:
            listed: list[dict[str, Any]] = []
            for i, (clip, more) in enumerate(zip(clips, extra)):
                if self.options.sample_rate_hz:
                    clip = clip.resampled(self.options.sample_rate_hz)
                path = Path(folder) / f"{i}.wav"
                path.write_bytes(clip.to_wav_bytes())
                listed.append(
                    {
                        "id": str(i),
                        "path": str(path),
                        "sample_rate_hz": clip.sample_rate_hz,
                        "duration_s": round(clip.duration_s, 6),
                    }
                    | more
                )
            what = f"a batch of {len(clips)} clip(s)"
            answers = self._call({"protocol": PROTOCOL, "op": op, "device": self.options.device, "clips": listed}, what)
        by_id: dict[str, dict[str, Any]] = {}
        for answer in answers:
            key = str(answer.get("id"))
            if key in by_id or key not in {c["id"] for c in listed}:
                raise TransientProviderError(
                    f"{self.label} scorer broke {PROTOCOL} on {what}: clip id {key!r} "
                    f"{'answered twice' if key in by_id else 'was not asked for'}"
                )
            by_id[key] = answer
        missing = [c["id"] for c in listed if c["id"] not in by_id]
        if missing:
            raise TransientProviderError(
                f"{self.label} scorer broke {PROTOCOL} on {what}: no line for clip id(s) {missing[:5]}"
            )
        return [by_id[c["id"]] for c in listed]

    def broke(self, answer: dict[str, Any], want: str) -> TransientProviderError:
        """The error for an answer that is not what the op promises (`want` says what is)."""
        return TransientProviderError(
            f"{self.label} scorer broke {PROTOCOL}: clip {answer.get('id')!r} needs {want}, got {answer!r:.200}"
        )

    def metadata(self) -> dict[str, Any]:
        described = self.describe()
        return {
            "engine": "command",
            "protocol": PROTOCOL,
            "label": self.label,
            "version": described["version"],
            "model": described["model"],
            "timeout_s": self.options.timeout_s,
            "batch_size": self.options.batch_size,
        }


def finite(value: object) -> TypeGuard[float]:
    """A JSON number that is finite (not a bool, NaN or infinite); an int passes, as a float would."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _tail(stderr: str | None) -> str:
    lines = [line for line in (stderr or "").splitlines() if line.strip()][-STDERR_LINES:]
    return "; its stderr ends:\n" + "\n".join(lines) if lines else "; its stderr was empty"
