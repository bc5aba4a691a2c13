"""`ttseval datasets push|list|show` and `ttseval systems push|list`: items files and clips made on the
user's side, registered in the store so a run on another machine names them (NAME@VERSION, pushed:LABEL).

The tests call the command in-process (ttseval.cli.main, its real parser and exit codes); the evaluate run of what
was pushed is tests/e2e/test_pushed_dataset_evaluate.py. Counts are checked against collections.Counter over the
file as written, hashes against hashlib over the stored bytes, clips against soundfile's decoding of the
originals.
"""

from __future__ import annotations

import collections
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from tests.support.harness import demo_items
from tests.support.push import clips, ttseval

ITEMS = ("emo-a-d0", "que-a-d0", "que-a-d1", "mul-fr")


@pytest.fixture(autouse=True)
def _no_prefect_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)  # the form refresh is the UI test's (tests/system/test_ui.py)
    monkeypatch.delenv("TTSEVAL_STORE", raising=False)


def test_push_list_show_a_dataset_counts_from_the_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = demo_items(tmp_path / "mine.jsonl", ITEMS)
    store = str(tmp_path / "store")
    code, out, err = ttseval(
        capsys, "datasets", "push", str(tmp_path / "mine.jsonl"), "--name", "mine", "--version", "v1", "--store", store
    )
    assert code == 0, err
    assert f"dataset mine@v1: {len(rows)} items -> " in out
    # counts by an independent tally of the file as written
    by = {dim: collections.Counter(str(r[dim]) for r in rows) for dim in ("category", "language", "depth")}
    assert by["category"] == {"emotions": 1, "questions": 2, "multilingual": 1}
    code, out, err = ttseval(capsys, "datasets", "show", "mine@v1", "--store", store)
    assert code == 0, err
    for dim, tally in by.items():
        assert f"by {dim}: " + ", ".join(f"{v} {n}" for v, n in sorted(tally.items())) in out
    sha = hashlib.sha256((tmp_path / "mine.jsonl").read_bytes()).hexdigest()
    assert f"from: pushed file mine.jsonl (sha256 {sha[:12]})" in out
    # pushed again unchanged: same version, nothing rewritten; a content-addressed second version beside it
    stored = (tmp_path / "store/datasets/mine/v1/manifest.json").read_bytes()
    code, out, _ = ttseval(
        capsys, "datasets", "push", str(tmp_path / "mine.jsonl"), "--name", "mine", "--version", "v1", "--store", store
    )
    assert code == 0 and "(unchanged: this version held these items)" in out
    assert (tmp_path / "store/datasets/mine/v1/manifest.json").read_bytes() == stored
    code, out, _ = ttseval(capsys, "datasets", "push", str(tmp_path / "mine.jsonl"), "--name", "mine", "--store", store)
    content = json.loads(stored)["content_sha256"]
    assert code == 0 and f"dataset mine@g{content[:12]}: " in out
    code, out, _ = ttseval(capsys, "datasets", "list", "--store", store)
    assert code == 0
    assert [line.split("\t")[:3] for line in out.splitlines()] == [
        ["mine@v1", f"{len(rows)} items", "pushed"],
        [f"mine@g{content[:12]}", f"{len(rows)} items", "pushed"],
    ]
    # the store's copy is what a run reads: the items of the file, with the categories' canonical names
    from ttseval.core.config import load_settings
    from ttseval.corpus.items import read_items

    items, _, read = read_items("mine@v1", load_settings(store=store))
    assert read == "mine@v1" and list(items["item_id"]) == [r["item_id"] for r in rows]
    assert list(items["text"]) == [r["text"] for r in rows]


