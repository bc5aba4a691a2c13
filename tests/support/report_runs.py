"""What the HTML report and `ttseval serve` tests share (tests/system/test_html_report.py, tests/unit/test_serve_s3.py):
a run's tables written as evaluate writes them, and `ttseval serve`'s server on loopback with a plain HTTP GET."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime

import numpy as np

from ttseval.core.audio import Audio, sha256_hex
from ttseval.core.registry import Spec
from ttseval.core.schemas import table_from_rows
from ttseval.core.store import ArtifactStore
from ttseval.infra.serve import make_server

CATEGORIES = (
    "emotions",
    "questions",
    "foreign_words",
    "paralinguistics",
    "complex_pronunciation",
    "syntactic_complexity",
)
SYSTEMS = ("a", "b", "c")
ASR = "faster-whisper:tiny.en"


def tone_wav(seconds: float, f0: float) -> bytes:
    t = np.arange(int(16000 * seconds)) / 16000
    return Audio((0.2 * np.sin(2 * np.pi * f0 * t)).astype(np.float32), 16000).to_wav_bytes()


def write_run(store: ArtifactStore, run_id: str, n_items: int, *, shift: float = 0.0) -> dict[str, int]:
    """A run's tables as evaluate writes them: n_items items over six categories and four depths, three systems
    (c fails every 7th item), a transcript each with a word dropped on every 3rd item of b, MOS, and the
    objective judge's verdicts of b and c against a. Returns counts the page should show."""
    now = datetime.now(UTC)
    asr_id, quality_id, judge_id = Spec.parse(ASR).id, Spec.parse("dnsmos").id, "objective-test"
    clips = {s: tone_wav(0.6 + 0.2 * k, 200 + 100 * k) for k, s in enumerate(SYSTEMS)}
    for wav in clips.values():
        store.put_audio(wav, sha256_hex(wav))
    items, synthesis, transcripts, quality, judgments = [], [], [], [], []
    for i in range(n_items):
        item, text = f"it{i:04d}", f"the quick brown fox number {i} jumps"
        items.append(
            {
                "item_id": item,
                "text": text,
                "category": CATEGORIES[i % 6],
                "depth": i % 4,
                "language": "en-US",
                "created_at": now,
            }
        )
        for k, system in enumerate(SYSTEMS):
            failed = system == "c" and i % 7 == 0
            synthesis.append(
                {
                    "item_id": item,
                    "system_id": system,
                    "system_spec": system,
                    "created_at": now,
                    "status": "failed" if failed else "ok",
                    "error_message": "HTTP 500" if failed else None,
                    "audio_sha256": None if failed else sha256_hex(clips[system]),
                    "duration_s": None if failed else 0.6 + 0.2 * k,
                    "sample_rate_hz": 16000,
                    "latency_s": 0.1,
                    "billable_chars": 0,
                    "cost_usd": 0.0,
                }
            )
            if failed:
                continue
            dropped = system == "b" and i % 3 == 0
            hyp = text.replace("brown ", "") if dropped else text
            wer = (1 / 7 if dropped else 0.0) + (shift if system == "a" and i % 2 == 0 else 0.0)
            transcripts.append(
                {
                    "item_id": item,
                    "system_id": system,
                    "asr_id": asr_id,
                    "asr_spec": ASR,
                    "hypothesis": hyp,
                    "normalizer": "t",
                    "ref_norm": text,
                    "hyp_norm": hyp,
                    "word_errors": int(dropped),
                    "ref_words": 7,
                    "char_errors": 6 * int(dropped),
                    "ref_chars": len(text),
                    "wer": wer,
                    "cer": 6 * int(dropped) / len(text),
                    "status": "ok",
                    "created_at": now,
                }
            )
            quality.append(
                {
                    "item_id": item,
                    "system_id": system,
                    "quality_id": quality_id,
                    "quality_spec": "dnsmos",
                    "mos": 3.0 + k / 2 + (i % 10) / 100,
                    "status": "ok",
                    "created_at": now,
                }
            )
            if system != "a":
                lost = dropped or (system == "c" and i % 2 == 0)
                judgments.append(
                    {
                        "item_id": item,
                        "system_id": system,
                        "baseline_id": "a",
                        "judge_id": judge_id,
                        "judge_spec": "objective",
                        "candidate_first": bool(i % 2),
                        "status": "ok",
                        "parse_ok": True,
                        "winner": "baseline" if lost else "candidate",
                        "score_candidate": 0.5 if lost else 0.9,
                        "score_baseline": 0.8 + (i % 5) / 100 if lost else 0.7,
                        "reasoning_candidate": f"{system} on {item}",
                        "comparison": "CER 0.1 vs 0.0",
                        "created_at": now,
                    }
                )
    for table, rows in (
        ("items", items),
        ("synthesis", synthesis),
        ("transcripts", transcripts),
        ("quality", quality),
        ("judgments", judgments),
    ):
        store.write_part(run_id, table, table_from_rows(table, rows))
    b_losses = sum(1 for j in judgments if j["system_id"] == "b" and j["winner"] == "baseline")
    return {"items": n_items, "b_losses": b_losses, "c_failed": sum(1 for i in range(n_items) if i % 7 == 0)}


def http_get(url: str, **headers: str) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def serving(store_uri: str):
    server = make_server(store_uri, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
