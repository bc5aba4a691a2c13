"""The evaluate/adhoc run form lists what the store holds: datasets (NAME@VERSION) and pushed systems (pushed:LABEL).

    python -m ttseval.deployments.choices --store s3://bucket/prefix [--api-url http://127.0.0.1:4200/api]

Prefect builds a deployment's run form from its parameter schema (generated from the flow's signature at
`prefect deploy`). This rewrites the adhoc deployment's schema in place on the server: the `dataset` and
`systems` parameters' descriptions end with the store's current choices, and `examples` carries them, so the
person filling the form sees them. `ttseval datasets push` and `ttseval systems push` call it when
PREFECT_API_URL is set, and so does `register(..., store=...)` after a deploy. A value that is not registered is
refused by the flow's preflight before any work (ttseval.flows.preflight), its message listing the same choices.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from collections.abc import Collection
from typing import Any, TypedDict

DEPLOYMENT = "evaluate/adhoc"
MARK = "\n\nIn the store "  # where the generated part of a description begins


class ChoicesError(RuntimeError):
    """The server could not be read or updated; the message says which and why."""


def registered(store_uri: str) -> tuple[list[str], list[str]]:
    """(every NAME@VERSION in the store's catalog, every pushed system as pushed:LABEL)."""
    from ttseval.core.store import ArtifactStore
    from ttseval.corpus import catalog
    from ttseval.providers.tts import pushed

    store = ArtifactStore(store_uri)
    return catalog.refs(store), [f"pushed:{label}" for label in pushed.labels(store)]


def with_choices(schema: dict[str, Any], store_display: str, datasets: list[str], systems: list[str]) -> dict[str, Any]:
    """A copy of the evaluate flow's parameter schema whose dataset and systems parameters list the choices."""
    out = copy.deepcopy(schema)
    props = out.setdefault("properties", {})
    for name, choices, what, push in (
        (
            "dataset",
            datasets,
            "registered datasets (NAME@VERSION; a path on the worker still works)",
            "ttseval datasets push",
        ),
        (
            "systems",
            systems,
            "pushed systems (add any of them to the list, beside other provider specs)",
            "ttseval systems push",
        ),
    ):
        prop = props.setdefault(name, {})
        base = str(prop.get("description", "")).split(MARK, 1)[0]
        listed = ", ".join(choices) if choices else f"none yet ({push})"
        prop["description"] = f"{base}{MARK}{store_display}, {what}: {listed}".lstrip()
        prop["examples"] = list(choices)
    return out


# A busy server answers 503 (its database locked under load, as a test suite's shared server was once) or drops the
# connection; Prefect's own client retries such answers, and so does this: urllib3's Retry, with its backoff and the
# server's Retry-After. PATCH is retried too: it writes the whole schema, so a second one changes nothing.
class RetryOptions(TypedDict):
    """The arguments of urllib3's Retry that RETRY sets."""

    total: int
    connect: int
    read: int
    status: int
    backoff_factor: float
    status_forcelist: Collection[int]
    allowed_methods: Collection[str] | None  # None: every method
    respect_retry_after_header: bool
    raise_on_status: bool


RETRY: RetryOptions = {
    "total": 5,
    "connect": 2,
    "read": 2,
    "status": 5,
    "backoff_factor": 0.5,
    "status_forcelist": (429, 502, 503, 504),
    "allowed_methods": None,
    "respect_retry_after_header": True,
    "raise_on_status": False,
}


def _call(api_url: str, path: str, body: Any = None, method: str = "GET") -> Any:
    import urllib3

    data = None if body is None else json.dumps(body).encode()
    http = urllib3.PoolManager(retries=urllib3.util.Retry(**RETRY), timeout=urllib3.Timeout(total=30))
    try:
        r = http.request(method, api_url.rstrip("/") + path, body=data, headers={"Content-Type": "application/json"})
    except urllib3.exceptions.HTTPError as e:  # connection refused, reset or timed out, after the retries
        raise ChoicesError(f"{method} {path}: the Prefect server at {api_url} cannot be reached ({e})") from e
    finally:
        http.clear()
    if r.status >= 400:
        tries = len(r.retries.history) + 1 if r.retries else 1
        raise ChoicesError(
            f"{method} {path} on {api_url}: HTTP {r.status} {r.data[:300]!r}"
            + (f" (after {tries} tries)" if tries > 1 else "")
        )
    return json.loads(r.data) if r.data else None


def refresh_adhoc_form(api_url: str, store_uri: str, deployment: str = DEPLOYMENT) -> tuple[list[str], list[str]]:
    """Write the store's choices into `deployment`'s parameter schema on the server; returns them. Raises
    ChoicesError when the server cannot be reached or holds no such deployment (`ttseval stack up --deploy`)."""
    from ttseval.core.store import ArtifactStore

    datasets, systems = registered(store_uri)
    found = _call(api_url, f"/deployments/name/{deployment}")
    schema = with_choices(
        found.get("parameter_openapi_schema") or {}, ArtifactStore(store_uri).display(), datasets, systems
    )
    _call(api_url, f"/deployments/{found['id']}", {"parameter_openapi_schema": schema}, method="PATCH")
    return datasets, systems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ttseval.deployments.choices", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--api-url", default=os.environ.get("PREFECT_API_URL"), required=not os.environ.get("PREFECT_API_URL")
    )
    parser.add_argument(
        "--store", default=os.environ.get("TTSEVAL_STORE"), required=not os.environ.get("TTSEVAL_STORE")
    )
    parser.add_argument("--deployment", default=DEPLOYMENT)
    args = parser.parse_args(argv)
    try:
        datasets, systems = refresh_adhoc_form(args.api_url, args.store, args.deployment)
    except ChoicesError as e:
        print(f"choices: {e}", file=sys.stderr)
        return 1
    print(f"{args.deployment}: datasets {', '.join(datasets) or 'none'}; systems {', '.join(systems) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
