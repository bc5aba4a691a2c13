"""The human_eval flow (Rethinking MUSHRA): a listening test from a stored run's audio, then its analysis.

    export:  the run's clips -> stimuli (one rate, equal length per page, anchors) -> webMUSHRA configs, one per
             rater (seeded page order, blinded names) -> the key in the run's listening_stimuli table
    analyze: results files (webMUSHRA's CSVs or the plain CSV) -> ratings table -> scores with CIs, the rejection
             rule and its lambda, listener x utterance subsampling, MOS alpha, CMOS, DG fault isolation, and the
             automatic metrics of the same audio against the human scores -> report section and artifact

No model runs here, so the flow uses Prefect's default task runner rather than a Dask cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact

from ttseval.core.errors import SpecError
from ttseval.core.store import check_run_id
from ttseval.flows.common import artifact_key, check_paths_confined, report_meta, run_settings, stored_systems
from ttseval.tasks.listening import analyse_test, export_test, ingest_ratings
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import get_store
from ttseval.tasks.report import write_full_report

export_task = task(name="export listening test")(export_test)
ingest_task = task(name="ingest ratings")(ingest_ratings)
analyse_task = task(name="analyse listening test")(analyse_test)


@flow(name="human_eval")
def human_eval(
    run_id: str,
    step: Literal["export", "analyze"] = "analyze",
    test_id: str = "listening",
    kind: Literal["mushra", "mushra-nmr", "mushra-dg", "mushra-dg-nmr", "mos", "cmos"] = "mushra-dg-nmr",
    out: str | None = None,
    raters: int = 20,
    items: int = 30,
    systems: list[str] | None = None,
    reference: str | None = None,
    anchor_x: bool | None = None,
    anchor_y: str | None = None,
    language: str = "English",
    seed: int = 0,
    results: list[str] | None = None,
    store: str | None = None,
) -> dict[str, Any]:
    """Export a listening test of run `run_id`, or analyse its ratings.

    Args:
        run_id: a run in the store whose audio the raters hear.
        step: `export` (write the webMUSHRA folder) or `analyze` (ingest `results`, if given, then analyse).
        test_id: the test's name (lower-case letters, digits, '-', '_'); its results come back under it.
        kind: mushra, mushra-nmr, mushra-dg, mushra-dg-nmr, mos or cmos.
        out: export: the folder to write (copy it over a webMUSHRA checkout); default listening/<test_id>.
        raters: export: rater configs to write (r01 ...).
        items: export: items drawn from those with audio from every system.
        systems: export: systems rated; default the run's TTS systems.
        reference: export: the natural-speech system (MUSHRA's reference, CMOS's other side); default the
            run's one natural system.
        anchor_x: export: add Anchor-X (the reference band-limited to 3.5 kHz); default on when there is a
            natural reference and the test is a MUSHRA.
        anchor_y: export: the system whose degraded clips are Anchor-Y.
        language: export: the language named in the raters' instructions.
        seed: export: seeds item choice, page orders, CMOS orders and blinded names.
        results: analyze: results files to ingest first (webMUSHRA's mushra.csv / lss.csv, or the plain CSV).
        store: artifact store URI; default from settings.
    """
    check_run_id(run_id)
    settings = run_settings(store=store)
    check_paths_confined(settings, "human_eval", out=out, results=results)
    st = get_store(settings.store, settings.store_wait_s)
    if not st.part_files(run_id, "synthesis"):
        raise SpecError(f"run {run_id!r} is not in store {st.display()}")
    if step == "export":
        folder = Path(out or f"listening/{test_id}")
        done = export_task(
            settings,
            run_id,
            folder,
            kind=kind,
            test_id=test_id,
            raters=raters,
            items=items,
            systems=systems,
            reference=reference,
            anchor_x_on=anchor_x,
            anchor_y_system=anchor_y,
            language=language,
            seed=seed,
        )
        logger().info(
            f"listening test {test_id!r} ({kind}): {len(done['items'])} items, {raters} rater configs in {folder}"
        )
        return {
            "step": step,
            "folder": str(folder),
            **{k: done[k] for k in ("test_id", "kind", "items", "systems", "reference", "pages_per_rater")},
        }
    ingested = ingest_task(settings, run_id, test_id, [Path(p) for p in results]) if results else None
    markdown = analyse_task(settings, run_id, test_id)
    write_full_report(
        st,
        run_id,
        settings,
        stored_systems(st, run_id)[0],
        # the whole report again, its provenance the evaluate's
        report_meta(st.run_log(run_id) or {}) | {"run_id": run_id, "store": st.display(), "listening test": test_id},
    )
    create_markdown_artifact(
        markdown=markdown,
        key=artifact_key("listening", f"{run_id}-{test_id}"),
        description=f"listening test {test_id} of run {run_id}",
    )
    return {"step": step, "test_id": test_id, "ingested": ingested, "markdown": markdown}
