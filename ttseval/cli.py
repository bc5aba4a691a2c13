"""The `ttseval` command. Heavy imports (prefect, dask, GE) happen inside the subcommand that needs them.

Exit codes: 0 done, 1 the run failed, 2 bad input (dataset, spec, settings): nothing was written.
"""

from __future__ import annotations

import argparse
import json
import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from ttseval.core.errors import ConfigError, DatasetError, RunBusyError, SpecError, StoreUnwritableError, TTSEvalError

USER_ERRORS = (DatasetError, SpecError, ConfigError, RunBusyError, StoreUnwritableError)


def _quiet_defaults() -> None:
    # Telemetry off: it raises "database is locked" on a first local run, and we are offline anyway.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # inherited by the worker processes


TEMPORARY_SERVER_TIMEOUT_S = 90


def _csv(value: str) -> list[str]:
    """A comma-separated argument as its non-empty parts."""
    return [v.strip() for v in value.split(",") if v.strip()]


def _csv_ints(value: str) -> list[int]:
    try:
        return [int(v) for v in _csv(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, e.g. 0,1; got {value!r}") from None


@contextlib.contextmanager
def prefect_api() -> Iterator[None]:
    """Use PREFECT_API_URL when set; otherwise start one temporary local server for this command.

    Prefect would otherwise start a temporary server in every Dask worker process as well (seconds each);
    exporting the URL lets the workers report to the same one.
    """
    if os.environ.get("PREFECT_API_URL"):
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    server = SubprocessASGIServer()
    # Prefect waits 20 s by default; a loaded 2-core machine took longer to migrate the temporary database once.
    configured = get_current_settings().server.ephemeral.startup_timeout_seconds
    server.start(timeout=max(configured, TEMPORARY_SERVER_TIMEOUT_S))
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        with temporary_settings({PREFECT_API_URL: server.api_url}):
            yield
    finally:
        from prefect.logging.handlers import APILogHandler

        APILogHandler().flush()  # send the last log lines before the server they go to stops
        os.environ.pop("PREFECT_API_URL", None)
        server.stop()


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec

    settings = load_settings(store=args.store, shard_size=args.shard_size, dask_address=args.dask_address,
                             n_workers=args.workers, budget_usd=args.budget_usd)
    # Everything a user can get wrong is checked here, before Prefect starts and before the store is touched.
    from ttseval.corpus.items import read_items

    read_items(args.dataset, settings)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    from ttseval.flows.common import check_judges, check_systems
    from ttseval.flows.evaluate import evaluate
    from ttseval.flows.runner import task_runner

    env = {"TTSEVAL_STORE": settings.store, "TTSEVAL_SHARD_SIZE": str(settings.shard_size)}
    for flag, field in ((args.controls, "controls"), (args.natural, "natural")):  # roles: also systems of the run
        if flag:
            extra = [s for s in _csv(flag) if s not in systems]
            systems += extra
            env[f"TTSEVAL_{field.upper()}"] = json.dumps(getattr(settings, field) + _csv(flag))
    os.environ.update(env)
    settings = load_settings(store=args.store, shard_size=args.shard_size, dask_address=args.dask_address,
                             n_workers=args.workers, budget_usd=args.budget_usd)
    check_systems(systems, settings)
    os.environ.update(env)  # worker processes build their settings from the same values
    # --judges "" turns judging off; no flag means the configured judges
    judges = [j.strip() for j in args.judges.split(",") if j.strip()] if args.judges is not None else None
    check_judges(judges if judges is not None else settings.judges, settings)
    instruction_judges = ([j.strip() for j in args.instruction_judges.split(",") if j.strip()]
                          if args.instruction_judges is not None else None)
    check_judges(instruction_judges if instruction_judges is not None else settings.instruction_judges, settings,
                 role="instruction")
    if args.dry_run:
        from ttseval.tasks.cost import dry_run

        table = dry_run(args.dataset, systems, args.run_id, args.baseline,
                        judges if judges is not None else settings.judges,
                        instruction_judges if instruction_judges is not None else settings.instruction_judges,
                        settings)
        print(f"dry run of {args.run_id!r}: what would be called for what {settings.store} lacks "
              "(nothing was called; judge figures are estimates)")
        print(table.to_string(index=False))
        return 0
    runner = evaluate.with_options(task_runner=task_runner(settings))
    with prefect_api():
        result = runner(dataset=args.dataset, systems=systems, store=settings.store, run_id=args.run_id,
                        shard_size=settings.shard_size, baseline=args.baseline, judges=judges,
                        instruction_judges=instruction_judges, budget_usd=args.budget_usd)
    _print_report(settings, args.run_id, [Spec.parse(s).id for s in systems])
    print(f"reused rows: {result['reused']}; computed rows: {result['computed']}; wall time {result['wall_s']:.1f} s")
    print(f"tables: {result['store']}/runs/{args.run_id}/<items|synthesis|transcripts|quality|report>")
    return 0


def _print_report(settings, run_id: str, system_ids: list[str] | None) -> None:
    from ttseval.tasks.report import compute_summary, compute_winrates, leaderboard_markdown, print_table
    from ttseval.core.store import ArtifactStore

    store = ArtifactStore(settings.store)
    if store.read(run_id, "items").empty:
        raise TTSEvalError(f"no run {run_id!r} in {store.display()}; runs there: {', '.join(store.runs()) or 'none'}")
    summary = compute_summary(store, run_id, settings, system_ids)
    print_table(summary, title=f"ttseval run {run_id!r} ({store.display()})")
    board = leaderboard_markdown(store, run_id, summary, compute_winrates(store, run_id, settings))
    if board:
        from rich.console import Console
        from rich.markdown import Markdown

        Console(width=200).print(Markdown(board))
    if store.exists(f"runs/{run_id}/html/index.html"):
        from ttseval.tasks.html_report import html_location

        print(f"HTML report (every clip playable, with its transcript, scores and verdicts): "
              f"{html_location(store, run_id)}")


def cmd_backfill_judge(args: argparse.Namespace) -> int:
    from ttseval.flows.backfill_judge import backfill_judge
    from ttseval.flows.common import check_judges
    from ttseval.flows.runner import task_runner
    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store, dask_address=args.dask_address, n_workers=args.workers)
    check_judges([args.judge], settings, role=args.kind)
    os.environ["TTSEVAL_STORE"] = settings.store
    runner = backfill_judge.with_options(task_runner=task_runner(settings))
    with prefect_api():
        result = runner(run_id=args.run_id, judge=args.judge, store=settings.store, baseline=args.baseline,
                        kind=args.kind, systems=args.systems, categories=args.categories, depths=args.depths,
                        items=args.items)
    _print_report(settings, args.run_id, None)
    what = "comparisons" if args.kind == "pairwise" else "instruction judgements"
    audit = f"{result['audited']} asked in the other order (position audit); " if args.kind == "pairwise" else ""
    print(f"judge {result['judge']}: reused {result['reused']} {what}, computed {result['computed']}; {audit}"
          f"wall time {result['wall_s']:.1f} s (no synthesis)")
    return 0


def cmd_human_alignment(args: argparse.Namespace) -> int:
    """How well each judge of a run agrees with human pairwise preferences from a CSV."""
    import pandas as pd

    from ttseval.metrics.agreement import preference_alignment
    from ttseval.core.config import load_settings
    from ttseval.core.store import ArtifactStore

    human = pd.read_csv(args.human, dtype=str)
    missing = {"item_id", "system_id", "preference"} - set(human.columns)
    if missing:
        raise DatasetError(f"{args.human}: missing column(s) {', '.join(sorted(missing))}; expected item_id, "
                           "system_id (or system_spec), preference (candidate / baseline / tie)", source=args.human)
    store = ArtifactStore(load_settings(store=args.store).store)
    judgments = store.read(args.run_id, "judgments")
    judgments = judgments[(judgments["status"] == "ok") & judgments["parse_ok"].fillna(False).astype(bool)]
    if judgments.empty:
        raise TTSEvalError(f"run {args.run_id!r} has no parsed judgments to compare with")
    items = store.read(args.run_id, "items", columns=["item_id", "category"])
    category_of = dict(zip(items["item_id"], items["category"]))
    print(f"{'judge':45} {'n':>4} {'agree':>6} {'alpha':>7} {'spearman':>9} {'systems':>7}")
    for spec, g in judgments.groupby("judge_spec", sort=False):
        mine = g.rename(columns={"winner": "preference"})[["item_id", "system_id", "preference"]]
        try:
            r = preference_alignment(mine, human[["item_id", "system_id", "preference"]], category_of)
        except ValueError as e:
            raise DatasetError(f"{args.human}: {e}", source=args.human) from e
        print(f"{spec[:45]:45} {r['n']:>4} {r['raw_agreement']:>6.3f} {r['krippendorff_alpha']:>7.3f} "
              f"{r['spearman']:>9.3f} {r['n_systems']:>7}")
        print("  agreement per category: " + ", ".join(f"{c} {a:.3f} ({n})"
                                                      for c, (n, a) in r["by_category"].items()))
    return 0


def cmd_nightly(args: argparse.Namespace) -> int:
    from ttseval.flows.nightly import nightly
    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store)
    os.environ["TTSEVAL_STORE"] = settings.store
    with prefect_api():
        result = nightly(dataset=args.dataset, systems=[s.strip() for s in args.systems.split(",") if s.strip()],
                         store=settings.store, run_id=args.run_id, previous_run=args.previous_run)
    print(f"nightly run {result['run_id']}: {result['cache_hits']} clips reused from earlier runs; "
          f"previous run {result['previous_run'] or 'none'}; flagged changes: {result['flagged']}")
    if result["previous_run"]:
        from ttseval.core.store import ArtifactStore

        print(ArtifactStore(settings.store).read_bytes(f"runs/{result['run_id']}/drift.md").decode())
    return 0


