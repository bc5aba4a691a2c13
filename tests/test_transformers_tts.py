"""transformers-tts: a tiny random VITS (MMS-TTS architecture) written with save_pretrained, loaded through the
registry; batching, determinism, the synthesis stage, errors, and the GPU worker placement of its shards.

Nothing is downloaded: the model is built here from a VitsConfig with tiny dimensions and a character vocabulary.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from tests.conftest import BIN, _stop, cli_env, free_port, run_cli
from ttseval.core.audio import Audio

pytest.importorskip("torch")
pytest.importorskip("transformers")

RATE_HZ = 8000
TEXTS = ["hi", "hello there my friend", "a much longer sentence, with many words in it and then some more"]
ATOL = 1e-4
"""Batched vs one-at-a-time tolerance on samples in [-1, 1]: the same float32 arithmetic, in a different
batch shape (observed differences are below 1e-5)."""


def write_tiny_vits(path: Path, *, language: str | None = "eng", num_speakers: int = 1) -> Path:
    """A random VITS with MMS-TTS's tokenizer layout (characters, blanks between them, tokenizer_config language)."""
    import torch
    from transformers import VitsConfig, VitsModel, VitsTokenizer

    path.mkdir(parents=True, exist_ok=True)
    chars = list("abcdefghijklmnopqrstuvwxyz '")
    vocab = {"<pad>": 0, **{c: i + 1 for i, c in enumerate(chars)}, "<unk>": len(chars) + 1}
    vocab_file = path / "source-vocab.json"
    vocab_file.write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = VitsTokenizer(str(vocab_file), language=language, add_blank=True, normalize=True, phonemize=False)
    config = VitsConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        ffn_dim=16,
        flow_size=8,
        spectrogram_bins=9,
        upsample_initial_channel=16,
        upsample_rates=(4, 4),
        upsample_kernel_sizes=(8, 8),
        resblock_kernel_sizes=(3,),
        resblock_dilation_sizes=((1,),),
        duration_predictor_filter_channels=8,
        duration_predictor_num_flows=2,
        prior_encoder_num_flows=2,
        prior_encoder_num_wavenet_layers=1,
        posterior_encoder_num_wavenet_layers=1,
        depth_separable_num_layers=1,
        sampling_rate=RATE_HZ,
        num_speakers=num_speakers,
        speaker_embedding_size=4 if num_speakers > 1 else 0,
    )  # noise_scale 0.667 and noise_scale_duration 0.8: MMS-TTS's defaults, so the noise path is exercised
    torch.manual_seed(0)
    VitsModel(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def tiny_vits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_vits(tmp_path_factory.mktemp("vits") / "mms-tiny")


def build(spec: str) -> Any:
    from ttseval.providers.tts import TTS

    return TTS.build(spec)


def test_clip_has_the_config_rate_a_length_and_the_checkpoint_language(tiny_vits: Path) -> None:
    tts = build(f"transformers-tts:model={tiny_vits}")
    audio = tts.synthesize("hello there", "en-US")
    assert audio.sample_rate_hz == RATE_HZ and len(audio.samples) > 0 and audio.samples.dtype == np.float32
    assert np.isfinite(audio.samples).all() and float(np.abs(audio.samples).max()) > 0
    assert [tts.supports_language(t) for t in ("en", "en-US", "eng", "EN", "fr", "deu")] == [True] * 4 + [False] * 2
    meta = tts.metadata()
    assert (meta["language"], meta["sample_rate_hz"], meta["device"], meta["model_type"]) == (
        "eng",
        RATE_HZ,
        "cpu",
        "vits",
    )
    assert tts.batch_size == 8 and type(tts).gpu and not type(tts).accepts_instruction


def test_batched_clips_equal_one_at_a_time_clips_and_are_repeatable(tiny_vits: Path) -> None:
    tts = build(f"transformers-tts:model={tiny_vits}:batch_size=2")
    alone = [tts.synthesize(t, "en").samples for t in TEXTS]
    assert len({len(a) for a in alone}) == len(TEXTS)  # different lengths: the batch is padded
    batched = [a.samples for a in tts.synthesize_batch(TEXTS[::-1], ["en"] * 3, [None] * 3)][::-1]
    for text, a, b in zip(TEXTS, alone, batched):
        assert len(a) == len(b), text
        np.testing.assert_allclose(b, a, rtol=0, atol=ATOL, err_msg=text)
    # Deterministic across instances; the seed (and only the seed) changes the sampled noise.
    again = build(f"transformers-tts:model={tiny_vits}").synthesize(TEXTS[1], "en").samples
    np.testing.assert_allclose(again, alone[1], rtol=0, atol=ATOL)
    other_seed = build(f"transformers-tts:model={tiny_vits}:seed=7").synthesize(TEXTS[1], "en").samples
    assert len(other_seed) != len(alone[1]) or not np.allclose(other_seed, alone[1], atol=ATOL)
    # Without noise the seed does not matter at all.
    quiet = [
        build(f"transformers-tts:model={tiny_vits}:noise_scale=0:noise_scale_duration=0:seed={s}")
        .synthesize(TEXTS[2], "en")
        .samples
        for s in (0, 7)
    ]
    np.testing.assert_array_equal(quiet[0], quiet[1])


def test_multi_speaker_batches_match_too(tmp_path: Path) -> None:
    path = write_tiny_vits(tmp_path / "two-speakers", num_speakers=2)
    tts = build(f"transformers-tts:model={path}:speaker_id=1")
    alone = [tts.synthesize(t, "en").samples for t in TEXTS[:2]]
    for a, b in zip(alone, tts.synthesize_batch(TEXTS[:2], ["en"] * 2, [None] * 2)):
        np.testing.assert_allclose(b.samples, a, rtol=0, atol=ATOL)
    speaker0 = build(f"transformers-tts:model={path}:speaker_id=0").synthesize(TEXTS[0], "en").samples
    assert len(speaker0) != len(alone[0]) or not np.allclose(speaker0, alone[0], atol=ATOL)


def test_synthesis_stage_uses_synthesize_batch_and_stores_ok_rows(tiny_vits: Path, tmp_path: Path) -> None:
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.synthesize import synthesize_rows

    spec = Spec.parse(f"transformers-tts:model={tiny_vits}:batch_size=2")
    provider = build(spec.canonical)
    calls: list[int] = []
    real = provider.synthesize_batch

    def counting(texts: list[str], languages: list[str], instructions: list[str | None]) -> list[Audio]:
        calls.append(len(texts))
        return real(texts, languages, instructions)

    provider.synthesize_batch = counting
    items = [{"item_id": f"i{n}", "text": t, "language": "en-US", "category": "emotions"} for n, t in enumerate(TEXTS)]
    items.append({"item_id": "fr", "text": "bonjour", "language": "fr-FR", "category": "emotions"})
    store = ArtifactStore(str(tmp_path / "store"))
    settings = load_settings(store=str(tmp_path / "store"))
    rows = synthesize_rows(provider, spec, items, settings, store)
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "unsupported"]
    assert calls == [2, 1]  # the stage's chunks of batch_size; the French item never reaches the model
    assert {r["sample_rate_hz"] for r in rows[:3]} == {RATE_HZ}
    assert all(r["duration_s"] > 0 for r in rows[:3])
    clip = Audio.from_wav_bytes(store.get_audio(rows[1]["audio_sha256"]))
    assert clip.sample_rate_hz == RATE_HZ and len(clip.samples) == round(rows[1]["duration_s"] * RATE_HZ)


