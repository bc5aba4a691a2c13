"""The per-clip model stages, declared once each and run by one loop: transcripts, quality, lid, prosody, similarity.

Each stage asks a model something about every stored clip and writes one row per (item, system, model). What they
share is written once here (`run_stage`): group the clips by model, build the model once per worker, answer each
clip from the store's request cache when an earlier run asked the same question (`reused_or_computed`), turn a
failed batch into rows (`error_row`), and commit one part per call. A `ClipStage` says what differs: its table,
which models apply, the cache key, how to ask the model, how to make a row. The planner (`plan_stage`), the
evaluate flow (submission, progress, reused/computed), and validation (through the table's declaration in
ttseval.core.schemas) loop over `STAGES`, as the judges' loop runs `JudgeKind` declarations (tasks/judge.py).

Adding a clip stage:

1. Its table in ttseval/core/schemas.py: the pyarrow schema (item_id, system_id, the model-id column, its own
   columns, `cache_hit`, the status columns) declared in TABLES as `_clip_stage("name", SCHEMA, "model_id")`; its
   key, model column and status rule follow from that, and validation checks it. Value rules of ok rows, if any,
   go in ttseval/core/validation.py's _VALUE_RULES.
2. Its setting in ttseval/core/config.py (which models, or whether it is on).
3. One `ClipStage` in `STAGES` below; a hook longer than a line lives in the stage's own module (tasks/<stage>.py).

The planner, the flow's shards, backlog, progress totals, GPU placement, the run log's reused/computed figures,
table checks and compaction then include it. Its request-cache key (the dict passed to `digest`) is part of the
store's format: change it and every earlier answer is asked again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from prefect import Task, task
from prefect.cache_policies import NO_CACHE

from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.ids import digest
from ttseval.core.registry import Spec
from ttseval.core.schemas import TABLES
from ttseval.core.store import ArtifactStore
from ttseval.tasks.failures import error_row, one_per_request
from ttseval.tasks.lid import identify
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import StageResult, commit, get_store, now
from ttseval.tasks.plan import Plan, plan_model_stage
from ttseval.tasks.prosody import PROSODY_ID, measure_clips
from ttseval.tasks.provider_cache import get_provider, model_output_id
from ttseval.tasks.quality import mos_row, predict
from ttseval.tasks.retries import is_transient_task_error
from ttseval.tasks.reuse import by_model, reused_or_computed
from ttseval.tasks.similarity import compare, reference_of
from ttseval.tasks.transcribe import recognise, scored_row
from ttseval.tasks.voices import References

Work = dict[str, Any]
"""One clip to process: item_id, system_id, audio_sha256, language, text; `model_spec` (a backlog item: the one
model that lacks its row), `replaces` (an earlier retryable row is superseded) and `context` (what `context` gave)."""

OK = {"status": "ok", "retryable": False, "attempt": 1}


ClipKey = tuple[str, str, str]
"""A clip stage's row key: item_id, system_id, the model's output id."""


def answered(w: Work, answer: dict[str, Any], settings: Settings, where: str, key: ClipKey) -> dict[str, Any]:
    """The default row of an answered clip: the answer's columns as they are, ok."""
    return answer | OK


@dataclass(frozen=True)
class ClipStage:
    """What one per-clip model stage is; `run_stage` does the rest.

    Attributes:
        table: Its table, declared in ttseval.core.schemas as a clip stage (key, model-id column, statuses).
        kind: The registry kind of its models (asr, quality, lid, speaker), built with get_provider; None for a
            measure with no model to build (prosody), whose output id is `measure_id`.
        task_name: The Prefect task's name, as the UI shows it. Its function is named `<table>_task` (Dask keys).
        spec_column: The column holding the model's canonical spec (asr_spec, ...); None when it has none.
        models: (settings, language or None) -> the model specs that answer for a clip of that language; [] when
            the stage is off.
        cache_key: (clip, output id, model version) -> the request-cache key's dict (digested; byte-stable).
        ask: (model, clips, audio of a SHA-256, spec) -> one JSON-able answer per clip, in order.
        row: (clip, answer, settings, where, key) -> the row's own and status columns for an answered clip;
            `where` and `key` name it in an error_row. Default: the answer's columns, ok.
        enabled: (settings, references) -> whether the run has this stage (its figures in the run log, its table
            checked and compacted).
        context: (references, item_id, system_id) -> extra columns of the clip's rows (its `context`), or None to
            leave the clip out (similarity: only clips with a reference are compared); None: every clip, no columns.
        measure_id: The output id of a stage with no registry model (kind None).
    """

    table: str
    kind: str | None
    task_name: str
    spec_column: str | None
    models: Callable[[Settings, str | None], list[str]]
    cache_key: Callable[[Work, str, str], dict[str, Any]]
    ask: Callable[[Any, list[Work], Callable[[str], Audio], str], list[dict[str, Any]]]
    row: Callable[[Work, dict[str, Any], Settings, str, ClipKey], dict[str, Any]] = answered
    enabled: Callable[[Settings, References], bool] = lambda settings, references: True
    context: Callable[[References, str, str], dict[str, Any] | None] | None = None
    measure_id: str | None = None

    def __post_init__(self) -> None:
        if not TABLES[self.table].clip_stage:
            raise ValueError(f"{self.table!r} is not declared as a clip-stage table in ttseval.core.schemas")
        if (self.kind is None) != (self.measure_id is not None):
            raise ValueError(f"stage {self.table!r}: give a registry kind or a measure_id, exactly one")

    @property
    def model_column(self) -> str:
        """The model-id column (asr_id, quality_id, ...), from the table's declaration."""
        return TABLES[self.table].model_column

    def output_id(self, spec: str, settings: Settings) -> str:
        """The id that keys a model's rows: the registry's output id of the spec, or the measure's id."""
        if self.kind is not None:
            return model_output_id(self.kind, Spec.parse(spec), settings)
        assert self.measure_id is not None  # __post_init__: a stage without a registry kind has a measure_id
        return self.measure_id

    def models_for(self, settings: Settings) -> Callable[[str], list[tuple[str, str]]]:
        """language -> [(canonical model spec, output id), ...]: the planner's view of `models`."""
        ids: dict[str, tuple[str, str]] = {}

        def models(language: str) -> list[tuple[str, str]]:
            for spec in (specs := self.models(settings, language)):
                if spec not in ids:
                    ids[spec] = (Spec.parse(spec).canonical, self.output_id(spec, settings))
            return [ids[spec] for spec in specs]

        return models

    def rows_per_clip(
        self, settings: Settings, references: References, language: str, item_id: str, system_id: str
    ) -> int:
        """How many rows a clip gets: one per model that applies, none for a clip the stage leaves out."""
        if self.context is not None and self.context(references, item_id, system_id) is None:
            return 0
        return len(self.models(settings, language))


