"""Listening tests from a stored run (tasks/listening/, flows/human_eval.py): the webMUSHRA export (only the
keys webMUSHRA documents, one rate and one length per page, at most 12 conditions, seeded per-rater orders, the
key kept out of the folder), results in webMUSHRA's CSV formats (as its service/write.php writes them) and the
plain CSV round-tripping into the ratings table, bad results refused or flagged, and the analysis in the report."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from tests.support.listening import (
    RUN,
    SYSTEMS,
    mushra_csv,
    rater_configs,
    stimuli_key,
    stored_run,
)
from ttseval.core.audio import Audio
from ttseval.core.config import load_settings
from ttseval.core.errors import DatasetError, SpecError
from ttseval.core.store import ArtifactStore
from ttseval.tasks.listening import analyse_test, export_test, ingest_ratings

# webMUSHRA's documented keys (doc/experimenter.md), plus the finish page's questionnaire and the multi-scale
# likert response, which its shipped configs (mushra_customquestionaire.yaml, LSS_multiscale.yaml) document
DOCUMENTED = {
    None: {"testname", "testId", "bufferSize", "stopOnErrors", "showButtonPreviousPage", "remoteService", "pages"},
    "generic": {"type", "id", "name", "content"},
    "mushra": {
        "type",
        "id",
        "name",
        "content",
        "showWaveform",
        "enableLooping",
        "strict",
        "reference",
        "createAnchor35",
        "createAnchor70",
        "randomize",
        "showConditionNames",
        "stimuli",
        "switchBack",
    },
    "likert_single_stimulus": {
        "type",
        "id",
        "name",
        "content",
        "showWaveform",
        "mustRate",
        "mustPlayback",
        "stimuli",
        "maxStimuli",
        "response",
    },
    "finish": {"type", "name", "content", "showResults", "writeResults", "questionnaire"},
}


@pytest.fixture
def run(tmp_path: Path) -> tuple[ArtifactStore, object]:
    store = stored_run(tmp_path / "store")
    return store, load_settings(store=str(tmp_path / "store"), natural=["nat"])


def test_mushra_export_is_a_webmushra_folder_with_a_seeded_design(run: tuple, tmp_path: Path) -> None:
    store, settings = run
    out = tmp_path / "mushra"
    done = export_test(
        settings, RUN, out, kind="mushra", test_id="m1", raters=4, items=5, anchor_y_system="poor", seed=7
    )
    configs = rater_configs(out, "m1")
    assert [c["testId"] for c in configs] == ["m1-r01", "m1-r02", "m1-r03", "m1-r04"]
    for config in configs:
        assert set(config) <= DOCUMENTED[None]
        for page in config["pages"]:
            assert set(page) <= DOCUMENTED[page["type"]], page["type"]
        pages = [p for p in config["pages"] if p["type"] == "mushra"]
        assert len(pages) == 5 and config["pages"][-1]["type"] == "finish"
        for page in pages:
            # systems + Anchor-X + Anchor-Y listed; webMUSHRA adds the hidden reference: 6 conditions of 12
            assert len(page["stimuli"]) == 5 and page["randomize"] is True
            files = [page["reference"], *page["stimuli"].values()]
            infos = [sf.info(out / f) for f in files]
            assert {i.samplerate for i in infos} == {48000} and {i.channels for i in infos} == {1}
            assert len({i.frames for i in infos}) == 1  # padded to one length
            assert all(i.duration <= 12 for i in infos)
    orders = [[p["id"] for p in c["pages"] if p["type"] == "mushra"] for c in configs]
    assert len({tuple(o) for o in orders}) > 1 and all(sorted(o) == sorted(orders[0]) for o in orders)
    again = export_test(
        settings,
        RUN,
        tmp_path / "again",
        kind="mushra",
        test_id="m2",
        raters=4,
        items=5,
        anchor_y_system="poor",
        seed=7,
    )
    assert again["page_orders"] == done["page_orders"] and again["items"] == done["items"]  # the seed decides
    # the key is the run's, never the folder's: no system or item name in any file name or config
    key = stimuli_key(store, "m1")
    assert set(key["system_id"]) == {*SYSTEMS, "nat", "anchor-x", "anchor-y"}
    assert set(key.loc[key["stimulus"] == "reference", "role"]) == {"reference"}
    text = "".join(p.read_text() for p in (out / "configs").glob("*.yaml"))
    assert not any(f"{s}" in text for s in ("good", "fair", "poor", "anchor"))
    assert (
        not list(out.rglob("*key*")) and json.loads(store.read_bytes(f"runs/{RUN}/listening/m1/test.json"))["seed"] == 7
    )
    # Anchor-X is the reference band-limited to 3.5 kHz: no energy left above 4 kHz
    page = key[key["system_id"] == "anchor-x"].iloc[0]
    ref = key[(key["trial_id"] == page["trial_id"]) & (key["stimulus"] == "reference")].iloc[0]
    for f, limited in ((page["file"], True), (ref["file"], False)):
        x, rate = sf.read(out / f)
        spectrum = np.abs(np.fft.rfft(x)) ** 2
        high = spectrum[np.fft.rfftfreq(len(x), 1 / rate) > 4000].sum() / spectrum.sum()
        assert (high < 1e-4) if limited else (high > 1e-3)
    # (Anchor-Y's pitch, length and word edits are checked in test_anchor_y_flattens_the_pitch_slows_the_clip...)
    with pytest.raises(SpecError, match="already has a listening test 'm1'"):
        export_test(settings, RUN, out, kind="mushra", test_id="m1")


def test_conditions_past_twelve_are_split_over_pages_and_long_items_left_out(tmp_path: Path) -> None:
    systems = tuple(f"s{k}" for k in range(14))
    store = stored_run(tmp_path / "store", systems=systems, items=3, long_item=True)
    settings = load_settings(store=str(tmp_path / "store"), natural=["nat"])
    done = export_test(
        settings, RUN, tmp_path / "out", kind="mushra-nmr", test_id="big", raters=1, items=3, anchor_y_system="s0"
    )
    # i0's reference is 13 s; i1's s0 clip is 10.5 s, so its Anchor-Y (slowed 1.2x) would pass 12 s
    assert done["left_out_too_long"] == 2 and done["items"] == ["i2"]
    [config] = rater_configs(tmp_path / "out", "big")
    pages = [p for p in config["pages"] if p["type"] == "mushra"]
    # 14 systems + Anchor-X + Anchor-Y, with the hidden reference at most 12 a page: two pages for the item
    assert len(pages) == 2 and all(len(p["stimuli"]) + 1 <= 12 for p in pages)
    assert all(len(p["stimuli"]) == 2 + 7 for p in pages)  # the 14 systems split 7 + 7, each page its anchors
    key = stimuli_key(store, "big")
    for _item, g in key[key["role"] == "system"].groupby("item_id"):
        assert sorted(g["system_id"]) == sorted(systems)
    assert "#buttonReference" in pages[0]["content"]  # NMR: the mentioned reference is hidden


def test_a_mushra_needs_a_reference_and_known_systems(tmp_path: Path) -> None:
    stored_run(tmp_path / "store")
    settings = load_settings(store=str(tmp_path / "store"))  # no natural system declared
    with pytest.raises(SpecError, match="needs a reference"):
        export_test(settings, RUN, tmp_path / "o", kind="mushra", test_id="t")
    with pytest.raises(SpecError, match="'nope' has no audio"):
        export_test(settings, RUN, tmp_path / "o", kind="mushra", test_id="t", reference="nope")
    with pytest.raises(SpecError, match="--kind"):
        export_test(settings, RUN, tmp_path / "o", kind="abx", test_id="t")
    with pytest.raises(SpecError, match="--test-id"):
        export_test(settings, RUN, tmp_path / "o", kind="mos", test_id="../x")


def test_webmushra_results_round_trip_into_the_ratings_table(run: tuple, tmp_path: Path) -> None:
    store, settings = run
    out = tmp_path / "mushra"
    export_test(settings, RUN, out, kind="mushra", test_id="m", raters=3, items=4)
    key = stimuli_key(store, "m")
    results = tmp_path / "mushra.csv"
    results.write_text(mushra_csv(out, "m", key), encoding="utf-8")
    done = ingest_ratings(settings, RUN, "m", [results])
    ratings = store.read(RUN, "ratings")
    # 3 raters x 4 pages x (3 systems + Anchor-X + hidden reference)
    assert done["stored"] == len(ratings) == 3 * 4 * 5 and done["flagged"] == 0
    raw = pd.read_csv(results)
    raw["rater_id"] = raw["session_test_id"].str.removeprefix("m-")
    joined = raw.merge(key, on=["trial_id"]).query("rating_stimulus == stimulus")
    stored = ratings.merge(joined, on=["rater_id", "trial_id", "item_id", "system_id"])
    assert len(stored) == len(ratings) and (stored["score"] == stored["rating_score"]).all()
    assert (stored["rating_time_s"] == 4.321).all()
    assert set(ratings["role"]) == {"system", "reference", "anchor-x"}
    assert json.loads(ratings["questionnaire"].iloc[0]) == {
        "rater": ratings["questionnaire"].map(lambda q: json.loads(q)["rater"]).iloc[0],
        "headphones": "yes",
    }
    again = ingest_ratings(settings, RUN, "m", [results])  # the same file again changes nothing
    assert again["stored"] == 0 and again["already_stored"] == 60 and len(store.read(RUN, "ratings")) == 60


def test_bad_results_are_refused_whole_or_flagged_and_nothing_ingested_is_lost(run: tuple, tmp_path: Path) -> None:
    store, settings = run
    out = tmp_path / "mushra"
    export_test(settings, RUN, out, kind="mushra", test_id="m", raters=2, items=3)
    key = stimuli_key(store, "m")
    first = tmp_path / "first.csv"
    first.write_text(mushra_csv(out, "m", key, skip_reference={(1, "p002")}), encoding="utf-8")
    done = ingest_ratings(settings, RUN, "m", [first])
    assert done["pages_without_hidden_reference"] == 1
    before = store.read(RUN, "ratings")
    noted = before[before["note"].notna()]
    assert set(zip(noted["rater_id"], noted["trial_id"])) == {("r01", "p002")}

    text = mushra_csv(out, "m", key, seed=1)
    lines = text.splitlines()
    header, row = lines[0], lines[5].split(",")
    cases = {
        "unknown stimulus": ("s0000000000", 5, r"rater 'r0\d', page 'p00\d': stimulus 's0000000000' is not one"),
        "score off scale": ("130", 6, r"score 130 is outside the mushra scale 0..100"),
    }
    for name, (value, column, message) in cases.items():
        bad = row.copy()
        bad[column] = value
        path = tmp_path / f"{name}.csv"
        path.write_text("\n".join([header, *lines[1:5], ",".join(bad)]) + "\n", encoding="utf-8")
        with pytest.raises(DatasetError, match=message):
            ingest_ratings(settings, RUN, "m", [path])
    other = tmp_path / "other.csv"
    other.write_text(text.replace("m-r01", "other-r01"), encoding="utf-8")
    with pytest.raises(DatasetError, match="'other-r01' is not a rater config of test 'm'"):
        ingest_ratings(settings, RUN, "m", [other])
    assert store.read(RUN, "ratings").equals(before)  # refused whole: nothing written, nothing changed

    # a rater who took the test twice (a second webMUSHRA session): kept, flagged, left out of the analysis
    twice = tmp_path / "twice.csv"
    twice.write_text(mushra_csv(out, "m", key, seed=2, sessions=2), encoding="utf-8")
    done = ingest_ratings(settings, RUN, "m", [twice])
    after = store.read(RUN, "ratings")
    assert len(after) == len(before) + done["stored"]
    flagged = after[after["flag"].notna()]
    # every rating of the second file repeats a page of the first, except r01's hidden reference on p002, which
    # the first file lacked: that one is a first rating and counts
    assert done["flagged"] == len(flagged) == done["stored"] - 1 == 2 * 3 * 5 * 2 - 1
    assert flagged["flag"].str.contains(r"rater 'r0\d' rated page 'p00\d' again").all()
    used = after[after["flag"].isna()]
    assert set(used.loc[used["source_file"] == "twice.csv", "role"]) == {"reference"}
    assert after.merge(before, on=list(before.columns)).shape[0] == len(before)  # what was there is unchanged
    markdown = analyse_test(settings, RUN, "m")
    assert f"{len(before) + 1} ratings used; {len(flagged)} flagged" in markdown


def _lss_csv(folder: Path, test_id: str, key: pd.DataFrame, rate) -> str:
    """lss.csv as write.php writes it: the rating columns labelled from the session's first trial."""
    systems = key.set_index(["trial_id", "stimulus"])["system_id"]
    buf = io.StringIO()
    out = csv.writer(buf)
    header_written = False
    for n, config in enumerate(rater_configs(folder, test_id), start=1):
        for page in config["pages"]:
            if page["type"] != "likert_single_stimulus":
                continue
            for stimulus in page["stimuli"]:
                system = "practice" if stimulus == "practice" else systems[(page["id"], stimulus)]
                values = rate(system, n)
                if not header_written:
                    names = (
                        ["stimuli_rating"]
                        if len(values) == 1
                        else [f"stimuli_rating{i + 1}" for i in range(len(values))]
                    )
                    out.writerow(
                        ["session_test_id", "rater", "headphones", "trial_id", *names, "stimuli", "rating_time"]
                    )
                    header_written = True
                out.writerow([config["testId"], f"rater {n}", "yes", page["id"], *values, stimulus, 2000])
    return buf.getvalue()


