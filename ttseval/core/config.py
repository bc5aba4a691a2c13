"""Typed settings: environment variables (TTSEVAL_*) over a TOML file over defaults.

The TOML file is `$TTSEVAL_CONFIG` if set, else `./ttseval.toml` if it exists. Nested values use `__` in the
environment (`TTSEVAL_ASR__EN=faster-whisper:base`). Secrets never live here as plain strings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from ttseval.core.errors import ConfigError

STORE_WAIT_S = 120.0
"""How long an operation on an S3 store waits for a store it cannot reach, by default (setting `store_wait_s`)."""
SCHEDULER_WAIT_S = 120.0
"""How long a run on an existing Dask scheduler waits for it to come back when it is lost mid-run, by default
(setting `scheduler_wait_s`)."""

DEFAULT_SYSTEMS = ("piper:joe", "espeak-ng", "flite:slt")
DEFAULT_ASR: dict[str, str | list[str]] = {"en": "faster-whisper:tiny.en", "*": "faster-whisper:base"}


class VendorLimit(BaseModel):
    """A vendor's limits over all Dask workers together (tasks/limits.py); None = no limit of that kind."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int | None = Field(default=None, ge=1, description="calls in flight at once")
    per_second: float | None = Field(default=None, gt=0, description="calls started per second")


Escalation = Literal["tie", "subtle", "flip"]
"""When a cascade asks its strong judge (Cascade.escalate)."""
_ESCALATE_DEFAULT: tuple[Escalation, ...] = ("tie", "subtle", "flip")


class Cascade(BaseModel):
    """A cheap judge on every pair, a strong one on the pairs it cannot settle (providers/judges/cascade.py)."""

    model_config = ConfigDict(extra="forbid")

    cheap: str = Field(description="judge spec asked first, in both orders, e.g. gemini:gemini-2.5-flash")
    strong: str = Field(description="judge spec asked when the cheap one escalates, e.g. gemini:gemini-2.5-pro")
    escalate: list[Escalation] = Field(
        default_factory=lambda: list(_ESCALATE_DEFAULT),
        description="when the strong judge is asked: the cheap verdict is a tie, heard a subtle difference, or "
        "changes when the clips swap places",
    )
    escalate_sample: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="share of the pairs the cheap judge cannot settle "
        "that go to the strong judge (drawn by a hash of the pair); the rest keep the cheap "
        "verdict in the drawn order",
    )
    audit_share: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="share of the pairs the cheap judge settles that the "
        "strong judge also hears, to report how often the two agree (its answer is not used)",
    )


class Insv(BaseModel):
    """INSV-A report card thresholds (metrics/screening.py). PashtoTTS-Bench's extracted text lost most of its
    numbers; its prose keeps 90% and 50% for the LID rule, the rest are ours and stated in the docs (docs/insv.md)."""

    model_config = ConfigDict(extra="forbid")

    completion: float = Field(default=0.95, ge=0, le=1, description="F1 gate: share of items with audio to pass")
    sfr: float = Field(default=0.95, ge=0, le=1, description="S gate: mean transcript Script Fidelity Rate to pass")
    lid_pass: float = Field(
        default=0.90, ge=0, le=1, description="V gate: every LID model's target-language rate at least this passes"
    )
    lid_fail: float = Field(
        default=0.50,
        ge=0,
        le=1,
        description="V gate: every LID model below this fails (likely substitution); anything else is unresolved",
    )
    low_error_wer: float = Field(default=0.10, ge=0, description="Low-error%: utterances with WER at most this")
    f3_ratio: float = Field(
        default=1.5, gt=0, description="F3 candidate: a letter class's WER at least this times the overall WER"
    )
    f3_min_items: int = Field(default=5, ge=1, description="F3: utterances a letter class needs to be screened")
    f5_cer_wer: float = Field(
        default=0.75,
        gt=0,
        description="F5 candidate: an utterance's CER / WER at least this (the paper's worked example)",
    )
    digits: Literal["exclude", "count"] = Field(
        default="exclude",
        description="SFR digit policy: digits excluded from both sides, or counted (ASCII digits as no script)",
    )


_REJECTION_LAMBDAS: tuple[float, ...] = (50, 60, 70, 80, 90)


