"""Datasets: import-dataset, generate-dataset, generate-instructions."""

from __future__ import annotations

import argparse
from typing import Any

from ttseval.cli.common import Subcommands, add_store, prefect_api


def cmd_import_dataset(args: argparse.Namespace) -> int:
    """Write the items file; with clips made elsewhere (EmergentTTS-Eval's baseline_audios, InstructTTSEval's
    gen_path fields, Seed-TTS-eval's ground-truth recordings) also a `files` manifest next to it, and print the
    system spec that reads it (ttseval.corpus.importers.import_items_file)."""
    from ttseval.corpus.importers import import_items_file

    done = import_items_file(
        args.format,
        args.path,
        args.out,
        baseline_audios=args.baseline_audios,
        system_name=args.system_name,
        language=args.language,
    )
    out = done.out
    if done.fmt == "seedtts":
        print(f"{done.n_items} items with voice prompts -> {out}")
        systems = "files:MY-TTS:dir=FOLDER_OF_<utt>.wav"
        if done.spec:
            print(f"{done.n_clips} ground-truth recordings -> {done.manifest}\nsystem: {done.spec}")
            systems += f",{done.spec} --natural {done.spec}"
        print(
            f"then: ttseval evaluate --dataset {out} --systems {systems}  (WER, speaker similarity to each prompt, MOS)"
        )
        return 0
    print(f"{done.n_items} items -> {out} (then: ttseval evaluate --dataset {out})")
    if done.spec:
        missing = done.missing
        print(
            f"{done.n_clips - len(missing)} of {done.n_clips} {done.what} found -> {done.manifest}"
            + (
                f"; missing (a failed row each, retried by later runs): {', '.join(missing[:3])}"
                + (" ..." if len(missing) > 3 else "")
                if missing
                else ""
            )
        )
        print(f"system: {done.spec}")
        print(
            f"for a shared server: ttseval datasets push {out} --name NAME --system {done.spec} (items and clips "
            "into the store; the run form then offers NAME@VERSION and the system as pushed:<label>)"
        )
        print(
            f"then: ttseval evaluate --dataset {out} --systems {done.spec},piper:joe --baseline {done.spec}"
            if done.fmt == "emergenttts"
            else f"then: ttseval evaluate --dataset {out} --systems {done.spec} --instruction-judges "
            "gemini:gemini-2.5-pro"
        )
    return 0


def _print_generated(result: dict[str, Any], by: str) -> None:
    calls = result["calls"]
    print(
        f"dataset {result['ref']}: {result['n_items']} items by {by} {result[f'items_by_{by}']}; "
        f"{result['n_failed']} failed rows {result['failed_by_reason'] or ''}"
    )
    print(
        f"LLM calls: {calls['made']} made, {calls['cached']} from the cache; tokens in {calls['input_tokens']}, "
        f"out {calls['output_tokens']}; ${calls['cost_usd']:.4f}"
    )
    print(result["stats_markdown"])
    print(f"stored at {result['uri']}" + ("" if result["created"] else " (unchanged: this version existed)"))


def cmd_generate_dataset(args: argparse.Namespace) -> int:
    """Grow a seed file into a frozen dataset version with an LLM (EmergentTTS-Eval's breadth and depth)."""
    from ttseval.core.config import load_settings
    from ttseval.corpus import generation
    from ttseval.corpus.generation import read_seeds
    from ttseval.flows.generate_dataset import generate_dataset
    from ttseval.tasks.provider_cache import get_provider

    settings = load_settings(store=args.store)
    spec = generation.load_spec(args.categories)
    read_seeds(args.seeds, spec)
    for llm in dict.fromkeys(filter(None, [args.llm, args.refine_llm, args.repair_llm])):
        get_provider("llm", llm, settings)  # a bad spec or a missing API key fails before any call
    with prefect_api():
        result = generate_dataset(
            seeds=args.seeds,
            name=args.name,
            version=args.version,
            llm=args.llm,
            refine_llm=args.refine_llm,
            repair_llm=args.repair_llm,
            categories=args.categories,
            breadth=args.breadth,
            breadth_batch=args.breadth_batch,
            depth_steps=args.depth_steps,
            temperature=args.temperature,
            duplicate_threshold=args.duplicate_threshold,
            store=settings.store,
        )
    _print_generated(result, "depth")
    print(f"evaluate it: ttseval evaluate --dataset {result['ref']}")
    return 0


def cmd_generate_instructions(args: argparse.Namespace) -> int:
    """Caption reference clips and write InstructTTSEval-style APS, DSD and RP instructions into a frozen dataset."""
    from ttseval.core.config import load_settings
    from ttseval.corpus.instructions import read_references
    from ttseval.flows.generate_instructions import generate_instructions
    from ttseval.tasks.provider_cache import get_provider

    settings = load_settings(store=args.store, seed=args.seed)
    read_references(args.references)
    for llm in dict.fromkeys(filter(None, [args.caption_llm, args.instruct_llm])):
        get_provider("llm", llm, settings)  # a bad spec or a missing API key fails before any call
    with prefect_api():
        result = generate_instructions(
            references=args.references,
            name=args.name,
            version=args.version,
            caption_llm=args.caption_llm,
            instruct_llm=args.instruct_llm,
            caption_temperature=args.caption_temperature,
            temperature=args.temperature,
            instruction_language=args.instruction_language,
            seed=args.seed,
            store=settings.store,
        )
    _print_generated(result, "task")
    print(
        f"evaluate it: ttseval evaluate --dataset {result['ref']} --instruction-judges gemini:gemini-2.5-pro "
        "--systems SPEC,..."
    )
    return 0


