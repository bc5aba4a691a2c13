"""The deployment files in infra/, checked without Docker or a cluster.

The Compose file, the Kubernetes manifests, the Helm values and the Dockerfiles are parsed and checked for
what the code relies on: service and resource names, the Dask resources GPU=1 / CPU=1, the settings every
ttseval process reads (PREFECT_API_URL, TTSEVAL_DASK_ADDRESS, TTSEVAL_STORE, AWS_*), references between
objects (depends_on, envFrom, the scheduler Service), and that every file a Dockerfile copies exists.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.harness import ROOT

INFRA = ROOT / "infra"
COMPOSE_FILE = INFRA / "docker-compose.yml"
K8S = INFRA / "k8s"
HELM_VALUES = K8S / "prefect-worker-values.yaml"
DOCKERFILES = {"cpu": INFRA / "images" / "Dockerfile.cpu", "cuda": INFRA / "images" / "Dockerfile.cuda"}

EXPECTED_SERVICES = {
    "postgres",
    "prefect-server",
    "minio",
    "minio-init",
    "dask-scheduler",
    "dask-worker-cpu",
    "dask-worker-gpu",
    "prefect-worker",
}
TTSEVAL_ENV = {
    "PREFECT_API_URL",
    "TTSEVAL_DASK_ADDRESS",
    "TTSEVAL_STORE",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "PREFECT_API_AUTH_STRING",
}
REQUIRED = re.compile(r"^\$\{([A-Z0-9_]+):\?[^}]+\}$")
"""A Compose variable that must be set (no default): `${VAR:?what to do}`."""


# ----------------------------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def env_of(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a dict, from either Compose form (mapping or list of NAME=value)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def command_of(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def depends_on(service: dict[str, Any]) -> list[str]:
    deps = service.get("depends_on") or []
    return list(deps) if isinstance(deps, (list, dict)) else []


def option(args: list[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in an argument list."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def k8s_documents() -> list[tuple[str, dict[str, Any]]]:
    """(file name, object) for every Kubernetes object under infra/k8s (not the Helm values)."""
    docs = []
    for path in sorted(K8S.glob("*.y*ml")):
        if path == HELM_VALUES:
            continue
        docs += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def containers_in(obj: Any) -> Iterator[dict[str, Any]]:
    """Every container (and init container) spec anywhere in an object, custom resources included."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from value
            else:
                yield from containers_in(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from containers_in(value)


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with comments dropped and continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def copy_sources(path: Path) -> list[str]:
    """The build-context paths a Dockerfile COPYs (copies from other stages excluded)."""
    sources = []
    for keyword, args in dockerfile_instructions(path):
        if keyword not in ("COPY", "ADD"):
            continue
        words = shlex.split(args)
        if any(w.startswith("--from=") for w in words):
            continue
        words = [w for w in words if not w.startswith("--")]
        sources += words[:-1]
    return sources


# ------------------------------------------------------------------------------------------ compose


def test_compose_has_every_service_the_stack_needs(services: dict[str, Any]) -> None:
    missing = EXPECTED_SERVICES - set(services)
    assert not missing, f"docker-compose.yml lacks services {sorted(missing)}"


def test_every_depends_on_names_an_existing_service(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for dep in depends_on(service):
            assert dep in services, f"service {name} depends on {dep!r}, which is not a service"
            assert dep != name


def test_every_build_points_at_an_existing_dockerfile(services: dict[str, Any]) -> None:
    built = 0
    for name, service in services.items():
        build = service.get("build")
        if build is None:
            continue
        build = {"context": build} if isinstance(build, str) else build
        context = (COMPOSE_FILE.parent / build["context"]).resolve()
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert context == ROOT, f"service {name}: the build context must be the repository root"
        assert dockerfile.is_file(), f"service {name} builds {dockerfile}, which does not exist"
        assert service.get("image"), f"service {name} builds an image but does not name it"
        built += 1
    assert built >= 4


def test_gpu_worker_is_opt_in_reserves_an_nvidia_gpu_and_declares_gpu_1(services: dict[str, Any]) -> None:
    gpu = services["dask-worker-gpu"]
    assert gpu.get("profiles") == ["gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in devices), devices
    cmd = command_of(gpu)
    assert cmd[:2] == ["dask", "worker"] and option(cmd, "--resources") == "GPU=1", cmd
    assert gpu["build"]["dockerfile"].endswith("Dockerfile.cuda")
    others = [n for n, s in services.items() if s.get("profiles") and n != "dask-worker-gpu"]
    assert not others, f"only the GPU worker should be behind a profile, not {others}"


def test_cpu_workers_declare_cpu_1_and_use_the_scheduler(services: dict[str, Any]) -> None:
    scheduler_cmd = command_of(services["dask-scheduler"])
    port = option(scheduler_cmd, "--port") or "8786"
    assert scheduler_cmd[:2] == ["dask", "scheduler"]
    workers = [n for n in services if n.startswith("dask-worker")]
    for name in workers:
        cmd = command_of(services[name])
        assert f"tcp://dask-scheduler:{port}" in cmd, f"{name} does not connect to the scheduler: {cmd}"
        assert option(cmd, "--nthreads") == "1"
        if name != "dask-worker-gpu":
            assert option(cmd, "--resources") == "CPU=1", f"{name} must declare its own resource CPU=1: {cmd}"
            assert "gpu" not in (services[name].get("profiles") or [])


def test_prefect_worker_points_at_the_stack(services: dict[str, Any]) -> None:
    worker = services["prefect-worker"]
    env = env_of(worker)
    assert set(env) >= TTSEVAL_ENV, f"prefect-worker lacks {sorted(TTSEVAL_ENV - set(env))}"
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert env["TTSEVAL_DASK_ADDRESS"] == "tcp://dask-scheduler:8786"
    assert "s3://ttseval/artifacts" in env["TTSEVAL_STORE"]
    assert "http://minio:9000" in env["AWS_ENDPOINT_URL"]
    cmd = command_of(worker)
    assert cmd[:3] == ["prefect", "worker", "start"]
    assert option(cmd, "--pool") == "ttseval-process" and option(cmd, "--type") == "process"
    assert {"prefect-server", "dask-scheduler", "minio-init"} <= set(depends_on(worker))


def test_dask_workers_can_reach_the_store(services: dict[str, Any]) -> None:
    # Tasks write their Parquet parts and audio from the workers, so they need the S3 endpoint and keys too.
    for name in ("dask-worker-cpu", "dask-worker-gpu"):
        assert set(env_of(services[name])) >= TTSEVAL_ENV, name


def test_scheduler_and_workers_share_one_image(services: dict[str, Any]) -> None:
    # A Dask client, scheduler and workers must run the same dask/distributed version.
    images = {services[n]["image"] for n in ("dask-scheduler", "dask-worker-cpu", "prefect-worker")}
    assert len(images) == 1, images


def test_prefect_server_uses_postgres_the_pinned_version_and_a_health_check(services: dict[str, Any]) -> None:
    server = services["prefect-server"]
    pinned = re.search(r"^prefect==(\S+)$", (ROOT / "constraints.txt").read_text(), re.MULTILINE)
    assert pinned, "constraints.txt no longer pins prefect"
    assert f"prefecthq/prefect:{pinned.group(1)}-python3.11" in server["image"]
    assert command_of(server)[:3] == ["prefect", "server", "start"]
    assert option(command_of(server), "--host") == "0.0.0.0"
    url = env_of(server)["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert url.startswith("postgresql+asyncpg://") and "@postgres:5432/" in url
    assert "/api/health" in " ".join(map(str, server["healthcheck"]["test"]))
    assert any("4200" in str(p) for p in server["ports"])
    assert services["postgres"]["image"].startswith("postgres:16")
    assert "postgres" in depends_on(server)


def test_minio_exposes_its_ports_and_minio_init_creates_the_bucket(services: dict[str, Any]) -> None:
    ports = " ".join(map(str, services["minio"]["ports"]))
    assert ":9000" in ports and ":9001" in ports
    init = services["minio-init"]
    script = " ".join(command_of(init) + [str(e) for e in init.get("entrypoint", [])])
    assert "mc alias set" in script and "mc mb" in script
    assert "minio" in depends_on(init)
    assert init.get("restart") in ("no", None)


def test_no_credential_is_hard_coded_or_defaulted(services: dict[str, Any]) -> None:
    secret_names = re.compile(r"PASSWORD|SECRET|ACCESS_KEY|ROOT_USER|AUTH_STRING")
    for name, service in services.items():
        for key, value in env_of(service).items():
            if secret_names.search(key):
                assert REQUIRED.match(value), f"{name}: {key} must be a required ${{VAR:?...}}, got {value!r}"
        url = env_of(service).get("PREFECT_API_DATABASE_CONNECTION_URL", "")
        if url:
            credentials = re.match(r"postgresql\+asyncpg://(\$\{[^}]+\}):(\$\{[^}]+\})@", url)
            assert credentials, f"{name}: the database user and password must come from variables: {url}"
            assert REQUIRED.match(credentials.group(2)), f"{name}: the database password has a default"


def test_the_api_asks_every_client_for_its_password_and_the_scheduler_stays_on_loopback(
    services: dict[str, Any],
) -> None:
    # the server requires the auth string every ttseval process sends; BIND_HOST shares the API, MinIO and the UI
    # but never the Dask scheduler, which runs code for any client that reaches it
    server = env_of(services["prefect-server"])["PREFECT_SERVER_API_AUTH_STRING"]
    for name in ("prefect-worker", "dask-worker-cpu", "dask-worker-gpu"):
        assert env_of(services[name])["PREFECT_API_AUTH_STRING"] == server, name
    assert [str(p).rsplit(":", 2)[0] for p in services["dask-scheduler"]["ports"]] == ["127.0.0.1", "127.0.0.1"]
    assert all(str(p).startswith("${BIND_HOST:-127.0.0.1}:") for p in services["minio"]["ports"])


def test_new_env_makes_every_required_variable_once_secret_and_random(tmp_path: Path) -> None:
    """infra/new-env.sh writes a value for each `${VAR:?...}` of the compose file, readable by its owner only,
    different each time it is made, and never overwrites a file the stack's volumes were made with."""
    required = set(re.findall(r"\$\{([A-Z0-9_]+):\?", COMPOSE_FILE.read_text()))
    assert required >= {"POSTGRES_PASSWORD", "MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "PREFECT_API_AUTH_STRING"}
    made = []
    for i in (1, 2):
        out = tmp_path / f"env{i}"
        run = subprocess.run([str(INFRA / "new-env.sh"), str(out)], capture_output=True, text=True, timeout=30)
        assert run.returncode == 0, run.stderr
        assert out.stat().st_mode & 0o077 == 0
        values = dict(line.split("=", 1) for line in out.read_text().splitlines() if line and line[0] != "#")
        assert set(values) == required and all(len(v) >= 16 for v in values.values()), values
        assert re.fullmatch(r"[A-Za-z0-9]{32}", values["POSTGRES_PASSWORD"])  # safe inside the database URL
        made.append(values)
    assert all(made[0][k] != made[1][k] for k in required)
    kept = (tmp_path / "env1").read_text()
    again = subprocess.run([str(INFRA / "new-env.sh"), str(tmp_path / "env1")], capture_output=True, text=True)
    assert again.returncode == 1 and "kept" in again.stderr and (tmp_path / "env1").read_text() == kept
    assert "/infra/.env" in (ROOT / ".gitignore").read_text().splitlines()


def test_named_volumes_are_declared(compose: dict[str, Any], services: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source", "")
            if source and not source.startswith((".", "/", "$")):
                assert source in declared, f"{name} mounts undeclared volume {source!r}"


# ----------------------------------------------------------------------------------------- kubernetes


def test_k8s_manifests_have_every_kind_with_its_api_version() -> None:
    kinds = {(d["kind"], d["apiVersion"]) for _, d in k8s_documents()}
    for expected in [
        ("Namespace", "v1"),
        ("Deployment", "apps/v1"),
        ("Secret", "v1"),
        ("ConfigMap", "v1"),
        ("DaskCluster", "kubernetes.dask.org/v1"),
        ("DaskWorkerGroup", "kubernetes.dask.org/v1"),
    ]:
        assert expected in kinds, f"no {expected[0]} ({expected[1]}) under infra/k8s"


def test_k8s_objects_are_named_and_in_the_ttseval_namespace() -> None:
    namespaces = {d["metadata"]["name"] for _, d in k8s_documents() if d["kind"] == "Namespace"}
    assert namespaces == {"ttseval"}
    for fname, doc in k8s_documents():
        if doc["kind"] in ("Namespace", "Kustomization"):
            continue
        assert doc["metadata"].get("name"), f"{fname}: {doc['kind']} without a name"
        assert doc["metadata"].get("namespace") == "ttseval", f"{fname}: {doc['kind']} outside namespace ttseval"


def test_every_container_has_an_image() -> None:
    found = 0
    for fname, doc in k8s_documents():
        for container in containers_in(doc):
            assert container.get("image"), f"{fname}: container {container.get('name')} has no image"
            assert container.get("name")
            found += 1
    assert found >= 4  # prefect worker, scheduler, CPU workers, GPU workers


def test_env_from_references_the_config_map_and_secret_that_exist() -> None:
    docs = [d for _, d in k8s_documents()]
    config_maps = {d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap"}
    secrets = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
    assert "ttseval-config" in config_maps and "ttseval-s3" in secrets
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    for doc in docs:
        for container in containers_in(doc):
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in config_maps
                if "secretRef" in source:
                    assert source["secretRef"]["name"] in secrets
    worker = next(containers_in(deployment))
    refs = {next(iter(s.values()))["name"] for s in worker["envFrom"]}
    assert refs == {"ttseval-config", "ttseval-s3"}
    assert option(worker["args"], "--pool") == "ttseval-process"


def test_config_map_carries_the_settings_and_the_secret_only_placeholders() -> None:
    docs = [d for _, d in k8s_documents()]
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    assert {"PREFECT_API_URL", "TTSEVAL_DASK_ADDRESS", "TTSEVAL_STORE", "AWS_ENDPOINT_URL"} <= set(config)
    assert config["TTSEVAL_STORE"].startswith("s3://")
    assert all(isinstance(v, str) for v in config.values()), "ConfigMap values must be strings"
    secret = next(d for d in docs if d["kind"] == "Secret")
    values = secret.get("stringData") or secret.get("data") or {}
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(values)
    assert all("REPLACE" in v for v in values.values()), "the Secret template must hold placeholders only"


def test_dask_cluster_cpu_workers_and_gpu_worker_group() -> None:
    docs = [d for _, d in k8s_documents()]
    cluster = next(d for d in docs if d["kind"] == "DaskCluster")
    spec = cluster["spec"]
    assert spec["scheduler"]["service"]["ports"] and spec["scheduler"]["spec"]["containers"]
    cpu_args = [str(a) for a in spec["worker"]["spec"]["containers"][0]["args"]]
    assert cpu_args[:2] == ["dask", "worker"] and option(cpu_args, "--resources") == "CPU=1"

    group = next(d for d in docs if d["kind"] == "DaskWorkerGroup")
    assert group["metadata"]["name"].endswith("gpu")
    assert group["spec"]["cluster"] == cluster["metadata"]["name"]
    container = group["spec"]["worker"]["spec"]["containers"][0]
    assert option([str(a) for a in container["args"]], "--resources") == "GPU=1"
    limits = container["resources"]["limits"]
    assert int(limits["nvidia.com/gpu"]) == 1
    assert "cuda" in container["image"]

    # The flows reach the scheduler through the Service the operator names <cluster>-scheduler.
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    assert config["TTSEVAL_DASK_ADDRESS"].startswith(f"tcp://{cluster['metadata']['name']}-scheduler.")
    assert config["TTSEVAL_DASK_ADDRESS"].endswith(":8786")


def test_kustomization_lists_existing_manifests_but_not_the_secret_template() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource
    assert "secret.example.yaml" not in kustomization["resources"]
    assert HELM_VALUES.name not in kustomization["resources"]


def test_prefect_worker_helm_values() -> None:
    values = yaml.safe_load(HELM_VALUES.read_text())["worker"]
    assert values["config"]["workPool"] == "ttseval-k8s"
    assert values["config"]["type"] == "kubernetes"
    assert values["apiConfig"] == "server" and values["serverApiConfig"]["apiUrl"].endswith("/api")
    template = json.loads(values["config"]["baseJobTemplate"]["configuration"])
    assert set(template) == {"job_configuration", "variables"}
    variables = template["variables"]["properties"]
    assert "ttseval-cpu" in variables["image"]["default"]
    assert variables["namespace"]["default"] == "ttseval"
    job = template["job_configuration"]["job_manifest"]
    assert job["kind"] == "Job"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == "prefect-job" and container["image"] == "{{ image }}"
    assert {next(iter(s.values()))["name"] for s in container["envFrom"]} == {"ttseval-config", "ttseval-s3"}


# ---------------------------------------------------------------------------------------- Dockerfiles


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_dockerfile_installs_engines_torch_and_the_pinned_project(flavour: str) -> None:
    path = DOCKERFILES[flavour]
    instructions = dockerfile_instructions(path)
    runs = [args for keyword, args in instructions if keyword == "RUN"]
    apt = next((r for r in runs if "apt-get install" in r), "")
    assert "espeak-ng" in apt.split() and "flite" in apt.split(), f"{path.name} must apt-get install espeak-ng flite"
    torch = next((r for r in runs if "torch==" in r), "")
    assert "--index-url" in torch, f"{path.name} must take torch from the PyTorch index"
    project = next((r for r in runs if "-c constraints.txt" in r), "")
    assert '".[all]"' in project or "'.[all]'" in project or " .[all]" in project, project
    assert runs.index(torch) < runs.index(project), "torch goes in before the project, as in setup.sh"
    assert ("WORKDIR", "/opt/ttseval") in instructions
    user = [args for keyword, args in instructions if keyword == "USER"]
    assert user and user[-1].split(":")[0] not in ("0", "root"), f"{path.name} must end as a non-root user"


def test_dockerfile_bases() -> None:
    assert ("FROM", "python:3.11-slim-bookworm") in dockerfile_instructions(DOCKERFILES["cpu"])
    cuda_text = DOCKERFILES["cuda"].read_text()
    assert re.search(r"nvidia/cuda:[\w.-]*runtime", cuda_text)
    assert "download.pytorch.org/whl/cu" in cuda_text
    assert "download.pytorch.org/whl/cpu" in DOCKERFILES["cpu"].read_text()


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_dockerfile_torch_matches_setup_script(flavour: str) -> None:
    setup = re.search(r'TORCH_SPEC="\$\{TORCH_SPEC:-torch==([^}]+)\}"', (ROOT / "scripts" / "setup.sh").read_text())
    assert setup, "scripts/setup.sh no longer sets a default TORCH_SPEC"
    assert f"ARG TORCH_VERSION={setup.group(1)}" in DOCKERFILES[flavour].read_text()


@pytest.mark.parametrize("flavour", sorted(DOCKERFILES))
def test_every_copied_file_exists_and_passes_the_dockerignore(flavour: str) -> None:
    path = DOCKERFILES[flavour]
    sources = copy_sources(path)
    assert {"pyproject.toml", "constraints.txt", "ttseval/"} <= set(sources)
    ignore = path.with_name(path.name + ".dockerignore")
    allowed = {line[1:].rstrip("/") for line in ignore.read_text().splitlines() if line.startswith("!")}
    for source in sources:
        assert (ROOT / source).exists(), f"{path.name} copies {source}, which is not in the repository"
        assert source.rstrip("/") in allowed, f"{ignore.name} keeps {source} out of the build context"


def test_the_images_hold_every_package_setuptools_installs() -> None:
    # pyproject finds the packages under ttseval/ (ttseval*): the image must copy that folder whole, or the install
    # drops code; a link at the root (flows/, tasks/, ...) would copy nothing of its own.
    import tomllib

    sources = {s.rstrip("/") for s in copy_sources(DOCKERFILES["cpu"])}
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert found == {"include": ["ttseval*"]}
    assert "ttseval" in sources and not any((ROOT / s).is_symlink() for s in sources)
    assert copy_sources(DOCKERFILES["cpu"]) == copy_sources(DOCKERFILES["cuda"])


def test_a_cluster_that_is_slow_to_stop_fails_nothing_unless_the_run_failed(monkeypatch, caplog) -> None:
    import logging

    from prefect_dask import DaskTaskRunner

    from ttseval.flows.runner import SettingsDaskTaskRunner

    def slow_close(self, *exc_info):
        raise TimeoutError

    monkeypatch.setattr(DaskTaskRunner, "__exit__", slow_close)
    runner = SettingsDaskTaskRunner().__enter__()
    assert runner.started_cluster is False
    runner.__exit__(None, None, None)  # no task was submitted: no Dask runner was made, nothing to close
    runner = SettingsDaskTaskRunner().__enter__()
    runner.dask_runner()  # what the first submitted task does (its client, and the cluster, start later still)
    with caplog.at_level(logging.WARNING, logger="ttseval"):
        runner.__exit__(None, None, None)  # the run succeeded: a warning, not a failure
    [record] = [r for r in caplog.records if r.name == "ttseval"]
    assert record.levelno == logging.WARNING and "took too long to stop" in record.getMessage()
    assert "results are stored" in record.getMessage()
    caplog.clear()
    runner = SettingsDaskTaskRunner().__enter__()
    runner.dask_runner()
    with caplog.at_level(logging.WARNING, logger="ttseval"), pytest.raises(TimeoutError):
        runner.__exit__(ValueError, ValueError("the run failed"), None)
    assert [r for r in caplog.records if r.name == "ttseval"] == []  # the run's own failure, no reassurance


def test_container_images_and_manifests_set_the_telemetry_and_allocator_the_core_declares() -> None:
    # The images, the compose file and the Kubernetes config cannot import ttseval.core.telemetry or
    # ttseval.core.memory; they restate their variables, held here to the one declaration.
    import yaml

    from ttseval.core.memory import ARROW_ALLOCATOR
    from ttseval.core.telemetry import TELEMETRY_OFF
    from ttseval.infra.dask_defaults import dask_env

    infra = ROOT / "infra"
    for dockerfile in ("images/Dockerfile.cpu", "images/Dockerfile.cuda"):
        text = (infra / dockerfile).read_text()
        assert all(f"{name}={value}" in text for name, value in TELEMETRY_OFF.items()), dockerfile
        # and Arrow's allocator that gives freed pages back (ttseval.core.memory)
        assert all(f"{name}={value}" in text for name, value in ARROW_ALLOCATOR.items()), dockerfile
        # and Dask's housekeeping at ttseval's pace in every scheduler and worker container
        # (ttseval.infra.dask_defaults)
        assert all(f"{name}={value}" in text for name, value in dask_env({}).items()), dockerfile
    compose = yaml.safe_load((infra / "docker-compose.yml").read_text())
    anchors = [v for k, v in compose.items() if k.startswith("x-") and isinstance(v, dict)]
    declared = TELEMETRY_OFF | ARROW_ALLOCATOR
    assert any(declared.items() <= {str(k): str(v) for k, v in a.items()}.items() for a in anchors), anchors
    config = next(
        d for d in yaml.safe_load_all((infra / "k8s" / "config.yaml").read_text()) if d and d.get("kind") == "ConfigMap"
    )
    assert declared.items() <= config["data"].items()


def test_a_deploy_that_times_out_says_what_prefect_printed_as_text(monkeypatch, tmp_path: Path) -> None:
    # subprocess.run's TimeoutExpired carries the output as bytes even with text=True: the error must show it as
    # the text prefect printed, not b'...'. A real process stands in for `prefect deploy`: it prints, then hangs.
    import ttseval.deployments.register as register

    real_run = subprocess.run

    def hanging_deploy(argv, **kwargs):
        script = "import sys, time; print('Deploying nightly...', flush=True); time.sleep(30)"
        return real_run([sys.executable, "-c", script], **kwargs)

    monkeypatch.setattr(register.subprocess, "run", hanging_deploy)
    with pytest.raises(register.RegisterError) as timed_out:
        register.register("http://127.0.0.1:9/api", timeout_s=2)
    assert str(timed_out.value) == "prefect deploy did not finish within 2 s:\nDeploying nightly...\n"