def cmd_generate_dataset(args: argparse.Namespace) -> int:
    """Grow a seed file into a frozen dataset version with an LLM (EmergentTTS-Eval's breadth and depth)."""
    from ttseval.corpus import generation
    from ttseval.corpus.generation import read_seeds
    from ttseval.flows.generate_dataset import generate_dataset
    from ttseval.tasks.common import get_provider
    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store)
    spec = generation.load_spec(args.categories)
    read_seeds(args.seeds, spec)
    for llm in dict.fromkeys(filter(None, [args.llm, args.refine_llm, args.repair_llm])):
        get_provider("llm", llm, settings)  # a bad spec or a missing API key fails before any call
    with prefect_api():
        result = generate_dataset(seeds=args.seeds, name=args.name, version=args.version, llm=args.llm,
                                  refine_llm=args.refine_llm, repair_llm=args.repair_llm, categories=args.categories,
                                  breadth=args.breadth, breadth_batch=args.breadth_batch,
                                  depth_steps=args.depth_steps, temperature=args.temperature,
                                  duplicate_threshold=args.duplicate_threshold, store=settings.store)
    calls = result["calls"]
    print(f"dataset {result['ref']}: {result['n_items']} items by depth {result['items_by_depth']}; "
          f"{result['n_failed']} failed rows {result['failed_by_reason'] or ''}")
    print(f"LLM calls: {calls['made']} made, {calls['cached']} from the cache; tokens in {calls['input_tokens']}, "
          f"out {calls['output_tokens']}; ${calls['cost_usd']:.4f}")
    print(result["stats_markdown"])
    print(f"stored at {result['uri']}" + ("" if result["created"] else " (unchanged: this version existed)"))
    print(f"evaluate it: ttseval evaluate --dataset {result['ref']}")
    return 0


