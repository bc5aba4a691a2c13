"""The alert of a nightly run's flagged drift (ttseval.tasks.report.drift_alert): what the message says, and when
there is one. Sending it through real Prefect notification blocks is tests/e2e/test_alerts_on_prefect.py."""

from __future__ import annotations

import pandas as pd

from tests.support.alerts import drift_rows
from ttseval.tasks.report import drift_alert


def test_the_message_names_system_metric_size_and_links_and_the_series_change_apart() -> None:
    subject, body = drift_alert(
        drift_rows(),
        "nightly-20261122T020000Z",
        "nightly-20261123T020000Z",
        ["HTML report: file:///s/runs/n/html/index.html"],
        series_change=["systems removed: elevenlabs:Rachel"],
    )
    # the system gone is a change of the series, said apart and not counted
    assert subject == "ttseval nightly nightly-20261123T020000Z: 1 flagged change(s), 1 for the worse"
    assert body.splitlines() == [
        "Drift of nightly-20261123T020000Z against nightly-20261122T020000Z:",
        "- openai:alloy (whisper:tiny) wer: 0.050 -> 0.125 (delta 0.075, adjusted p 0.0021), worse",
        "",
        "The series itself changed since nightly-20261122T020000Z (not counted as drift):",
        "- systems removed: elevenlabs:Rachel",
        "",
        "HTML report: file:///s/runs/n/html/index.html",
    ]


def test_a_series_change_alone_sends_nothing() -> None:
    quiet = drift_rows().assign(flagged=False)
    assert drift_alert(quiet, "a", "b", [], series_change=["systems removed: elevenlabs:Rachel"]) is None


def test_no_flagged_change_no_message() -> None:
    quiet = drift_rows().assign(flagged=False)
    assert drift_alert(quiet, "a", "b", []) is None


def rising_wer() -> pd.DataFrame:
    """Five nights of one series, WER 0.10 rising 0.01 a night with SE 0.01: a slow drift the CUSUM (k 0.5, h 5)
    flags on the fifth night, n4 (worked by hand in the test below)."""
    return pd.DataFrame(
        {
            "night": range(5),
            "run_id": [f"n{i}" for i in range(5)],
            "system_id": "a",
            "system_spec": "openai:alloy",
            "metric": "wer",
            "detail": "whisper:tiny",
            "value": [0.10, 0.11, 0.12, 0.13, 0.14],
            "ci_low": 0.0,
            "ci_high": 1.0,
            "se": 0.01,
            "n": 8,
        }
    )


def test_a_slow_drift_alone_sends_the_message() -> None:
    # WER 0.10 rising 0.01 a night, SE 0.01 each night: z_t = 0.01 t / (0.01 sqrt 2) = 0.707 t; with k 0.5 the
    # CUSUM is 0.207, 1.121, 2.743, then 2.743 + 2.828 - 0.5 = 5.071 > 5 on the fifth night (worked by hand)
    from ttseval.metrics.trends import trend_changes
    from ttseval.tasks.trends import drift_lines

    nights = rising_wer()
    trends = trend_changes(nights, k=0.5, h=5.0)
    assert trends["drift"].tolist() == [False, False, False, False, True]
    assert drift_lines(trends, "n3", 5.0) == []
    [line] = drift_lines(trends, "n4", 5.0)
    assert line == (
        "- openai:alloy wer (whisper:tiny) slow drift: 0.100 on n0 -> 0.140 tonight (2.83 SE; CUSUM "
        "5.07 > h 5.0 over 5 nights)"
    )
    quiet = drift_rows().assign(flagged=False)
    subject, body = drift_alert(quiet, "n3", "n4", ["trends: /s/runs/n4/html/trends.html"], None, [line])
    assert subject == "ttseval nightly n4: 1 flagged change(s), 1 for the worse"
    assert body.splitlines() == ["Drift of n4 against n3:", line, "", "trends: /s/runs/n4/html/trends.html"]


