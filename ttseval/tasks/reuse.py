"""Model answers reused across runs: the store's request cache in front of a model, and work grouped by model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ttseval.core.store import ArtifactStore
from ttseval.tasks.failures import one_per_request


def reused_or_computed(
    store: ArtifactStore,
    namespace: str,
    keys: list[str],
    compute: Callable[[list[int]], list[dict[str, Any]]],
    *,
    reuse: bool,
) -> tuple[list[dict[str, Any]], list[bool]]:
    """One JSON-able answer per key, in order, and whether each came from the store's request cache: the keys
    answered by an earlier run (any run of this store) are read back; `compute(missing positions)` answers the
    rest, in order, and its answers are kept for later runs. With `reuse` False nothing is read (all computed)
    but the answers are still kept. A recogniser's transcript and a predictor's scores are cached this way,
    keyed by what they depend on (the clip's SHA-256, the model's output id, its version, the language hint),
    as synthesis caches audio."""
    from ttseval.core.cache import RequestCache

    cache = RequestCache(store, namespace)
    cached = [cache.get(k) if reuse else None for k in keys]
    missing = [i for i, a in enumerate(cached) if a is None]
    computed = dict(zip(missing, one_per_request(compute(missing), missing, namespace))) if missing else {}
    for i, answer in computed.items():
        cache.put(keys[i], answer)
    answers = [computed[i] if a is None else a for i, a in enumerate(cached)]
    return answers, [a is not None for a in cached]


def by_model(
    work: list[dict[str, Any]], models_of: Callable[[dict[str, Any]], list[str]]
) -> dict[str, list[dict[str, Any]]]:
    """Work items grouped by the model spec (canonical) that must process them: the one the planner named
    (`model_spec`, a backlog item), else every model `models_of(item)` lists (a clip just synthesized)."""
    from ttseval.core.registry import Spec

    groups: dict[str, list[dict[str, Any]]] = {}
    for w in work:
        for spec in [w["model_spec"]] if w.get("model_spec") else models_of(w):
            groups.setdefault(Spec.parse(spec).canonical, []).append(w)
    return groups
