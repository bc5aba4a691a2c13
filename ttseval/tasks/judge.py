"""Judge stages: pairwise comparisons (against a baseline, or every / a sample of pairs: setting judge_pairs),
and instruction following, on one path.

Both kinds do the same thing with a different table: plan the (item, system[, baseline], judge) keys the store
lacks, skip keys whose clip is missing (as rows), ask the judge for the rest in one batch, and commit one part
per shard. A `JudgeKind` says what differs: the table and its key, what to judge, the request and the row.
`PAIRWISE` lives here; `INSTRUCTION` (InstructTTSEval) in tasks/judge_instructions.py.

Planning reads only stored tables (items, synthesis, transcripts, quality), so the same code serves the evaluate
flow and a backfill over audio stored by an earlier run: no TTS provider is ever built here.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from prefect import task
from prefect.cache_policies import NO_CACHE

from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.protocols import PairwiseJudge, PairwiseRequest, PairwiseVerdict, Winner
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore
from ttseval.providers.judges.prompts import rubric_for
from ttseval.tasks.cost import Budget, judge_call_usd
from ttseval.tasks.failures import error_row, one_per_request
from ttseval.tasks.limits import limit_calls
from ttseval.tasks.llm import cached_generate
from ttseval.tasks.logs import logger
from ttseval.tasks.pairs import audit_sample, judged_pairs, order_sensitive
from ttseval.tasks.parts import StageResult, commit, get_store, now
from ttseval.tasks.plan import Plan, _chunks, _present, shard_size_for
from ttseval.tasks.provider_cache import get_provider
from ttseval.tasks.quality import primary_quality_id
from ttseval.tasks.retries import is_transient_task_error, task_retry_options
from ttseval.tasks.window import Job, in_window, window_for

Placement = Callable[[str], contextlib.AbstractContextManager[object]]
"""judge spec -> the context its tasks are submitted in (which Dask workers may run them)."""


# -- presentation order: the judge hears the two clips in an order it is not told about ------------------------
# Drawn per (item, system, baseline) from a hash, so a re-run asks the same question; the first/second answer is
# mapped back to candidate/baseline.


def candidate_first(item_id: str, system_id: str, baseline_id: str, seed: int = 0) -> bool:
    """The presentation order of one comparison: reproducible from its key, independent of everything else."""
    digest = hashlib.sha256(f"{seed}|{item_id}|{system_id}|{baseline_id}".encode()).digest()
    return digest[0] % 2 == 0


def to_candidate_view(winner: Winner | None, cand_first: bool) -> Literal["candidate", "baseline", "tie"] | None:
    """Map a first/second answer back to candidate/baseline."""
    if winner is None or winner == "tie":
        return winner
    return "candidate" if (winner == "first") == cand_first else "baseline"


Work = dict[str, Any]
"""One key to judge: its key columns, what the request needs, `skip` (the row's reason when a clip is missing,
else None) and `replaces` (an earlier retryable row of the key is superseded)."""


@dataclass(frozen=True)
class WorkRows:
    """A shard's work as tuples under one tuple of column names, read back as Work dicts one at a time. A plan holds
    every key a judge has still to judge (95,000 pairs at 100,000 clips): as dicts that was about 1.5 KB a pair in
    the flow's process, as tuples a fraction of it, and the pickle sent to a worker is as small."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    def __iter__(self) -> Iterator[Work]:
        return (dict(zip(self.columns, row)) for row in self.rows)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class Clips:
    """The synthesis table seen from a judge: which clips exist, and which will never exist."""

    ok: dict[tuple[str, str], str]
    """(item_id, system_id) -> audio_sha256 of the ok clip."""
    final: frozenset[tuple[str, str]]
    """Keys whose synthesis ended for good without a clip (unsupported, silent, a permanent provider error)."""

    @classmethod
    def read(cls, store: ArtifactStore, run_id: str) -> Clips:
        columns = ["item_id", "system_id", "status", "retryable", "audio_sha256"]  # not the whole table
        synthesis = store.read(run_id, "synthesis", columns=columns)
        if synthesis.empty:
            return cls({}, frozenset())
        ok = synthesis[synthesis["status"] == "ok"]
        final = synthesis[(synthesis["status"] != "ok") & ~synthesis["retryable"].fillna(False).astype(bool)]
        return cls(
            ok.set_index(["item_id", "system_id"])["audio_sha256"].to_dict(),
            frozenset(final[["item_id", "system_id"]].itertuples(index=False, name=None)),
        )

    def sha(self, item_id: str, system_id: str) -> str | None:
        return self.ok.get((item_id, system_id))

    def skip(
        self, item_id: str, missing: dict[str, str | None], error_type: str, message: str
    ) -> dict[str, Any] | None:
        """The columns of a `skipped` row when a clip in `missing` (role -> system_id or None) has no audio.

        The row is retryable while a missing clip may still come (its synthesis failed retryably or has not run):
        once the next run heals that synthesis, the pair is judged. A clip that will never exist skips for good.
        """
        absent = [system_id for system_id in missing.values() if system_id and not self.sha(item_id, system_id)]
        if not absent:
            return None
        pending = any((item_id, system_id) not in self.final for system_id in absent)
        return {
            "status": "skipped",
            "error_type": error_type,
            "error_message": message,
            "retryable": pending,
            "attempt": 0,
            "parse_ok": False,
        }