def test_mushra_dg_scoresheets_become_formula_scores_with_fault_isolation(
    run: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttseval.tasks.listening import figures

    store, settings = run
    drawn = []  # the figures as drawn, to read their bars and points
    real_png = figures.figure_png
    monkeypatch.setattr(figures, "figure_png", lambda fig, **kw: drawn.append(fig) or real_png(fig, **kw))
    out = tmp_path / "dg"
    export_test(settings, RUN, out, kind="mushra-dg", test_id="dg", raters=3, items=3)
    key = stimuli_key(store, "dg")
    sheets = {  # per system: MP, SP, US, DA, SEF, WS, L, VQ, R
        "good": [1, 0, 0, 0, 0, 0, 100, 92.5, 100],
        "fair": [2, 1, 1, 0, 1, 0, 85, 85, 85],
        "poor": [4, 2, 2, 3, 2, 1, 70, 60, 60],
        "nat": [0, 0, 0, 0, 0, 0, 100, 100, 100],
        "anchor-x": [0, 0, 0, 2, 0, 0, 100, 70, 100],
        "practice": [0] * 6 + [100] * 3,
    }
    (tmp_path / "mushra.csv").write_text(mushra_csv(out, "dg", key), encoding="utf-8")
    (tmp_path / "lss.csv").write_text(_lss_csv(out, "dg", key, lambda s, n: sheets[s]), encoding="utf-8")
    ingest_ratings(settings, RUN, "dg", [tmp_path / "mushra.csv", tmp_path / "lss.csv"])
    ratings = store.read(RUN, "ratings")
    assert len(ratings) == 3 * 3 * 5  # one row per clip: the slider and the scoresheet joined
    by_system = ratings.groupby("system_id")["score"].agg(["min", "max"])
    # appendix A.6 by hand: good 97.5 - 5 = 92.5; fair 85 - 10 - 10 - 5 - 5 = 55;
    # poor 63.33 - 20 - 20 - 10 - 15 - 10 - 25 = -36.67 -> clipped to 0; anchor-x 90 - 10 = 80; nat 100
    assert by_system.to_dict("index") == {
        "anchor-x": {"min": 80.0, "max": 80.0},
        "fair": {"min": 55.0, "max": 55.0},
        "good": {"min": 92.5, "max": 92.5},
        "nat": {"min": 100.0, "max": 100.0},
        "poor": {"min": 0.0, "max": 0.0},
    }
    assert ratings["slider"].notna().all() and ratings["word_skips"].notna().all()
    markdown = analyse_test(settings, RUN, "dg")
    assert "Fault isolation" in markdown and store.exists(f"runs/{RUN}/listening/dg/faults.png")
    assert "| poor | 9 | 100% | 100% | 100% | 100% | 100% | 100% | 70.0 | 60.0 | 60.0 |" in markdown
    # the figure shows those numbers: per system, the stacked bars add up the shares of clips with each of the six
    # faults (from the sheets above: good has MP only, fair MP SP US SEF, poor all six, anchor-x DA, nat none), and
    # the points are the perceptual means (poor: L 70, VQ 60, R 60)
    [fig] = [f for f in drawn if f._suptitle is not None and "fault isolation" in f._suptitle.get_text()]
    bars, points = fig.axes[:2]
    names = [t.get_text() for t in bars.get_xticklabels()]
    stacked = dict.fromkeys(names, 0.0)
    for bar in bars.patches:
        stacked[names[round(bar.get_x() + bar.get_width() / 2)]] += bar.get_height()
    assert stacked == pytest.approx({"good": 100, "fair": 400, "poor": 600, "anchor-x": 100, "nat": 0})
    poor = names.index("poor")
    assert sorted(c.get_offsets()[poor][1] for c in points.collections) == pytest.approx([60, 60, 70])
    assert store.read_bytes(f"runs/{RUN}/listening/dg/faults.png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_cmos_scores_are_oriented_to_the_system_whatever_order_the_rater_heard(run: tuple, tmp_path: Path) -> None:
    store, settings = run
    out = tmp_path / "cmos"
    export_test(settings, RUN, out, kind="cmos", test_id="c", raters=4, items=3)
    key = stimuli_key(store, "c")
    flips = key.set_index("stimulus")["b_is_system"]
    truth = {"good": 1.0, "fair": -0.5, "poor": -2.5}

    # each rater hears one order of each pair, drawn per rater: both orders occur
    heard = [
        s
        for c in rater_configs(out, "c")
        for p in c["pages"]
        if p["type"] == "likert_single_stimulus"
        for s in p["stimuli"]
    ]
    assert len(heard) == 4 * 3 * 3 and 0 < flips[heard].mean() < 1

    def oriented(system: str, n: int) -> list[float]:
        return [truth[system]]

    text = _lss_csv(out, "c", key, oriented)
    # write the score of B against A: the truth when B is the system, its negation when A is
    rows = list(csv.reader(io.StringIO(text)))
    for row in rows[1:]:
        if not flips[row[-2]]:
            row[4] = str(-float(row[4]))
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    (tmp_path / "lss.csv").write_text(buf.getvalue(), encoding="utf-8")
    ingest_ratings(settings, RUN, "c", [tmp_path / "lss.csv"])
    ratings = store.read(RUN, "ratings")
    assert ratings.groupby("system_id")["score"].unique().map(list).to_dict() == {s: [v] for s, v in truth.items()}
    assert set(ratings["other_system_id"]) == {"nat"}
    markdown = analyse_test(settings, RUN, "c")
    assert (
        "| good | 12 | +1.00 |" in markdown and "| poor | 12 | -2.50 | 0.00 | ±0.00 | 100.0 | 0.0 | 0.0 |" in markdown
    )
    # the listeners' Bradley-Terry ranking: good wins all 12 ratings against nat, fair and poor lose all 12 (3 items:
    # no interval); items and comparisons per system counted from the 36 ratings
    board = markdown[markdown.index("**Bradley-Terry ranking from the listeners' choices**") :].split("\n\n")[1]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in board.splitlines()[2:]]
    assert {c[1]: (c[0], c[4], c[5]) for c in cells} == {
        "good": ("1", "3", "12"),
        "nat": ("2", "3", "36"),
        "fair": ("3", "3", "12"),
        "poor": ("3", "3", "12"),
    }
    assert all("(n too small)" in c[2] for c in cells)


def test_plain_csv_mos_with_alpha_and_the_report_section(run: tuple, tmp_path: Path) -> None:
    store, settings = run
    export_test(settings, RUN, tmp_path / "mos", kind="mos", test_id="mos", raters=2, items=4)
    key = stimuli_key(store, "mos")
    rng = np.random.default_rng(0)
    mos = {"good": 4, "fair": 3, "poor": 2, "nat": 5}
    rows = [
        {
            "rater_id": f"lab-{n}",
            "trial_id": "mos",
            "stimulus": r.stimulus,
            "score": int(np.clip(mos[r.system_id] + rng.integers(-1, 2) * (n == 3), 1, 5)),
        }
        for n in (1, 2, 3)
        for r in key.itertuples()
    ]
    path = tmp_path / "prolific.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    ingest_ratings(settings, RUN, "mos", [path])
    ratings = store.read(RUN, "ratings")
    assert len(ratings) == 3 * 4 * 4 and set(ratings["rater_id"]) == {"lab-1", "lab-2", "lab-3"}
    markdown = analyse_test(settings, RUN, "mos")
    expected = pd.DataFrame(rows).merge(key, on="stimulus").groupby("system_id")["score"].agg(["mean", "std"])
    for rank, (system, r) in enumerate(expected.sort_values("mean", ascending=False).iterrows(), start=1):
        role = "reference" if system == "nat" else "system"
        assert f"| {rank} | {system} | {role} | 12 | {r['mean']:.2f} | {r['std']:.2f} |" in markdown
    assert "Krippendorff's alpha (ordinal) over (item, system) units: 0." in markdown  # value: test_listening_metrics
    # the planning table (values: tests/unit/test_listening_planning.py) for the two TTS systems whose means are closest
    means = expected.drop(index="nat")["mean"].sort_values(ascending=False)
    k = int(np.argmin(-np.diff(means.to_numpy())))
    planning = (
        markdown[
            markdown.index(f"**Planning: listeners x utterances for `{means.index[k]}` vs `{means.index[k + 1]}`**") :
        ]
        .split("\n\n")[1]
        .splitlines()
    )
    assert planning[0].startswith("| listeners \\ utterances | 2 | 3 | 4 |") and len(planning) == 2 + 2  # 2, 3
    assert all(cell.strip().startswith("±") for line in planning[2:] for cell in line.strip("|").split("|")[1:])
    from ttseval.tasks.report import write_full_report

    report = write_full_report(store, RUN, settings, [*SYSTEMS, "nat"], {"run_id": RUN})
    assert "## Listening tests" in report and "### Listening test `mos` (mos)" in report
    bad = tmp_path / "bad.csv"
    bad.write_text(f"rater_id,trial_id,stimulus,score\nlab-1,mos,{key['stimulus'].iloc[0]},7\n", encoding="utf-8")
    with pytest.raises(
        DatasetError,
        match=r"bad.csv row 2: rater 'lab-1', page 'mos', stimulus 's[0-9a-f]+': "
        r"score 7 is outside the mos scale 1..5",
    ):
        ingest_ratings(settings, RUN, "mos", [bad])
    empty = tmp_path / "empty.csv"
    empty.write_text("rater_id,trial_id,stimulus,score\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="a header and no ratings"):
        ingest_ratings(settings, RUN, "mos", [empty])
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("rater,page,clip,score\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="neither webMUSHRA's"):
        ingest_ratings(settings, RUN, "mos", [wrong])


def test_anchor_y_flattens_the_pitch_slows_the_clip_and_cuts_or_repeats_one_word() -> None:
    """tasks.listening.anchors.anchor_y on a voiced glide (F0 120 -> 180 Hz over 2 s, 7 harmonics), measured with
    librosa's pYIN (not Praat, which makes the anchor): the contour is flat at about the mean F0, the clip is 1.2x
    as long, and 'skip' / 'repeat' take away / add one word's length (2 s of voice over 4 words: 0.5 s)."""
    import librosa

    from ttseval.tasks.listening.anchors import anchor_y

    rate = 16000
    t = np.arange(2 * rate) / rate
    phase = 2 * np.pi * np.cumsum(120 + 30 * t) / rate
    glide = Audio((0.1 * sum(np.sin(k * phase) / k for k in range(1, 8))).astype(np.float32), rate)

    def f0(clip: Audio) -> np.ndarray:
        track, voiced, _ = librosa.pyin(clip.samples, fmin=80, fmax=300, sr=rate, frame_length=1024)
        return track[voiced & np.isfinite(track)][5:-5]  # the onset and offset frames aside

    before = f0(glide)
    assert before.std() > 15  # the glide: about 17 Hz around 150
    made = {
        edit: anchor_y(glide, slowdown=1.2, edit=edit, n_words=4, rng=np.random.default_rng(0))
        for edit in (None, "skip", "repeat")
    }
    after = f0(made[None])
    assert after.std() < 2 and after.mean() == pytest.approx(before.mean(), abs=5)
    for edit, seconds in ((None, 2.0), ("skip", 1.5), ("repeat", 2.5)):
        assert made[edit].sample_rate_hz == rate
        assert made[edit].duration_s == pytest.approx(1.2 * seconds, abs=0.03), edit
