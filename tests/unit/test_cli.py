"""The CLI package's own behaviour: the real parser (positionals anywhere), the evaluate preflight that runs
once per invocation (flows/preflight.py), and the logic the commands call below them (an items file written by
the importers, judge-human alignment). The commands end to end are in the *_cli test modules."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.support.harness import ROOT
from ttseval.core.errors import DatasetError, SpecError

# -- parsing -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("step", ["analyze", "ingest"])
def test_human_eval_results_files_parse_before_and_after_the_options(step: str) -> None:
    from ttseval.cli import build_parser

    files = ["results/t1-r1/mushra.csv", "results/t1-r2/mushra.csv"]
    options = ["--run-id", "demo", "--test-id", "t1"]
    for argv in (
        ["human-eval", step, *options, *files],  # the documented order: refused before the fix
        ["human-eval", step, *files, *options],
        ["human-eval", step, files[0], *options, files[1]],
    ):
        args = build_parser().parse_args(argv)
        assert (args.step, args.run_id, args.test_id, args.results) == (step, "demo", "t1", files), argv
    export = build_parser().parse_args(["human-eval", "export", "--run-id", "demo", "--raters", "4"])
    assert (export.step, export.results, export.raters) == ("export", [], 4)


def test_unknown_options_and_missing_positionals_are_still_refused(capsys: pytest.CaptureFixture) -> None:
    from ttseval.cli import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["human-eval", "analyze", "--run-id", "demo", "--no-such-flag", "a.csv"])
    assert e.value.code == 2 and "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["import-dataset", "--format", "seedtts", "--out", "o.jsonl"])
    assert e.value.code == 2 and "the following arguments are required: path" in capsys.readouterr().err
    args = build_parser().parse_args(["import-dataset", "--format", "seedtts", "--out", "o.jsonl", "meta.lst"])
    assert (args.path, args.out, args.format) == ("meta.lst", "o.jsonl", "seedtts")


def test_every_command_has_its_group_module() -> None:
    import argparse

    from ttseval.cli import build_parser

    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    modules = {name: sub.get_default("func").__module__.rsplit(".", 1)[1] for name, sub in commands.choices.items()}
    assert modules == {
        "evaluate": "runs",
        "backfill-judge": "runs",
        "report": "results",
        "nightly": "runs",
        "export": "results",
        "leaderboard": "results",
        "trends": "results",
        "stack": "operations",
        "server": "operations",
        "series": "operations",
        "serve": "operations",
        "human-alignment": "listening",
        "human-eval": "listening",
        "mos-forms": "listening",
        "mos-analyze": "listening",
        "import-dataset": "datasets",
        "generate-dataset": "datasets",
        "generate-instructions": "datasets",
        "datasets": "registered",
        "systems": "registered",
        "store": "registered",
        "providers": "catalog",
        "voices": "catalog",
    }
    for path in (ROOT / "ttseval" / "cli").glob("*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 400, path


# -- the evaluate preflight ----------------------------------------------------------------------------------------


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The preflight's three checks, counted (and still run)."""
    import ttseval.flows.preflight as preflight

    calls = {"read_items": 0, "check_systems": 0, "check_judges": 0}
    for name in calls:
        real = getattr(preflight, name)

        def wrapper(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(preflight, name, wrapper)
    return calls


def test_the_preflight_checks_once_when_handed_over_and_again_otherwise(
    counted: dict[str, int], small_dataset: Path, tmp_path: Path
) -> None:
    from ttseval.core.config import load_settings
    from ttseval.flows.preflight import handed_over, preflight_evaluate

    settings = load_settings(store=str(tmp_path / "store"))
    systems = ["espeak-ng", "flite:slt"]
    checked = preflight_evaluate(str(small_dataset), systems, settings, judges=[])
    assert counted == {"read_items": 1, "check_systems": 1, "check_judges": 2}
    assert len(checked.items) == 9 and [s.canonical for s in checked.systems] == systems
    assert checked.baseline.canonical == "espeak-ng" and checked.judges == [] and checked.instruction_judges == []
    # the caller's dask placement differs from the flow's: still the same check
    placed = settings.model_copy(update={"dask_address": "tcp://127.0.0.1:1", "n_workers": 5})
    with handed_over(checked):
        assert preflight_evaluate(str(small_dataset), systems, placed, judges=[]) is checked  # the flow's call
        assert counted == {"read_items": 1, "check_systems": 1, "check_judges": 2}
        again = preflight_evaluate(str(small_dataset), systems, settings, judges=[])  # one-shot: a second run checks
        assert again is not checked and counted["read_items"] == 2
    with handed_over(checked):
        preflight_evaluate(str(small_dataset), systems, settings, judges=["objective"])  # other inputs: checked
        assert counted == {"read_items": 3, "check_systems": 3, "check_judges": 6}
    preflight_evaluate(str(small_dataset), systems, settings, judges=[])  # nothing handed over outside
    assert counted["read_items"] == 4
    assert (tmp_path / "store").exists() is False  # the preflight writes nothing


def test_the_preflight_refuses_a_baseline_outside_the_systems(small_dataset: Path, tmp_path: Path) -> None:
    from ttseval.core.config import load_settings
    from ttseval.flows.preflight import preflight_evaluate

    with pytest.raises(SpecError, match=r"baseline 'piper:joe' is not one of the systems; add it to --systems"):
        preflight_evaluate(
            str(small_dataset),
            ["espeak-ng", "flite:slt"],
            load_settings(store=str(tmp_path)),
            baseline="piper:joe",
            judges=[],
        )


def test_evaluate_refuses_a_bad_baseline_before_any_prefect_server(small_dataset: Path, tmp_path: Path) -> None:
    # Before, only the flow checked the baseline: a temporary Prefect server started first.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "PREFECT_API"))}
    env |= {"PYTHONPATH": str(ROOT), "PREFECT_HOME": str(tmp_path / "ph"), "DO_NOT_TRACK": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ttseval.cli",
            "evaluate",
            "--dataset",
            str(small_dataset),
            "--systems",
            "espeak-ng,flite:slt",
            "--baseline",
            "piper:joe",
            "--judges",
            "",
            "--store",
            str(tmp_path / "s"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "ttseval: error: baseline 'piper:joe' is not one of the systems; add it to --systems"
    ]
    assert "temporary server" not in out.stdout + out.stderr and not (tmp_path / "s").exists()


def test_a_dry_run_prices_paid_vendors_before_any_api_key_is_set(tmp_path: Path) -> None:
    """Estimating cost is what people do before signing up, so no key may be asked for."""
    from ttseval.providers.tts.elevenlabs import ElevenLabsTTS
    from ttseval.providers.tts.openai_speech import OpenAISpeechTTS

    texts = ["Is the kettle on yet?", "Tell me what you saw, please."]
    data = tmp_path / "items.jsonl"
    data.write_text(
        "".join(
            json.dumps({"item_id": f"k{i}", "text": t, "language": "en-US", "category": "questions", "depth": 0}) + "\n"
            for i, t in enumerate(texts)
        ),
        encoding="utf-8",
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TTSEVAL_", "PREFECT_API")) and "API_KEY" not in k and not k.endswith("_KEY")
    }
    env |= {"PYTHONPATH": str(ROOT), "PREFECT_HOME": str(tmp_path / "ph"), "DO_NOT_TRACK": "1"}
    args = [
        sys.executable,
        "-m",
        "ttseval.cli",
        "evaluate",
        "--dataset",
        str(data),
        "--systems",
        "openai:alloy,elevenlabs:JBFqnCBsd6RMkjVDRZzb",
        "--judges",
        "gemini:gemini-2.5-flash",
        "--store",
        str(tmp_path / "s"),
    ]
    dry = subprocess.run([*args, "--dry-run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr
    rows = {
        line.rsplit(maxsplit=7)[0].strip(): line.rsplit(maxsplit=7)[1:]
        for line in dry.stdout.splitlines()
        if len(line.rsplit(maxsplit=7)) == 8
    }
    chars = sum(map(len, texts))  # 21 + 29 characters, each billed once
    # USD by hand: characters x the vendor's list price per million characters (tts-1 15, multilingual v2 100)
    for system, price in (
        ("openai:alloy", OpenAISpeechTTS.prices["tts-1"]),
        ("elevenlabs:JBFqnCBsd6RMkjVDRZzb", ElevenLabsTTS.prices["eleven_multilingual_v2"]),
    ):
        kind, keys, calls, _reused, billed, _, usd = rows[system]
        assert (kind, keys, calls, billed) == ("tts", "2", "2", str(chars))
        assert float(usd) == pytest.approx(round(chars * price / 1e6, 4))
    # elevenlabs vs the baseline on 2 items, and the same 2 again in the other order (the position audit)
    assert rows["gemini:gemini-2.5-flash (pairwise)"][:3] == ["judge", "4", "4"]
    assert float(rows["gemini:gemini-2.5-flash (pairwise)"][-1]) > 0
    assert "no API key yet for openai:alloy, elevenlabs:JBFqnCBsd6RMkjVDRZzb, gemini:gemini-2.5-flash" in dry.stdout
    assert not (tmp_path / "s").exists()  # the dry run wrote nothing
    real = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert real.returncode == 2 and "openai needs an API key: set OPENAI_API_KEY" in real.stderr  # a run still does


def _cli(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    """The real `ttseval` command with no TTSEVAL_ setting, no API key and no Prefect server from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTSEVAL_", "PREFECT_API")) and "API_KEY" not in k}
    env |= {"PYTHONPATH": str(ROOT), "PREFECT_HOME": str(tmp_path / "ph"), "DO_NOT_TRACK": "1"} | extra
    return subprocess.run(
        [sys.executable, "-m", "ttseval.cli", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


def test_a_missing_store_or_run_is_exit_2_with_the_same_words_in_every_command(tmp_path: Path) -> None:
    """`report` said 'run failed' (exit 1) where `export` said the store had no such run (exit 2). Every command
    that reads a store now says the same thing with exit code 2."""
    from ttseval.core.schemas import table_from_rows
    from ttseval.core.store import ArtifactStore

    store = tmp_path / "store"
    ArtifactStore(str(store)).write_part(
        "r1",
        "items",
        table_from_rows(
            "items", [{"item_id": "i1", "category": "questions", "depth": 0, "language": "en-US", "text": "Is it on?"}]
        ),
    )
    typo = tmp_path / "stor"
    for command in (
        ["report", "--run-id", "r1"],
        ["export", "--run-id", "r1", "--out", str(tmp_path / "x")],
        ["serve", "--port", "0"],
        ["leaderboard"],
    ):
        out = _cli([*command, "--store", str(typo)], tmp_path)
        assert (out.returncode, out.stderr.strip()) == (
            2,
            (
                f"ttseval: error: no store at {typo}: nothing is stored "
                "there; check --store (or the TTSEVAL_STORE variable)"
            ),
        ), command
        assert not typo.exists()
    for command in (["report", "--run-id", "nope"], ["export", "--run-id", "nope", "--out", str(tmp_path / "x")]):
        out = _cli([*command, "--store", str(store)], tmp_path)
        assert (out.returncode, out.stderr.strip()) == (
            2,
            f"ttseval: error: no run 'nope' in {store}; runs there: r1; check --run-id and --store",
        ), command
    out = _cli(["leaderboard", "--store", str(store)], tmp_path)  # a store with no reported run
    assert (out.returncode, out.stderr.strip()) == (
        2,
        f"ttseval: error: no run with a report in {store}: run ttseval evaluate",
    )


def test_a_new_store_is_announced_and_a_paid_run_on_it_needs_new_store(tmp_path: Path, monkeypatch) -> None:
    """A mistyped --store started over silently, paying again. The store is the typo's."""
    from ttseval.core.config import load_settings
    from ttseval.core.errors import ConfigError
    from ttseval.core.store import ArtifactStore
    from ttseval.flows.preflight import preflight_evaluate

    data = tmp_path / "items.jsonl"
    data.write_text(
        json.dumps(
            {"item_id": "k0", "text": "Is the kettle on yet?", "language": "en-US", "category": "questions", "depth": 0}
        )
        + "\n",
        encoding="utf-8",
    )
    typo = tmp_path / "stor"
    args = [
        "evaluate",
        "--dataset",
        str(data),
        "--systems",
        "openai:alloy,espeak-ng",
        "--judges",
        "",
        "--store",
        str(typo),
    ]
    refused = _cli(args, tmp_path, OPENAI_API_KEY="sk-fake-0123")
    # 21 characters at tts-1's USD 15 per million: USD 0.000315, priced as the dry run prices it
    assert refused.returncode == 2 and refused.stderr.strip() == (
        f"ttseval: error: the store {typo} does not exist yet, and this run would pay about USD 0.0003 (openai:alloy)"
        " to compute everything there: check --store (a mistyped one starts over and pays again); to create it, pass "
        "--new-store (or set TTSEVAL_ALLOW_NEW_STORE=true)"
    )
    assert not typo.exists() and "sk-fake-0123" not in refused.stderr
    dry = _cli([*args, "--dry-run"], tmp_path)  # a dry run pays nothing: announced, not refused
    assert dry.returncode == 0 and f"ttseval: NEW STORE: nothing is stored at {typo} yet" in dry.stderr
    # The same preflight, in the flow too: the flag's setting lets the run create the store; a free run is let
    # through (and announced); once the store holds anything it is not new.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-0123")
    paid = ["openai:alloy", "espeak-ng"]
    with pytest.raises(ConfigError, match="does not exist yet"):
        preflight_evaluate(str(data), paid, load_settings(store=str(typo)), judges=[])
    allowed = preflight_evaluate(str(data), paid, load_settings(store=str(typo), allow_new_store=True), judges=[])
    assert allowed.new_store is True
    assert preflight_evaluate(str(data), ["espeak-ng"], load_settings(store=str(typo)), judges=[]).new_store is True
    ArtifactStore(str(typo)).write_bytes("runs/r/log/first.json", b"{}")
    assert preflight_evaluate(str(data), paid, load_settings(store=str(typo)), judges=[]).new_store is False


def _help(*command: str) -> str:
    """What `ttseval <command> --help` prints (the real parser)."""
    from ttseval.cli import build_parser

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--help"])
    return out.getvalue()


def test_the_natural_help_example_is_a_spec_the_run_accepts(tmp_path: Path) -> None:
    """--natural's help said files:<folder of recordings>, which the preflight refuses."""
    from ttseval.core.config import load_settings
    from ttseval.flows.common import check_systems

    text = " ".join(_help("evaluate").split())
    example = re.search(r"--natural NATURAL natural-speech baseline systems, e\.g\. (files:\S+=<folder>) ", text).group(
        1
    )
    folder = tmp_path / "recordings"
    folder.mkdir()
    spec = example.replace("<folder>", str(folder))
    assert check_systems([spec], load_settings(store=str(tmp_path)))[0].provider == "files"
    with pytest.raises(SpecError):  # what the help said before
        check_systems([f"files:{folder}"], load_settings(store=str(tmp_path)))


def test_every_store_option_has_the_same_help_and_nightly_takes_evaluate_s_run_options() -> None:
    """--store had no help on report, export, serve and leaderboard; nightly took no --dry-run, --budget-usd,
    --judges or --baseline. Both are declared once (cli/common.add_store, cli/runs.add_run_options)."""
    from ttseval.cli import build_parser
    from ttseval.cli.common import STORE_HELP

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    with_store = {name: p for name, p in sub.choices.items() if any("--store" in a.option_strings for a in p._actions)}
    assert {"evaluate", "report", "export", "serve", "leaderboard", "nightly", "backfill-judge"} <= set(with_store)
    for name in ("report", "export", "serve", "leaderboard"):
        assert " ".join(STORE_HELP.split()) in " ".join(_help(name).split()), name
    for name, parser in with_store.items():
        assert [a.help for a in parser._actions if "--store" in a.option_strings] == [STORE_HELP], name

    def options(name: str) -> dict[str, tuple]:
        return {
            a.option_strings[0]: (a.help, a.default, type(a).__name__)
            for a in sub.choices[name]._actions
            if a.option_strings
        }

    evaluate, nightly = options("evaluate"), options("nightly")
    for flag in ("--dry-run", "--budget-usd", "--judges", "--baseline", "--new-store"):
        assert nightly[flag] == evaluate[flag] and flag in _help("nightly"), flag


def test_nightly_dry_run_prints_the_estimate_of_tonight_s_run(tmp_path: Path) -> None:
    data = tmp_path / "items.jsonl"
    data.write_text(
        json.dumps(
            {"item_id": "k0", "text": "Is the kettle on yet?", "language": "en-US", "category": "questions", "depth": 0}
        )
        + "\n",
        encoding="utf-8",
    )
    out = _cli(
        [
            "nightly",
            "--dataset",
            str(data),
            "--systems",
            "openai:alloy,espeak-ng",
            "--judges",
            "",
            "--store",
            str(tmp_path / "s"),
            "--budget-usd",
            "1",
            "--dry-run",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert re.fullmatch(
        rf"dry run of 'nightly-\d{{8}}T\d{{6}}Z': what would be called for what {tmp_path}/s lacks "
        r"\(nothing was called; judge figures are estimates\)",
        first,
    ), first
    row = next(line.split() for line in out.stdout.splitlines() if line.split()[:1] == ["openai:alloy"])
    assert row[1:5] == ["tts", "1", "1", "0"] and row[5] == "21"  # 21 characters, one call
    assert float(row[7]) == pytest.approx(round(21 * 15.0 / 1e6, 4))  # tts-1 at USD 15 per million, by hand
    assert not (tmp_path / "s").exists()


# -- what the commands call ----------------------------------------------------------------------------------------


def test_import_items_file_writes_seedtts_items_and_the_ground_truth_manifest(tmp_path: Path) -> None:
    from ttseval.corpus.importers import import_items_file

    en = tmp_path / "seedtts_testset" / "en"
    for clip in ("prompt-wavs/p1.wav", "prompt-wavs/p2.wav", "wavs/u2.wav"):
        (en / clip).parent.mkdir(parents=True, exist_ok=True)
        (en / clip).write_bytes(b"RIFF")  # only their presence is checked here
    (en / "meta.lst").write_text(
        "u1|Hello there.|prompt-wavs/p1.wav|Good morning to you.\n"
        "u2|Second prompt.|prompt-wavs/p2.wav|Target two.|wavs/u2.wav\n",
        encoding="utf-8",
    )
    out = tmp_path / "items.jsonl"
    with pytest.raises(SpecError, match="not for --format seedtts"):
        import_items_file("seedtts", en / "meta.lst", out, system_name="x")
    with pytest.raises(SpecError, match="use a .jsonl or .parquet file name"):
        import_items_file("seedtts", en / "meta.lst", tmp_path / "items.txt")
    assert not out.exists()
    done = import_items_file("seedtts", en / "meta.lst", out)
    assert (done.n_items, done.n_clips, done.missing) == (2, 1, [])
    assert [json.loads(line)["item_id"] for line in out.read_text().splitlines()] == ["u1", "u2"]
    assert done.manifest == tmp_path / "items.ground-truth.jsonl"
    assert done.spec == f"files:seedtts-ground-truth:manifest={done.manifest.resolve()}"
    assert [json.loads(line) for line in done.manifest.read_text().splitlines()] == [
        {"item_id": "u2", "path": str((en / "wavs/u2.wav").resolve())}
    ]
    (en / "prompt-wavs/p2.wav").unlink()
    with pytest.raises(DatasetError, match=r"1 prompt clip\(s\) missing, e\.g\. .*p2\.wav"):
        import_items_file("seedtts", en / "meta.lst", tmp_path / "again.jsonl")
    assert not (tmp_path / "again.jsonl").exists()


def test_alignment_by_judge_counts_only_parsed_answers_per_judge() -> None:
    from ttseval.metrics.agreement import preference_alignment_by_judge

    judgments = pd.DataFrame(
        {
            "judge_spec": ["a", "a", "a", "b", "b", "b"],
            "item_id": ["i1", "i2", "i3", "i1", "i2", "i3"],
            "system_id": ["s"] * 6,
            "winner": ["candidate", "baseline", "tie", "candidate", "candidate", None],
            "status": ["ok", "ok", "ok", "ok", "ok", "failed"],
            "parse_ok": [True, True, False, True, True, None],
        }
    )
    human = pd.DataFrame(
        {"item_id": ["i1", "i2", "i3"], "system_id": ["s"] * 3, "preference": ["candidate", "candidate", "tie"]}
    )
    aligned = preference_alignment_by_judge(judgments, human, {"i1": "emotions", "i2": "questions"})
    assert list(aligned) == ["a", "b"]
    assert aligned["a"]["n"] == 2 and aligned["a"]["raw_agreement"] == 0.5  # i3 unparsed: left out
    assert aligned["b"]["n"] == 2 and aligned["b"]["raw_agreement"] == 1.0  # i3 failed: left out
    assert aligned["a"]["by_category"] == {"emotions": (1, 1.0), "questions": (1, 0.0)}
    assert preference_alignment_by_judge(judgments[judgments["status"] == "failed"], human) == {}