@dataclass(frozen=True)
class JudgeKind:
    """What differs between the pairwise and the instruction-following judge stage.

    Attributes:
        table: The table the rows go to.
        task_name: The Prefect task's name.
        wanted: (store, run_id, system_ids, baseline_id, settings) -> every key to judge as Work, judge_id
            excluded, in a stable order.
        request: (work, store, settings) -> (the judge's request, row columns already known, e.g. the order).
        ask: (judge, requests) -> verdicts, one per request, in order.
        verdict_row: (verdict, known columns) -> the kind's own columns of an answered row.
        row_base: work -> the kind's own columns of every row beyond the key (e.g. `task`); None: none.
    """

    table: str
    task_name: str
    wanted: Callable[[ArtifactStore, str, list[str], str | None, Settings], Iterator[Work]]
    request: Callable[[Work, ArtifactStore, Settings], tuple[Any, dict[str, Any]]]
    ask: Callable[[Any, list[Any]], list[Any]]
    verdict_row: Callable[[Any, dict[str, Any]], dict[str, Any]]
    row_base: Callable[[Work], dict[str, Any]] | None = None

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The table's key, `judge_id` included, as its schema declares it (ttseval.core.schemas)."""
        from ttseval.core.schemas import TABLES

        return TABLES[self.table].key

    def key(self, w: Work, judge_id: str) -> tuple[str, ...]:
        return tuple(judge_id if c == "judge_id" else w[c] for c in self.key_columns)


def judge_id_of(spec: str, settings: Settings) -> str:
    judge_id: str = get_provider("judge", spec, settings).judge_id
    return judge_id


def plan_judge(
    kind: JudgeKind,
    store: ArtifactStore,
    run_id: str,
    system_ids: list[str],
    judge_spec: str,
    settings: Settings,
    *,
    baseline_id: str | None = None,
    item_ids: set[str] | None = None,
) -> Plan:
    """Every key of `kind` this judge has not judged for good (`missing = wanted - present`), over `item_ids`
    only when given (a backfill of a subset)."""
    judge_id = judge_id_of(judge_spec, settings)
    stored = store.read(run_id, kind.table, columns=[*kind.key_columns, "retryable"])  # not the judges' answers
    done, again = _present(stored, list(kind.key_columns))
    plan = Plan(f"{kind.table} ({judge_spec})")
    columns: tuple[str, ...] = ()
    todo: list[tuple[Any, ...]] = []
    for w in kind.wanted(store, run_id, system_ids, baseline_id, settings):
        if item_ids is not None and w["item_id"] not in item_ids:
            continue
        plan.wanted += 1
        key = kind.key(w, judge_id)
        if key in done:
            plan.present += 1
            continue
        columns = columns or (*w, "replaces")
        if tuple(w) != columns[:-1]:
            raise ValueError(f"{kind.table}: a work item's keys {list(w)} are not those of the first, {columns[:-1]}")
        todo.append((*w.values(), key in again))
    size = shard_size_for(settings, len(todo))
    plan.shards = [
        {"judge": judge_spec, "judge_id": judge_id, "work": WorkRows(columns, c)} for c in _chunks(todo, size)
    ]
    return plan