class Listening(BaseModel):
    """Listening tests (Rethinking MUSHRA): the MUSHRA-DG formula's weights, the rejection rule's analysis, the
    subsampling study and the stimuli webMUSHRA is given (tasks/listening/, metrics/listening.py)."""

    model_config = ConfigDict(extra="forbid")

    dg_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Overrides of appendix A.6's weights and "
        "caps by name (ttseval.metrics.listening.DGWeights: mild_pronunciation, "
        "severe_pronunciation, unnatural_pauses, digital_artifacts, "
        "energy_fluctuations, word_skips, mild_cap, severe_cap)",
    )
    dg_clip: bool = Field(
        default=True,
        description="Clip MUSHRA-DG scores to 0-100 (the paper does not say; without it "
        "three word skips score below zero)",
    )
    rejection_lambda: float = Field(
        default=90,
        ge=0,
        le=100,
        description="MUSHRA rule: the hidden-reference score a rater "
        "must reach on all but rejection_share of their pages",
    )
    rejection_share: float = Field(
        default=0.15,
        ge=0,
        le=1,
        description="MUSHRA rule: the share of pages a rater may score the hidden reference below rejection_lambda",
    )
    lambdas: list[float] = Field(
        default_factory=lambda: list(_REJECTION_LAMBDAS),
        description="Lambdas of the reported effect of the rejection rule on scores and ranks (section 4.4)",
    )
    subsample_trials: int = Field(default=1000, ge=1, description="Random draws per (listeners, utterances) cell")
    sample_rate_hz: int = Field(
        default=48000,
        ge=8000,
        description="The one rate of every exported stimulus (webMUSHRA "
        "refuses stimuli whose rate is not the browser's audio device's, mostly 48 kHz)",
    )
    max_conditions: int = Field(
        default=12,
        ge=2,
        le=12,
        description="Conditions per MUSHRA page, hidden reference and "
        "anchors included; more systems are split over pages",
    )
    max_duration_s: float = Field(
        default=12.0,
        gt=0,
        description="Longest stimulus of a MUSHRA page (webMUSHRA's strict "
        "mode and ITU-R BS.1534 ask for at most 12 s); longer items are left out",
    )
    anchor_x_bandwidth_hz: float = Field(
        default=3500, gt=0, description="Anchor-X: the reference band-limited to this (resampled to twice it and back)"
    )
    anchor_y_slowdown: float = Field(
        default=1.2, ge=1, description="Anchor-Y: how much slower the degraded system speaks"
    )
    anchor_y_share: float = Field(
        default=0.2, ge=0, le=1, description="Anchor-Y: share of items with a word skipped or repeated"
    )


class Slurm(BaseModel):
    """Dask workers as Slurm jobs (dask-jobqueue's SLURMCluster), when `cluster = "slurm"`: the command's process
    runs the scheduler and submits jobs as the run needs workers (adaptive, between minimum_jobs and
    maximum_jobs); each job runs `processes` Dask workers on its `cores`."""

    cores: int = Field(default=1, ge=1, description="CPU cores of each job (#SBATCH --cpus-per-task)")
    memory: str = Field(default="4GB", description="memory of each job (#SBATCH --mem), e.g. 4GB")
    processes: int = Field(default=1, ge=1, description="Dask worker processes per job; they share its cores")
    walltime: str = Field(
        default="02:00:00",
        description="each job's time limit (#SBATCH -t); the cluster replaces a job that ends while work remains",
    )
    queue: str | None = Field(
        default=None, description="partition (#SBATCH -p); default the cluster's default partition"
    )
    account: str | None = Field(default=None, description="account charged (#SBATCH -A)")
    job_extra_directives: list[str] = Field(
        default_factory=list,
        description="more #SBATCH lines, each without '#SBATCH', e.g. ['--gres=gpu:1', '--constraint=a100']",
    )
    job_script_prologue: list[str] = Field(
        default_factory=list,
        description="shell lines the job runs before its "
        "worker starts, e.g. ['module load cuda/12.6', 'source /shared/venv/bin/activate']",
    )
    python: str | None = Field(
        default=None,
        description="the Python that runs the worker on a compute node; default the "
        "command's own (a shared filesystem)",
    )
    gpu: bool = Field(
        default=False,
        description="the jobs' workers declare the Dask resource GPU=1 and take the model "
        "stages (ask Slurm for the GPU in job_extra_directives: --gres=gpu:1); otherwise CPU=<threads>",
    )
    minimum_jobs: int = Field(default=0, ge=0, description="jobs kept while the cluster is up, even idle")
    maximum_jobs: int = Field(default=4, ge=1, description="jobs at most at once")
    interface: str | None = Field(
        default=None,
        description="network interface the scheduler and the workers listen on "
        "(e.g. ib0); default the address of the host name",
    )
    log_directory: str | None = Field(default=None, description="folder for the jobs' output files; default none kept")


