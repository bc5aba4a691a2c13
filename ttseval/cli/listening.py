"""People's judgements: human-eval (webMUSHRA listening tests), mos-forms, mos-analyze, human-alignment."""

from __future__ import annotations

import argparse
import contextlib
import os

from ttseval.cli.common import Subcommands, add_store, csv_list, prefect_api, run_id_arg


def cmd_human_eval(args: argparse.Namespace) -> int:
    """Listening tests (Rethinking MUSHRA): export for webMUSHRA, ingest results, analyse."""
    from pathlib import Path

    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store)
    os.environ["TTSEVAL_STORE"] = settings.store
    if args.step == "ingest":  # no flow: a file read and one table part written
        from ttseval.tasks.listening import ingest_ratings

        done = ingest_ratings(settings, args.run_id, args.test_id, [Path(p) for p in args.results])
        print(
            f"test {done['test_id']} ({done['kind']}): read {done['read']} ratings, stored {done['stored']} "
            f"({done['already_stored']} already stored), {done['flagged']} flagged as a second rating of a page, "
            f"{done['pages_without_hidden_reference']} pages without a hidden-reference rating; raters: "
            f"{', '.join(done['raters']) or 'none new'}"
        )
        return 0
    from ttseval.flows.human_eval import human_eval

    with prefect_api(), no_heartbeat():
        if args.step == "export":
            done = human_eval(
                run_id=args.run_id,
                step="export",
                test_id=args.test_id,
                kind=args.kind,
                out=args.out,
                raters=args.raters,
                items=args.items,
                systems=args.systems,
                reference=args.reference,
                anchor_x=args.anchor_x,
                anchor_y=args.anchor_y,
                language=args.language,
                seed=args.seed,
                store=settings.store,
            )
            print(
                f"{done['kind']} test {done['test_id']}: {len(done['items'])} items x {len(done['systems'])} "
                f"systems (reference {done['reference'] or 'none'}), {done['pages_per_rater']} pages per rater, "
                f"{args.raters} rater configs in {done['folder']}; copy it over a webMUSHRA checkout (its "
                "README.md says how), then: ttseval human-eval analyze --run-id "
                f"{args.run_id} --test-id {args.test_id} <results CSVs>"
            )
            return 0
        done = human_eval(
            run_id=args.run_id, step="analyze", test_id=args.test_id, results=args.results or None, store=settings.store
        )
    print(done["markdown"])
    return 0


def no_heartbeat() -> contextlib.AbstractContextManager[object]:
    """Prefect's flow-run heartbeat off for a flow of seconds, unless its frequency is set in the environment: the
    heartbeat thread sleeps in 1 s steps, so ending the flow waits up to 1 s for it (0.6 s of the 3.5 s export); at
    the default 180 s it never beats a second time. The command itself marks the run Crashed on an error or
    SIGTERM (ttseval.cli.main)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    if {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_RUNNER_HEARTBEAT_FREQUENCY"} & set(os.environ):
        return contextlib.nullcontext()
    return temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})


def cmd_mos_forms(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ttseval.core.config import load_settings
    from ttseval.tasks.mos_forms import export_mos_forms

    settings = load_settings(store=args.store)
    manifest = export_mos_forms(
        settings,
        args.run_id,
        Path(args.out),
        language=args.language,
        n=args.n,
        n_forms=args.forms,
        repeats=args.repeats,
        controls=args.controls,
        seed=args.seed,
    )
    print(
        f"{manifest['forms']} forms of {manifest['items']} sentences ({', '.join(manifest['systems'])}; "
        f"{manifest['repeats']} repeats and {len(manifest['controls'])} control clips each), {manifest['clips']} "
        f"blinded clips in {args.out}; give raters audio/, forms/, instructions.md and ratings_template.csv, keep "
        f"key.csv; then: ttseval mos-analyze --forms {args.out} --ratings <filled ratings.csv>"
    )
    return 0


def cmd_mos_analyze(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ttseval.tasks.mos_forms import analyse_mos_ratings

    print(analyse_mos_ratings(Path(args.forms), Path(args.ratings)))
    return 0


def cmd_human_alignment(args: argparse.Namespace) -> int:
    """How well each judge of a run agrees with human pairwise preferences from a CSV, or without --human, how well
    every metric and judge agrees with the run's own listening tests (ttseval.tasks.alignment)."""
    from ttseval.core.config import load_settings
    from ttseval.tasks.alignment import human_alignment, listener_alignment

    if args.human is None:
        print(listener_alignment(load_settings(store=args.store), args.run_id).strip())
        return 0
    aligned = human_alignment(load_settings(store=args.store), args.run_id, args.human)
    print(f"{'judge':45} {'n':>4} {'agree':>6} {'alpha':>7} {'spearman':>9} {'systems':>7}")
    for spec, r in aligned.items():
        print(
            f"{spec[:45]:45} {r['n']:>4} {r['raw_agreement']:>6.3f} {r['krippendorff_alpha']:>7.3f} "
            f"{r['spearman']:>9.3f} {r['n_systems']:>7}"
        )
        print("  agreement per category: " + ", ".join(f"{c} {a:.3f} ({n})" for c, (n, a) in r["by_category"].items()))
    return 0