def _answered(v: Any) -> dict[str, Any]:
    """The columns every answered row has, whichever the kind: raw output, parse status, budgets, usage.

    A verdict whose answer never came (`transient`: the transport failed after its retries) is a failed row the
    next run asks again. An unparseable answer is a row of the judge's answer (counted as a parse failure), and the
    next run asks again too: a server answering in the wrong shape, once fixed, heals the run."""
    if getattr(v, "transient", False):
        status = {"status": "failed", "retryable": True, "error_type": "JudgeUnreachable"}
    else:
        status = {"status": "ok", "retryable": not v.parse_ok, "error_type": None if v.parse_ok else "ParseFailure"}
    return {
        "raw_response": v.raw_response,
        "parse_ok": v.parse_ok,
        "attempts": v.attempts,
        "retries": v.retries,
        "input_tokens": v.input_tokens,
        "output_tokens": v.output_tokens,
        "cost_usd": v.cost_usd,
        "samples": getattr(v, "samples", 1),
        "sample_agreement": getattr(v, "sample_agreement", None),
        "served_model": getattr(v, "served_model", None),
        "attempt": v.attempts,
        "error_message": v.error,
    } | status


def _verdicts(kind: JudgeKind, spec: str, settings: Settings, requests: list[Any]) -> list[Any]:
    """The judge's verdicts, one per request; the judge is built here, so a judge that cannot load fails rows."""
    if not requests:
        return []
    judge = get_provider("judge", spec, settings)
    limit_calls(judge, settings)
    if getattr(judge, "samples", 1) > 1:  # self-consistency: each sample cached by index, so N can grow
        store = get_store(settings.store, settings.store_wait_s)
        judge.route_calls(lambda llm, requests: cached_generate(store, llm, requests, keep_unparseable=False))
    return one_per_request(kind.ask(judge, requests), requests, spec)


def judge_shard(
    kind: JudgeKind, settings: Settings, run_id: str, shard: dict[str, Any], *, label: str = ""
) -> StageResult:
    """Judge one shard of keys; keys missing a clip are written as `skipped` with the reason.

    A judge that raises fails the shard's rows (retryable unless it documents the error as permanent), never the
    run. Unparseable answers are answered rows (`parse_ok` False), not failures: the judge said them.
    """
    started = time.perf_counter()
    store = get_store(settings.store, settings.store_wait_s)
    spec = Spec.parse(shard["judge"]).canonical
    judge_id = shard["judge_id"]

    def base(w: Work) -> dict[str, Any]:
        own = kind.row_base(w) if kind.row_base else {}
        key = {c: w[c] for c in kind.key_columns if c != "judge_id"}
        return key | own | {"judge_id": judge_id, "judge_spec": spec, "created_at": now()}

    rows, requests, pending = [], [], []
    for w in shard["work"]:
        if w["skip"]:
            rows.append(base(w) | w["skip"])
            continue
        request, known = kind.request(w, store, settings)
        requests.append(request)
        pending.append((w, known))
    try:
        verdicts = _verdicts(kind, spec, settings, requests)
    # A judge that breaks fails its rows, never the run; retryable unless documented permanent
    # (ttseval.tasks.failures.is_final).
    except Exception as e:  # noqa: BLE001
        failed = error_row(e, attempt=1, stage=f"{kind.table} {spec}", keys=[kind.key(w, judge_id) for w, _ in pending])
        rows += [base(w) | known | {"parse_ok": False} | failed for w, known in pending]
        verdicts = []
    rows += [base(w) | known | kind.verdict_row(v, known) | _answered(v) for (w, known), v in zip(pending, verdicts)]
    replaces = {kind.key(w, judge_id) for w in shard["work"] if w["replaces"]}
    part, statuses = commit(store, run_id, kind.table, rows, label=label, replaces=replaces, fence=settings.lease_token)
    return StageResult(kind.table, label, sum(statuses.values()), statuses, part, time.perf_counter() - started)


