"""Dataset-generation stages: breadth expansion, one depth-refinement step, screening, freezing.

Each stage takes and returns rows of the `GENERATED` schema (dicts). A failed call or a rejected item is a row
with status `failed` and the reason; descendants of a failed item are rows with `parent_failed`, so every
lineage shows its full extent.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from ttseval.core.config import Settings
from ttseval.core.protocols import LLM, LLMRequest, LLMResult
from ttseval.core.store import ArtifactStore
from ttseval.core.validation import Rule, row_failures
from ttseval.corpus import generation as g
from ttseval.corpus.generation import CategorySpec, GenerationSpec, Seed
from ttseval.tasks.llm import CallStats, cached_generate
from ttseval.tasks.parts import get_store
from ttseval.tasks.provider_cache import get_provider

DUPLICATE_RULE = "no near-duplicate within the category"


def _temperature(llm: LLM, request: LLMRequest) -> float | None:
    if request.temperature is not None:
        return request.temperature
    return getattr(getattr(llm, "options", None), "temperature", None)


def _call_fields(llm: LLM, request: LLMRequest, result: LLMResult, prompt_version: str) -> dict[str, Any]:
    return {
        "generator_model": llm.model,
        "llm_id": llm.llm_id,
        "prompt_version": prompt_version,
        "prompt_hash": result.extra["key"][:16],  # cached_generate sets the request's cache key on every result
        "temperature": _temperature(llm, request),
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "cost_usd": result.cost_usd,
        "source": "llm",
        "generator": f"{llm.spec} {prompt_version}",
    }


def _failed(row: dict[str, Any], kind: str, message: str) -> dict[str, Any]:
    return {**row, "status": "failed", "error_type": kind, "error_message": message}


def _base(spec: GenerationSpec, category: str, item_id: str, depth: int, root_id: str, **kw: Any) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "benchmark": f"ttseval-generated ({spec.version})",
        "category": category,
        "depth": depth,
        "root_id": root_id,
        "language": spec.language,
        "status": "ok",
        **kw,
    }


# -- breadth expansion ------------------------------------------------------------------------------------------
def breadth_rows(
    spec: GenerationSpec,
    seeds: list[Seed],
    llm: LLM,
    store: ArtifactStore,
    *,
    per_category: int,
    batch: int,
    temperature: float,
    stats: CallStats,
) -> list[dict[str, Any]]:
    """Depth-0 rows: the human seeds, the tongue twisters, and `per_category` new items per category."""
    rows: list[dict[str, Any]] = []
    requests: list[tuple[str, Any, LLMRequest, str]] = []  # (kind, plan, request, prompt version)
    for name, cat in spec.categories.items():
        mine = [s for s in seeds if s.category == name]
        for s in mine:
            rid = f"{name}-{s.seed_id}"
            rows.append(
                _base(
                    spec,
                    name,
                    rid,
                    0,
                    rid,
                    seed_id=s.seed_id,
                    text=s.text,
                    subcategory=s.subcategory,
                    method="seed",
                    source="human",
                )
            )
        examples = [s.text for s in mine]
        for call in g.plan_breadth(cat, per_category, batch):
            req = LLMRequest(
                parts=(g.breadth_prompt(cat, call, examples, spec.language),),
                schema=g.BreadthAnswer,
                temperature=temperature,
                sample=call.call,
            )
            requests.append(("breadth", call, req, g.BREADTH_PROMPT_VERSION))
        if cat.tongue_twisters:
            req = LLMRequest(
                parts=(g.twister_prompt(cat, cat.tongue_twisters, spec.language),),
                schema=g.TwisterAnswer,
                temperature=temperature,
            )
            requests.append(("twister", cat, req, g.TWISTER_PROMPT_VERSION))
    results = cached_generate(store, llm, [r[2] for r in requests], stats)
    for (kind, plan, req, version), result in zip(requests, results):
        fields = _call_fields(llm, req, result, version)
        if kind == "breadth":
            rows += _breadth_items(spec, plan, result, fields)
        else:
            rows += _twister_items(spec, plan, result, fields)
    return rows


def _breadth_items(
    spec: GenerationSpec, call: g.BreadthCall, result: LLMResult, fields: dict[str, Any]
) -> list[dict[str, Any]]:
    first = f"{call.category}-b{call.call}-0"
    if not result.ok:
        return [
            _failed(
                _base(spec, call.category, first, 0, first, method="breadth", **fields),
                result.failure or "failed",
                f"breadth call {call.call}: {result.error}",
            )
        ]
    rows = []
    items = result.data.items[: call.count]
    # Items asked for but not given are rows too, so a short answer is seen, not silently absorbed.
    rows += [
        _failed(
            _base(
                spec,
                call.category,
                f"{call.category}-b{call.call}-{j}",
                0,
                f"{call.category}-b{call.call}-{j}",
                method="breadth",
                **fields,
            ),
            "unparseable",
            f"breadth call {call.call}: the answer held {len(items)} of {call.count} items",
        )
        for j in range(len(items), call.count)
    ]
    if not items:
        return rows
    # Tokens and cost belong to the call; they are split evenly over the items it produced.
    share = {
        k: (fields[k] / len(items) if fields[k] is not None else None)
        for k in ("input_tokens", "output_tokens", "cost_usd")
    }
    for j, item in enumerate(items):
        rid = f"{call.category}-b{call.call}-{j}"
        sub = call.subcategories[j] if j < len(call.subcategories) else item.subcategory
        rows.append(
            _base(
                spec,
                call.category,
                rid,
                0,
                rid,
                text=item.text.strip(),
                subcategory=sub,
                diversity_aspect=item.diversity_aspect or call.lead,
                method="breadth",
                **{
                    **fields,
                    "input_tokens": _int(share["input_tokens"]),
                    "output_tokens": _int(share["output_tokens"]),
                    "cost_usd": share["cost_usd"],
                },
            )
        )
    return rows


def _int(v: float | None) -> int | None:
    return None if v is None else round(v)


def _twister_items(
    spec: GenerationSpec, cat: CategorySpec, result: LLMResult, fields: dict[str, Any]
) -> list[dict[str, Any]]:
    first = f"{cat.name}-tt0"
    if not result.ok:
        return [
            _failed(
                _base(spec, cat.name, first, 0, first, method="tongue-twister", **fields),
                result.failure or "failed",
                f"tongue-twister call: {result.error}",
            )
        ]
    given = result.data.tongue_twisters[: cat.tongue_twisters]
    return [
        _base(
            spec,
            cat.name,
            f"{cat.name}-tt{j}",
            0,
            f"{cat.name}-tt{j}",
            method="tongue-twister",
            subcategory="tongue twisters",
            text=g.repeat_twister(t, cat.tongue_twister_repeats),
            diversity_aspect=f"tongue twister repeated {cat.tongue_twister_repeats} times",
            **fields,
        )
        for j, t in enumerate(given)
    ] + [
        _failed(
            _base(spec, cat.name, f"{cat.name}-tt{j}", 0, f"{cat.name}-tt{j}", method="tongue-twister", **fields),
            "unparseable",
            f"tongue-twister call: the answer held {len(given)} of {cat.tongue_twisters}",
        )
        for j in range(len(given), cat.tongue_twisters)
    ]


# -- depth refinement -------------------------------------------------------------------------------------------
def refine_rows(
    spec: GenerationSpec,
    parents: list[dict[str, Any]],
    depth: int,
    llm: LLM,
    repair_llm: LLM,
    store: ArtifactStore,
    *,
    temperature: float,
    seed: int,
    stats: CallStats,
) -> list[dict[str, Any]]:
    """Rows at `depth`, one per parent at depth-1 (tongue twisters are not refined)."""
    rows: list[dict[str, Any]] = []
    todo: list[tuple[dict[str, Any], str, LLMRequest]] = []
    for p in parents:
        if p["method"] == "tongue-twister":
            continue
        cat = spec.categories[p["category"]]
        child = _base(
            spec,
            p["category"],
            f"{p['root_id']}-d{depth}",
            depth,
            p["root_id"],
            parent_id=p["item_id"],
            seed_id=p.get("seed_id"),
            subcategory=p.get("subcategory"),
        )
        if p["status"] != "ok":
            rows.append(
                _failed(
                    {**child, "method": "refine"},
                    "parent_failed",
                    f"not refined: its parent {p['item_id']} failed ({p.get('error_type')})",
                )
            )
            continue
        method = g.pick_method(cat, p["root_id"], depth, seed)
        req = LLMRequest(
            parts=(g.refine_prompt(cat, p["text"], method, depth),), schema=g.RefineAnswer, temperature=temperature
        )
        todo.append(({**child, "method": f"refine: {method}"}, p["category"], req))
    results = cached_generate(store, llm, [t[2] for t in todo], stats)
    repairs: list[tuple[int, LLMRequest]] = []
    for (child, category, req), result in zip(todo, results):
        row = {**child, **_call_fields(llm, req, result, g.REFINE_PROMPT_VERSION)}
        if not result.ok:
            rows.append(_failed(row, result.failure or "failed", f"refinement: {result.error}"))
            continue
        row.update(text=result.data.text_to_synthesize.strip(), reasoning=result.data.tts_synthesis_diversity or None)
        rows.append(row)
        if spec.categories[category].grammar_repair:
            repairs.append(
                (
                    len(rows) - 1,
                    LLMRequest(parts=(row["text"],), schema=g.RepairAnswer, system=g.REPAIR_SYSTEM, temperature=0.0),
                )
            )
    fixed = cached_generate(store, repair_llm, [r[1] for r in repairs], stats)
    for (index, req), result in zip(repairs, fixed):
        row = rows[index]
        fields = _call_fields(repair_llm, req, result, g.REPAIR_PROMPT_VERSION)
        row.update(
            repaired=result.ok,
            text_before_repair=row["text"],
            prompt_version=f"{row['prompt_version']}+{g.REPAIR_PROMPT_VERSION}",
            prompt_hash=f"{row['prompt_hash']}+{fields['prompt_hash']}",
            input_tokens=_sum(row["input_tokens"], result.input_tokens),
            output_tokens=_sum(row["output_tokens"], result.output_tokens),
            cost_usd=_sum(row["cost_usd"], result.cost_usd),
        )
        if result.ok:
            row["text"] = result.data.text_to_synthesize.strip()
        else:
            rows[index] = _failed(row, result.failure or "failed", f"grammar repair: {result.error}")
    return rows


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


# -- screening: de-duplication and validation (Great Expectations) ---------------------------------------------
def screen(
    spec: GenerationSpec, new: list[dict[str, Any]], kept: list[dict[str, Any]], *, max_depth: int, threshold: float
) -> list[dict[str, Any]]:
    """Mark new ok rows that break a rule as failed: empty, out of length bounds, unknown category or depth, or a
    near-duplicate (rapidfuzz ratio >= threshold) of an earlier item of the category from another lineage."""
    candidates = [r for r in new if r["status"] == "ok"]
    if not candidates:
        return new
    dup: dict[str, str] = {}
    for category in {r["category"] for r in candidates}:
        prior = [r for r in kept if r["category"] == category and r["status"] == "ok"]
        fresh = [r for r in candidates if r["category"] == category]
        pool = prior + fresh
        found = g.near_duplicates(
            [r.get("text") or "" for r in pool], [r["root_id"] for r in pool], threshold=threshold
        )
        for r, hit in zip(pool[len(prior) :], found[len(prior) :]):
            if hit is not None:
                dup[r["item_id"]] = f"{pool[hit[0]]['item_id']} (similarity {hit[1]:.1f})"
        for r in fresh:  # a refinement that returns its parent unchanged is no refinement
            parent = next((p for p in prior if p["item_id"] == r.get("parent_id")), None)
            if parent is not None and g.dedupe_key(parent["text"]) == g.dedupe_key(r.get("text") or ""):
                dup[r["item_id"]] = f"{parent['item_id']} (its parent, unchanged)"
    frame = pd.DataFrame(
        {
            "row": range(1, len(candidates) + 1),
            "item_id": [r["item_id"] for r in candidates],
            "text": [r.get("text") or "" for r in candidates],
            "category": [r["category"] for r in candidates],
            "depth": [r["depth"] for r in candidates],
            "near_duplicate_of": [dup.get(r["item_id"]) for r in candidates],
        }
    )
    failures = row_failures(frame, screening_rules(spec, max_depth), suite_name="generated-items")
    by_id = {}
    for number, rules in failures.items():
        r = candidates[number - 1]
        is_dup = any(rule.name == DUPLICATE_RULE for rule in rules)
        reasons = "; ".join(
            f"near-duplicate of {dup[r['item_id']]}" if rule.name == DUPLICATE_RULE else f"rule '{rule.name}' fails"
            for rule in rules
        )
        by_id[r["item_id"]] = _failed(r, "duplicate" if is_dup else "validation", reasons)
    return [by_id.get(r["item_id"], r) for r in new]


def screening_rules(spec: GenerationSpec, max_depth: int) -> list[Rule]:
    rules = [
        Rule("text is non-empty", "text", "ExpectColumnValuesToMatchRegex", {"regex": r"\S"}),
        Rule(
            "category is in the category set",
            "category",
            "ExpectColumnValuesToBeInSet",
            {"value_set": sorted(spec.categories)},
        ),
        Rule(
            f"depth is between 0 and {max_depth}",
            "depth",
            "ExpectColumnValuesToBeBetween",
            {"min_value": 0, "max_value": max_depth},
        ),
        Rule(DUPLICATE_RULE, "near_duplicate_of", "ExpectColumnValuesToBeNull", {}),
    ]
    for name, cat in spec.categories.items():
        rules.append(
            Rule(
                f"{name} text has {cat.min_chars}-{cat.max_chars} characters",
                "text",
                "ExpectColumnValueLengthsToBeBetween",
                {
                    "min_value": cat.min_chars,
                    "max_value": cat.max_chars,
                    "row_condition": f'category=="{name}"',
                    "condition_parser": "pandas",
                },
            )
        )
    return rules


@task(name="expand-breadth", cache_policy=NO_CACHE)
def expand_breadth(
    settings: Settings,
    spec: GenerationSpec,
    seeds: list[Seed],
    llm_spec: str,
    per_category: int,
    batch: int,
    temperature: float,
    max_depth: int,
    threshold: float,
    stats: CallStats,
) -> list[dict[str, Any]]:
    llm = get_provider("llm", llm_spec, settings)
    rows = breadth_rows(
        spec,
        seeds,
        llm,
        get_store(settings.store, settings.store_wait_s),
        per_category=per_category,
        batch=batch,
        temperature=temperature,
        stats=stats,
    )
    return screen(spec, rows, [], max_depth=max_depth, threshold=threshold)


@task(name="refine-depth", cache_policy=NO_CACHE)
def refine_depth(
    settings: Settings,
    spec: GenerationSpec,
    rows: list[dict[str, Any]],
    depth: int,
    llm_spec: str,
    repair_spec: str,
    temperature: float,
    max_depth: int,
    threshold: float,
    stats: CallStats,
) -> list[dict[str, Any]]:
    parents = [r for r in rows if r["depth"] == depth - 1]
    new = refine_rows(
        spec,
        parents,
        depth,
        get_provider("llm", llm_spec, settings),
        get_provider("llm", repair_spec, settings),
        get_store(settings.store, settings.store_wait_s),
        temperature=temperature,
        seed=settings.seed,
        stats=stats,
    )
    return rows + screen(spec, new, rows, max_depth=max_depth, threshold=threshold)