def test_versions_are_ordered_by_when_they_were_made_to_the_microsecond(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`datasets list` (oldest first) and NAME@latest follow created_at, written to the microsecond. A fresh-clone
    suite once listed a content-addressed version before the v1 pushed a moment earlier: both were stamped to the
    second, and the store's listing order broke the tie. Stamps of the same second (manifests written before the
    change) are ordered by version name."""
    demo_items(tmp_path / "mine.jsonl", ITEMS)
    store = tmp_path / "store"
    for version in ("v2", "v1"):  # v2 first
        code, _, err = ttseval(
            capsys,
            "datasets",
            "push",
            str(tmp_path / "mine.jsonl"),
            "--name",
            "mine",
            "--version",
            version,
            "--store",
            str(store),
        )
        assert code == 0, err
    stamps = {
        v: json.loads((store / f"datasets/mine/{v}/manifest.json").read_text())["created_at"] for v in ("v1", "v2")
    }
    assert all(len(t.split("+")[0].split(".")[1]) == 6 for t in stamps.values()), stamps  # microseconds written
    assert stamps["v2"] < stamps["v1"]

    def listed() -> list[str]:
        code, out, _ = ttseval(capsys, "datasets", "list", "--store", str(store))
        assert code == 0
        return [line.split("\t")[0] for line in out.splitlines()]

    def latest() -> str:
        code, out, err = ttseval(capsys, "datasets", "show", "mine@latest", "--store", str(store))
        assert code == 0, err
        return out

    assert listed() == ["mine@v2", "mine@v1"] and "mine@v1" in latest()

    def stamp(version: str, created_at: str) -> None:
        path = store / f"datasets/mine/{version}/manifest.json"
        path.write_text(json.dumps(json.loads(path.read_text()) | {"created_at": created_at}))

    # one second apart by a millionth: v1 is older
    stamp("v1", "2026-11-25T07:00:00.000001+00:00")
    stamp("v2", "2026-11-25T07:00:00.000002+00:00")
    assert listed() == ["mine@v1", "mine@v2"] and "mine@v2" in latest()
    # a stamp to the second sorts before the same second's microseconds (it means .000000)
    stamp("v1", "2026-11-25T07:00:00.5+00:00")
    stamp("v2", "2026-11-25T07:00:00+00:00")
    assert listed() == ["mine@v2", "mine@v1"]
    # the same second, both to the second: by version name
    stamp("v1", "2026-11-25T07:00:00+00:00")
    assert listed() == ["mine@v1", "mine@v2"] and "mine@v2" in latest()


def test_a_bad_file_is_refused_with_evaluates_message_and_nothing_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from ttseval.core.errors import DatasetError
    from ttseval.corpus.items import load_items

    rows = demo_items(tmp_path / "bad.jsonl", ITEMS)
    rows[1]["language"] = "klingon"
    rows[2]["item_id"] = rows[0]["item_id"]
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DatasetError) as expected:  # what `evaluate --dataset` reads the file with
        load_items(tmp_path / "bad.jsonl")
    code, out, err = ttseval(
        capsys, "datasets", "push", str(tmp_path / "bad.jsonl"), "--name", "bad", "--store", str(tmp_path / "store")
    )
    assert code == 2 and out == ""
    assert err == f"ttseval: error: {expected.value}\n"
    assert "row 2 (item_id='que-a-d0')" in err and "language" in err and "item_id is unique" in err
    assert not (tmp_path / "store").exists()


def test_a_frozen_version_with_other_items_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    store = str(tmp_path / "store")
    demo_items(tmp_path / "a.jsonl", ITEMS[:2])
    demo_items(tmp_path / "b.jsonl", ITEMS[:3])
    assert (
        ttseval(
            capsys, "datasets", "push", str(tmp_path / "a.jsonl"), "--name", "s", "--version", "1", "--store", store
        )[0]
        == 0
    )
    before = (tmp_path / "store/datasets/s/1/items.parquet").read_bytes()
    code, _, err = ttseval(
        capsys, "datasets", "push", str(tmp_path / "b.jsonl"), "--name", "s", "--version", "1", "--store", store
    )
    assert code == 2 and "dataset s@1 is frozen and holds other items" in err and "pass a new --version" in err
    assert (tmp_path / "store/datasets/s/1/items.parquet").read_bytes() == before
    code, _, err = ttseval(
        capsys, "datasets", "push", str(tmp_path / "b.jsonl"), "--name", "s", "--version", "latest", "--store", store
    )
    assert code == 2 and "dataset version 'latest'" in err
    code, _, err = ttseval(capsys, "datasets", "push", str(tmp_path / "b.jsonl"), "--store", store)
    assert code == 2 and "datasets push needs the items FILE and --name NAME" in err
    code, _, err = ttseval(capsys, "datasets", "show", "s@2", "--store", store)
    assert code == 2 and err == f"ttseval: error: dataset s@2 is not in store {tmp_path / 'store'} (versions: 1)\n"


def test_voice_prompts_are_pushed_with_the_items(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = demo_items(tmp_path / "p.jsonl", ITEMS[:2])
    written = clips(tmp_path / "prompts", ["spk1"])
    rows[0] |= {"prompt_audio_uri": "prompts/spk1.wav", "prompt_text": "hello", "reference_audio_uri": "gone.wav"}
    rows[1] |= {"reference_audio_uri": "prompts/spk1.wav"}
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    store = tmp_path / "store"
    code, out, err = ttseval(
        capsys, "datasets", "push", str(tmp_path / "p.jsonl"), "--name", "p", "--store", str(store)
    )
    assert code == 0, err
    assert "1 reference_audio_uri clip(s) could not be read and are left empty" in out and rows[0]["item_id"] in out
    shutil.rmtree(tmp_path / "prompts")  # the user's copy is gone: the run reads the store's
    from ttseval.core.store import ArtifactStore
    from ttseval.corpus import catalog

    _, items, _ = catalog.resolve(ArtifactStore(str(store)), "p@latest")
    uri = items.loc[0, "prompt_audio_uri"]
    assert uri.startswith(str(store / "blobs/audio/")) and items.loc[1, "prompt_audio_uri"] is None
    data = Path(uri).read_bytes()
    assert Path(uri).stem == hashlib.sha256(data).hexdigest()
    np.testing.assert_allclose(sf.read(uri, dtype="float32")[0], written["spk1"], atol=1 / 32768)
    assert items.loc[1, "reference_audio_uri"] == uri and items.loc[0, "reference_audio_uri"] is None
    # a run started from a deployment reads only what it may (confine_paths): the store's own copies are inside
    from ttseval.core.config import load_settings
    from ttseval.flows.preflight import preflight_evaluate

    monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__ID", "5f1c3a52-0000-4000-8000-000000000033")
    checked = preflight_evaluate("p@latest", ["espeak-ng"], load_settings(store=str(store)), judges=[])
    assert checked.items.loc[0, "prompt_audio_uri"] == uri


def test_systems_push_stores_clips_by_hash_and_a_label_is_frozen(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    store = tmp_path / "store"
    written = clips(tmp_path / "clips", list(ITEMS[:3]))
    code, out, err = ttseval(
        capsys, "systems", "push", "--label", "rec", "--dir", str(tmp_path / "clips"), "--store", str(store)
    )
    assert code == 0, err
    manifest = json.loads((store / "systems/rec/manifest.json").read_text())
    assert sorted(manifest["clips"]) == sorted(ITEMS[:3]) and manifest["spec"] == "pushed:rec"
    for item_id, sha in manifest["clips"].items():
        blob = store / f"blobs/audio/{sha[:2]}/{sha}.wav"
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == sha
        np.testing.assert_allclose(sf.read(blob, dtype="float32")[0], written[item_id], atol=1 / 32768)
    assert f"system pushed:rec: 3 clips (3 new), content {manifest['content_sha256'][:12]}" in out
    assert str(tmp_path) not in json.dumps(manifest["clips"])  # identity: label and hashes, never a path
    # the same clips again from elsewhere: nothing changes; one more item through a manifest: added
    shutil.copytree(tmp_path / "clips", tmp_path / "copy")
    code, out, _ = ttseval(
        capsys, "systems", "push", "--label", "rec", "--dir", str(tmp_path / "copy"), "--store", str(store)
    )
    assert code == 0 and "3 clips (0 new)" in out
    clips(tmp_path / "more", [ITEMS[3]], base_hz=500)
    (tmp_path / "more.csv").write_text(
        f"item_id,path\n{ITEMS[3]},more/{ITEMS[3]}.wav\n{ITEMS[0]},copy/{ITEMS[0]}.wav\ngone,more/gone.wav\n"
    )
    code, out, err = ttseval(
        capsys, "systems", "push", "--label", "rec", "--manifest", str(tmp_path / "more.csv"), "--store", str(store)
    )
    assert code == 0, err
    assert "4 clips (1 new)" in out and "1 listed clip(s) not found, left out" in out and "gone" in out
    after = json.loads((store / "systems/rec/manifest.json").read_text())
    assert after["clips"] == manifest["clips"] | {ITEMS[3]: after["clips"][ITEMS[3]]}
    # another clip for an item the label holds: refused, the label unchanged and no audio stored
    clips(tmp_path / "other", [ITEMS[0]], base_hz=900)
    blobs = sorted(p.name for p in (store / "blobs").rglob("*.wav"))
    code, _, err = ttseval(
        capsys, "systems", "push", "--label", "rec", "--dir", str(tmp_path / "other"), "--store", str(store)
    )
    assert code == 2 and f"system 'rec' is registered with other clips for 1 item(s): '{ITEMS[0]}'" in err
    assert "push them under a new --label" in err
    assert json.loads((store / "systems/rec/manifest.json").read_text()) == after
    assert sorted(p.name for p in (store / "blobs").rglob("*.wav")) == blobs
    code, out, _ = ttseval(capsys, "systems", "list", "--store", str(store))
    assert code == 0 and out.splitlines()[0].split("\t")[:3] == [
        "pushed:rec",
        "4 clips",
        f"content {after['content_sha256'][:12]}",
    ]


def test_systems_push_refusals_name_the_clip_and_register_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = tmp_path / "store"
    clips(tmp_path / "clips", ["a", "b"])
    (tmp_path / "clips/c.wav").write_bytes(b"RIFF not audio")
    code, out, err = ttseval(
        capsys, "systems", "push", "--label", "x", "--dir", str(tmp_path / "clips"), "--store", str(store)
    )
    assert code == 2 and out == ""
    assert "1 clip(s) in dir " in err and "item 'c': " in err and "nothing was registered" in err
    assert not (store / "systems").exists() and not (store / "blobs").exists()  # nor the good clips' audio stored
    for args, words in (
        (["--label", "x"], "exactly one of --dir FOLDER"),
        (["--label", "a/b", "--dir", str(tmp_path / "clips")], "system label 'a/b'"),
        (["--label", "x", "--dir", str(tmp_path / "nope")], "is not an existing folder"),
        (["--label", "x", "--dir", str(tmp_path)], "holds no clips"),
    ):
        code, _, err = ttseval(capsys, "systems", "push", *args, "--store", str(store))
        assert code == 2 and words in err, err


def test_the_adhoc_forms_schema_lists_the_stores_choices() -> None:
    from ttseval.deployments.choices import MARK, with_choices

    schema = {
        "properties": {
            "dataset": {"type": "string", "description": "JSONL, CSV or Parquet items file."},
            "systems": {"type": "array", "items": {"type": "string"}},
        }
    }
    once = with_choices(schema, "s3://b/p", ["mine@v1", "mine@g1"], ["pushed:rec"])
    assert once["properties"]["dataset"]["description"] == (
        "JSONL, CSV or Parquet items file." + MARK + "s3://b/p, registered datasets (NAME@VERSION; a path on the "
        "worker still works): mine@v1, mine@g1"
    )
    assert once["properties"]["dataset"]["examples"] == ["mine@v1", "mine@g1"]
    assert once["properties"]["systems"]["examples"] == ["pushed:rec"]
    assert once["properties"]["systems"]["items"] == {"type": "string"}  # any provider spec still goes
    again = with_choices(once, "s3://b/p", ["mine@v1"], [])  # rewritten, never appended twice
    assert again["properties"]["dataset"]["description"].count(MARK) == 1
    assert again["properties"]["systems"]["description"].endswith(
        "pushed systems (add any of them to the list, beside other provider specs): none yet (ttseval systems push)"
    )
    assert schema["properties"]["dataset"]["description"] == "JSONL, CSV or Parquet items file."  # a copy


class BusyPrefect:
    """A loopback stand-in for the two Prefect API routes the form refresh calls (GET /deployments/name/...,
    PATCH /deployments/ID), answering the first `busy` PATCHes 503 as a Prefect server whose database is locked
    does (as seen in CI)."""

    def __init__(self, busy: int) -> None:
        import http.server
        import threading

        self.busy, self.patches, self.bodies = busy, 0, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, code: int, body: dict | None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                assert self.path == "/api/deployments/name/evaluate/adhoc", self.path
                self._send(200, {"id": "d-1", "parameter_openapi_schema": {"properties": {}}})

            def do_PATCH(self) -> None:
                assert self.path == "/api/deployments/d-1", self.path
                outer.patches += 1
                outer.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                if outer.patches <= outer.busy:
                    self._send(503, {"exception_message": "Service Unavailable"})
                else:
                    self._send(204, None)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/api"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_form_refresh_waits_out_a_busy_server_and_names_it_when_it_stays_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttseval.deployments import choices

    monkeypatch.setitem(choices.RETRY, "backoff_factor", 0.01)  # the same retries, shorter sleeps
    store = str(tmp_path / "store")
    busy = BusyPrefect(busy=2)
    try:
        assert choices.refresh_adhoc_form(busy.url, store) == ([], [])
    finally:
        busy.close()
    assert busy.patches == 3  # two 503s, then the schema written
    assert busy.bodies[0] == busy.bodies[2]  # the same whole schema each time: a repeat changes nothing
    assert busy.bodies[2]["parameter_openapi_schema"]["properties"]["systems"]["examples"] == []
    stuck = BusyPrefect(busy=100)
    try:
        with pytest.raises(choices.ChoicesError) as e:
            choices.refresh_adhoc_form(stuck.url, store)
    finally:
        stuck.close()
    assert stuck.patches == 1 + choices.RETRY["status"]
    assert str(e.value) == (
        f"PATCH /deployments/d-1 on {stuck.url}: HTTP 503 "
        f'b\'{{"exception_message": "Service Unavailable"}}\' (after 6 tries)'
    )
    with pytest.raises(choices.ChoicesError, match="cannot be reached"):
        choices.refresh_adhoc_form(stuck.url, store)  # closed: connection refused, after the connect retries


def test_an_imported_set_is_pushed_with_its_baseline_clips(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = [
        {
            "category": "Emotions",
            "text_to_synthesize": 'She gasped, "You came back!"',
            "evolution_depth": 0,
            "language": "en",
        },
        {
            "category": "Questions",
            "text_to_synthesize": "Did you see it? I did. Did you?",
            "evolution_depth": 1,
            "language": "en",
        },
        {"category": "Questions", "text_to_synthesize": "Is it? Was it?", "evolution_depth": 0, "language": "en"},
    ]
    (tmp_path / "ette.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    written = clips(tmp_path / "baseline_audios", ["0", "2"])  # EmergentTTS-Eval names them by line; 1 is missing
    code, out, err = ttseval(
        capsys,
        "import-dataset",
        "--format",
        "emergenttts",
        str(tmp_path / "ette.jsonl"),
        "--out",
        str(tmp_path / "items.jsonl"),
        "--baseline-audios",
        str(tmp_path / "baseline_audios"),
    )
    assert code == 0, err
    spec = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("system: "))
    assert f"ttseval datasets push {tmp_path / 'items.jsonl'} --name NAME --system {spec}" in out
    store = tmp_path / "store"
    code, out, err = ttseval(
        capsys,
        "datasets",
        "push",
        str(tmp_path / "items.jsonl"),
        "--name",
        "ette",
        "--system",
        spec,
        "--store",
        str(store),
    )
    assert code == 0, err
    assert "system pushed:gpt-4o-mini-tts-alloy: 2 clips (2 new); 1 listed clip(s) not found" in out
    code, out, _ = ttseval(capsys, "datasets", "show", "ette@latest", "--store", str(store))
    assert code == 0 and "clips pushed with it: pushed:gpt-4o-mini-tts-alloy" in out
    assert "by category: emotions 1, questions 2" in out and "by depth: 0 2, 1 1" in out
    stored = json.loads((store / "systems/gpt-4o-mini-tts-alloy/manifest.json").read_text())["clips"]
    imported = [json.loads(line)["item_id"] for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert sorted(stored) == [imported[0], imported[2]]
    for item_id, line in ((imported[0], "0"), (imported[2], "2")):
        blob = store / f"blobs/audio/{stored[item_id][:2]}/{stored[item_id]}.wav"
        np.testing.assert_allclose(sf.read(blob, dtype="float32")[0], written[line], atol=1 / 32768)
    code, _, err = ttseval(
        capsys,
        "datasets",
        "push",
        str(tmp_path / "items.jsonl"),
        "--name",
        "ette",
        "--system",
        "piper:joe",
        "--store",
        str(store),
    )
    assert code == 2 and "--system 'piper:joe': give the files system the import printed" in err


def test_show_says_where_a_generated_version_came_from_and_an_unreachable_server_keeps_the_push(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttseval.core.store import ArtifactStore
    from ttseval.corpus import catalog
    from ttseval.corpus.items import load_items

    store = tmp_path / "store"
    demo_items(tmp_path / "g.jsonl", ITEMS)
    items = load_items(tmp_path / "g.jsonl").assign(status="ok", method="breadth")
    catalog.write_version(
        ArtifactStore(str(store)),
        "gen",
        "1",
        items=items,
        generation=items,
        stats=pd.DataFrame({"n": [len(items)]}),
        stats_md="",
        manifest={"seeds": "seeds.jsonl", "llm": "gemini:gemini-2.5-pro", "created_at": "2026-11-25T00:00:00+00:00"},
    )
    code, out, err = ttseval(capsys, "datasets", "show", "gen@1", "--store", str(store))
    assert code == 0, err
    assert "from: generated from seeds.jsonl by gemini:gemini-2.5-pro on 2026-11-25T00:00:00+00:00" in out
    assert "by depth: 0 3, 1 1" in out
    # a Prefect server that cannot be reached: the push is stored and stays, the command says the form is stale
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{port}/api")
    code, out, err = ttseval(
        capsys, "datasets", "push", str(tmp_path / "g.jsonl"), "--name", "mine", "--store", str(store)
    )
    assert code == 0, err
    assert "the push is stored, but the run form was not updated: GET /deployments/name/evaluate/adhoc" in out
    assert f"the Prefect server at http://127.0.0.1:{port}/api cannot be reached" in out
    [version] = catalog.versions(ArtifactStore(str(store)), "mine")
    assert f"dataset {version['ref']}: {len(ITEMS)} items -> " in out and version["n_items"] == len(ITEMS)


def test_a_corrupt_manifest_is_named_with_its_fix_and_store_repair_sets_it_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A manifest stored with an S3 upload's chunk framing (`184\\r\\n{...`, as a server that takes unsigned uploads
    kept it) made every `datasets list` and `push` fail with a JSONDecodeError traceback, for good. Now each command
    that reads it exits 2 naming the object and `ttseval store repair`, which keeps its bytes beside it and removes
    it; the rest of the catalog lists, and pushing again writes the version whole."""
    demo_items(tmp_path / "mine.jsonl", ITEMS)
    clips(tmp_path / "clips", list(ITEMS))
    store = str(tmp_path / "store")
    push = ("datasets", "push", str(tmp_path / "mine.jsonl"), "--name", "mine", "--version", "v1", "--store", store)
    assert ttseval(capsys, *push)[0] == 0
    assert ttseval(capsys, "datasets", "push", str(tmp_path / "mine.jsonl"), "--name", "ok", "--store", store)[0] == 0
    assert (
        ttseval(capsys, "systems", "push", "--label", "mine", "--dir", str(tmp_path / "clips"), "--store", store)[0]
        == 0
    )
    manifests = [tmp_path / "store/datasets/mine/v1/manifest.json", tmp_path / "store/systems/mine/manifest.json"]
    whole = [m.read_bytes() for m in manifests]
    for m, data in zip(manifests, whole):
        m.write_bytes(b"%x\r\n" % len(data) + data + b"\r\n0\r\n\r\n")  # the framing, as it was stored
    code, out, err = ttseval(capsys, "datasets", "list", "--store", store)
    assert code == 2 and "Traceback" not in err
    assert f"{manifests[0]} is not JSON (it begins b'" in err and "`ttseval store repair`" in err
    assert ttseval(capsys, "systems", "list", "--store", store)[0] == 2
    code, out, _ = ttseval(capsys, "store", "repair", "--dry-run", "--store", store)
    assert code == 0 and out.count("corrupt: ") == 2 and "nothing changed" in out
    assert [m.read_bytes().split(b"\r\n")[1] for m in manifests] == whole  # the dry run changed nothing
    code, out, _ = ttseval(capsys, "store", "repair", "--store", store)
    assert code == 0 and out.count("set aside: ") == 2
    assert "ttseval datasets push FILE --name mine --version v1" in out
    assert "ttseval systems push --label mine --dir FOLDER" in out
    assert [m.exists() for m in manifests] == [False, False]
    kept = [m.with_name("manifest.json.corrupt").read_bytes() for m in manifests]
    assert [k.split(b"\r\n")[1] for k in kept] == whole  # the bytes set aside are the object's, framing and all
    code, out, _ = ttseval(capsys, "datasets", "list", "--store", store)
    assert code == 0 and out.startswith("ok@") and "mine@v1" not in out  # the rest lists; the version is unfinished
    assert ttseval(capsys, *push)[0] == 0  # pushed again: whole
    assert json.loads(manifests[0].read_bytes())["ref"] == "mine@v1"
    assert ttseval(capsys, "store", "repair", "--store", store)[1].startswith(f"store {store}: every")