# -- parsers ------------------------------------------------------------------------------------------------------


def add_import_dataset(sub: Subcommands) -> None:
    imp = sub.add_parser("import-dataset", help="convert a published benchmark file into a ttseval items file")
    imp.add_argument("--format", required=True, choices=["emergenttts", "instructttseval", "seedtts"])
    imp.add_argument("path", help="the published file (.jsonl, .json, .parquet or .csv; Seed-TTS-eval: its meta.lst)")
    imp.add_argument("--out", required=True, help="items file to write (.jsonl or .parquet)")
    imp.add_argument(
        "--baseline-audios",
        default=None,
        help="emergenttts: the baseline_audios folder (0.wav, 1.wav, ...); writes <out>.baseline.jsonl "
        "and prints the files:gpt-4o-mini-tts-alloy system spec that judges it without synthesis",
    )
    imp.add_argument(
        "--system-name",
        default=None,
        help="instructttseval: system name of the clips in the file's gen_path fields (default "
        "instructttseval-gen); they go to <out>.generated.jsonl, a files:<name> system",
    )
    imp.add_argument(
        "--language",
        default=None,
        help="seedtts: the items' language tag (default from meta.lst's folder: en -> en-US, zh -> zh-CN)",
    )
    imp.set_defaults(func=cmd_import_dataset)


def add_generate_dataset(sub: Subcommands) -> None:
    from ttseval.corpus import DEFAULT_LLM, DEFAULT_SEEDS

    gen = sub.add_parser("generate-dataset", help="grow a seed file into a versioned dataset with an LLM")
    gen.add_argument("--seeds", default=str(DEFAULT_SEEDS), help="JSON Lines seed items (category, text)")
    gen.add_argument("--name", default="generated", help="dataset name in the store")
    gen.add_argument("--version", default=None, help="version to freeze (default: a hash of the items)")
    gen.add_argument(
        "--llm",
        default=DEFAULT_LLM,
        help="LLM spec, e.g. gemini:gemini-2.5-pro or openai:MODEL:base_url=http://127.0.0.1:8000/v1",
    )
    gen.add_argument("--refine-llm", default=None, help="LLM for depth refinement (default --llm)")
    gen.add_argument("--repair-llm", default=None, help="LLM for grammar repair (default the refinement LLM)")
    gen.add_argument("--categories", default=None, help="category-set TOML (default: EmergentTTS-Eval's six)")
    gen.add_argument("--breadth", type=int, default=5, help="new items per category")
    gen.add_argument("--breadth-batch", type=int, default=5, help="items asked for per breadth call")
    gen.add_argument("--depth-steps", type=int, default=3, help="refinement steps (0-3)")
    gen.add_argument("--temperature", type=float, default=1.0)
    gen.add_argument("--duplicate-threshold", type=float, default=90.0, help="rapidfuzz ratio 0-100")
    add_store(gen)
    gen.set_defaults(func=cmd_generate_dataset)


def add_generate_instructions(sub: Subcommands) -> None:
    from ttseval.corpus import DEFAULT_CAPTION_LLM

    gi = sub.add_parser(
        "generate-instructions",
        help="caption reference clips and write APS/DSD/RP instructions (InstructTTSEval) into a versioned dataset",
    )
    gi.add_argument(
        "--references",
        required=True,
        help="JSON Lines manifest: ref_id, audio (WAV path, relative to the manifest), text, language",
    )
    gi.add_argument("--name", default="instructions", help="dataset name in the store")
    gi.add_argument("--version", default=None, help="version to freeze (default: a hash of the items)")
    gi.add_argument(
        "--caption-llm",
        default=DEFAULT_CAPTION_LLM,
        help="audio-capable LLM spec that captions the clips, e.g. gemini:gemini-2.5-pro",
    )
    gi.add_argument(
        "--instruct-llm",
        default=None,
        help="LLM that writes DSD and RP instructions (default --caption-llm), e.g. openai:gpt-4o:temperature=1",
    )
    gi.add_argument("--caption-temperature", type=float, default=0.0)
    gi.add_argument("--temperature", type=float, default=1.0, help="temperature of the DSD and RP calls")
    gi.add_argument("--instruction-language", default="English", help="language of DSD and RP instructions")
    gi.add_argument(
        "--seed", type=int, default=None, help="seed of dropout draws and picks (default: the seed setting, 0)"
    )
    add_store(gi)
    gi.set_defaults(func=cmd_generate_instructions)