def run_stage(stage: ClipStage, settings: Settings, run_id: str, work: list[Work], *, label: str = "") -> StageResult:
    """Process each clip of `work` with the model its work item names (`model_spec`, from the planner), else with
    every model `stage.models` lists for its language (clips just synthesized); one part per call.

    A model that cannot load, or whose batch raises, fails the batch's rows (retryable unless the provider
    documents the error as permanent: ttseval.tasks.failures.error_row), never the shard."""
    started = time.perf_counter()
    store = get_store(settings.store, settings.store_wait_s)
    if stage.context is not None:
        references = References.read(store, run_id)
        found = [(w, stage.context(references, w["item_id"], w["system_id"])) for w in work]
        work = [w | {"context": c} for w, c in found if c is not None]

    def audio(sha: str) -> Audio:
        return Audio.from_wav_bytes(store.get_audio(sha))

    rows: list[dict[str, Any]] = []
    replaces: set[tuple[Any, ...]] = set()
    for spec, batch in by_model(work, lambda w: stage.models(settings, w.get("language"))).items():
        output_id = stage.output_id(spec, settings)
        base = {stage.model_column: output_id} | ({stage.spec_column: spec} if stage.spec_column else {})
        where = stage.table if stage.kind is None else f"{stage.table} {spec}"
        keys: list[ClipKey] = [(w["item_id"], w["system_id"], output_id) for w in batch]
        replaces |= {k for w, k in zip(batch, keys) if w.get("replaces")}

        def common(w: Work, base: dict[str, Any] = base) -> dict[str, Any]:
            return {
                "item_id": w["item_id"],
                "system_id": w["system_id"],
                **base,
                "created_at": now(),
                **w.get("context", {}),
            }

        model = compute = None  # the previous model's last references here, before the next loads (models_in_memory)
        try:
            model = get_provider(stage.kind, spec, settings) if stage.kind else None
            version = str(getattr(model, "version", "unknown"))

            def compute(
                todo: list[int], batch: list[Work] = batch, model: Any = model, spec: str = spec
            ) -> list[dict[str, Any]]:
                return one_per_request(stage.ask(model, [batch[i] for i in todo], audio, spec), todo, spec)

            answers, hits = reused_or_computed(
                store,
                stage.table,
                [digest(stage.cache_key(w, output_id, version)) for w in batch],
                compute,
                reuse=settings.reuse_scores,
            )
        # The batch fails as rows, never as a lost shard; retryable unless documented permanent
        # (ttseval.tasks.failures.is_final).
        except Exception as e:  # noqa: BLE001
            failed = error_row(e, attempt=1, stage=where, keys=keys)
            rows += [common(w) | failed for w in batch]
            continue
        for w, answer, hit, key in zip(batch, answers, hits, keys):
            try:
                own = stage.row(w, answer, settings, where, key)
            # A row that cannot be made from a stored answer is not the data's fault: retryable.
            except Exception as e:  # noqa: BLE001
                own = error_row(e, attempt=1, stage=f"{where} (row)", keys=[key])
            rows.append(common(w) | {"cache_hit": hit} | own)
    part, statuses = commit(
        store, run_id, stage.table, rows, label=label, replaces=replaces, fence=settings.lease_token
    )
    return StageResult(stage.table, label, sum(statuses.values()), statuses, part, time.perf_counter() - started)