def cmd_generate_instructions(args: argparse.Namespace) -> int:
    """Caption reference clips and write InstructTTSEval-style APS, DSD and RP instructions into a frozen dataset."""
    from ttseval.corpus.instructions import read_references
    from ttseval.flows.generate_instructions import generate_instructions
    from ttseval.tasks.common import get_provider
    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store, seed=args.seed)
    read_references(args.references)
    for llm in dict.fromkeys(filter(None, [args.caption_llm, args.instruct_llm])):
        get_provider("llm", llm, settings)  # a bad spec or a missing API key fails before any call
    with prefect_api():
        result = generate_instructions(references=args.references, name=args.name, version=args.version,
                                       caption_llm=args.caption_llm, instruct_llm=args.instruct_llm,
                                       caption_temperature=args.caption_temperature, temperature=args.temperature,
                                       instruction_language=args.instruction_language, seed=args.seed,
                                       store=settings.store)
    calls = result["calls"]
    print(f"dataset {result['ref']}: {result['n_items']} items by task {result['items_by_task']}; "
          f"{result['n_failed']} failed rows {result['failed_by_reason'] or ''}")
    print(f"LLM calls: {calls['made']} made, {calls['cached']} from the cache; tokens in {calls['input_tokens']}, "
          f"out {calls['output_tokens']}; ${calls['cost_usd']:.4f}")
    print(result["stats_markdown"])
    print(f"stored at {result['uri']}" + ("" if result["created"] else " (unchanged: this version existed)"))
    print(f"evaluate it: ttseval evaluate --dataset {result['ref']} --instruction-judges gemini:gemini-2.5-pro "
          "--systems SPEC,...")
    return 0


def cmd_stack(args: argparse.Namespace) -> int:
    """Start, stop or describe the local stack: Prefect server + worker, Dask cluster, S3 server, on 127.0.0.1."""
    import json
    from pathlib import Path

    from ttseval.infra.stack import stack_down, stack_status, stack_up

    folder = Path(args.folder)
    if args.action == "up":
        info = stack_up(folder, gpu=args.gpu)
        print(info.describe())
        if args.deploy:
            from ttseval.deployments.register import register

            print("\n".join(register(info.api_url, info.pool)))
    elif args.action == "down":
        stack_down(folder)
        print(f"stack in {folder} stopped")
    else:
        print(json.dumps(stack_status(folder), indent=2))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store)
    _print_report(settings, args.run_id, None)
    return 0


def cmd_mos_forms(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ttseval.tasks.mos_forms import export_mos_forms
    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store)
    manifest = export_mos_forms(settings, args.run_id, Path(args.out), language=args.language, n=args.n,
                                n_forms=args.forms, repeats=args.repeats, controls=args.controls, seed=args.seed)
    print(f"{manifest['forms']} forms of {manifest['items']} sentences ({', '.join(manifest['systems'])}; "
          f"{manifest['repeats']} repeats and {len(manifest['controls'])} control clips each), {manifest['clips']} "
          f"blinded clips in {args.out}; give raters audio/, forms/, instructions.md and ratings_template.csv, keep "
          f"key.csv; then: ttseval mos-analyze --forms {args.out} --ratings <filled ratings.csv>")
    return 0