# -- parsers ------------------------------------------------------------------------------------------------------


def add_human_alignment(sub: Subcommands) -> None:
    ha = sub.add_parser(
        "human-alignment",
        help="agreement with people: of each judge with human preferences (--human CSV), or of every metric and judge "
        "with the run's listening tests",
    )
    add_store(ha)
    ha.add_argument("--run-id", type=run_id_arg, required=True)
    ha.add_argument(
        "--human",
        default=None,
        help="CSV: item_id, system_id, preference (candidate/baseline/tie); without it, the run's MUSHRA and MOS "
        "tests are the listeners",
    )
    ha.set_defaults(func=cmd_human_alignment)


def add_mos_forms(sub: Subcommands) -> None:
    mf = sub.add_parser("mos-forms", help="native MOS listening forms from a stored run (PashtoTTS-Bench 4.3)")
    add_store(mf)
    mf.add_argument("--run-id", type=run_id_arg, required=True)
    mf.add_argument("--language", required=True, help="the items' language, e.g. ps")
    mf.add_argument("--out", required=True, help="folder to write the forms, audio and key to")
    mf.add_argument("--n", type=int, default=50, help="sentences in the stratified subset")
    mf.add_argument("--forms", type=int, default=None, help="forms: a multiple of the systems (default: as many)")
    mf.add_argument("--repeats", type=int, default=3, help="repeated clips per form (within-rater consistency)")
    mf.add_argument("--controls", type=int, default=2, help="negative-control clips per form (language check)")
    mf.add_argument("--seed", type=int, default=0, help="order and names are drawn from it (recorded)")
    mf.set_defaults(func=cmd_mos_forms)


def add_mos_analyze(sub: Subcommands) -> None:
    ma = sub.add_parser("mos-analyze", help="analyse the ratings returned on mos-forms forms")
    ma.add_argument("--forms", required=True, help="the folder mos-forms wrote")
    ma.add_argument("--ratings", required=True, help="CSV: rater_id, form, position, score (1-5)")
    ma.set_defaults(func=cmd_mos_analyze)


def add_human_eval(sub: Subcommands) -> None:
    he = sub.add_parser(
        "human-eval",
        help="listening tests (Rethinking MUSHRA): export a run's audio for "
        "webMUSHRA, ingest the ratings, analyse them",
    )
    he.add_argument("step", choices=["export", "ingest", "analyze"])
    he.add_argument(
        "results",
        nargs="*",
        help="ingest/analyze: results files (webMUSHRA's mushra.csv, lss.csv, "
        "or the plain CSV: rater_id, trial_id, stimulus, score), before or after the options",
    )
    add_store(he)
    he.add_argument("--run-id", type=run_id_arg, required=True)
    he.add_argument("--test-id", default="listening", help="the test's name; results come back under it")
    he.add_argument(
        "--kind", default="mushra-dg-nmr", choices=["mushra", "mushra-nmr", "mushra-dg", "mushra-dg-nmr", "mos", "cmos"]
    )
    he.add_argument("--out", default=None, help="export: folder to write (default listening/<test-id>)")
    he.add_argument("--raters", type=int, default=20, help="export: rater configs to write")
    he.add_argument("--items", type=int, default=30, help="export: items drawn")
    he.add_argument("--systems", type=csv_list, default=None, help="export: systems rated (default: the run's TTS)")
    he.add_argument("--reference", default=None, help="export: natural-speech system (default: the run's one)")
    he.add_argument(
        "--anchor-x",
        default=None,
        action=argparse.BooleanOptionalAction,
        help="export: Anchor-X (default: on for MUSHRA kinds with a natural reference)",
    )
    he.add_argument("--anchor-y", default=None, help="export: system whose degraded clips are Anchor-Y")
    he.add_argument("--language", default="English", help="export: language named in the instructions")
    he.add_argument("--seed", type=int, default=0, help="export: item choice, page orders, names (recorded)")
    he.set_defaults(func=cmd_human_eval)
