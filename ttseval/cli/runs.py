"""Runs: evaluate, backfill-judge, nightly (and the report and exit-code policy they end with)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from ttseval.cli.common import (
    Subcommands,
    add_store,
    add_wait_lease,
    csv_ints,
    csv_list,
    prefect_api,
    run_id_arg,
    seconds_since_start,
)
from ttseval.cli.results import policy_exit, print_report

if TYPE_CHECKING:
    from ttseval.core.config import Settings


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ttseval.flows.common import run_settings
    from ttseval.flows.preflight import check_cluster_reach, handed_over, preflight_evaluate

    flags = {
        "store": args.store,
        "shard_size": args.shard_size,
        "dask_address": args.dask_address,
        "n_workers": args.workers,
        "budget_usd": args.budget_usd,
        "allow_new_store": True if args.new_store else None,
    }
    settings = run_settings(**flags)  # a budget above the configured cap is refused, the dry run's too
    systems = csv_list(args.systems)
    env = {
        "TTSEVAL_STORE": settings.store,
        "TTSEVAL_ALLOW_NEW_STORE": str(settings.allow_new_store).lower(),
    }
    for flag, field in ((args.controls, "controls"), (args.natural, "natural")):  # roles: also systems of the run
        if flag:
            systems += [s for s in csv_list(flag) if s not in systems]
            env[f"TTSEVAL_{field.upper()}"] = json.dumps(getattr(settings, field) + csv_list(flag))
    if settings.shard_size is not None:  # None: each stage's own choice by its size (ttseval.tasks.plan)
        env["TTSEVAL_SHARD_SIZE"] = str(settings.shard_size)
    os.environ.update(env)  # worker processes (and the flow) build their settings from the same values
    settings = run_settings(**flags)
    # --judges "" turns judging off; no flag means the configured judges
    judges = csv_list(args.judges) if args.judges is not None else None
    instruction_judges = csv_list(args.instruction_judges) if args.instruction_judges is not None else None
    # Everything a user can get wrong is checked here, before Prefect starts and before the store is touched; the
    # flow is handed the result instead of checking again (flows/preflight.py).
    if args.dry_run:
        return print_dry_run(args.dataset, systems, args.run_id, args.baseline, judges, instruction_judges, settings)
    checked = preflight_evaluate(
        args.dataset, systems, settings, baseline=args.baseline, judges=judges, instruction_judges=instruction_judges
    )
    announce_new_store(checked.new_store, settings.store)
    from ttseval.flows.evaluate import evaluate
    from ttseval.flows.runner import task_runner

    runner = evaluate.with_options(task_runner=task_runner(settings))
    with prefect_api(), handed_over(checked):
        # before the flow starts: refused on a cluster that cannot run it (exit 2)
        check_cluster_reach(
            settings, [s.canonical for s in checked.systems] + checked.judges + checked.instruction_judges
        )
        result = runner(
            dataset=args.dataset,
            systems=systems,
            store=settings.store,
            run_id=args.run_id,
            shard_size=settings.shard_size,
            baseline=args.baseline,
            judges=judges,
            instruction_judges=instruction_judges,
            budget_usd=args.budget_usd,
        )
    from ttseval.tasks.staging import staged_settings

    # files: systems are named by their label once their clips are stored (ttseval.tasks.staging)
    settings = staged_settings(settings, result["renamed"], result["clip_sets"])
    print_report(settings, args.run_id, result["system_ids"])
    from_cache = result.get("from_cache", {})
    computed = {k: v - from_cache.get(k, 0) for k, v in result["computed"].items()}
    print(
        f"reused rows (already in the run): {result['reused']}; computed rows: {computed}; taken from earlier "
        f"runs' caches (no call, no model run): {from_cache}"
    )
    total = seconds_since_start()
    print(
        f"wall time {total:.1f} s since the command started ({result['wall_s']:.1f} s in the flow, "
        f"{max(total - result['wall_s'], 0):.1f} s starting Python, Prefect and Dask and printing the report)"
    )
    print(f"tables: {result['store']}/runs/{args.run_id}/<items|synthesis|transcripts|quality|report>")
    return policy_exit(settings, args.run_id)


def print_dry_run(
    dataset: str,
    systems: list[str],
    run_id: str,
    baseline: str | None,
    judges: list[str] | None,
    instruction_judges: list[str] | None,
    settings: Settings,
) -> int:
    """`--dry-run` of evaluate and nightly: the checked inputs priced per system and judge, nothing called. It calls
    nothing, so a vendor with no API key yet can still be priced (tasks.provider_cache.estimate_only)."""
    from ttseval.flows.preflight import preflight_evaluate
    from ttseval.tasks.cost import dry_run
    from ttseval.tasks.provider_cache import estimate_only

    with estimate_only() as keyless:
        checked = preflight_evaluate(
            dataset,
            systems,
            settings,
            baseline=baseline,
            judges=judges,
            instruction_judges=instruction_judges,
            paying=False,
        )
        announce_new_store(checked.new_store, settings.store)
        table = dry_run(
            dataset,
            systems,
            run_id,
            baseline,
            judges if judges is not None else settings.judges,
            instruction_judges if instruction_judges is not None else settings.instruction_judges,
            settings,
            items=checked.items,
        )
    print(
        f"dry run of {run_id!r}: what would be called for what {settings.store} lacks "
        "(nothing was called; judge figures are estimates)"
    )
    print(table.to_string(index=False))
    if keyless:
        print(
            f"no API key yet for {', '.join(keyless)}: the estimate needs none, a run will (see "
            "`ttseval providers` for each one's variable)"
        )
    return 0


def announce_new_store(new: bool, uri: str) -> None:
    """Say loudly, before any work, that the store does not exist yet: a mistyped --store starts over."""
    if new:
        from ttseval.core.store import ArtifactStore

        print(
            f"ttseval: NEW STORE: nothing is stored at {ArtifactStore(uri).display()} yet; this run creates it and "
            "computes every row (nothing to reuse). A typo in --store? Stop now (Ctrl-C) and check it.",
            file=sys.stderr,
            flush=True,
        )


def cmd_backfill_judge(args: argparse.Namespace) -> int:
    from ttseval.core.config import load_settings
    from ttseval.flows.backfill_judge import backfill_judge
    from ttseval.flows.common import check_judges
    from ttseval.flows.preflight import check_cluster_reach
    from ttseval.flows.runner import task_runner

    settings = load_settings(store=args.store, dask_address=args.dask_address, n_workers=args.workers)
    check_judges([args.judge], settings, role=args.kind)
    os.environ["TTSEVAL_STORE"] = settings.store
    runner = backfill_judge.with_options(task_runner=task_runner(settings))
    with prefect_api():
        check_cluster_reach(settings, [args.judge])
        result = runner(
            run_id=args.run_id,
            judge=args.judge,
            store=settings.store,
            baseline=args.baseline,
            kind=args.kind,
            systems=args.systems,
            categories=args.categories,
            depths=args.depths,
            items=args.items,
        )
    print_report(settings, args.run_id, None)
    what = "comparisons" if args.kind == "pairwise" else "instruction judgements"
    audit = f"{result['audited']} asked in the other order (position audit); " if args.kind == "pairwise" else ""
    print(
        f"judge {result['judge']}: reused {result['reused']} {what}, computed {result['computed']}; {audit}"
        f"wall time {result['wall_s']:.1f} s (no synthesis)"
    )
    return 0


def cmd_nightly(args: argparse.Namespace) -> int:
    from ttseval.core.store import open_store
    from ttseval.flows.common import run_settings
    from ttseval.flows.nightly import nightly, nightly_run_id
    from ttseval.flows.preflight import check_cluster_reach
    from ttseval.tasks.trends import DEFAULT_SERIES, check_night_id, check_series, night_of

    series = check_series(DEFAULT_SERIES if args.series is None else args.series)
    night = night_of(
        series,
        run_settings(store=args.store, budget_usd=args.budget_usd, allow_new_store=True if args.new_store else None),
        dataset=args.dataset,
        systems=csv_list(args.systems) if args.systems is not None else None,
        baseline=args.baseline,
        judges=csv_list(args.judges) if args.judges is not None else None,  # "" judges nothing, as for evaluate
        budget_usd=args.budget_usd,
    )
    settings, systems, judges = night.settings, night.systems, night.judges
    run_id = check_night_id(args.run_id or nightly_run_id(series), series)
    if args.dry_run:  # tonight's canary is priced as the calls it makes: remote voices speak it afresh
        from ttseval.flows.nightly import night_canary

        settings = settings.model_copy(update={"fresh_items": night_canary(night.dataset, settings)})
        return print_dry_run(night.dataset, systems, run_id, night.baseline, judges, None, settings)
    announce_new_store(open_store(settings).is_new(), settings.store)
    os.environ.update(
        {"TTSEVAL_STORE": settings.store, "TTSEVAL_ALLOW_NEW_STORE": str(settings.allow_new_store).lower()}
    )
    with prefect_api():
        check_cluster_reach(settings, systems + (judges or []))
        asked = night.parameters()
        result = nightly(**asked, store=settings.store, run_id=run_id, previous_run=args.previous_run, series=series)
    # the night's per-system table, its drift page, then the verdict as the last line
    print_report(settings, result["run_id"], None)
    regressions = None
    if result["previous_run"]:
        import io

        import pandas as pd

        store = open_store(settings)
        print(store.read_bytes(f"runs/{result['run_id']}/drift.md").decode())
        regressions = pd.read_json(
            io.BytesIO(store.read_bytes(f"runs/{result['run_id']}/drift.json")), orient="records"
        )
    print(
        f"nightly run {result['run_id']} of series {series}: {result['cache_hits']} clips reused from earlier runs; "
        f"previous night {result['previous_run'] or 'none'}; flagged changes: {result['flagged']}"
    )
    return policy_exit(settings, result["run_id"], regressions)


# -- parsers ------------------------------------------------------------------------------------------------------


def add_evaluate(sub: Subcommands) -> None:
    from ttseval.core.config import DEFAULT_SYSTEMS
    from ttseval.corpus import DEMO_DATASET

    ev = sub.add_parser("evaluate", help="synthesize, transcribe, score and report (defaults: the demo)")
    ev.add_argument(
        "--dataset",
        default=str(DEMO_DATASET),
        help="items file (.jsonl, .csv, .parquet) or a generated dataset NAME@VERSION / NAME@latest",
    )
    ev.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS), help="comma-separated provider specs")
    add_store(ev)
    ev.add_argument(
        "--run-id", type=run_id_arg, default="demo", help="run name; the same name resumes and reuses stored rows"
    )
    ev.add_argument(
        "--shard-size",
        type=int,
        default=None,
        help="items per task (default: the shard_size setting; unset, 8 or more so a stage has at most 500 "
        "tasks, up to 256)",
    )
    ev.add_argument("--dask-address", default=None, help="existing Dask scheduler (default: a LocalCluster)")
    ev.add_argument(
        "--workers", type=int, default=None, help="LocalCluster worker processes (default: the n_workers setting, 2)"
    )
    ev.add_argument(
        "--controls",
        default=None,
        help="negative-control systems, comma-separated: a neighbouring "
        "language's voice that speaks every item (PashtoTTS-Bench); added to --systems",
    )
    ev.add_argument(
        "--natural",
        default=None,
        help="natural-speech baseline systems, e.g. "
        "files:natural:dir=<folder> (recordings named <item_id>.wav); added to --systems",
    )
    ev.add_argument(
        "--instruction-judges",
        default=None,
        help="judges of instruction following for items with an instruction (InstructTTSEval) "
        "(default: the instruction_judges setting, none)",
    )
    add_run_options(ev)
    add_wait_lease(ev)
    ev.set_defaults(func=cmd_evaluate)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of an evaluate run that `nightly` takes too, declared once: --baseline, --judges, --dry-run,
    --budget-usd, --new-store."""
    parser.add_argument("--baseline", default=None, help="system the others are judged against (default: the first)")
    parser.add_argument(
        "--judges",
        default=None,
        help='comma-separated pairwise judge specs; "" judges nothing (default: the judges setting, objective)',
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be called for what the store lacks (calls, characters, audio "
        "seconds, USD per system and judge) and call nothing; needs no API key",
    )
    parser.add_argument(
        "--budget-usd",
        type=float,
        default=None,
        help="most to spend on paid synthesis and judge calls (synthesis first, the judges from what "
        "is left); keys past it stay missing for a later run (default: the budget_usd setting, "
        "no cap)",
    )
    parser.add_argument(
        "--new-store",
        action="store_true",
        help="let a run with paid systems or judges create a store that does not exist yet (default: "
        "the allow_new_store setting, off: refused, exit 2, so a mistyped --store pays nothing)",
    )


def add_backfill_judge(sub: Subcommands) -> None:
    bf = sub.add_parser("backfill-judge", help="run a new judge over the audio stored by an earlier run")
    add_wait_lease(bf)
    add_store(bf)
    bf.add_argument("--run-id", type=run_id_arg, required=True)
    bf.add_argument(
        "--judge", required=True, help="judge spec, e.g. gemini:gemini-2.5-pro or objective:cer_margin=0.05"
    )
    bf.add_argument(
        "--baseline",
        default=None,
        help="default: the baseline the run was judged against, else the one its evaluate recorded",
    )
    bf.add_argument(
        "--kind",
        choices=("pairwise", "instruction"),
        default="pairwise",
        help="pairwise comparisons against the baseline, or instruction following (InstructTTSEval)",
    )
    bf.add_argument("--systems", type=csv_list, default=None, help="only these systems (comma-separated specs)")
    bf.add_argument("--categories", type=csv_list, default=None, help="only items in these categories")
    bf.add_argument("--depths", type=csv_ints, default=None, help="only items at these depths, e.g. 0,1")
    bf.add_argument("--items", type=csv_list, default=None, help="only these item ids")
    bf.add_argument("--dask-address", default=None)
    bf.add_argument("--workers", type=int, default=None)
    bf.set_defaults(func=cmd_backfill_judge)


def add_nightly(sub: Subcommands) -> None:
    from ttseval.core.config import DEFAULT_SYSTEMS
    from ttseval.corpus import DEMO_DATASET

    ni = sub.add_parser(
        "nightly", help="a dated evaluate run plus a drift report against the previous night of its series"
    )
    ni.add_argument(
        "--dataset",
        default=None,
        help="the items every night of the series speaks: a JSONL file or a frozen dataset NAME@VERSION in the "
        f"store (default: the series' dataset in the settings file, else the demo dataset {DEMO_DATASET.name})",
    )
    ni.add_argument(
        "--systems",
        default=None,
        help="comma-separated provider specs re-run each night (default: the series' systems in the settings file, "
        f"else {','.join(DEFAULT_SYSTEMS)})",
    )
    add_store(ni)
    ni.add_argument(
        "--series",
        default=None,
        help="the series this night belongs to: it is compared and drawn only with earlier nights of the same "
        "series, so several series share one store; a series declared in the settings file ([series.NAME]) gives "
        "the dataset, systems, judges and alerts not given here (default: the unnamed series, run ids "
        "nightly-<UTC timestamp>)",
    )
    ni.add_argument(
        "--run-id", type=run_id_arg, default=None, help="default nightly-<UTC timestamp>, or nightly-<series>-<...>"
    )
    ni.add_argument("--previous-run", default=None, help="default: the latest earlier night of the series")
    add_run_options(ni)
    ni.set_defaults(func=cmd_nightly)
