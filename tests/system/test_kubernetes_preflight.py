"""The Kubernetes preflight: with cluster = kubernetes, a command that starts its own temporary Prefect server (on
its loopback) and a store folder on this host is refused before anything is written, naming both fixes. The
manifests and cluster specs checked against Kubernetes' schemas are tests/unit/test_kubernetes.py."""

from __future__ import annotations

from pathlib import Path


def test_a_kubernetes_run_is_refused_before_anything_is_written_when_its_pods_could_not_report_or_store(
    prefect_api: str, tmp_path: Path
) -> None:
    """cluster = kubernetes with the command's own Prefect server (on its loopback) and a store folder on this host:
    the pods reach neither. Exit 2 naming both fixes, no traceback, no store made, no Kubernetes API asked (there is
    none here). A spec file that is not a DaskCluster is refused the same way."""
    from tests.support.harness import cli_env, demo_items, run_cli

    demo_items(tmp_path / "one.jsonl", ["emo-a-d0"])
    args = [
        "evaluate",
        "--dataset",
        "one.jsonl",
        "--systems",
        "espeak-ng:en-us",
        "--judges",
        "",
        "--store",
        str(tmp_path / "store"),
        "--run-id",
        "r",
    ]
    env = cli_env(
        prefect_api, TTSEVAL_CLUSTER="kubernetes", PREFECT_HOME=str(tmp_path / "ph"), TTSEVAL_PREFECT_SERVER_KEEP_S="0"
    )  # the server the command starts is not left running
    env.pop("PREFECT_API_URL")
    done = run_cli(args, env, cwd=tmp_path, timeout_s=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "cluster = 'kubernetes' cannot run this" in done.stderr
    assert "the pods' workers report to the Prefect API" in done.stderr
    assert "set PREFECT_API_URL=http://<its name or address>:4200/api" in done.stderr
    assert f"the store '{tmp_path / 'store'}' is a folder on this host" in done.stderr
    assert not (tmp_path / "store").exists()
    (tmp_path / "spec.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", encoding="utf-8")
    spec = run_cli(
        args,
        cli_env(prefect_api, TTSEVAL_CLUSTER="kubernetes", TTSEVAL_KUBERNETES__SPEC=str(tmp_path / "spec.yaml")),
        cwd=tmp_path,
        timeout_s=300,
    )
    assert spec.returncode == 2, spec.stderr[-3000:]
    assert "must hold one DaskCluster and any DaskWorkerGroups, nothing else (found: ConfigMap)" in spec.stderr
    assert "Traceback" not in spec.stderr and not (tmp_path / "store").exists()
