"""The Kubernetes side, checked against the schemas a cluster would check it with. No Kubernetes
cluster runs here, so none of this was applied to one: the manifests in infra/k8s and the DaskCluster and
DaskWorkerGroup that `cluster = "kubernetes"` makes are validated, strictly (an unknown field is an error, as
`kubectl apply --validate=strict` makes it), against

- Kubernetes' own OpenAPI schemas (kubernetes-validate, the newest Kubernetes version it ships) for the built-in
  kinds (Namespace, ConfigMap, Secret, Deployment), and
- the dask-kubernetes operator's CustomResourceDefinitions (the openAPIV3Schema of daskclusters and
  daskworkergroups, from the installed dask-kubernetes, the version the cluster's operator must run), which
  carry the full Pod spec schema, with jsonschema.

Each validator is shown to fail on a broken manifest, so a pass means something. The refusal of a Kubernetes run
whose pods could not report or store is tests/system/test_kubernetes_preflight.py.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support.harness import ROOT
from ttseval.core.config import Settings
from ttseval.core.errors import ConfigError
from ttseval.flows.runner import kubernetes_specs, runner_kwargs

K8S = ROOT / "infra" / "k8s"
CUSTOM_KINDS = ("DaskCluster", "DaskWorkerGroup")


def crd_schema(kind: str) -> dict[str, Any]:
    """The operator's CRD schema of `kind`, strict: an object schema that lists its properties allows no others
    (the API server prunes unknown fields, and strict field validation refuses them)."""
    import dask_kubernetes

    folder = Path(dask_kubernetes.__file__).parent / "operator" / "deployment" / "helm" / "dask-kubernetes-operator"
    crd = yaml.safe_load((folder / "crds" / f"{kind.lower()}.yaml").read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = _strict(version["schema"]["openAPIV3Schema"])
    # a CRD's schema lists spec and status; the API server adds the fields every object has
    schema["properties"].update(
        {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}}
    )
    return schema


def _strict(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    return out


def check(document: dict[str, Any]) -> None:
    """Validate one manifest by its kind; raises on the first violation."""
    kind = document["kind"]
    if kind in CUSTOM_KINDS:
        assert document["apiVersion"] == "kubernetes.dask.org/v1"
        pruned = _drop_nulls(document)  # the API server drops nulls of non-nullable fields before validating
        jsonschema.validate(pruned, crd_schema(kind), cls=jsonschema.Draft7Validator)
    else:
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(), strict=True)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name in ("kustomization.yaml", "prefect-worker-values.yaml"):  # kustomize's and Helm's, not objects
            continue
        out += [
            (f"{path.name}: {d['kind']} {d['metadata']['name']}", d) for d in yaml.safe_load_all(path.read_text()) if d
        ]
    return out


@pytest.mark.parametrize("name, document", manifests(), ids=[n for n, _ in manifests()])
def test_every_manifest_in_infra_k8s_is_valid_for_kubernetes_and_the_dask_operator(name: str, document: dict) -> None:
    check(document)


def test_the_manifests_cover_every_kind_the_deployment_needs() -> None:
    kinds = sorted({d["kind"] for _, d in manifests()})
    assert kinds == ["ConfigMap", "DaskCluster", "DaskWorkerGroup", "Deployment", "Namespace", "Secret"]


def test_the_cluster_made_from_the_settings_is_valid_with_cpu_and_gpu_worker_groups() -> None:
    settings = Settings(
        cluster="kubernetes",
        gpu=True,
        kubernetes={
            "name": "nightly",
            "image": "registry.example/ttseval-cpu:0.1.0",
            "workers": 4,
            "worker_cpu": "2",
            "worker_memory": "6Gi",
            "gpu_workers": 2,
            "gpu_image": "registry.example/ttseval-cuda:0.1.0",
        },
    )
    cluster, groups = kubernetes_specs(settings)
    check(cluster)
    assert [g["metadata"]["name"] for g in groups] == ["nightly-gpu"]
    check(groups[0])
    worker = cluster["spec"]["worker"]
    [container] = worker["spec"]["containers"]
    assert worker["replicas"] == 4 and container["image"] == "registry.example/ttseval-cpu:0.1.0"
    assert container["args"][:6] == ["dask", "worker", "--nthreads", "1", "--resources", "CPU=1"]
    assert container["resources"] == {"requests": {"cpu": "2", "memory": "6Gi"}, "limits": {"memory": "6Gi"}}
    assert {"name": "TTSEVAL_MODEL_THREADS", "value": "2"} in container["env"]
    assert container["envFrom"] == [{"configMapRef": {"name": "ttseval-config"}}, {"secretRef": {"name": "ttseval-s3"}}]
    gpu = groups[0]["spec"]["worker"]
    [gpu_container] = gpu["spec"]["containers"]
    assert gpu["replicas"] == 2 and gpu_container["image"] == "registry.example/ttseval-cuda:0.1.0"
    assert gpu_container["resources"]["limits"]["nvidia.com/gpu"] == "1" and "GPU=1" in gpu_container["args"]
    kwargs = runner_kwargs(settings)
    assert kwargs["cluster_class"].__name__ == "kube_cluster" and kwargs["cluster_kwargs"]["cluster"] == cluster
    with pytest.raises(ConfigError, match="set kubernetes.gpu_workers"):
        kubernetes_specs(
            settings.model_copy(update={"kubernetes": settings.kubernetes.model_copy(update={"gpu_workers": 0})})
        )


def test_a_spec_file_is_taken_as_it_is_and_must_hold_one_dask_cluster(tmp_path: Path) -> None:
    cluster, groups = kubernetes_specs(
        Settings(cluster="kubernetes", kubernetes={"spec": str(K8S / "dask-cluster.yaml")})
    )
    assert cluster["metadata"]["name"] == "ttseval" and [g["metadata"]["name"] for g in groups] == ["ttseval-gpu"]
    (tmp_path / "two.yaml").write_text(yaml.safe_dump_all([cluster, cluster]))
    with pytest.raises(ConfigError, match="must hold one DaskCluster"):
        kubernetes_specs(Settings(cluster="kubernetes", kubernetes={"spec": str(tmp_path / "two.yaml")}))


def test_the_validators_refuse_broken_manifests() -> None:
    """A misspelt field, a wrong type and a missing required field, in a custom and in a built-in kind."""
    cluster, _ = kubernetes_specs(Settings(cluster="kubernetes"))
    misspelt = copy.deepcopy(cluster)
    misspelt["spec"]["worker"]["replica"] = misspelt["spec"]["worker"].pop("replicas")
    wrong = copy.deepcopy(cluster)
    wrong["spec"]["worker"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "eighty"
    no_image_name = copy.deepcopy(cluster)
    del no_image_name["spec"]["scheduler"]["spec"]["containers"][0]["name"]
    for broken in (misspelt, wrong, no_image_name):
        with pytest.raises(jsonschema.ValidationError):
            check(broken)
    deployment = next(d for _, d in manifests() if d["kind"] == "Deployment")
    typo = copy.deepcopy(deployment)
    typo["spec"]["replica"] = typo["spec"].pop("replicas", 1)
    with pytest.raises(kubernetes_validate.ValidationError):
        check(typo)