def plan_stage(
    stage: ClipStage,
    store: ArtifactStore,
    run_id: str,
    items: pd.DataFrame,
    systems: list[Spec],
    settings: Settings,
    references: References,
) -> Plan:
    """The clips synthesized earlier that still lack a row of `stage` from a model that applies to them."""
    eligible = None
    if stage.context is not None:
        context = stage.context

        def eligible(item_id: str, system_id: str) -> bool:
            return context(references, item_id, system_id) is not None

    return plan_model_stage(
        store,
        run_id,
        items,
        systems,
        settings,
        table=stage.table,
        models_for=stage.models_for(settings),
        eligible=eligible,
    )


# -- the stages ----------------------------------------------------------------------------------------------------


def _asrs(settings: Settings, language: str | None) -> list[str]:
    if language is None:  # the recognisers are chosen by language: a clip without one has none to choose
        raise ValueError("a clip to transcribe has no language, so no recogniser can be chosen for it (setting asr)")
    return settings.asrs_for(language)


TRANSCRIPTS = ClipStage(
    table="transcripts",
    kind="asr",
    task_name="transcribe",
    spec_column="asr_spec",
    models=_asrs,
    cache_key=lambda w, asr_id, version: {
        "audio": w["audio_sha256"],
        "asr": asr_id,
        "version": version,
        "language": w["language"],
    },
    ask=recognise,
    row=scored_row,
)

QUALITY = ClipStage(
    table="quality",
    kind="quality",
    task_name="score-quality",
    spec_column="quality_spec",
    models=lambda settings, language: settings.qualities,
    cache_key=lambda w, quality_id, version: {"audio": w["audio_sha256"], "quality": quality_id, "version": version},
    ask=predict,
    row=mos_row,
)

LID = ClipStage(
    table="lid",
    kind="lid",
    task_name="identify-language",
    spec_column="lid_spec",
    models=lambda settings, language: settings.lid,
    cache_key=lambda w, lid_id, version: {"audio": w["audio_sha256"], "lid": lid_id, "version": version},
    ask=identify,
    enabled=lambda settings, references: bool(settings.lid),
)

PROSODY = ClipStage(
    table="prosody",
    kind=None,
    task_name="measure-prosody",
    spec_column=None,
    measure_id=PROSODY_ID,
    models=lambda settings, language: ["prosody"] if settings.prosody else [],
    cache_key=lambda w, prosody_id, version: {"audio": w["audio_sha256"], "prosody": prosody_id},
    ask=measure_clips,
    enabled=lambda settings, references: settings.prosody,
)

SIMILARITY = ClipStage(
    table="similarity",
    kind="speaker",
    task_name="speaker-similarity",
    spec_column="encoder_spec",
    models=lambda settings, language: settings.similarity,
    cache_key=lambda w, encoder_id, version: {
        "audio": w["audio_sha256"],
        "reference": w["context"]["reference_sha256"],
        "encoder": encoder_id,
        "version": version,
    },
    ask=compare,
    context=reference_of,
    enabled=lambda settings, references: bool(settings.similarity) and bool(references),
)

STAGES: tuple[ClipStage, ...] = (TRANSCRIPTS, QUALITY, LID, PROSODY, SIMILARITY)
"""Every clip stage, in the order they are planned, submitted and reported."""

STAGE: dict[str, ClipStage] = {s.table: s for s in STAGES}


# -- Prefect tasks: one per stage, each running `run_stage` ------------------------------------------------------


def run_task(table: str, settings: Settings, run_id: str, source: StageResult | list[Work], label: str) -> StageResult:
    """The body of every stage's task: a synthesis shard's result (its ok clips) or a backlog shard, run."""
    work = source.work if isinstance(source, StageResult) else source
    result = run_stage(STAGE[table], settings, run_id, work, label=label)
    logger().info(result.describe())
    return result


StageTask = Task[..., StageResult]
"""A stage's Prefect task: (settings, run_id, a synthesis shard's result or a backlog shard, part label) -> result.
Its parameters are left open: the flow submits the synthesis shard's future in place of the result, which Prefect
resolves before the task runs and which Task[P, R].submit's typing does not admit."""


def _task_of(table: str) -> StageTask:
    """The stage's Prefect task, named `task_name` in the UI. Its function is `<table>_task`, so the Dask keys
    (and the dashboard's task stream) tell the stages apart: transcripts_task-..., quality_task-...; it holds
    only the table's name and finds the rest in this module where it runs."""

    def run(settings: Settings, run_id: str, source: StageResult | list[Work], label: str) -> StageResult:
        from ttseval.tasks import stages

        return stages.run_task(table, settings, run_id, source, label)

    run.__name__ = run.__qualname__ = f"{table}_task"
    return task(name=STAGE[table].task_name, cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)(run)


TASKS: dict[str, StageTask] = {s.table: _task_of(s.table) for s in STAGES}
"""table -> the stage's Prefect task (submitted with the run's retry options:
ttseval.tasks.retries.task_retry_options)."""
