"""A run's report as a static web page, with every clip playable beside its transcript, scores and verdicts.

Written beside report.md, as runs/<run>/html/:

    index.html, app.js, style.css, compare.html   the page (tasks/report_html/, no build step, no CDN)
    data.js                                        the run: window.TTSEVAL_RUNS[<run>] = {...}

The data is a script, not JSON, so the page also works opened as a file (browsers refuse fetch() from file://).
Audio is linked, not copied: ../../../blobs/audio/<ab>/<sha256>.wav from the page, the store's own blob, so
the page works from a local store as is and from S3 through `ttseval serve`. compare.html?a=<run>&b=<run> loads
two runs' data.js side by side (nightly drift: the same item's clips from both runs and the metric deltas).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ttseval.core.registry import system_name
from ttseval.core.store import ArtifactStore
from ttseval.metrics.wer import word_alignment
from ttseval.metrics.winrate import against_baseline

ASSETS = Path(__file__).resolve().parent.parent / "report_html"  # tasks/report_html, package data of ttseval.tasks
FILES = ("index.html", "app.js", "style.css", "compare.html")


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and NA become null, numpy scalars plain numbers (rounded to 4 decimals)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 4)
    return value


def _markdown_html(markdown: str) -> str:
    """report.md as HTML (markdown-it, CommonMark with tables); figure links made relative to html/."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    return re.sub(r'src="(figures|listening)/', r'src="../\1/', html)


VERDICT_COLUMNS = (
    "system_id",
    "judge_id",
    "status",
    "winner",
    "baseline_id",
    "candidate_first",
    "score_candidate",
    "score_baseline",
    "reasoning_candidate",
    "reasoning_baseline",
    "comparison",
    "error_message",
)
"""The judgments' columns a clip's verdict shows (not the raw answers: at 100,000 clips they are most of the table)."""
TRANSCRIPT_COLUMNS = ("system_id", "asr_id", "status", "wer", "cer", "ref_norm", "hyp_norm", "error_message")
"""The transcripts' columns a clip's recognisers show."""
NORMALISED = ("ref_norm", "hyp_norm")
"""Of them, the normalised texts: read from the store for the page alone."""


ITEMS_PER_BLOCK = 100
"""Items whose rows the page turns into Python values at once: a block of 100 items of 20 systems is 2,000 clips and
their word alignments, where every clip's values of a 100,000-clip run held as lists were 180 MiB of small objects
(blocks of 500 items took the report's peak 25 MiB higher at 100,000 clips)."""


class _ByItem:
    """A table's rows grouped by item without a Python object per row: each item's row positions, and for a block
    of items the columns the page shows, converted for those items' rows only. A column the table lacks reads as
    None."""

    def __init__(self, frame: pd.DataFrame, columns: tuple[str, ...]) -> None:
        self.frame = frame
        self.at: dict[Any, Any] = frame.groupby("item_id", sort=False).indices if len(frame) else {}
        self.columns = columns

    def block(self, item_ids: list[Any]) -> dict[Any, list[dict[str, Any]]]:
        """The rows of `item_ids`, each item's in the table's order, as dicts of the shown columns."""
        present = [i for i in item_ids if i in self.at]
        if not present:
            return {}
        positions = np.concatenate([self.at[i] for i in present])
        values = {
            c: self.frame[c].take(positions).tolist() if c in self.frame.columns else [None] * len(positions)
            for c in self.columns
        }
        rows: dict[Any, list[dict[str, Any]]] = {}
        at = 0
        for item_id in present:
            n = len(self.at[item_id])
            rows[item_id] = [{c: v[j] for c, v in values.items()} for j in range(at, at + n)]
            at += n
        return rows


