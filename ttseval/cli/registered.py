"""What a shared server's runs can name without a file on its disk: `datasets push|list|show` (items frozen in the
store's catalog as NAME@VERSION, ttseval.corpus.catalog) and `systems push|list` (clips stored content-addressed
and named pushed:<label>, ttseval.providers.tts.pushed).

After a push, when PREFECT_API_URL names a server, the evaluate/adhoc deployment's run form is told the new
choices (ttseval.deployments.choices).
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ttseval.cli.common import Subcommands, add_store

if TYPE_CHECKING:
    import pandas as pd

    from ttseval.core.config import Settings
    from ttseval.core.store import ArtifactStore


def _store(args: argparse.Namespace) -> tuple[Settings, ArtifactStore]:
    from ttseval.core.config import load_settings
    from ttseval.core.store import open_store

    settings = load_settings(store=args.store)
    return settings, open_store(settings)


def _refresh_form(store_uri: str) -> None:
    """Tell the Prefect server's adhoc run form the store's choices, when a server is configured."""
    api_url = os.environ.get("PREFECT_API_URL")
    if not api_url:
        print(
            "(PREFECT_API_URL is not set: no Prefect server's run form was updated; `python -m "
            "ttseval.deployments.choices --store URI` does it later)"
        )
        return
    from ttseval.deployments.choices import ChoicesError, refresh_adhoc_form

    try:
        datasets, systems = refresh_adhoc_form(api_url, store_uri)
    except ChoicesError as e:  # the push itself is done and stays; only the form's list is stale
        print(f"the push is stored, but the run form was not updated: {e}")
        return
    print(f"the evaluate/adhoc run form now offers {len(datasets)} dataset(s) and {len(systems)} pushed system(s)")


def cmd_datasets(args: argparse.Namespace) -> int:
    """datasets push FILE --name NAME [--version V] | list | show NAME@VERSION."""
    from ttseval.core.errors import DatasetError
    from ttseval.corpus import catalog

    settings, store = _store(args)
    if args.action == "push":
        if not args.file or not args.name:
            raise DatasetError(
                "datasets push needs the items FILE and --name NAME, e.g. `ttseval datasets push "
                "items.jsonl --name my-set` (--version V is optional)"
            )
        return _push_dataset(args, settings, store)
    if args.action == "list":
        found = catalog.names(store)
        if not found:
            print(f"no datasets in store {store.display()}; register one with `ttseval datasets push FILE --name NAME`")
            return 0
        for name in found:
            for m in catalog.versions(store, name):
                origin = m.get("origin", "generated")
                print(f"{m['ref']}\t{m.get('n_items', '?')} items\t{origin}\t{m.get('created_at', '')}")
        return 0
    if not args.file:
        raise DatasetError("datasets show needs NAME@VERSION (or NAME@latest); `ttseval datasets list` lists them")
    manifest, table = catalog.describe(store, args.file)
    print(f"dataset {manifest['ref']}: {manifest.get('n_items')} items, content {manifest['content_sha256'][:12]}")
    print(catalog.counts_markdown(table))
    origin = manifest.get("origin", "generated")
    if origin == "pushed":
        src = manifest.get("source", {})
        print(
            f"from: pushed file {src.get('file')} (sha256 {str(src.get('sha256', ''))[:12]}) on "
            f"{manifest.get('created_at')}"
        )
        if manifest.get("systems"):
            print("clips pushed with it: " + ", ".join(f"pushed:{s}" for s in manifest["systems"]))
    else:
        print(
            f"from: generated from {manifest.get('seeds') or manifest.get('references') or '?'} by "
            f"{manifest.get('llm') or manifest.get('caption_llm') or '?'} on {manifest.get('created_at')}"
        )
    return 0


def _push_dataset(args: argparse.Namespace, settings: Settings, store: ArtifactStore) -> int:
    from ttseval.core.errors import SpecError
    from ttseval.core.registry import Spec
    from ttseval.corpus import catalog
    from ttseval.corpus.items import load_items
    from ttseval.providers.tts.pushed import check_label, push_files
    from ttseval.tasks.voices import store_prompts

    path = Path(args.file)
    items = load_items(path, categories=settings.categories)  # the rules and messages of `evaluate --dataset`
    clip_sources = []
    for text in args.system or []:
        spec = Spec.parse(text)
        if spec.provider != "files" or not spec.voice or len(spec.options) != 1:
            raise SpecError(
                f"--system {text!r}: give the files system the import printed, files:LABEL:manifest=PATH "
                "or files:LABEL:dir=FOLDER",
                spec=text,
            )
        clip_sources.append((check_label(spec.voice), dict(spec.options)))
    catalog.check_free(store, args.name, args.version, items)  # a bad name or version: refused before any copy
    # voice prompts go into the store too, and the items point at the stored copy, readable wherever the run is
    items = store_prompts(store, items, source=str(path))
    items["prompt_audio_uri"] = [
        store.display(store.audio_rel_path(s)) if isinstance(s, str) and s else None
        for s in items["prompt_audio_sha256"]
    ]
    items["reference_audio_uri"], dropped = _stored_references(store, path, items)
    if dropped:
        print(
            f"{len(dropped)} reference_audio_uri clip(s) could not be read and are left empty (a run does not read "
            f"them; they are the references an instruction describes): {', '.join(dropped[:5])}"
            + (" ..." if len(dropped) > 5 else "")
        )
    catalog.check_free(store, args.name, args.version, items)  # a frozen version with other items: before the clips
    pushed = []
    for label, options in clip_sources:
        done = push_files(store, label, dir=options.get("dir"), manifest=options.get("manifest"))
        pushed.append(label)
        print(f"system pushed:{label}: {done['n_clips']} clips ({len(done['added'])} new)" + _missing(done))
    written = catalog.push_items(
        store,
        args.name,
        args.version,
        items,
        source={"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()},
        systems=pushed,
    )
    print(
        f"dataset {written.ref}: {len(items)} items -> {written.uri}"
        + ("" if written.created else " (unchanged: this version held these items)")
    )
    print(catalog.counts_markdown(catalog.counts(items)))
    print(f"then: ttseval evaluate --dataset {written.ref} (or choose {written.ref} in the UI's run form)")
    _refresh_form(settings.store)
    return 0


def _missing(done: dict[str, Any]) -> str:
    missing = done.get("missing") or []
    return (
        (
            f"; {len(missing)} listed clip(s) not found, left out (their items get failed rows until pushed): "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )
        if missing
        else ""
    )


def _stored_references(store: ArtifactStore, dataset: Path, items: pd.DataFrame) -> tuple[list[str | None], list[str]]:
    """Each item's reference_audio_uri stored in the store (a path on the user's side means nothing to the server,
    and a UI run, confined to what it may read, would refuse it): the stored copies' URIs, and the item ids whose
    reference could not be read."""
    from ttseval.core.paths import resolve_against
    from ttseval.providers.tts.files import filesystem
    from ttseval.providers.tts.pushed import store_clip

    done: dict[str, str | None] = {}
    uris: list[str | None] = []
    dropped: list[str] = []
    for item_id, value in zip(items["item_id"], items["reference_audio_uri"]):
        if not isinstance(value, str) or not value.strip():
            uris.append(None)
            continue
        if value not in done:
            try:
                fs, inner = filesystem(resolve_against(dataset, value))
                with fs.open(inner, "rb") as f:
                    done[value] = store.display(store.audio_rel_path(store_clip(store, f.read())))
            except Exception:  # noqa: BLE001 - named in the command's output
                done[value] = None
        if done[value] is None:
            dropped.append(str(item_id))
        uris.append(done[value])
    return uris, dropped


def cmd_store(args: argparse.Namespace) -> int:
    """store repair [--dry-run]: set aside the catalog objects that do not parse (ttseval.tasks.repair)."""
    from ttseval.tasks.repair import CORRUPT_SUFFIX, corrupt_objects, set_aside

    _, store = _store(args)
    found = corrupt_objects(store)
    if not found:
        print(f"store {store.display()}: every dataset and pushed-system manifest reads; nothing to repair")
        return 0
    for c in found:
        print(f"corrupt: {c.reason}")
    if args.dry_run:
        print(f"{len(found)} object(s) would be set aside (--dry-run: nothing changed)")
        return 0
    set_aside(store, found)
    for c in found:
        print(
            f"set aside: {store.display(c.rel_path)} -> {c.rel_path.rsplit('/', 1)[-1]}{CORRUPT_SUFFIX}; "
            f"push it again: {c.push_again}"
        )
    return 0


def cmd_systems(args: argparse.Namespace) -> int:
    """systems push --label NAME (--dir D | --manifest M) | list."""
    from ttseval.providers.tts import pushed

    settings, store = _store(args)
    if args.action == "list":
        found = pushed.labels(store)
        if not found:
            print(
                f"no pushed systems in store {store.display()}; push one with `ttseval systems push --label NAME "
                "--dir FOLDER`"
            )
        for label in found:
            m = pushed.read_system(store, label)
            if m is None:  # its manifest went between the listing and this read
                continue
            print(f"pushed:{label}\t{m['n_clips']} clips\tcontent {m['content_sha256'][:12]}\t{m['updated_at']}")
        return 0
    if not args.label or bool(args.dir) == bool(args.manifest):
        from ttseval.core.errors import DatasetError

        raise DatasetError(
            "systems push needs --label NAME and exactly one of --dir FOLDER (clips named "
            "<item_id>.wav/.flac/.mp3/.ogg) and --manifest FILE (.jsonl or .csv: item_id, path)"
        )
    done = pushed.push_files(store, args.label, dir=args.dir, manifest=args.manifest)
    print(
        f"system pushed:{args.label}: {done['n_clips']} clips ({len(done['added'])} new), content "
        f"{done['content_sha256'][:12]} in {store.display()}" + _missing(done)
    )
    print(
        f"then: ttseval evaluate --systems pushed:{args.label},... (or add pushed:{args.label} to the UI form's "
        "systems)"
    )
    _refresh_form(settings.store)
    return 0


# -- parsers ------------------------------------------------------------------------------------------------------


def add_datasets(sub: Subcommands) -> None:
    ds = sub.add_parser("datasets", help="register items files in the store as NAME@VERSION, list and show them")
    ds.add_argument("action", choices=["push", "list", "show"])
    ds.add_argument(
        "file",
        nargs="?",
        default=None,
        help="push: the items file (.jsonl, .csv, .parquet, or one import-dataset wrote); "
        "show: NAME@VERSION (or NAME@latest)",
    )
    ds.add_argument("--name", default=None, help="push: the dataset's name in the store")
    ds.add_argument("--version", default=None, help="push: version to freeze (default: a hash of the items)")
    ds.add_argument(
        "--system",
        action="append",
        default=None,
        metavar="files:LABEL:manifest=PATH",
        help="push: clips that come with the items (the files system import-dataset printed), pushed "
        "as pushed:LABEL; repeatable",
    )
    add_store(ds)
    ds.set_defaults(func=cmd_datasets)


def add_systems(sub: Subcommands) -> None:
    sy = sub.add_parser(
        "systems", help="push clips made elsewhere into the store as a system (pushed:LABEL), list them"
    )
    sy.add_argument("action", choices=["push", "list"])
    sy.add_argument("--label", default=None, help="push: the system's name (reports, the spec pushed:LABEL)")
    sy.add_argument("--dir", default=None, help="push: folder of clips named <item_id>.wav (.flac, .mp3, .ogg)")
    sy.add_argument("--manifest", default=None, help="push: .jsonl or .csv with columns item_id and path")
    add_store(sy)
    sy.set_defaults(func=cmd_systems)


def add_store_repair(sub: Subcommands) -> None:
    st = sub.add_parser("store", help="repair the store's catalog: set aside manifests that do not parse")
    st.add_argument("action", choices=["repair"])
    st.add_argument("--dry-run", action="store_true", help="list what would be set aside, change nothing")
    add_store(st)
    st.set_defaults(func=cmd_store)
