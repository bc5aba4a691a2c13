"""The GPU worker placement of a GPU provider's shards: `ttseval evaluate` with gpu = true on a Dask cluster of a
scheduler, a worker declaring GPU=1 and one declaring CPU=1 sends every synthesis shard of transformers-tts (a tiny
random VITS) and every model stage to the GPU worker. The provider itself is tests/unit/test_transformers_tts.py.

Nothing is downloaded: the models are built here with tiny dimensions (tests/support/tiny_models.py).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import BIN, cli_env, free_port, run_cli, stop_group
from tests.support.tiny_models import build_tiny_vits

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny_vits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_vits(tmp_path_factory.mktemp("vits") / "mms-tiny")


# -- GPU worker placement ------------------------------------------------------------------------------------------


def _task_stream(address: str) -> list[dict[str, Any]]:
    from distributed import Client

    with Client(address, timeout=20, set_as_default=False) as client:
        return client.get_task_stream()  # the first call also starts recording on the scheduler


def test_synthesis_shards_of_a_gpu_provider_run_on_the_gpu_worker(
    tiny_vits: Path, tmp_path: Path, prefect_api: str
) -> None:
    # Also more model stages on the same workers: two more recognisers (tiny CTC and Whisper models)
    # beside the echo one, and a LID model of MMS-LID's shape, all built here and run batched, with labelled rows.
    from tests.support.tiny_models import (
        LID_LABELS,
        WHISPER_LANGUAGES,
        build_tiny_ctc,
        build_tiny_lid,
        build_tiny_whisper,
    )

    ctc = build_tiny_ctc(tmp_path / "ctc")
    whisper = build_tiny_whisper(tmp_path / "whisper")
    lid_dir = build_tiny_lid(tmp_path / "lid")
    # A scheduler, a worker declaring GPU=1 and one declaring CPU=1, as the compose and Kubernetes stacks start
    # them; `ttseval evaluate` with gpu=true must send every synthesis shard of transformers-tts (gpu=True) to
    # the GPU worker (flows/evaluate.py annotates them with dask.annotate(resources={"GPU": 1})).
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = cli_env(prefect_api)
    procs = [
        subprocess.Popen(
            [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    ]
    try:
        for name, resource in (("gpu", "GPU=1"), ("cpu", "CPU=1")):
            procs.append(
                subprocess.Popen(
                    [
                        str(BIN / "dask"),
                        "worker",
                        address,
                        "--name",
                        name,
                        "--resources",
                        resource,
                        "--nthreads",
                        "1",
                        "--no-nanny",
                        "--no-dashboard",
                        "--local-directory",
                        str(tmp_path / f"dask-{name}"),
                    ],
                    env=env,
                    cwd=tmp_path,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(address, timeout=5, set_as_default=False) as client:
                    workers = client.scheduler_info(n_workers=-1)["workers"]
                    if len(workers) == 2:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the Dask workers did not start within 60 s"
            time.sleep(0.5)
        gpu_worker = next(a for a, w in workers.items() if w.get("resources", {}).get("GPU"))
        cpu_worker = next(a for a, w in workers.items() if w.get("resources", {}).get("CPU"))
        _task_stream(address)

        dataset = tmp_path / "items.jsonl"
        words = ["hello there", "a short one", "speak slowly now", "one more line", "the last item", "and again"]
        dataset.write_text(
            "".join(
                json.dumps({"item_id": f"i{n}", "text": t, "language": "en-US", "category": "emotions", "depth": 0})
                + "\n"
                for n, t in enumerate(words)
            ),
            encoding="utf-8",
        )
        plugins = {
            "asr": {"place-asr": "tests.support.fakes:HelloASR"},
            "quality": {"place-mos": "tests.support.fakes:FlatMOS"},
        }
        run_env = env | {
            "TTSEVAL_DASK_ADDRESS": address,
            "TTSEVAL_GPU": "true",
            "TTSEVAL_PLUGINS": json.dumps(plugins),
            "TTSEVAL_ASR": json.dumps(
                {
                    "en": ["place-asr", f"transformers:{ctc}", f"transformers:{whisper}:max_new_tokens=4"],
                    "*": "place-asr",
                }
            ),
            "TTSEVAL_LID": json.dumps([f"transformers:{lid_dir}"]),
            "TTSEVAL_QUALITY": "place-mos",
            "TTSEVAL_SHARD_SIZE": "2",
        }
        result = run_cli(
            [
                "evaluate",
                "--dataset",
                str(dataset),
                "--systems",
                f"transformers-tts:model={tiny_vits},espeak-ng",
                "--store",
                str(tmp_path / "store"),
                "--run-id",
                "gpu",
                "--judges",
                "",
            ],
            run_env,
            cwd=tmp_path,
            timeout_s=180,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        stream = _task_stream(address)
    finally:
        for proc in reversed(procs):
            stop_group(proc)

    # Dask keys are '<function>-<token>': synthesize_task-..., and each clip stage's task function is named for
    # its table (ttseval.tasks.stages): transcripts_task-..., quality_task-..., lid_task-...
    placed = {str(r["key"]): r["worker"] for r in stream}
    synth = [(r["key"], r["worker"]) for r in stream if str(r["key"]).startswith("synthesize_task-")]
    assert len(synth) == 6, f"expected 2 x 3 synthesis shards (6 items, shard_size 2) in the task stream: {placed}"
    # transformers-tts's 3 shards can only run on the GPU worker; espeak-ng's carry CPU=1
    # (ttseval.flows.common.placement; its annotations are tested in test_placement_of_model_and_cpu_stages), so they
    # all run on the CPU worker
    by_system = Counter(w for _, w in synth)
    assert by_system == {gpu_worker: 3, cpu_worker: 3}, f"synthesis ran on {synth}; GPU worker {gpu_worker}"
    models = {k: w for k, w in placed.items() if k.startswith(("transcripts_task-", "quality_task-", "lid_task-"))}
    assert len(models) == 18 and set(models.values()) == {gpu_worker}, models  # ASR, MOS and LID go there too

    from ttseval.core.store import ArtifactStore

    store = ArtifactStore(str(tmp_path / "store"))
    rows = store.read("gpu", "synthesis")
    assert sorted(rows["status"]) == ["ok"] * len(words) * 2
    transcripts = store.read("gpu", "transcripts")
    assert transcripts.groupby("asr_spec")["status"].apply(list).to_dict() == {
        "place-asr": ["ok"] * 12,
        f"transformers:{ctc}": ["ok"] * 12,
        f"transformers:{whisper}:max_new_tokens=4": ["ok"] * 12,
    }  # every recogniser, every clip
    heard = transcripts.loc[transcripts["asr_spec"].str.startswith(f"transformers:{whisper}"), "detected_language"]
    assert heard.isin(WHISPER_LANGUAGES).all()  # Whisper's detection, kept as the diagnostic
    ctc_texts = transcripts.loc[transcripts["asr_spec"] == f"transformers:{ctc}", "hypothesis"]
    assert ctc_texts.str.fullmatch(r"[a-z' ]+").all()  # the random CTC model's letters, not the echo's
    lid = store.read("gpu", "lid")
    assert len(lid) == 12 and (lid["status"] == "ok").all() and lid["language"].isin(LID_LABELS).all()
    assert lid["lid_spec"].unique().tolist() == [f"transformers:{lid_dir}"] and lid["prob"].between(0, 1).all()