def cmd_mos_analyze(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ttseval.tasks.mos_forms import analyse_mos_ratings

    print(analyse_mos_ratings(Path(args.forms), Path(args.ratings)))
    return 0


def cmd_human_eval(args: argparse.Namespace) -> int:
    """Listening tests (Rethinking MUSHRA): export for webMUSHRA, ingest results, analyse."""
    from pathlib import Path

    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store)
    os.environ["TTSEVAL_STORE"] = settings.store
    if args.step == "ingest":  # no flow: a file read and one table part written
        from ttseval.tasks.listening import ingest_ratings

        done = ingest_ratings(settings, args.run_id, args.test_id, [Path(p) for p in args.results])
        print(f"test {done['test_id']} ({done['kind']}): read {done['read']} ratings, stored {done['stored']} "
              f"({done['already_stored']} already stored), {done['flagged']} flagged as a second rating of a page, "
              f"{done['pages_without_hidden_reference']} pages without a hidden-reference rating; raters: "
              f"{', '.join(done['raters']) or 'none new'}")
        return 0
    from ttseval.flows.human_eval import human_eval

    with prefect_api():
        if args.step == "export":
            done = human_eval(run_id=args.run_id, step="export", test_id=args.test_id, kind=args.kind,
                              out=args.out, raters=args.raters, items=args.items, systems=args.systems,
                              reference=args.reference, anchor_x=args.anchor_x, anchor_y=args.anchor_y,
                              language=args.language, seed=args.seed, store=settings.store)
            print(f"{done['kind']} test {done['test_id']}: {len(done['items'])} items x {len(done['systems'])} "
                  f"systems (reference {done['reference'] or 'none'}), {done['pages_per_rater']} pages per rater, "
                  f"{args.raters} rater configs in {done['folder']}; copy it over a webMUSHRA checkout (its "
                  "README.md says how), then: ttseval human-eval analyze --run-id "
                  f"{args.run_id} --test-id {args.test_id} <results CSVs>")
            return 0
        done = human_eval(run_id=args.run_id, step="analyze", test_id=args.test_id, results=args.results or None,
                          store=settings.store)
    print(done["markdown"])
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """A store's HTML reports over HTTP, read-only (infra/serve.py)."""
    from ttseval.infra.serve import make_server
    from ttseval.core.config import load_settings

    settings = load_settings(store=args.store)
    server = make_server(settings.store, args.host, args.port)
    host, port = server.server_address[:2]
    print(f"serving the reports of {settings.store} at http://{host}:{port}/ (read-only; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ttseval.tasks.export import export_run
    from ttseval.core.config import load_settings

    tables = export_run(load_settings(store=args.store), args.run_id, Path(args.out))
    print(f"{len(tables)} tables ({', '.join(tables)}), the report and the run logs in {args.out}; no audio")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from ttseval.tasks.leaderboard import leaderboard, leaderboard_markdown
    from ttseval.core.config import load_settings

    boards = leaderboard(load_settings(store=args.store))
    if not boards:
        raise SpecError(f"no run with a report in the store {args.store or '(the default)'}: run ttseval evaluate")
    print(leaderboard_markdown(boards))
    return 0


def cmd_import_dataset(args: argparse.Namespace) -> int:
    """Write the items file; with clips made elsewhere (EmergentTTS-Eval's baseline_audios, InstructTTSEval's
    gen_path fields) also a `files` manifest next to it, and print the system spec that reads it."""
    from pathlib import Path

    from ttseval.corpus import importers
    from ttseval.corpus.items import validate_items

    if args.format == "seedtts":
        return _import_seedtts(args)
    if args.language is not None:
        raise SpecError("--language is for --format seedtts (its folder name says en or zh otherwise); drop it")
    emergent = args.format == "emergenttts"
    if args.baseline_audios is not None and not emergent:
        raise SpecError("--baseline-audios is for --format emergenttts (its baseline_audios folder); drop it")
    if args.system_name is not None and emergent:
        raise SpecError("--system-name names the clips of an InstructTTSEval file's gen_path fields (the "
                        f"EmergentTTS-Eval baseline is always {importers.EMERGENTTTS_BASELINE_LABEL!r}); drop it")
    out = Path(args.out)
    if out.suffix not in (".parquet", ".jsonl", ".ndjson"):
        raise SpecError(f"--out {out}: use a .jsonl or .parquet file name")
    label = importers.EMERGENTTTS_BASELINE_LABEL if emergent else (
        args.system_name or importers.INSTRUCTTTSEVAL_GENERATED_LABEL)
    try:
        importers.files_spec(label, out)  # a bad --system-name fails before anything is written
    except ValueError as e:
        raise SpecError(f"--system-name: {e}") from e
    frame = importers.import_dataset(args.format, args.path)
    validate_items(frame, source=str(args.path))
    clips: list[dict[str, str]] = []
    if args.baseline_audios is not None:
        clips = importers.emergenttts_baseline_manifest(args.path, frame, args.baseline_audios)
        what, manifest = (f"baseline clips ({importers.EMERGENTTTS_BASELINE_MODEL}, voice "
                          f"{importers.EMERGENTTTS_BASELINE_VOICE.capitalize()})"), out.with_suffix(".baseline.jsonl")
    elif not emergent:
        clips = importers.instructttseval_generated_manifest(args.path)
        what, manifest = "generated clips (gen_path)", out.with_suffix(".generated.jsonl")
        if not clips and args.system_name is not None:
            raise DatasetError(f"--system-name {args.system_name!r}: {args.path} has no gen_path fields (the "
                               "evaluation JSONL has them, the HF parquet does not); drop --system-name",
                               source=str(args.path))
    if out.suffix == ".parquet":
        frame.to_parquet(out, index=False)
    else:
        frame.to_json(out, orient="records", lines=True, force_ascii=False)
    print(f"{len(frame)} items -> {out} (then: ttseval evaluate --dataset {out})")
    if clips:
        importers.write_manifest(clips, manifest)
        spec = importers.files_spec(label, manifest)
        missing = [c["path"] for c in clips if "://" not in c["path"] and not Path(c["path"]).is_file()]
        print(f"{len(clips) - len(missing)} of {len(clips)} {what} found -> {manifest}" + (
            f"; missing (a failed row each, retried by later runs): {', '.join(missing[:3])}"
            + (" ..." if len(missing) > 3 else "") if missing else ""))
        print(f"system: {spec}")
        print(f"then: ttseval evaluate --dataset {out} --systems {spec},piper:joe --baseline {spec}" if emergent
              else f"then: ttseval evaluate --dataset {out} --systems {spec} --instruction-judges "
                   "gemini:gemini-2.5-pro")
    return 0


def _import_seedtts(args: argparse.Namespace) -> int:
    """Seed-TTS-eval's meta.lst -> an items file with voice prompts; with ground-truth recordings (5-field lines)
    also a `files` manifest of them, the natural-speech system."""
    from pathlib import Path

    from ttseval.corpus import importers
    from ttseval.corpus.items import validate_items

    if args.baseline_audios is not None or args.system_name is not None:
        raise SpecError("--baseline-audios and --system-name are not for --format seedtts; drop them")
    out = Path(args.out)
    if out.suffix not in (".parquet", ".jsonl", ".ndjson"):
        raise SpecError(f"--out {out}: use a .jsonl or .parquet file name")
    frame = importers.import_seedtts(args.path, language=args.language)
    validate_items(frame, source=str(args.path))
    missing = [p for p in frame["prompt_audio_uri"] if "://" not in p and not Path(p).is_file()]
    if missing:
        raise DatasetError(f"{args.path}: {len(missing)} prompt clip(s) missing, e.g. {missing[0]}; keep meta.lst "
                           "beside its prompt-wavs folder", source=str(args.path))
    if out.suffix == ".parquet":
        frame.to_parquet(out, index=False)
    else:
        frame.to_json(out, orient="records", lines=True, force_ascii=False)
    print(f"{len(frame)} items with voice prompts -> {out}")
    systems = "files:MY-TTS:dir=FOLDER_OF_<utt>.wav"
    if clips := importers.seedtts_ground_truth_manifest(args.path):
        manifest = importers.write_manifest(clips, out.with_suffix(".ground-truth.jsonl"))
        natural = importers.files_spec(importers.SEEDTTS_GROUND_TRUTH_LABEL, manifest)
        print(f"{len(clips)} ground-truth recordings -> {manifest}\nsystem: {natural}")
        systems += f",{natural} --natural {natural}"
    print(f"then: ttseval evaluate --dataset {out} --systems {systems}  (WER, speaker similarity to each prompt, MOS)")
    return 0


def cmd_voices(args: argparse.Namespace) -> int:
    """List a TTS provider's voices where its API (or engine) offers a list."""
    from ttseval.tasks.common import build_provider
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec

    settings = load_settings()
    spec = Spec.parse(args.spec)
    provider = build_provider("tts", spec.canonical, settings)
    voices = getattr(provider, "voices", None)
    if not callable(voices):
        raise SpecError(f"tts provider {spec.provider!r} offers no voice list")
    try:
        listed = voices()
    except NotImplementedError as e:
        raise SpecError(str(e)) from e
    columns = ["id", "name", "language", "description"]
    for v in listed:
        print("\t".join(str(v.get(c) or "") for c in columns))
    print(f"{len(listed)} voice(s) of {spec.provider}", file=sys.stderr)
    return 0


def cmd_providers(args: argparse.Namespace) -> int:
    """One table per kind of every provider's declared metadata (the `plugins` setting's included), read from the
    classes: nothing is built and neither Prefect nor Dask is imported. A missing program or package is marked."""
    from ttseval.core.config import load_settings
    from ttseval.core.registry import REGISTRIES

    plugins = load_settings().plugins
    header = ("name", "languages", "instruction", "gpu", "extra", "sample rate", "needs", "version")
    for kind, registry in REGISTRIES.items():
        rows = []
        for name in sorted(registry.entries(plugins.get(kind))):
            info = registry.info(name, plugins.get(kind))
            codes = info.language_codes()
            languages = (codes if isinstance(codes, str)
                         else ", ".join(sorted(codes)) if len(codes) <= 4 else f"{len(codes)} languages")
            absent = info.missing_programs()
            needs = [f"{p} (not installed)" if p in absent else p for p in info.requires]
            extra = (info.extra or "-") + (" (not installed)" if info.missing_modules() else "")
            rate = (f"{info.output_sample_rate_hz} Hz" if info.output_sample_rate_hz
                    else "per voice" if kind == "tts" else "-")
            rows.append((name if name in registry.names else f"{name} (plugin)", languages,
                         "yes" if info.accepts_instruction else "no", "yes" if info.gpu else "no", extra, rate,
                         ", ".join(needs) or "-", info.version))
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        print(f"{kind}:")
        for row in [header, *rows]:
            print("  " + "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
        print()
    return 0


def build_parser() -> argparse.ArgumentParser:
    from ttseval.corpus import DEFAULT_CAPTION_LLM, DEFAULT_LLM, DEFAULT_SEEDS, DEMO_DATASET
    from ttseval.core.config import DEFAULT_SYSTEMS

    parser = argparse.ArgumentParser(prog="ttseval", description="Evaluate text-to-speech systems.")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="synthesize, transcribe, score and report (defaults: the demo)")
    ev.add_argument("--dataset", default=str(DEMO_DATASET),
                    help="items file (.jsonl, .csv, .parquet) or a generated dataset NAME@VERSION / NAME@latest")
    ev.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS), help="comma-separated provider specs")
    ev.add_argument("--store", default=None, help="artifact store URI (default ./artifacts or TTSEVAL_STORE)")
    ev.add_argument("--run-id", default="demo", help="run name; the same name resumes and reuses stored rows")
    ev.add_argument("--shard-size", type=int, default=None, help="items per task")
    ev.add_argument("--dask-address", default=None, help="existing Dask scheduler (default: a LocalCluster)")
    ev.add_argument("--workers", type=int, default=None, help="LocalCluster worker processes")
    ev.add_argument("--baseline", default=None, help="system the others are judged against (default: the first)")
    ev.add_argument("--controls", default=None, help="negative-control systems, comma-separated: a neighbouring "
                    "language's voice that speaks every item (PashtoTTS-Bench); added to --systems")
    ev.add_argument("--natural", default=None, help="natural-speech baseline systems, e.g. files:<folder of "
                    "recordings>; added to --systems")
    ev.add_argument("--judges", default=None, help="comma-separated judge specs (default: objective)")
    ev.add_argument("--instruction-judges", default=None,
                    help="judges of instruction following for items with an instruction (InstructTTSEval)")
    ev.add_argument("--dry-run", action="store_true",
                    help="print what would be called for what the store lacks (calls, characters, audio seconds, "
                         "USD per system and judge) and call nothing")
    ev.add_argument("--budget-usd", type=float, default=None,
                    help="most to spend on paid synthesis and judge calls; keys past it stay missing for a later run")
    ev.add_argument("--wait-lease", type=float, default=None, metavar="SECONDS",
                    help="when another invocation is writing this run id, wait up to this long for it (default: "
                         "refuse at once, exit 2)")
    ev.set_defaults(func=cmd_evaluate)
    bf = sub.add_parser("backfill-judge", help="run a new judge over the audio stored by an earlier run")
    bf.add_argument("--wait-lease", type=float, default=None, metavar="SECONDS",
                    help="when another invocation is writing this run id, wait up to this long for it (default: "
                         "refuse at once, exit 2)")
    bf.add_argument("--store", default=None)
    bf.add_argument("--run-id", required=True)
    bf.add_argument("--judge", required=True, help="judge spec, e.g. gemini:gemini-2.5-pro or objective:cer_margin=0.05")
    bf.add_argument("--baseline", default=None, help="default: the run's earlier baseline, else its first system")
    bf.add_argument("--kind", choices=("pairwise", "instruction"), default="pairwise",
                    help="pairwise comparisons against the baseline, or instruction following (InstructTTSEval)")
    bf.add_argument("--systems", type=_csv, default=None, help="only these systems (comma-separated specs)")
    bf.add_argument("--categories", type=_csv, default=None, help="only items in these categories")
    bf.add_argument("--depths", type=_csv_ints, default=None, help="only items at these depths, e.g. 0,1")
    bf.add_argument("--items", type=_csv, default=None, help="only these item ids")
    bf.add_argument("--dask-address", default=None)
    bf.add_argument("--workers", type=int, default=None)
    bf.set_defaults(func=cmd_backfill_judge)
    rep = sub.add_parser("report", help="print the per-system table of a stored run")
    rep.add_argument("--store", default=None)
    rep.add_argument("--run-id", default="demo")
    rep.set_defaults(func=cmd_report)
    stk = sub.add_parser("stack", help="local Prefect server + worker, Dask cluster and S3 server on 127.0.0.1")
    stk.add_argument("action", choices=["up", "down", "status"])
    stk.add_argument("--folder", default=".ttseval-stack", help="PIDs, logs and state of the stack")
    stk.add_argument("--gpu", action=argparse.BooleanOptionalAction, default=None,
                     help="give one Dask worker the GPU resource (default: when nvidia-smi finds a GPU)")
    stk.add_argument("--deploy", action="store_true", help="also register deployments/prefect.yaml")
    stk.set_defaults(func=cmd_stack)
    ni = sub.add_parser("nightly", help="a dated evaluate run plus a drift report against the previous nightly run")
    ni.add_argument("--dataset", default=str(DEMO_DATASET))
    ni.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    ni.add_argument("--store", default=None)
    ni.add_argument("--run-id", default=None, help="default nightly-<UTC timestamp>")
    ni.add_argument("--previous-run", default=None, help="default: the latest earlier nightly run")
    ni.set_defaults(func=cmd_nightly)
    ha = sub.add_parser("human-alignment", help="agreement of each judge with human preferences (CSV)")
    ha.add_argument("--store", default=None)
    ha.add_argument("--run-id", required=True)
    ha.add_argument("--human", required=True, help="CSV: item_id, system_id, preference (candidate/baseline/tie)")
    ha.set_defaults(func=cmd_human_alignment)
    imp = sub.add_parser("import-dataset", help="convert a published benchmark file into a ttseval items file")
    imp.add_argument("--format", required=True, choices=["emergenttts", "instructttseval", "seedtts"])
    imp.add_argument("path", help="the published file (.jsonl, .json, .parquet or .csv; Seed-TTS-eval: its meta.lst)")
    imp.add_argument("--out", required=True, help="items file to write (.jsonl or .parquet)")
    imp.add_argument("--baseline-audios", default=None,
                     help="emergenttts: the baseline_audios folder (0.wav, 1.wav, ...); writes <out>.baseline.jsonl "
                          "and prints the files:gpt-4o-mini-tts-alloy system spec that judges it without synthesis")
    imp.add_argument("--system-name", default=None,
                     help="instructttseval: system name of the clips in the file's gen_path fields (default "
                          "instructttseval-gen); they go to <out>.generated.jsonl, a files:<name> system")
    imp.add_argument("--language", default=None,
                     help="seedtts: the items' language tag (default from meta.lst's folder: en -> en-US, zh -> zh-CN)")
    imp.set_defaults(func=cmd_import_dataset)
    gen = sub.add_parser("generate-dataset", help="grow a seed file into a versioned dataset with an LLM")
    gen.add_argument("--seeds", default=str(DEFAULT_SEEDS), help="JSON Lines seed items (category, text)")
    gen.add_argument("--name", default="generated", help="dataset name in the store")
    gen.add_argument("--version", default=None, help="version to freeze (default: a hash of the items)")
    gen.add_argument("--llm", default=DEFAULT_LLM, help="LLM spec, e.g. gemini:gemini-2.5-pro or "
                     "openai:MODEL:base_url=http://127.0.0.1:8000/v1")
    gen.add_argument("--refine-llm", default=None, help="LLM for depth refinement (default --llm)")
    gen.add_argument("--repair-llm", default=None, help="LLM for grammar repair (default the refinement LLM)")
    gen.add_argument("--categories", default=None, help="category-set TOML (default: EmergentTTS-Eval's six)")
    gen.add_argument("--breadth", type=int, default=5, help="new items per category")
    gen.add_argument("--breadth-batch", type=int, default=5, help="items asked for per breadth call")
    gen.add_argument("--depth-steps", type=int, default=3, help="refinement steps (0-3)")
    gen.add_argument("--temperature", type=float, default=1.0)
    gen.add_argument("--duplicate-threshold", type=float, default=90.0, help="rapidfuzz ratio 0-100")
    gen.add_argument("--store", default=None)
    gen.set_defaults(func=cmd_generate_dataset)
    gi = sub.add_parser("generate-instructions",
                        help="caption reference clips and write APS/DSD/RP instructions (InstructTTSEval) into a "
                             "versioned dataset")
    gi.add_argument("--references", required=True,
                    help="JSON Lines manifest: ref_id, audio (WAV path, relative to the manifest), text, language")
    gi.add_argument("--name", default="instructions", help="dataset name in the store")
    gi.add_argument("--version", default=None, help="version to freeze (default: a hash of the items)")
    gi.add_argument("--caption-llm", default=DEFAULT_CAPTION_LLM,
                    help="audio-capable LLM spec that captions the clips, e.g. gemini:gemini-2.5-pro")
    gi.add_argument("--instruct-llm", default=None, help="LLM that writes DSD and RP instructions (default "
                    "--caption-llm), e.g. openai:gpt-4o:temperature=1")
    gi.add_argument("--caption-temperature", type=float, default=0.0)
    gi.add_argument("--temperature", type=float, default=1.0, help="temperature of the DSD and RP calls")
    gi.add_argument("--instruction-language", default="English", help="language of DSD and RP instructions")
    gi.add_argument("--seed", type=int, default=None, help="seed of dropout draws and picks (default: settings)")
    gi.add_argument("--store", default=None)
    gi.set_defaults(func=cmd_generate_instructions)
    mf = sub.add_parser("mos-forms", help="native MOS listening forms from a stored run (PashtoTTS-Bench 4.3)")
    mf.add_argument("--store", default=None)
    mf.add_argument("--run-id", required=True)
    mf.add_argument("--language", required=True, help="the items' language, e.g. ps")
    mf.add_argument("--out", required=True, help="folder to write the forms, audio and key to")
    mf.add_argument("--n", type=int, default=50, help="sentences in the stratified subset")
    mf.add_argument("--forms", type=int, default=None, help="forms: a multiple of the systems (default: as many)")
    mf.add_argument("--repeats", type=int, default=3, help="repeated clips per form (within-rater consistency)")
    mf.add_argument("--controls", type=int, default=2, help="negative-control clips per form (language check)")
    mf.add_argument("--seed", type=int, default=0, help="order and names are drawn from it (recorded)")
    mf.set_defaults(func=cmd_mos_forms)
    ma = sub.add_parser("mos-analyze", help="analyse the ratings returned on mos-forms forms")
    ma.add_argument("--forms", required=True, help="the folder mos-forms wrote")
    ma.add_argument("--ratings", required=True, help="CSV: rater_id, form, position, score (1-5)")
    ma.set_defaults(func=cmd_mos_analyze)
    he = sub.add_parser("human-eval", help="listening tests (Rethinking MUSHRA): export a run's audio for "
                        "webMUSHRA, ingest the ratings, analyse them")
    he.add_argument("step", choices=["export", "ingest", "analyze"])
    he.add_argument("results", nargs="*", help="ingest/analyze: results files (webMUSHRA's mushra.csv, lss.csv, "
                    "or the plain CSV: rater_id, trial_id, stimulus, score)")
    he.add_argument("--store", default=None)
    he.add_argument("--run-id", required=True)
    he.add_argument("--test-id", default="listening", help="the test's name; results come back under it")
    he.add_argument("--kind", default="mushra-dg-nmr",
                    choices=["mushra", "mushra-nmr", "mushra-dg", "mushra-dg-nmr", "mos", "cmos"])
    he.add_argument("--out", default=None, help="export: folder to write (default listening/<test-id>)")
    he.add_argument("--raters", type=int, default=20, help="export: rater configs to write")
    he.add_argument("--items", type=int, default=30, help="export: items drawn")
    he.add_argument("--systems", type=_csv, default=None, help="export: systems rated (default: the run's TTS)")
    he.add_argument("--reference", default=None, help="export: natural-speech system (default: the run's one)")
    he.add_argument("--anchor-x", default=None, action=argparse.BooleanOptionalAction,
                    help="export: Anchor-X (default: on for MUSHRA kinds with a natural reference)")
    he.add_argument("--anchor-y", default=None, help="export: system whose degraded clips are Anchor-Y")
    he.add_argument("--language", default="English", help="export: language named in the instructions")
    he.add_argument("--seed", type=int, default=0, help="export: item choice, page orders, names (recorded)")
    he.set_defaults(func=cmd_human_eval)
    sv = sub.add_parser("serve", help="serve a store's HTML run reports and their audio over HTTP, read-only")
    sv.add_argument("--store", default=None)
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    sv.add_argument("--port", type=int, default=8765, help="port (0: any free one)")
    sv.set_defaults(func=cmd_serve)
    ex = sub.add_parser("export", help="a run's tables, report and logs as CSV without its audio, to share")
    ex.add_argument("--store", default=None)
    ex.add_argument("--run-id", required=True)
    ex.add_argument("--out", required=True, help="folder to write")
    ex.set_defaults(func=cmd_export)
    lb = sub.add_parser("leaderboard", help="every system evaluated in a store, per dataset version, latest figures")
    lb.add_argument("--store", default=None)
    lb.set_defaults(func=cmd_leaderboard)
    prov = sub.add_parser("providers", help="list the registered providers")
    prov.set_defaults(func=cmd_providers)
    vo = sub.add_parser("voices", help="list a TTS provider's voices (where its API offers a list)")
    vo.add_argument("spec", help="provider or spec, e.g. elevenlabs, openai::base_url=http://127.0.0.1:8880/v1")
    vo.set_defaults(func=cmd_voices)
    return parser


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # SystemExit unwinds the stack, so the temporary Prefect server and the Dask cluster are stopped by their
    # context managers instead of being left behind; Prefect marks the flow run Crashed and calls this after.
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    import signal

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    _quiet_defaults()
    logging.getLogger("ttseval").setLevel(logging.INFO)
    args = build_parser().parse_args(argv)
    if getattr(args, "wait_lease", None) is not None:  # the flows read it from the settings, in any process
        os.environ["TTSEVAL_LEASE_WAIT_S"] = str(args.wait_lease)
    try:
        return args.func(args)
    except USER_ERRORS as e:
        print(f"ttseval: error: {e}", file=sys.stderr)
        return 2
    except TTSEvalError as e:
        print(f"ttseval: run failed: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # `python -m ttseval.cli`; also guards Dask's spawned workers
    sys.exit(main())