def test_one_verdict_in_the_page_the_alert_and_verdict_json_for_a_step_a_canary_change_and_a_slow_drift() -> None:
    """drift.md's first line, the alert's subject and verdict.json's rows give the same count (flagged_changes)
    whichever kind of change the night has: a drift-table step, a canary measure, a slow drift, or all three."""
    from ttseval.metrics.trends import trend_changes
    from ttseval.tasks.report import drift_markdown, flagged_changes, verdict_rows
    from ttseval.tasks.trends import drift_lines, tonight_drifts

    canary = pd.DataFrame(
        [
            {
                "system_spec": "openai:alloy",
                "measure": "duration_s",
                "reference": 2.0,
                "tonight": 2.6,
                "delta": 0.6,
                "p_permutation": 0.01,
                "p_adjusted": 0.03,
                "n_items": 8,
                "flagged": True,
            }
        ]
    )
    rising = rising_wer()  # the CUSUM over h on n4
    sliding, flat = trend_changes(rising, k=0.5, h=5.0), trend_changes(rising.assign(value=0.1), k=0.5, h=5.0)
    quiet = drift_rows().assign(flagged=False)
    cases = {
        "step": (drift_rows(), None, flat, 1),
        "canary": (quiet, canary, flat, 1),
        "slow drift": (quiet, None, sliding, 1),
        "all three": (drift_rows(), canary, sliding, 3),
    }
    for name, (drift, voices, trends, expected) in cases.items():
        slides = drift_lines(trends, "n4", 5.0)
        assert flagged_changes(drift, voices, slides) == expected, name
        page = drift_markdown(drift, "n3", "n4", canary=voices, slides=slides)
        assert page.split("\n\n")[1].startswith(f"{expected} flagged change(s)"), (name, page[:300])
        subject, body = drift_alert(drift, "n3", "n4", [], voices, slides)
        assert subject.startswith(f"ttseval nightly n4: {expected} flagged change(s)"), name
        rows = verdict_rows(drift, voices, tonight_drifts(trends, "n4"))
        assert len(rows) == expected, (name, rows)
        assert all(slide in page and slide in body for slide in slides), name
    kinds = {r["kind"]: r for r in verdict_rows(drift_rows(), canary, tonight_drifts(sliding, "n4"))}
    assert kinds["drift"]["metric"] == "wer" and kinds["drift"]["recogniser"] == "whisper:tiny"
    assert kinds["drift"]["p_adjusted"] == 0.0021 and kinds["drift"]["direction"] == "worse"
    assert (kinds["canary"]["metric"], kinds["canary"]["direction"], kinds["canary"]["p_adjusted"]) == (
        "duration_s",
        "changed",
        0.03,
    )
    slow = kinds["slow drift"]
    assert (slow["recogniser"], slow["previous"], slow["current"], slow["direction"]) == (
        "whisper:tiny",
        0.10,
        0.14,
        "worse",
    )


def test_changes_for_the_worse_come_first_each_by_its_adjusted_p() -> None:
    rows = drift_rows()
    wer = rows[rows["metric"] == "wer"].iloc[0].to_dict()
    more = pd.DataFrame(
        [
            wer | {"system_spec": "a", "direction": "better", "p_adjusted": 0.001},
            wer | {"system_spec": "b", "direction": "worse", "p_adjusted": 0.04},
            wer | {"system_spec": "c", "direction": "worse", "p_adjusted": None, "test": "ci-overlap"},
            wer | {"system_spec": "d", "direction": "worse", "p_adjusted": 0.002},
        ]
    )
    _, body = drift_alert(more, "n1", "n2", [])
    assert [line.split(" ")[1] for line in body.splitlines() if line.startswith("- ")] == ["d", "b", "c", "a"]


def test_a_link_that_would_not_open_is_left_out() -> None:
    """serves_page against a real HTTP server on loopback: a page, a 404 (a Prefect server without its UI) and a port
    nothing listens on."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from ttseval.flows.nightly import serves_page

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path.startswith("/runs/flow-run/") else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    silent = socket.socket()  # bound, never listening: a connection to it is refused
    silent.bind(("127.0.0.1", 0))
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert serves_page(f"{base}/runs/flow-run/1234")
        assert not serves_page(f"{base}/flow-runs/flow-run/1234")
        assert not serves_page(f"http://127.0.0.1:{silent.getsockname()[1]}/runs/flow-run/1234", timeout_s=2)
    finally:
        server.shutdown()
        silent.close()
