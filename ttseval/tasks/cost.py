"""What a run would call and spend, before it calls anything: `evaluate --dry-run` and `--budget-usd`.

Both read the same plan the run would execute (tasks/plan.py: only keys the store lacks) and price each key the way
the synthesis stage will (tasks/synthesize.py: a supported language, reused audio is free, `billable_chars` at the
provider's price or the setting `tts_prices`). So the dry run's characters are the characters the run would send,
and the budget is applied to the plan before any task starts: the flow drops the paid keys past the budget from
its shards, which hold across every Dask worker without a shared counter, and those keys stay missing for a later
run. Prices per character are exact for vendors that bill characters; token-billed models are estimates (their
price tables say so).

Judge calls are estimated per judge: the pairs (or instruction clips) the store lacks, at the judge's audio
tokens per second (`audio_tokens_per_s`: Gemini 32, OpenAI 10, as their documentation gives) at its audio price,
plus `JUDGE_PROMPT_TOKENS` of prompt and the `judge_output_tokens` setting's output tokens (thinking included:
raise it for a thinking model), at the judge's own prices
(`prices_per_mtok`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.store import ArtifactStore
from ttseval.tasks.plan import Plan
from ttseval.tasks.provider_cache import get_provider
from ttseval.tasks.synthesize import call_cost, instruction_for, request_key, reuses_audio, synthesis_cache

WORDS_PER_MINUTE = 133.0
"""Speaking rate for expected audio length: EmergentTTS-Eval's overall means (33.93 words, 15.32 s)."""
AUDIO_TOKENS_PER_S = 32
"""Input tokens per second of audio for a judge that does not declare its own (Gemini's documented rate)."""
JUDGE_PROMPT_TOKENS = 600


def expected_audio_s(text: str) -> float:
    return len(text.split()) / (WORDS_PER_MINUTE / 60.0)


@dataclass
class Estimate:
    """What one system (or judge) would do for the keys the store lacks."""

    what: str
    kind: str  # "tts" or "judge"
    keys: int = 0  # keys to compute
    calls: int = 0  # provider calls (reused audio and unsupported languages make none)
    reused: int = 0
    chars: int = 0
    audio_s: float = 0.0
    usd: float = 0.0
    priced: dict[tuple[str, str], float] = field(default_factory=dict)  # (item_id, system spec) -> usd

    def row(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "kind": self.kind,
            "keys": self.keys,
            "calls": self.calls,
            "reused": self.reused,
            "chars": self.chars,
            "audio_s": round(self.audio_s, 1),
            "usd": round(self.usd, 4),
        }


def estimate_synthesis(plan: Plan, store: ArtifactStore, settings: Settings) -> list[Estimate]:
    """Per system of `plan` (ttseval.tasks.plan.plan_synthesis): calls, characters, audio seconds and USD."""
    cache = synthesis_cache(store)
    by_system: dict[str, Estimate] = {}
    from ttseval.core.registry import Spec

    for shard in plan.shards:
        spec = Spec.parse(shard["system"])
        est = by_system.setdefault(spec.canonical, Estimate(spec.canonical, "tts"))
        provider = get_provider("tts", spec.canonical, settings)
        for item in shard["items"]:
            est.keys += 1
            if not provider.supports_language(item["language"]) or getattr(provider, "keyed_by_item", False):
                continue  # an unsupported language is refused before a call; audio made elsewhere is looked up
            instruction = instruction_for(spec, item) if getattr(provider, "accepts_instruction", False) else None
            if (
                reuses_audio(provider, item["item_id"], settings)
                and cache.get(request_key(spec, provider, item, instruction)) is not None
            ):
                est.reused += 1
                continue
            chars, usd = call_cost(provider, item["text"], instruction, settings)
            est.calls += 1
            est.chars += chars
            est.audio_s += expected_audio_s(item["text"])
            est.usd += usd
            est.priced[(item["item_id"], spec.canonical)] = usd
    return list(by_system.values())


def estimate_judges(
    items: pd.DataFrame,
    system_ids: list[str],
    baseline_id: str,
    judges: list[str],
    instruction_judges: list[str],
    store: ArtifactStore,
    run_id: str,
    settings: Settings,
) -> list[Estimate]:
    """Per judge: the comparisons the store lacks once every clip exists, and their estimated price.

    Pairwise: the pairs the setting judge_pairs asks for (ttseval.tasks.pairs.judged_pairs: k - 1, k(k - 1)/2 or
    pairs_per_item per item for k systems) and, for an order-sensitive judge, the position audit's sample of them
    heard again in the other order; calls are those comparisons times the judge's samples."""
    from ttseval.tasks.pairs import audit_sample, judged_pairs, order_sensitive

    audio_s = {r.item_id: expected_audio_s(r.text) for r in items.itertuples(index=False)}
    audit_stored = store.read(run_id, "position_audit")
    out = []
    for role, specs in (("pairwise", judges), ("instruction", instruction_judges)):
        table = "judgments" if role == "pairwise" else "instruction_judgments"
        stored = store.read(run_id, table)
        for spec in specs:
            judge = get_provider("judge", spec, settings)
            todo: list[tuple[str, ...]]
            if role == "pairwise":
                pairs = judged_pairs(audio_s, system_ids, baseline_id, settings)
                todo = _missing(pairs, stored, judge.judge_id)
                if order_sensitive(spec, settings):  # the position audit asks a sample again in the other order
                    audited = audit_sample(pairs, settings)
                    todo += _missing([k for k in pairs if k in audited], audit_stored, judge.judge_id)
                clips = 2
            else:
                wanted = [
                    (r.item_id, s)
                    for r in items.itertuples(index=False)
                    if getattr(r, "instruction", None)
                    for s in system_ids
                ]
                todo = _missing(wanted, stored, judge.judge_id)
                clips = 1
            # each comparison is one call per sample (self-consistency: `samples` calls), as the judge makes them
            est = Estimate(
                f"{spec} ({role})", "judge", keys=len(todo), calls=len(todo) * max(1, getattr(judge, "samples", 1))
            )
            est.audio_s = sum(clips * audio_s[k[0]] for k in todo)
            est.usd = sum(judge_call_usd(judge, clips * audio_s[k[0]], settings) for k in todo)
            out.append(est)
    return out