class PageItems:
    """The page's items, each built as it is written: at 100,000 clips every clip's dict with its word alignments
    held at once is most of a gigabyte, one item's is a few kilobytes. Iterable as often as needed, in the items
    table's order; each item's clips in the synthesis table's order, its recognisers and judges in theirs. The
    tables' values become Python objects a block of items at a time (ITEMS_PER_BLOCK)."""

    def __init__(
        self,
        items: pd.DataFrame,
        synthesis: pd.DataFrame,
        quality: pd.DataFrame,
        transcripts: pd.DataFrame,
        judgments: pd.DataFrame,
    ) -> None:
        self.items = {c: items[c].tolist() for c in ("item_id", "text", "category", "depth", "language")}
        self.synthesis = _ByItem(
            synthesis, ("system_id", "status", "error_message", "duration_s", "audio_flags", "audio_sha256")
        )
        self.quality = _ByItem(quality, ("system_id", "mos"))
        self.transcripts = _ByItem(transcripts, TRANSCRIPT_COLUMNS)
        self.judgments = _ByItem(judgments, VERDICT_COLUMNS)
        self.count = len(items)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for start in range(0, self.count, ITEMS_PER_BLOCK):
            stop = min(start + ITEMS_PER_BLOCK, self.count)
            ids = self.items["item_id"][start:stop]
            tables = [t.block(ids) for t in (self.synthesis, self.quality, self.transcripts, self.judgments)]
            for position in range(start, stop):
                r = {c: values[position] for c, values in self.items.items()}
                item_id = r["item_id"]
                yield {
                    "id": item_id,
                    "text": r["text"],
                    "category": _clean(r["category"]),
                    "depth": _clean(r["depth"]),
                    "language": _clean(r["language"]),
                    "clips": self.clips(*(t.get(item_id, []) for t in tables)),
                }

    @staticmethod
    def clips(
        synthesis: list[dict[str, Any]],
        quality: list[dict[str, Any]],
        transcripts: list[dict[str, Any]],
        judgments: list[dict[str, Any]],
    ) -> dict[str, dict[str, Any]]:
        """One item's clips by system, from its rows of each table."""
        clips: dict[str, dict[str, Any]] = {}
        for r in synthesis:
            clips[r["system_id"]] = {
                "status": r["status"],
                "error": _clean(r["error_message"]),
                "duration_s": _clean(r["duration_s"]),
                "flags": _clean(r["audio_flags"]),
                "audio": f"../../../{ArtifactStore.audio_rel_path(r['audio_sha256'])}"
                if r["status"] == "ok" and isinstance(r["audio_sha256"], str)
                else None,
                "asr": {},
                "judges": {},
            }
        for r in quality:
            if r["system_id"] in clips:
                clips[r["system_id"]]["mos"] = _clean(r["mos"])
        for r in transcripts:
            clip = clips.get(r["system_id"])
            if clip is None:
                continue
            entry: dict[str, Any] = {"status": r["status"], "wer": _clean(r["wer"]), "cer": _clean(r["cer"])}
            if r["status"] == "ok" and isinstance(r["ref_norm"], str):
                entry["words"] = [list(t) for t in word_alignment(r["ref_norm"], r["hyp_norm"] or "")]
            else:
                entry["error"] = _clean(r["error_message"])
            clip["asr"][r["asr_id"]] = entry
        for r in judgments:
            clip = clips.get(r["system_id"])
            if clip is None:
                continue
            ok = r["status"] == "ok"
            scores = (r["score_baseline"], r["score_candidate"])
            clip["judges"][r["judge_id"]] = {
                "verdict": {"candidate": "win", "baseline": "loss", "tie": "tie"}.get(r["winner"]) if ok else None,
                "status": r["status"],
                "baseline": r["baseline_id"],
                "a": "candidate" if r["candidate_first"] else "baseline",
                "margin": _clean(scores[0] - scores[1]) if not any(pd.isna(s) for s in scores) else None,
                "score_candidate": _clean(r["score_candidate"]),
                "score_baseline": _clean(r["score_baseline"]),
                "candidate": _clean(r["reasoning_candidate"]),
                "baseline_notes": _clean(r["reasoning_baseline"]),
                "comparison": _clean(r["comparison"]),
                "error": _clean(r["error_message"]),
            }
        return clips