@task(name="judge", cache_policy=NO_CACHE, retry_condition_fn=is_transient_task_error)
def judge_task(kind: JudgeKind, settings: Settings, run_id: str, shard: dict[str, Any], label: str) -> StageResult:
    result = judge_shard(kind, settings, run_id, shard, label=label)
    logger().info(result.describe())
    return result


def within_judge_budget(
    plan: Plan, spec: str, store: ArtifactStore, run_id: str, settings: Settings, budget: Budget
) -> Plan:
    """`plan` with the keys past `budget` dropped (in plan order), priced by the dry run's estimate for the clips'
    real durations; the dropped keys stay missing for a later run."""
    judge = get_provider("judge", spec, settings)
    synthesis = store.read(run_id, "synthesis", columns=["item_id", "system_id", "duration_s"])
    duration = dict(zip(zip(synthesis["item_id"], synthesis["system_id"]), synthesis["duration_s"].fillna(0.0)))
    shards, kept_total = [], 0
    for shard in plan.shards:
        work = shard["work"]
        kept = [
            row
            for w, row in zip(work, work.rows)
            if w["skip"]
            or budget.take(
                judge_call_usd(
                    judge,
                    sum(duration.get((w["item_id"], s), 0.0) for s in (w.get("system_id"), w.get("baseline_id")) if s),
                    settings,
                )
            )
        ]
        kept_total += len(kept)
        if kept:
            shards.append(shard | {"work": WorkRows(work.columns, kept)})
    dropped = sum(len(s["work"]) for s in plan.shards) - kept_total
    return Plan(plan.stage, wanted=plan.wanted - dropped, present=plan.present, shards=shards)


def run_judges(
    kind: JudgeKind,
    settings: Settings,
    run_id: str,
    system_ids: list[str],
    judges: list[str],
    *,
    baseline_id: str | None = None,
    place: Placement = lambda spec: contextlib.nullcontext(),
    item_ids: set[str] | None = None,
    budget: Budget | None = None,
) -> tuple[list[Plan], list[StageResult]]:
    """Plan and run every judge's missing keys of `kind` (over `item_ids` when given) as Prefect tasks on the
    flow's task runner; each judge's tasks are submitted inside `place(spec)` (the flow's choice of workers:
    ttseval.flows.common.placement). With a `budget`, keys past it are left for a later run."""
    store = get_store(settings.store, settings.store_wait_s)
    plans = []
    retrying = judge_task.with_options(name=kind.task_name, **task_retry_options(settings))
    for spec in judges:
        plan = plan_judge(kind, store, run_id, system_ids, spec, settings, baseline_id=baseline_id, item_ids=item_ids)
        if budget is not None:
            plan = within_judge_budget(plan, spec, store, run_id, settings, budget)
        if plan.wanted:
            logger().info(plan.describe())
        plans.append(plan)

    def job(spec: str, i: int, shard: dict[str, Any], of: int) -> Job:
        def submit() -> list[Any]:
            with place(spec):
                return [retrying.submit(kind, settings, run_id, shard, f"{spec} shard {i + 1}/{of}")]

        return submit

    jobs = (
        job(spec, i, shard, len(plan.shards))
        for spec, plan in zip(judges, plans)
        for i, shard in enumerate(plan.shards)
    )
    largest = max((len(shard["work"]) for plan in plans for shard in plan.shards), default=1)
    return plans, [f.result() for f in in_window(jobs, window_for(largest))]  # a bounded window of shards