def test_missing_model_names_the_path_and_bad_input_is_permanent(tiny_vits: Path, tmp_path: Path) -> None:
    from ttseval.core.errors import PermanentProviderError, SpecError

    missing = tmp_path / "no-such-model"
    with pytest.raises(SpecError, match=str(missing)):
        build(f"transformers-tts:model={missing}")
    with pytest.raises(SpecError, match="needs a model"):
        build("transformers-tts")
    with pytest.raises(SpecError, match="device"):
        build(f"transformers-tts:model={tiny_vits}:device=tpu")
    silent = write_tiny_vits(tmp_path / "no-language", language=None)
    with pytest.raises(SpecError, match="declares no language.*language="):
        build(f"transformers-tts:model={silent}")
    assert build(f"transformers-tts:model={silent}:language=fra").supports_language("fr-CA")

    tts = build(f"transformers-tts:model={tiny_vits}")
    for text in ("", "!!! 123 ?"):  # nothing in the vocabulary
        with pytest.raises(PermanentProviderError, match="can encode"):
            tts.synthesize(text, "en")
    with pytest.raises(PermanentProviderError, match="not 'fr'"):
        tts.synthesize("bonjour", "fr")


def test_cuda_out_of_memory_is_transient(tiny_vits: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from ttseval.core.errors import TransientProviderError

    tts = build(f"transformers-tts:model={tiny_vits}")
    model = tts._load()[0]

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(model.text_encoder, "forward", out_of_memory)
    with pytest.raises(TransientProviderError, match="out of memory"):
        tts.synthesize("hello", "en")


# -- GPU worker placement ------------------------------------------------------------------------------------------


class EchoASR:
    """A recogniser that hears 'hello' in every clip: the placement test needs the model stages, not their answers."""

    name: ClassVar[str] = "place-asr"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def transcribe(self, batch: list[Audio], languages: list[str | None]) -> list[Any]:
        from ttseval.core.protocols import Transcript

        return [Transcript(text="hello") for _ in batch]

    def metadata(self) -> dict[str, Any]:
        return {"asr": "place-asr"}


class FlatMOS:
    name: ClassVar[str] = "place-mos"

    def __init__(self, voice: str | None = None, **options: Any) -> None:
        pass

    def score(self, batch: list[Audio]) -> list[Any]:
        from ttseval.core.protocols import QualityScore

        return [QualityScore(mos=3.0) for _ in batch]

    def metadata(self) -> dict[str, Any]:
        return {"mos": "place-mos"}


def _task_stream(address: str) -> list[dict[str, Any]]:
    from distributed import Client

    with Client(address, timeout=20, set_as_default=False) as client:
        return client.get_task_stream()  # the first call also starts recording on the scheduler


def test_synthesis_shards_of_a_gpu_provider_run_on_the_gpu_worker(
    tiny_vits: Path, tmp_path: Path, prefect_api: str
) -> None:
    # Also the model stages of issue 13 on the same workers: two more recognisers (tiny CTC and Whisper models)
    # beside the echo one, and a LID model of MMS-LID's shape, all built here and run batched, with labelled rows.
    from tests.tiny_models import LID_LABELS, WHISPER_LANGUAGES, build_tiny_ctc, build_tiny_lid, build_tiny_whisper

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
            "asr": {"place-asr": "tests.test_transformers_tts:EchoASR"},
            "quality": {"place-mos": "tests.test_transformers_tts:FlatMOS"},
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
            _stop(proc)

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


def test_placement_of_model_and_cpu_stages() -> None:
    import dask

    from ttseval.core.config import load_settings
    from ttseval.flows.common import placement
    from ttseval.flows.runner import local_cluster_kwargs

    gpu, cpu = load_settings(gpu=True), load_settings(gpu=False)

    def annotations(where) -> dict:
        with where:
            return dict(dask.get_annotations())

    assert annotations(placement(gpu, True, True)) == {"resources": {"GPU": 1}}
    assert annotations(placement(gpu, False, True)) == {"resources": {"CPU": 1}}
    assert annotations(placement(gpu, False, False)) == {}  # no CPU workers: anywhere, never stuck
    assert annotations(placement(cpu, True, True)) == annotations(placement(cpu, False, True)) == {}
    # a LocalCluster's workers have both, so both kinds of task run there
    assert local_cluster_kwargs(load_settings(gpu=True, threads_per_worker=2))["resources"] == {"GPU": 1, "CPU": 2}