class Kubernetes(BaseModel):
    """Dask workers as pods of a DaskCluster the dask-kubernetes operator runs, when `cluster = "kubernetes"`: the
    command creates the cluster (from `spec`, or from these settings), runs the flow's tasks on it and deletes it at
    the end. The operator must be installed in the Kubernetes cluster (infra/README.md)."""

    spec: str | None = Field(
        default=None,
        description="a DaskCluster manifest (YAML) to create as it is; default one made from the settings below",
    )
    name: str = Field(default="ttseval", description="the DaskCluster's name")
    namespace: str | None = Field(default=None, description="its namespace; default the context's")
    image: str = Field(default="ttseval-cpu:0.1.0", description="the scheduler's and CPU workers' image (infra/images)")
    workers: int = Field(default=2, ge=0, description="CPU workers (pods declaring the Dask resource CPU=1)")
    worker_cpu: str = Field(default="1", description="CPU request of a CPU worker")
    worker_memory: str = Field(default="4Gi", description="memory request and limit of a CPU worker")
    gpu_workers: int = Field(
        default=0,
        ge=0,
        description="GPU workers (a DaskWorkerGroup '<name>-gpu', one nvidia.com/gpu "
        "and the Dask resource GPU=1 each); set gpu = true to send them the model stages",
    )
    gpu_image: str | None = Field(
        default=None, description="the GPU workers' image; default image (infra/images/Dockerfile.cuda builds one)"
    )
    gpu_memory: str = Field(default="16Gi", description="memory request and limit of a GPU worker")
    env_from: list[str] = Field(
        default_factory=lambda: ["configmap:ttseval-config", "secret:ttseval-s3"],
        description="ConfigMaps and Secrets every worker's environment comes from "
        "(configmap:<name>, secret:<name>; infra/k8s makes these two)",
    )


HOW_IT_RUNS = frozenset(
    {
        "dask_address",
        "cluster",
        "slurm",
        "kubernetes",
        "n_workers",
        "threads_per_worker",
        "models_in_memory",
        "prefect_server_keep_s",
        "lease_wait_s",
        "lease_ttl_s",
        "store_wait_s",
        "scheduler_wait_s",
        "lease_token",
    }
)
"""Settings that decide where and how a command runs, never what its tables or report hold: a re-run that changes
only these keeps the run's report (tasks/report/full.py hashes the other settings)."""