# -- pairwise: which pairs of systems are compared (setting judge_pairs) ------------------------------------------


def _signals(store: ArtifactStore, run_id: str, quality_id: str) -> dict[tuple[str, str], dict[str, float | None]]:
    """CER and MOS per clip from the stored tables (one transcript per clip by construction; the MOS of the first
    predictor in settings.quality, `quality_id`)."""
    out: dict[tuple[str, str], dict[str, float | None]] = {}
    transcripts = store.read(run_id, "transcripts", columns=["item_id", "system_id", "status", "cer"])
    for r in transcripts[transcripts["status"] == "ok"].itertuples(index=False):
        out.setdefault((r.item_id, r.system_id), {})["cer"] = float(r.cer)
    quality = store.read(run_id, "quality", columns=["item_id", "system_id", "status", "quality_id", "mos"])
    for r in quality[(quality["status"] == "ok") & (quality["quality_id"] == quality_id)].itertuples(index=False):
        out.setdefault((r.item_id, r.system_id), {})["mos"] = float(r.mos)
    return out


def _pairwise_wanted(
    store: ArtifactStore, run_id: str, system_ids: list[str], baseline_id: str | None, settings: Settings
) -> Iterator[Work]:
    """Every comparison of `judged_pairs` (each candidate against the baseline, or the pairs judge_pairs asks for),
    in its order; `baseline_id` of a work is the pair's other system, `vs_baseline` whether it is the run's."""
    if baseline_id is None:
        raise ValueError("pairwise judging needs a baseline_id")
    items = store.read(run_id, "items", columns=["item_id", "text", "language", "category"]).set_index("item_id")
    clips, signals = Clips.read(store, run_id), _signals(store, run_id, primary_quality_id(settings))
    rows = items[["text", "language", "category"]].to_dict("index")  # one dict lookup per pair, not a .loc
    for item_id, system_id, other in judged_pairs(items.index, system_ids, baseline_id, settings):
        item = rows[item_id]
        which = "candidate" if not clips.sha(item_id, system_id) else "baseline"
        yield {
            "item_id": item_id,
            "system_id": system_id,
            "baseline_id": other,
            "vs_baseline": other == baseline_id,
            "text": item["text"],
            "language": item["language"],
            "category": item["category"],
            "candidate_sha": clips.sha(item_id, system_id),
            "baseline_sha": clips.sha(item_id, other),
            "candidate_signals": signals.get((item_id, system_id), {}),
            "baseline_signals": signals.get((item_id, other), {}),
            "skip": clips.skip(
                item_id,
                {"candidate": system_id, "baseline": other},
                f"No{which.title()}Audio",
                f"the {which} has no ok clip for this item",
            ),
        }


def _pair_columns(w: Work) -> dict[str, Any]:
    """The row's own columns beyond its key: whether the pair is against the run's baseline."""
    return {"vs_baseline": w["vs_baseline"]}


def _pairwise_request(w: Work, store: ArtifactStore, settings: Settings) -> tuple[PairwiseRequest, dict[str, Any]]:
    """The two clips in an order drawn per (item, system, baseline) from a seeded hash, never by the judge."""
    first = candidate_first(w["item_id"], w["system_id"], w["baseline_id"], settings.seed)
    cand = Audio.from_wav_bytes(store.get_audio(w["candidate_sha"]))
    base = Audio.from_wav_bytes(store.get_audio(w["baseline_sha"]))
    request = PairwiseRequest(
        item_id=w["item_id"],
        text=w["text"],
        language=w["language"],
        category=w["category"],
        rubric=rubric_for(w["category"]),
        first=cand if first else base,
        second=base if first else cand,
        first_signals=w["candidate_signals"] if first else w["baseline_signals"],
        second_signals=w["baseline_signals"] if first else w["candidate_signals"],
    )
    return request, {"candidate_first": first}