def _missing(wanted: Sequence[tuple[str, ...]], stored: pd.DataFrame, judge_id: str) -> list[tuple[str, ...]]:
    """The keys of `wanted` ((item_id, system_id[, baseline_id])) that `stored` lacks for good for this judge."""
    if stored.empty:
        return list(wanted)
    mine = stored[(stored["judge_id"] == judge_id) & ~stored["retryable"].fillna(False).astype(bool)]
    columns = ["item_id", "system_id", "baseline_id"][: len(wanted[0])] if wanted else ["item_id"]
    done = set(mine[columns].itertuples(index=False, name=None))
    return [k for k in wanted if k not in done]


def judge_call_usd(judge: Any, audio_s: float, settings: Settings) -> float:
    """The estimated price of one judgement of `audio_s` seconds of audio: the judge's audio tokens per second at
    its audio price, the prompt, and `judge_output_tokens`; 0 for a judge with no prices (objective, local)."""
    if not hasattr(judge, "prices_per_mtok"):  # a paid chat judge has them (providers/judges/llm_judge.py)
        return 0.0
    text_price, audio_price, out_price = judge.prices_per_mtok()
    audio_tokens = audio_s * getattr(judge, "audio_tokens_per_s", AUDIO_TOKENS_PER_S)
    usd: float = (
        (audio_tokens * audio_price + JUDGE_PROMPT_TOKENS * text_price + settings.judge_output_tokens * out_price)
        / 1e6
        * max(1, getattr(judge, "samples", 1))
    )
    return usd


@dataclass
class Budget:
    """What a run may still spend (USD), shared by the stages that draw on it in turn."""

    remaining_usd: float
    deferred: int = 0

    def take(self, usd: float) -> bool:
        """Spend `usd` when it fits (free keys always fit); False leaves the key for a later run."""
        if usd > 0 and usd > self.remaining_usd + 1e-12:
            self.deferred += 1
            return False
        self.remaining_usd -= usd
        return True


def within_budget(plan: Plan, estimates: list[Estimate], budget: Budget) -> tuple[Plan, int, float]:
    """`plan` with the paid keys past `budget` dropped (in plan order; free keys always stay), drawing on it;
    returns (the plan, keys left for a later run, USD the kept keys will cost)."""
    price = {k: v for e in estimates for k, v in e.priced.items()}
    before_usd, before_deferred = budget.remaining_usd, budget.deferred
    shards = []
    for shard in plan.shards:
        kept = [item for item in shard["items"] if budget.take(price.get((item["item_id"], shard["system"]), 0.0))]
        if kept:
            shards.append(shard | {"items": kept})
    for n, shard in enumerate(shards):
        shard["index"], shard["of"] = n + 1, len(shards)
    # The dropped keys are not wanted by this run (a later run computes them), so progress totals stay true.
    dropped = budget.deferred - before_deferred
    return (
        Plan(plan.stage, wanted=plan.wanted - dropped, present=plan.present, shards=shards),
        dropped,
        before_usd - budget.remaining_usd,
    )


def dry_run_table(estimates: list[Estimate]) -> pd.DataFrame:
    rows = [e.row() for e in estimates]
    total = {
        "what": "total",
        "kind": "",
        "keys": sum(e.keys for e in estimates),
        "calls": sum(e.calls for e in estimates),
        "reused": sum(e.reused for e in estimates),
        "chars": sum(e.chars for e in estimates),
        "audio_s": round(sum(e.audio_s for e in estimates), 1),
        "usd": round(sum(e.usd for e in estimates), 4),
    }
    return pd.DataFrame([*rows, total])


def dry_run(
    dataset: str,
    systems: list[str],
    run_id: str,
    baseline: str | None,
    judges: list[str],
    instruction_judges: list[str],
    settings: Settings,
    *,
    items: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The estimate table of `evaluate --dry-run`: per system and judge, what the run would call for the keys
    the store lacks. Reads the store; writes nothing and calls no provider. `items`: the dataset's items when
    the caller has read and checked them already (ttseval.flows.preflight), so they are not read twice."""
    from ttseval.core.registry import Spec
    from ttseval.corpus.items import read_items
    from ttseval.tasks.parts import get_store
    from ttseval.tasks.plan import plan_synthesis

    store = get_store(settings.store, settings.store_wait_s)
    if items is None:
        items, _, _ = read_items(dataset, settings)
    specs = [Spec.parse(s) for s in systems]
    plan = plan_synthesis(store, run_id, items, specs, settings)
    baseline_id = Spec.parse(baseline).id if baseline else specs[0].id
    estimates = estimate_synthesis(plan, store, settings) + estimate_judges(
        items, [s.id for s in specs], baseline_id, judges, instruction_judges, store, run_id, settings
    )
    return dry_run_table(estimates)
