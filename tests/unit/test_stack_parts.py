"""The local operations stack's parts that start no stack (ttseval.infra.stack): stack_down on an empty folder or a
stale record touches nothing it did not start, GPU detection through nvidia-smi (a fake one, or none), and the
stack extra's S3 server named when it is missing. The stack itself is tests/system/test_stack.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.harness import ROOT
from ttseval.infra import stack as stack_mod
from ttseval.infra.stack import StackError, stack_down, stack_info


def test_stack_down_on_an_empty_folder_or_a_stale_record_touches_nothing_it_did_not_start(tmp_path: Path) -> None:
    stack_down(tmp_path)  # an empty folder: nothing written there
    assert list(tmp_path.iterdir()) == []
    stack_down(tmp_path / "missing")  # a folder that does not exist is not made
    assert not (tmp_path / "missing").exists()
    # A record left by a stack whose processes are gone, naming a PID now used by an unrelated live process (a
    # recycled PID: its start time differs): that process is left running, the record is marked stopped.
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        folder = tmp_path / "stale"
        (folder / "pids").mkdir(parents=True)
        (folder / "stack.json").write_text(
            json.dumps({"running": True, "components": {"s3": {"pid": stranger.pid, "create_time": 1.0}}})
        )
        (folder / "pids" / "s3.pid").write_text(f"{stranger.pid} 1.0")
        stack_down(folder, grace_s=0.5)
        assert stranger.poll() is None  # not ours: not signalled
        state = json.loads((folder / "stack.json").read_text())
        assert state["running"] is False and "stopped_at" in state
        assert list((folder / "pids").iterdir()) == [] and stack_info(folder) is None
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.parametrize(
    ("listing", "code", "expected"),
    [
        ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)", 0, True),  # nvidia-smi -L with one GPU
        ("No devices were found", 6, False),  # driver present, no GPU
        ("", 0, False),  # ran, listed nothing
    ],
)
def test_gpu_detection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listing: str, code: int, expected: bool
) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] || exit 9\necho '{listing}'\nexit {code}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(stack_mod.shutil, "which", lambda name: str(fake) if name == "nvidia-smi" else None)
    assert stack_mod.gpu_present() is expected


def test_no_nvidia_smi_means_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack_mod.shutil, "which", lambda name: None)
    assert stack_mod.gpu_present() is False


def test_the_stack_extra_brings_its_s3_server_and_a_missing_one_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `ttseval stack up` needs moto_server, which only the test extra used to install.
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(d.startswith("moto[server]") for d in extras["stack"])
    assert any(d.startswith("ttseval[") and "stack" in d for d in extras["test"]) and "stack" in extras["all"][0]
    monkeypatch.setattr(stack_mod.sys, "executable", str(tmp_path / "python"))  # nothing beside it
    monkeypatch.setattr(stack_mod.shutil, "which", lambda name: None)
    with pytest.raises(StackError, match=r"'moto_server' is not installed .* pip install 'ttseval\[stack\]'"):
        stack_mod._bin("moto_server")


def test_a_restarted_stack_keeps_each_free_port_and_moves_off_a_taken_one(tmp_path: Path) -> None:
    """stack_up takes the ports of the stack's last start (stack.json's `ports`) while they are free, so a client's
    exports and a remote worker's scheduler address stay valid; a port another process now listens on is replaced."""
    import socket

    kept, taken = stack_mod.free_port(), socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        busy = taken.getsockname()[1]
        (tmp_path / "stack.json").write_text(json.dumps({"ports": {"s3": kept, "dask-scheduler": busy}}))
        ports = stack_mod._ports(tmp_path)
        assert ports["s3"] == kept and ports["dask-scheduler"] != busy
        assert len(set(ports.values())) == 3 and all(stack_mod._port_free(p) for p in ports.values())
    finally:
        taken.close()
    assert stack_mod._ports(tmp_path / "never-started").keys() == {"s3", "dask-scheduler", "prefect-server"}