def _ask_pairs(judge: PairwiseJudge, requests: list[PairwiseRequest]) -> list[PairwiseVerdict]:
    return judge.judge_pairs(requests)


def _pairwise_row(v: Any, known: dict[str, Any]) -> dict[str, Any]:
    """The verdict mapped back from presentation order (first/second) to candidate/baseline."""
    first = known["candidate_first"]
    cand_score, base_score = (v.score_first, v.score_second) if first else (v.score_second, v.score_first)
    cand_why, base_why = (v.reasoning_first, v.reasoning_second) if first else (v.reasoning_second, v.reasoning_first)
    return {
        "winner_raw": v.winner,
        "winner": to_candidate_view(v.winner, first),
        "score_candidate": cand_score,
        "score_baseline": base_score,
        "reasoning_candidate": cand_why,
        "reasoning_baseline": base_why,
        "comparison": v.comparison,
    }


PAIRWISE = JudgeKind(
    table="judgments",
    task_name="judge",
    wanted=_pairwise_wanted,
    request=_pairwise_request,
    ask=_ask_pairs,
    verdict_row=_pairwise_row,
    row_base=_pair_columns,
)


# -- position-bias audit: a sample of the pairs, asked again in the other order ------------------------------------


def _audit_wanted(
    store: ArtifactStore, run_id: str, system_ids: list[str], baseline_id: str | None, settings: Settings
) -> Iterator[Work]:
    wanted = list(_pairwise_wanted(store, run_id, system_ids, baseline_id, settings))
    sample = audit_sample([(w["item_id"], w["system_id"], w["baseline_id"]) for w in wanted], settings)
    return (w for w in wanted if (w["item_id"], w["system_id"], w["baseline_id"]) in sample)


def _swapped_request(w: Work, store: ArtifactStore, settings: Settings) -> tuple[PairwiseRequest, dict[str, Any]]:
    """The pair in the order the judgments table did not use."""
    request, known = _pairwise_request(w, store, settings)
    return request.swapped(), {"candidate_first": not known["candidate_first"]}


POSITION_AUDIT = JudgeKind(
    table="position_audit",
    task_name="position-audit",
    wanted=_audit_wanted,
    request=_swapped_request,
    ask=_ask_pairs,
    verdict_row=_pairwise_row,
    row_base=_pair_columns,
)


def run_position_audit(
    settings: Settings,
    run_id: str,
    system_ids: list[str],
    baseline_id: str,
    judges: list[str],
    place: Placement = lambda spec: contextlib.nullcontext(),
    item_ids: set[str] | None = None,
    budget: Budget | None = None,
) -> tuple[list[Plan], list[StageResult]]:
    """Ask each order-sensitive judge the audit sample's pairs in the other order (`position_audit`)."""
    audited = [j for j in judges if order_sensitive(j, settings)]
    return run_judges(
        POSITION_AUDIT,
        settings,
        run_id,
        system_ids,
        audited,
        baseline_id=baseline_id,
        place=place,
        item_ids=item_ids,
        budget=budget,
    )


def run_judge_stage(
    settings: Settings,
    run_id: str,
    system_ids: list[str],
    baseline_id: str,
    judges: list[str],
    place: Placement = lambda spec: contextlib.nullcontext(),
    item_ids: set[str] | None = None,
    budget: Budget | None = None,
) -> tuple[list[Plan], list[StageResult]]:
    """Plan and run every pairwise judge's missing comparisons against `baseline_id`."""
    return run_judges(
        PAIRWISE,
        settings,
        run_id,
        system_ids,
        judges,
        baseline_id=baseline_id,
        place=place,
        item_ids=item_ids,
        budget=budget,
    )