def build_data(
    store: ArtifactStore,
    run_id: str,
    tables: Any,
    summary: pd.DataFrame,
    winrates: pd.DataFrame,
    markdown: str,
    meta: dict[str, Any],
    rankings: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """Everything the page shows, from the tables a report is built from (ttseval.tasks.report.compute.RunTables),
    with each judge's Bradley-Terry ranking (compute_rankings) when given."""
    names = dict(zip(summary["system_id"], summary["system_spec"].map(system_name)))
    roles = dict(zip(summary["system_id"], summary.get("role", pd.Series("tts", index=summary.index))))
    items = tables.items
    synthesis = tables.synthesis
    shown = [c for c in ("item_id", "asr_spec", *TRANSCRIPT_COLUMNS) if c not in NORMALISED]
    transcripts = tables.transcripts[shown]  # before the filter, which copies what it is given
    transcripts = transcripts[transcripts["system_id"].isin(tables.system_ids)]
    # the normalised texts the word alignments are drawn from, which the report's tables leave unread (NOT_REPORTED)
    key = ["item_id", "system_id", "asr_id"]
    texts = store.read(run_id, "transcripts", columns=[*key, *NORMALISED])
    transcripts = transcripts.merge(texts, on=key, how="left")
    quality = tables.quality
    columns = ["item_id", "judge_spec", "vs_baseline", *VERDICT_COLUMNS]
    judgments = against_baseline(store.read(run_id, "judgments", columns=columns))  # a clip's verdict: vs the baseline
    judgments = judgments[judgments["system_id"].isin(tables.system_ids)]
    recognisers = [
        {"id": a, "spec": spec}
        for a, spec in transcripts[["asr_id", "asr_spec"]].drop_duplicates("asr_id").itertuples(index=False)
    ]
    judge_ids = list(pd.unique(judgments["judge_id"]))
    judge_specs = dict(judgments.drop_duplicates("judge_id")[["judge_id", "judge_spec"]].itertuples(index=False))
    rows = PageItems(items, synthesis, quality[quality["status"] == "ok"], transcripts, judgments)
    leaderboard = []
    for r in summary.to_dict("records"):
        row = {
            k: _clean(r.get(k))
            for k in (
                "system_id",
                "system_spec",
                "asr_spec",
                "completion_rate",
                "wer",
                "wer_ci_low",
                "wer_ci_high",
                "cer",
                "mos",
                "n_ok",
                "n_items",
            )
        }
        row["system_spec"] = system_name(r["system_spec"])  # the page names a system as the report does
        row["role"] = _clean(r.get("role")) or "tts"
        overall = (
            winrates[(winrates["level"] == "overall") & (winrates["system_id"] == r["system_id"])]
            if not winrates.empty
            else winrates
        )
        row["win_rates"] = {w.judge_id: _clean(w.win_rate) for w in overall.itertuples()}
        row["win_rate_cis"] = {
            w.judge_id: [_clean(w.win_rate_ci_low), _clean(w.win_rate_ci_high)] for w in overall.itertuples()
        }
        ranked = rankings[rankings["system_id"] == r["system_id"]] if rankings is not None else pd.DataFrame()
        row["bradley_terry"] = {
            b.judge_id: {
                "rank": int(b.rank),
                "elo": _clean(b.elo),
                "low": _clean(b.elo_ci_low),
                "high": _clean(b.elo_ci_high),
            }
            for b in ranked.itertuples()
        }
        leaderboard.append(row)
    figures = [p.split(f"runs/{run_id}/", 1)[-1] for p in _figures(store, run_id)]
    return {
        "run_id": run_id,
        "meta": {k: str(v) for k, v in meta.items()},
        "systems": [{"id": s, "spec": names.get(s, s), "role": roles.get(s) or "tts"} for s in tables.system_ids],
        "recognisers": recognisers,
        "judges": [{"id": j, "spec": judge_specs[j]} for j in judge_ids],
        "leaderboard": leaderboard,
        "figures": [f"../{f}" for f in figures],
        "report_html": _markdown_html(markdown),
        "items": rows,
    }


def _figures(store: ArtifactStore, run_id: str) -> list[str]:
    import pyarrow.fs as pafs

    selector = pafs.FileSelector(store.path("runs", run_id, "figures"), allow_not_found=True)
    return sorted(i.path for i in store.fs.get_file_info(selector) if i.path.endswith(".png"))


def write_html_report(store: ArtifactStore, run_id: str, data: dict[str, Any]) -> str:
    """Write the page and its data under runs/<run>/html/; returns the index's location."""
    for name in FILES:
        store.write_bytes(f"runs/{run_id}/html/{name}", (ASSETS / name).read_bytes())

    def dumps(value: Any) -> bytes:  # "</" escaped: the data must not close the page's <script> element
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/").encode("utf-8")

    def chunks() -> Iterator[bytes]:
        # the items one at a time (tens of megabytes at 100,000 clips); the same JSON as one dumps of `data`
        head = f"window.TTSEVAL_RUNS = window.TTSEVAL_RUNS || {{}};\nwindow.TTSEVAL_RUNS[{json.dumps(run_id)}] = "
        yield head.encode("utf-8") + dumps({k: v for k, v in data.items() if k != "items"})[:-1] + b',"items":['
        for i, item in enumerate(data["items"]):
            yield (b"," if i else b"") + dumps(item)
        yield b"]};\n"

    store.write_chunks(f"runs/{run_id}/html/data.js", chunks)
    return store.display("runs", run_id, "html", "index.html")


def store_link(store: ArtifactStore, *parts: str) -> str:
    """A stored file as a person opens it from a message or a terminal: a file:// link in a local store (a mail or
    chat client makes it a link), the object's location in S3."""
    where = store.display(*parts)
    return f"file://{where}" if store.is_local else where


def html_location(store: ArtifactStore, run_id: str) -> str:
    """Where a person opens the run's page: a file:// link for a local store; for S3, the command that serves it."""
    where = store_link(store, "runs", run_id, "html", "index.html")
    return where if store.is_local else f"{where} (open with: ttseval serve --store {store.display()})"


def compare_line(store: ArtifactStore, earlier: str, later: str) -> str:
    """A Markdown line pointing at the two runs side by side (compare.html, both clips of each item)."""
    link = f"{store_link(store, 'runs', later, 'html', 'compare.html')}?a={earlier}&b={later}"
    if not store.is_local:
        link += f" (through ttseval serve --store {store.display()})"
    return f"\nEvery item's clips from both runs side by side, with the deltas: {link}\n"