class NightlySeries(BaseModel):
    """A nightly series declared in the settings file, `[series.NAME]`: what each of its nights runs, when, and whom
    it alerts. `ttseval series register` makes every declared series a deployment of its own (nightly/NAME, on its
    schedule) on a Prefect server, and `ttseval nightly --series NAME` runs one of its nights now; the worker that
    runs the deployment reads the same file. A field left out takes the settings' value."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(
        description="the items every night speaks: a JSONL, CSV or Parquet file (a relative path is taken from the "
        "folder the night runs in: the repository root for a deployment) or a dataset frozen in the store, "
        "NAME@VERSION"
    )
    systems: list[str] = Field(min_length=1, description="provider specs re-run every night")
    baseline: str | None = Field(default=None, description="system the others are judged against (default: the first)")
    judges: list[str] | None = Field(default=None, description="pairwise judge specs (default: the judges setting)")
    schedule: str = Field(
        default="0 2 * * *", description="when a night starts, as cron (minute hour day month weekday)"
    )
    timezone: str = Field(default="UTC", description="the time zone of schedule, an IANA name such as Europe/Berlin")
    alert_blocks: list[str] | None = Field(
        default=None,
        description="Prefect notification blocks ('block-type-slug/block-name') this series alerts (default: the "
        "alert_blocks setting); registration refuses a block the server does not hold",
    )
    canary_fixed: int | None = Field(default=None, ge=0, description="as the setting canary_fixed, for this series")
    canary_rotating: int | None = Field(default=None, ge=0, description="as the setting canary_rotating")
    alpha: float | None = Field(default=None, gt=0, lt=1, description="as the setting alpha, for this series' tests")
    budget_usd: float | None = Field(default=None, ge=0, description="the most one night may spend on paid calls")
    asr: dict[str, str | list[str]] | None = Field(
        default=None,
        description="recogniser spec per base language, as the setting asr: the languages named here replace the "
        "settings' own for this series' nights, the others keep them",
    )
    quality: str | list[str] | None = Field(
        default=None, description="MOS predictor spec, or several, as the setting quality, for this series' nights"
    )

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timezone {value!r} is not an IANA time zone name, e.g. UTC or Europe/Berlin") from None
        return value

    def apply(self, settings: Settings) -> Settings:
        """`settings` with what this series sets for its nights: alert blocks, canary sizes, alpha, recognisers
        (over the settings' own, language by language) and MOS predictors."""
        fields = ("alert_blocks", "canary_fixed", "canary_rotating", "alpha", "quality")
        update = {name: getattr(self, name) for name in fields if getattr(self, name) is not None}
        if self.asr is not None:
            update["asr"] = {**settings.asr, **self.asr}
        return settings.model_copy(update=update)


class Settings(BaseSettings):
    """Everything a run can be tuned by. Passed to tasks as one object, so workers see the same values."""

    model_config = SettingsConfigDict(env_prefix="TTSEVAL_", env_nested_delimiter="__", extra="forbid")

    store: str = Field(
        default="./artifacts",
        validate_default=True,
        description="Artifact store URI: a local folder or s3://bucket/prefix (a relative folder is "
        "taken from the folder the command runs in)",
    )
    shard_size: int | None = Field(
        default=None,
        ge=1,
        description="Items per task; None chooses by the work: 8, or more when a stage would otherwise have over "
        "500 tasks, up to 256",
    )
    dask_address: str | None = Field(
        default=None,
        description="Address of an existing Dask scheduler; None starts the cluster the setting cluster names",
    )
    cluster: Literal["local", "slurm", "kubernetes"] = Field(
        default="local",
        description="The Dask cluster a run starts when dask_address is unset: local (a LocalCluster on "
        "this machine), slurm (workers as Slurm jobs: the slurm settings) or kubernetes (a DaskCluster of the "
        "dask-kubernetes operator: the kubernetes settings)",
    )
    slurm: Slurm = Field(default_factory=Slurm, description="Slurm jobs as Dask workers (cluster = 'slurm')")
    kubernetes: Kubernetes = Field(
        default_factory=Kubernetes, description="Kubernetes pods as Dask workers (cluster = 'kubernetes')"
    )
    n_workers: int = Field(default=2, ge=1, description="LocalCluster worker processes")
    threads_per_worker: int = Field(
        default=1, ge=1, description="threads of each Dask worker of a LocalCluster: the tasks it runs at once"
    )
    gpu: bool = Field(default=False, description="Annotate model stages with the Dask resource GPU=1")
    models_in_memory: int = Field(
        default=0,
        ge=0,
        description="Metric models (recognisers, MOS predictors, speaker "
        "encoders, LID models) a worker process keeps loaded at once: 1 loads one, runs "
        "its shard and frees it before the next loads (least memory; a model loads again "
        "for each shard that needs it); 0 keeps each loaded once per worker (fastest)",
    )
    asr: dict[str, str | list[str]] = Field(
        default_factory=lambda: dict(DEFAULT_ASR),
        description="Recogniser spec per base language; '*' is the fallback. A value given (TOML table or "
        "TTSEVAL_ASR__EN=...) changes only the languages it names; the others keep their defaults",
    )
    wer_protocol: Literal["ttseval", "seed-tts-eval"] = Field(
        default="ttseval",
        description="How transcripts are normalized before WER/CER: ttseval's normalizers per language "
        "(numbers, contractions and punctuation made comparable), or seed-tts-eval: Seed-TTS-eval's run_wer.py "
        "exactly (en and zh only; its WER is the mean per utterance), so the report may label WER comparable with "
        "its published table",
    )
    quality: str | list[str] = Field(
        default="dnsmos",
        description="MOS predictor spec, or several (each its own rows and "
        "report column; the first is the MOS of the summary and the objective judge)",
    )
    prosody: bool = Field(
        default=False, description="Measure F0, speaking rate and silences of every clip (Praat pitch and Silero VAD)"
    )
    similarity: list[str] = Field(
        default_factory=lambda: ["resemblyzer"],
        description="Speaker encoder specs for "
        "speaker similarity (SIM) to each item's voice prompt or the system's reference "
        "voice; clips with neither are not compared",
    )
    reference_voices: dict[str, str] = Field(
        default_factory=dict,
        description="system id or spec -> a clip of the "
        "voice that system should speak with (SIM reference for items without "
        "a voice prompt)",
    )
    clip_sets: dict[str, str] = Field(
        default_factory=dict,
        description="Set by the run, not by you: label of each "
        "files: system -> the SHA-256 of the clip set the client stored before any "
        "work (blobs/clipsets/), which workers read instead of the folder or manifest",
    )
    lid: list[str] = Field(
        default_factory=list,
        description="Spoken language-identification model specs that vote "
        "in INSV-A's V gate, e.g. transformers:/models/mms-lid-4017 (none ships offline)",
    )
    judges: list[str] = Field(default_factory=lambda: ["objective"], description="Pairwise judge specs")
    instruction_judges: list[str] = Field(default_factory=list, description="Instruction-following judge specs")
    reuse_audio: bool = Field(
        default=True, description="Reuse audio from earlier runs for an unchanged request and engine version"
    )
    canary_fixed: int = Field(
        default=8,
        ge=0,
        description="Items a nightly run has its remote voices speak afresh every night "
        "(not reused), the same each night, stratified by category and language; compared "
        "item by item with the previous night's clips (ttseval.metrics.canary)",
    )
    canary_rotating: int = Field(
        default=4,
        ge=0,
        description="More canary items drawn afresh from the rest each night, seeded "
        "by the date, so over the weeks every item is heard fresh",
    )
    canary_min_change: float = Field(
        default=0.05,
        ge=0,
        description="Smallest change of a canary measure (duration, mean "
        "F0, speech time) flagged as a change of a remote voice, as a share of the "
        "previous night's mean (0.05: 5%); smaller shifts are the vendor's night-to-night "
        "jitter even when the paired test calls them significant",
    )
    trend_cusum_k: float = Field(
        default=0.5,
        ge=0,
        description="Slow-drift rule of the nightly trends (ttseval.metrics."
        "trends): the CUSUM's allowance k, in standard errors a night, that a series may "
        "move from its first night toward the worse side without adding up",
    )
    trend_cusum_h: float = Field(
        default=5.0,
        gt=0,
        description="Slow-drift rule of the nightly trends: the CUSUM's threshold "
        "h; 5 (with k 0.5) flags 4.2% of a never-changing series' 7-night weeks and a slide "
        "of 0.5 standard error a night by its 7th night in half the series",
    )
    fresh_items: list[str] = Field(
        default_factory=list,
        description="Item ids whose clips remote voices (providers "
        "with remote = True: the cloud APIs) synthesize afresh instead of reusing earlier "
        "runs' audio; a nightly run sets its canary here",
    )
    reuse_scores: bool = Field(
        default=True,
        description="Reuse the per-clip model outputs of any earlier run of the "
        "store (transcripts, MOS, spoken language, prosody, speaker similarity) for the "
        "same clip (audio SHA-256), model output id and engine version (transcripts: and "
        "language; similarity: and reference clip)",
    )
    max_clip_s: float = Field(
        default=600.0,
        gt=0,
        description="A synthesized clip longer than this many seconds is not stored: its row is failed for good, "
        "naming its length (a runaway voice, or an endpoint answering with something else)",
    )
    max_answer_mb: float = Field(
        default=100.0,
        gt=0,
        description="A vendor's answer (TTS, LLM, judge) is read up to this many MiB; a longer one is a failed call, "
        "and the worker never holds more of it (an endpoint streaming without end)",
    )
    item_retries: int = Field(default=2, ge=0, description="Retries of a transient provider error on one item")
    retry_backoff_s: float = Field(default=1.0, ge=0, description="First backoff; doubles each retry")
    task_retries: int = Field(
        default=2, ge=0, description="Prefect retries of a task that raised (worker lost, store error)"
    )
    bootstrap_resamples: int = Field(
        default=1000, ge=1, description="bootstrap resamples behind every confidence interval of a report"
    )
    permutation_resamples: int = Field(
        default=10000,
        ge=1,
        description="random swaps behind each paired permutation "
        "test (exact, every swap, when there are fewer); a p-value is never below "
        "about 1 / this, and the multiple-testing adjustment multiplies it by up to "
        "the number of tests, so keep it well above tests / alpha",
    )
    plan_power: float = Field(
        default=0.8,
        gt=0,
        lt=1,
        description="power the report's sample-size planner plans for: "
        "the chance that a paired test detects a difference of the given size",
    )
    alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="significance level of every 'differs' a report or a "
        "drift report decides (a paired permutation test, its p adjusted across the report's tests)",
    )
    p_adjust: Literal["holm", "bh"] = Field(
        default="holm",
        description="how a report's p-values are adjusted for the "
        "number of tests it makes: holm (Holm's step-down, family-wise error "
        "rate) or bh (Benjamini-Hochberg, false discovery rate)",
    )
    seed: int = Field(
        default=0,
        description="seed of the random draws of reports and analyses (bootstrap resamples, "
        "listening-test subsampling) and of LLM sampling in instruction generation",
    )
    judge_pairs: Literal["baseline", "all", "sampled"] = Field(
        default="baseline",
        description="Which pairs of systems the pairwise judges compare on each item: baseline (each "
        "system against the baseline, as EmergentTTS-Eval), all (every pair of systems: k(k-1)/2 per item for k "
        "systems) or sampled (pairs_per_item pairs per item, drawn from every pair by a hash of the seed and the "
        "item, so a re-run draws the same pairs). The Bradley-Terry ranking fits every verdict; win-rates read the "
        "verdicts against the baseline",
    )
    pairs_per_item: int = Field(
        default=3,
        ge=1,
        description="judge_pairs = sampled: the pairs of systems judged on each "
        "item (every pair when there are no more)",
    )
    position_audit_share: float = Field(
        default=0.10,
        ge=0,
        le=1,
        description="Share of pairs each order-sensitive judge also hears in the other order "
        "(the position-bias audit); 0 turns it off",
    )
    position_audit_min: int = Field(default=50, ge=0, description="Pairs audited at least, when the run has that many")
    judge_output_tokens: int = Field(
        default=400, ge=1, description="Output tokens per judge call in the dry run's estimate (thinking included)"
    )
    max_error_rate: float = Field(default=1.0, ge=0, le=1, description="Fail the flow when more rows than this fail")
    min_completion: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Exit-code policy: a finished evaluate, "
        "nightly or report whose any system's completion (clips with audio / "
        "items) is below this exits 3 (ran, threshold breached), naming the "
        "system. None: off",
    )
    fail_on_regression: bool = Field(
        default=False,
        description="Exit-code policy: a nightly run whose drift report flags "
        "a change for the worse exits 3 (ran, threshold breached). Off by default",
    )
    prefect_server_keep_s: float = Field(
        default=600.0,
        ge=0,
        description="With no PREFECT_API_URL, commands share one "
        "local Prefect server, which stops once no command has used it for this "
        "long (ttseval.infra.prefect_server); 0: a temporary server per command, "
        "stopped with it",
    )
    store_wait_s: float = Field(
        default=STORE_WAIT_S,
        ge=0,
        description="How long a store operation waits for an S3 store "
        "it cannot reach (server restarting, host cut off, 5xx), trying again with backoff, "
        "before the run fails; a local store is not waited for",
    )
    scheduler_wait_s: float = Field(
        default=SCHEDULER_WAIT_S,
        ge=0,
        description="How long a run on an existing Dask "
        "scheduler (dask_address) waits for it when it is lost mid-run (its host "
        "restarted) before the run fails; once it is back the run plans again from the "
        "store and computes only what was not stored. Also how long the first connection "
        "to it is tried",
    )
    lease_wait_s: float = Field(
        default=0.0,
        ge=0,
        description="How long a run waits for another invocation writing the "
        "same run id to finish; 0 refuses at once (exit 2, nothing written)",
    )
    lease_ttl_s: float = Field(
        default=120.0,
        gt=0,
        description="A run id's lease not renewed for this long (its writer "
        "frozen, or on another host and gone) is taken over; a dead writer on this host's "
        "is taken over at once",
    )
    lease_token: str | None = Field(
        default=None,
        description="Set by the flow that holds a run's lease, never by hand: its workers commit a part only while "
        "the run's lease is still this token's, so a writer that lost its lease (frozen past lease_ttl_s and taken "
        "over) commits nothing more",
    )
    confine_paths: Literal["deployments", "always", "never"] = Field(
        default="deployments",
        description="Which evaluate runs may read only files inside the dataset's folder and "
        "allowed_paths (items' prompt_audio_uri and reference_audio_uri, a files system's folder, manifest and "
        "clips): deployments (runs started from a deployment or the Prefect UI, where the person typing the paths "
        "is not the one who runs the worker), always, or never. A path outside is refused (exit 2) before any work",
    )
    allowed_paths: list[str] = Field(
        default_factory=list,
        description="Folders (or URI prefixes such as s3://bucket/clips/) a confined run may "
        "read besides the dataset's folder; set by whoever runs the worker (confine_paths)",
    )
    allowed_stores: list[str] = Field(
        default_factory=list,
        description="Stores (folders or s3:// URIs) a run started from a deployment or the Prefect UI may name "
        "besides the setting store; set by whoever runs the worker. Any other store such a run names is refused",
    )
    allowed_endpoints: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Endpoints besides each vendor's own that may receive the worker's API keys, per provider name "
        "(openai, gemini, ...; the name made of one asterisk covers every provider, and so does a plain list): a "
        "spec's base_url on one of them gets the key (a proxy, a test server); set by whoever runs the worker. Each is "
        "scheme://host[:port][/path], and one without a port admits every port of its host. A keyed provider whose "
        "base_url lies elsewhere is refused (exit 2) before any call, or, where a self-hosted server needs no key "
        "(openai), sends none",
    )
    extra_categories: list[str] = Field(default_factory=list, description="Categories beyond the built-in ones")
    vendor_limits: dict[str, VendorLimit] = Field(
        default_factory=dict,
        description="Per vendor (a TTS, judge or LLM provider name): concurrency and calls per second, all workers",
    )
    tts_prices: dict[str, float] = Field(
        default_factory=dict,
        description="USD per million billable characters, per TTS provider name or "
        "provider:model, over the provider's built-in price",
    )
    budget_usd: float | None = Field(
        default=None,
        ge=0,
        description="Most an evaluate run may spend on paid synthesis "
        "and judge calls (synthesis first, the judges from what is left); keys past "
        "it are not called and stay missing for a later run. None: no cap",
    )
    allow_new_store: bool = Field(
        default=False,
        description="Let an evaluate run with paid systems or judges create a "
        "store that does not exist yet. Off: such a run is refused (exit 2), so a "
        "mistyped --store does not pay for everything again; free runs only announce "
        "the new store. The flag evaluate --new-store turns it on for one command",
    )
    secret_blocks: dict[str, str] = Field(
        default_factory=dict,
        description="API-key variable -> Prefect Secret block name, read when the variable "
        "is not set in the environment (e.g. {ELEVENLABS_API_KEY = 'elevenlabs-key'})",
    )
    series: dict[str, NightlySeries] = Field(
        default_factory=dict,
        description="Nightly series by name, each declared once ([series.NAME] in the settings file): its dataset, "
        "systems, judges, schedule and alerts (NightlySeries); the command ttseval series register makes each a "
        "deployment",
    )
    alert_blocks: list[str] = Field(
        default_factory=list,
        description="Prefect notification blocks a nightly run notifies when its drift "
        "report flags a change, as 'block-type-slug/block-name' (e.g. 'slack-webhook/tts-alerts', "
        "'custom-webhook/oncall'); the block holds the URL or token, so no secret is in a settings file",
    )
    insv: Insv = Field(default_factory=Insv, description="INSV-A screening thresholds")
    listening: Listening = Field(
        default_factory=Listening,
        description="Listening tests: MUSHRA-DG weights, rejection rule, subsampling, stimuli",
    )
    controls: list[str] = Field(
        default_factory=list,
        description="System specs that are negative controls (a neighbouring language's "
        "voice): they speak every item whatever its language, and are shown apart from the TTS systems",
    )
    natural: list[str] = Field(
        default_factory=list,
        description="System specs whose audio is natural speech (e.g. files:<folder> of "
        "reference recordings): the natural-speech baseline, shown apart from the TTS systems",
    )
    cascades: dict[str, Cascade] = Field(
        default_factory=dict, description="Judge cascades by name, used as the judge spec cascade:<name>"
    )
    plugins: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="Extra providers per kind: {'tts': {'name': 'module:Class'}}"
    )

    @field_validator("store")
    @classmethod
    def _absolute_store(cls, value: str) -> str:
        # resolved once, where the settings are made (the client): workers get the client's folder in the run's
        # settings and environment, never their own working folder's ./artifacts
        return value if value.startswith("s3://") else os.path.abspath(value)

    @field_validator("allowed_endpoints", mode="before")
    @classmethod
    def _endpoints(cls, value: Any) -> Any:
        from urllib.parse import urlsplit

        if isinstance(value, str) and value.lstrip().startswith("["):  # TTSEVAL_ALLOWED_ENDPOINTS='["https://..."]'
            value = json.loads(value)
        if isinstance(value, list):
            value = {"*": value}
        for provider, entries in value.items() if isinstance(value, dict) else ():
            for i, entry in enumerate(entries if isinstance(entries, list) else []):
                where = f"allowed_endpoints.{provider}[{i}]"
                parts = urlsplit(str(entry))
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    raise ValueError(f"{where}: give scheme://host[:port][/path], e.g. https://proxy.example:8443")
                if parts.username or parts.password or parts.query or parts.fragment:
                    raise ValueError(f"{where}: no user:password@, query or fragment; the endpoint alone")
        return value

    @field_validator("quality", mode="before")
    @classmethod
    def _predictors(cls, value: Any) -> Any:
        if isinstance(value, str) and value.lstrip().startswith("["):  # TTSEVAL_QUALITY='["dnsmos", "distillmos"]'
            value = json.loads(value)
        if isinstance(value, list) and not value:
            raise ValueError("quality: an empty list; give at least one MOS predictor spec (e.g. dnsmos)")
        return value

    @field_validator("asr", mode="before")
    @classmethod
    def _over_defaults(cls, value: Any) -> Any:
        # pydantic-settings hands a nested override (TTSEVAL_ASR__EN) over as the whole table, which would drop
        # the '*' fallback; a nested value changes only the key it names.
        if not isinstance(value, dict):
            return value
        merged = {**DEFAULT_ASR, **value}
        for language, specs in merged.items():
            if isinstance(specs, str) and specs.lstrip().startswith("["):  # TTSEVAL_ASR__PS='["a", "b"]'
                merged[language] = specs = json.loads(specs)
            if isinstance(specs, list) and not specs:
                raise ValueError(f"asr.{language}: an empty list; give at least one recogniser spec")
        return merged

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = settings_file()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    @property
    def categories(self) -> set[str]:
        from ttseval.core.categories import CATEGORIES

        return set(CATEGORIES) | set(self.extra_categories)

    def role_of(self, system: str) -> str:
        """'control', 'natural' or 'tts' for a system spec or system id (PashtoTTS-Bench's roles)."""
        from ttseval.core.registry import Spec

        for role, specs in (("control", self.controls), ("natural", self.natural)):
            if (
                system in specs
                or system in {Spec.parse(x).id for x in specs}
                or system in {Spec.parse(x).canonical for x in specs}
            ):
                return role
        return "tts"

    def asrs_for(self, language: str) -> list[str]:
        """The recogniser specs for a BCP-47 tag, by base language ('en-US' -> 'en'), else the '*' entry; an entry
        may list several (each its own rows), the first of which ranks systems in the report."""
        from ttseval.core.languages import base_language

        specs = self.asr.get(language, self.asr.get(base_language(language), self.asr["*"]))
        return [specs] if isinstance(specs, str) else list(specs)

    @property
    def qualities(self) -> list[str]:
        """The MOS predictor specs, the first (the summary's MOS) first."""
        return [self.quality] if isinstance(self.quality, str) else list(self.quality)

    def asr_for(self, language: str) -> str:
        """The first (ranking) recogniser spec for a language."""
        return self.asrs_for(language)[0]


def settings_file() -> Path | None:
    """The settings file this process reads: `$TTSEVAL_CONFIG` if set, else `./ttseval.toml` if it exists, else none.

    Raises:
        ConfigError: TTSEVAL_CONFIG names something that is not a file.
    """
    named = os.environ.get("TTSEVAL_CONFIG")
    path = Path(named or "ttseval.toml")
    if path.is_file():
        return path.absolute()
    if named:
        raise ConfigError(f"TTSEVAL_CONFIG points to {named!r}, which is not a file")
    return None


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment and TOML file, with explicit overrides (CLI flags) on top."""
    from pydantic import ValidationError

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ConfigError:
        raise
    except ValidationError as e:  # each field and why, never the value given (it may hold a URL with a secret)
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in e.errors(include_url=False)
        )
        raise ConfigError(f"invalid ttseval settings: {problems}") from None
    except ValueError as e:
        raise ConfigError(f"invalid ttseval settings: {e}") from e
