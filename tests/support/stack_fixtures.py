"""Fixtures and helpers shared by tests/system/test_stack.py and tests/system/test_ui.py: a whole local stack per test
module.

tests/conftest.py registers this module as a pytest plugin (`pytest_plugins`), so a test asks for the fixtures
by name; the helpers are imported as usual. The fixtures are module-scoped, so each module gets its own stack in its
own tmp folder (about 30 s to start) and stops it at the end. Nothing here downloads anything; everything listens on
127.0.0.1 only.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import ROOT, a_zone_where_2am_is_hours_away
from ttseval.infra.stack import StackInfo, stack_down, stack_up

ENGLISH_ITEMS = ("emo-a-d0", "que-a-d0", "pro-a-d0")  # spoken by both espeak-ng and flite
SYSTEMS = ["espeak-ng", "flite:slt"]
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackInfo]:
    folder = tmp_path_factory.mktemp("stack")
    # the operator lets runs from the UI read the tests' files (seeds, datasets) under the session's temporary root
    with pytest.MonkeyPatch.context() as limits:
        limits.setenv("TTSEVAL_ALLOWED_PATHS", json.dumps([str(tmp_path_factory.getbasetemp())]))
        info = stack_up(folder)  # stops what it started and raises StackError (with the log tail) on failure
    try:
        yield info
    finally:
        stack_down(folder)


@pytest.fixture(scope="module")
def nightly_zone() -> str:
    """The time zone the module registers the nightly schedule in: its 02:00 is 11-12 hours away, so the stack's
    worker never starts a scheduled night mid-module (tests.support.harness.a_zone_where_2am_is_hours_away)."""
    return a_zone_where_2am_is_hours_away()


@pytest.fixture(scope="module")
def deployed(stack: StackInfo, nightly_zone: str) -> list[str]:
    from ttseval.deployments.register import register

    return register(stack.api_url, stack.pool, ROOT, timezone=nightly_zone)


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three English demo items (an absolute path: the flow runs in the worker's working directory)."""
    from ttseval.corpus import DEMO_DATASET

    rows = [json.loads(line) for line in DEMO_DATASET.read_text(encoding="utf-8").splitlines() if line.strip()]
    path = tmp_path_factory.mktemp("stack-data") / "tiny.jsonl"
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows if r["item_id"] in ENGLISH_ITEMS),
        encoding="utf-8",
    )
    return path


def new_run_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def api(stack: StackInfo, path: str, body: Any = None, method: str | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        stack.api_url + path,
        data=data,
        method=method or ("POST" if data else "GET"),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


def run_deployment_and_wait(
    stack: StackInfo,
    name: str,
    parameters: dict[str, Any],
    timeout_s: float = RUN_TIMEOUT_S,
    job_variables: dict[str, Any] | None = None,
) -> Any:
    """Trigger deployment `name` ('flow/deployment') on the stack's server (with a custom run's `job_variables`)
    and wait for a final state."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: stack.api_url}):
        flow_run = run_deployment(
            name, parameters=parameters, timeout=timeout_s, poll_interval=2, job_variables=job_variables
        )
    return flow_run


def wait_flow_run(stack: StackInfo, flow_run_id: str, timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """Poll the API until the flow run is in a final state; returns it."""
    deadline = time.monotonic() + timeout_s
    while True:
        run = api(stack, f"/flow_runs/{flow_run_id}")
        if run["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            return run
        if time.monotonic() > deadline:
            return run
        time.sleep(2)


def flow_run_logs(stack: StackInfo, flow_run_id: str, limit: int = 60) -> str:
    logs = api(
        stack,
        "/logs/filter",
        {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "sort": "TIMESTAMP_DESC", "limit": limit},
    )
    return "\n".join(f"{entry['level']} {entry['message'][:500]}" for entry in reversed(logs))


def wait_flow_run_log(stack: StackInfo, flow_run_id: str, text: str, timeout_s: float = 60) -> str:
    """The flow run's logs once one contains `text`, or as they are at the deadline. A flow run's process sends
    its logs in batches and may reach a final state before its last batch arrives, so a test that reads the logs
    right after the final state can miss the flow's own last lines."""
    deadline = time.monotonic() + timeout_s
    while True:
        logs = flow_run_logs(stack, flow_run_id)
        if text in logs or time.monotonic() > deadline:
            return logs
        time.sleep(1)


def read_table(stack: StackInfo, run_id: str, table: str):
    """A table of the S3 store, read with pandas over pyarrow's S3 filesystem (no listing cache)."""
    return read_parquet(stack, f"runs/{run_id}/{table}")


def read_parquet(stack: StackInfo, rel_path: str):
    """A Parquet file or folder under the S3 store's root."""
    import pandas as pd
    import pyarrow.fs as pafs

    aws = stack.aws_env()
    fs = pafs.S3FileSystem(
        access_key=aws["AWS_ACCESS_KEY_ID"],
        secret_key=aws["AWS_SECRET_ACCESS_KEY"],
        endpoint_override=stack.s3_endpoint.removeprefix("http://"),
        scheme="http",
        region=aws["AWS_REGION"],
    )
    return pd.read_parquet(f"{stack.store_uri.removeprefix('s3://')}/{rel_path}", filesystem=fs)


def _s3(stack: StackInfo) -> Any:
    import boto3

    aws = stack.aws_env()
    return boto3.client(
        "s3",
        endpoint_url=stack.s3_endpoint,
        aws_access_key_id=aws["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=aws["AWS_SECRET_ACCESS_KEY"],
        region_name=aws["AWS_REGION"],
    )


def s3_keys(stack: StackInfo, prefix: str) -> list[str]:
    bucket, _, root = stack.store_uri[len("s3://") :].partition("/")
    keys: list[str] = []
    pages = _s3(stack).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{root}/{prefix}".lstrip("/"))
    for page in pages:
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def read_bytes(stack: StackInfo, rel_path: str) -> bytes:
    """A file of the S3 store, by its path under the store's root."""
    bucket, _, root = stack.store_uri[len("s3://") :].partition("/")
    body: bytes = _s3(stack).get_object(Bucket=bucket, Key=f"{root}/{rel_path}".lstrip("/"))["Body"].read()
    return body


def report_artifact(stack: StackInfo, run_id: str) -> dict[str, Any] | None:
    key = f"ttseval-report-{run_id}"
    found = api(stack, "/artifacts/filter", {"artifacts": {"key": {"any_": [key]}}})
    return found[0] if found else None
