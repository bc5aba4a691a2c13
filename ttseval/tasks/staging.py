"""Audio made elsewhere enters the store before any work is handed out, so workers read only the store.

A `files:<label>:dir=PATH` or `files:<label>:manifest=PATH` system names a folder or manifest on the disk of the
machine that starts the run (a relative path: relative to the folder the command runs in). A Dask worker on
another host sees neither. So the flow, on that machine and before any task is submitted, reads the clip of
every item of the run (ttseval.providers.tts.files.stage_clips: decoded as synthesis would, stored as 16-bit WAV
under its SHA-256, the set recorded under its own SHA-256) and from then on the run names the system
`files:<label>`: its system id hashes the provider and the label, never a path, and its settings carry
{label: clip set SHA-256} (`clip_sets`), from which every worker builds it out of the store alone.

The settings and the baseline that named the system by its folder spec (natural, controls, reference_voices) are
renamed with it. Voice prompts and reference voices are stored the same way by ttseval.tasks.voices.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.errors import DatasetError, SpecError
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore
from ttseval.tasks.logs import logger
from ttseval.tasks.provider_cache import build_provider

LOCATORS = ("dir", "manifest")
"""The options of a files: spec that say where its clips are read from, not what the system is."""


@dataclass(frozen=True)
class Staged:
    """The run's systems, baseline and settings once its files: systems' clips are in the store."""

    systems: list[Spec]
    baseline: Spec
    settings: Settings
    renamed: dict[str, str]  # the folder spec (canonical) -> the label spec the run uses


def reads_paths(spec: Spec) -> bool:
    """Whether `spec` is a files: system given by a folder or manifest (a path or URI), staged before the run."""
    return spec.provider == "files" and any(spec.option(k) for k in LOCATORS)


def stage_files_systems(
    store: ArtifactStore, run_id: str, items: pd.DataFrame, systems: list[Spec], baseline: Spec, settings: Settings
) -> Staged:
    """Store the clips of each files: system's folder or manifest for the run's `items`, here, and rename the
    system `files:<label>` (see the module's docstring); other systems are left as they are.

    Raises:
        SpecError: two files: systems of the run share a label.
        DatasetError: the run already holds other audio of a label for some item (its rows would mix two
            recordings): nothing of the run is written.
    """
    from ttseval.providers.tts.files import stage_clips

    renamed: dict[str, str] = {}
    clip_sets = dict(settings.clip_sets)
    out: list[Spec] = []
    staged_clips: dict[str, dict[str, str]] = {}
    item_ids = [str(i) for i in items["item_id"]]
    for spec in systems:
        if not reads_paths(spec):
            out.append(spec)
            continue
        label_spec = Spec(spec.provider, spec.voice, tuple((k, v) for k, v in spec.options if k not in LOCATORS))
        if label_spec.canonical in renamed.values():
            first = next(k for k, v in renamed.items() if v == label_spec.canonical)
            raise SpecError(
                f"systems {first!r} and {spec.canonical!r} are both labelled {spec.voice!r}, and a files "
                "system is named by its label; give each its own label",
                spec=spec.canonical,
            )
        source = build_provider("tts", spec.canonical, settings)  # the folder or manifest, read here
        sha, record = stage_clips(source, store, item_ids)
        clip_sets[str(spec.voice)] = sha
        renamed[spec.canonical] = label_spec.canonical
        staged_clips[label_spec.id] = record["clips"]
        out.append(label_spec)
        logger().info(
            f"{spec.canonical}: {len(record['clips'])} clip(s) stored in {store.display()} (clip set "
            f"{sha[:12]}), {len(record['problems'])} item(s) without a usable clip; the run names it "
            f"{label_spec.canonical}"
        )
    if not renamed:
        return Staged(systems, baseline, settings, {})
    _refuse_changed_clips(store, run_id, staged_clips, {v: k for k, v in renamed.items()})
    baseline = Spec.parse(renamed.get(baseline.canonical, baseline.canonical))
    return Staged(out, baseline, staged_settings(settings, renamed, clip_sets), renamed)


def staged_settings(settings: Settings, renamed: dict[str, str], clip_sets: dict[str, str]) -> Settings:
    """`settings` as a staged run has them: the clip sets it stored, and the settings that name systems (natural,
    controls, reference_voices) naming the staged ones by label. The command that started the run prints its
    report with these (the flow returns `renamed` and `clip_sets`)."""
    if not renamed and not clip_sets:
        return settings
    return settings.model_copy(
        update={
            "clip_sets": dict(settings.clip_sets) | clip_sets,
            "natural": [_renamed(x, renamed) for x in settings.natural],
            "controls": [_renamed(x, renamed) for x in settings.controls],
            "reference_voices": {_renamed(k, renamed): v for k, v in settings.reference_voices.items()},
        }
    )


def _renamed(system: str, renamed: dict[str, str]) -> str:
    """A system named in a setting (spec or system id), renamed when it is a staged folder spec."""
    for old, new in renamed.items():
        if system == Spec.parse(old).id:
            return Spec.parse(new).id
    try:
        return renamed.get(Spec.parse(system).canonical, system)
    except SpecError:
        return system


def _refuse_changed_clips(
    store: ArtifactStore, run_id: str, staged: dict[str, dict[str, str]], source_of: dict[str, str]
) -> None:
    """Refuse a run whose stored rows of a staged label hold other audio than its clips now (item by item)."""
    import pyarrow.compute as pc

    rows = store.read(
        run_id,
        "synthesis",
        columns=["item_id", "system_id", "system_spec", "status", "audio_sha256"],
        where=pc.field("system_id").isin(list(staged)),
    )
    problems = []
    for r in rows[rows["status"] == "ok"].itertuples():
        now = staged[r.system_id].get(r.item_id)
        if now is not None and now != r.audio_sha256:
            problems.append((r.system_spec, r.item_id))
    if problems:
        shown = ", ".join(f"{spec} item {item!r}" for spec, item in problems[:5])
        more = f" and {len(problems) - 5} more" if len(problems) > 5 else ""
        specs = sorted({spec for spec, _ in problems})
        raise DatasetError(
            f"run {run_id!r} already holds other audio of {', '.join(specs)} ({shown}{more}) than "
            f"{', '.join(source_of[s] for s in specs)} holds now: its rows would mix two recordings. Fix: a new "
            "--run-id for the new clips (a nightly run has one each night), or a new label for them",
            source=", ".join(source_of[s] for s in specs),
            problems=[f"{spec} item {item!r}" for spec, item in problems],
        )
