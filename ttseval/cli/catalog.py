"""Catalog: providers (every registered provider's metadata), voices (a TTS provider's voice list)."""

from __future__ import annotations

import argparse
import sys

from ttseval.cli.common import Subcommands
from ttseval.core.errors import SpecError


def cmd_voices(args: argparse.Namespace) -> int:
    """List a TTS provider's voices where its API (or engine) offers a list."""
    from ttseval.core.config import load_settings
    from ttseval.core.registry import Spec
    from ttseval.tasks.provider_cache import build_provider

    settings = load_settings()
    spec = Spec.parse(args.spec)
    provider = build_provider("tts", spec.canonical, settings)
    voices = getattr(provider, "voices", None)
    if not callable(voices):
        from ttseval.providers.registries import REGISTRIES

        tts, plugins = REGISTRIES["tts"], settings.plugins.get("tts")
        listing = [
            n for n in sorted(tts.entries(plugins)) if callable(getattr(tts.resolve(n, plugins), "voices", None))
        ]
        raise SpecError(
            f"tts provider {spec.provider!r} offers no voice list (its voices are named in its spec; "
            f"see its page in the docs); providers that list theirs: {', '.join(listing)}"
        )
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
    from ttseval.providers.registries import REGISTRIES

    plugins = load_settings().plugins
    header = ("name", "languages", "instruction", "gpu", "extra", "sample rate", "needs", "version")
    for kind, registry in REGISTRIES.items():
        rows = []
        for name in sorted(registry.entries(plugins.get(kind))):
            info = registry.info(name, plugins.get(kind))
            codes = info.language_codes()
            languages = (
                codes
                if isinstance(codes, str)
                else ", ".join(sorted(codes))
                if len(codes) <= 4
                else f"{len(codes)} languages"
            )
            absent = info.missing_programs()
            needs = [f"{p} (not installed)" if p in absent else p for p in info.requires]
            extra = (info.extra or "-") + (" (not installed)" if info.missing_modules() else "")
            rate = (
                f"{info.output_sample_rate_hz} Hz"
                if info.output_sample_rate_hz
                else "per voice"
                if kind == "tts"
                else "-"
            )
            rows.append(
                (
                    name if name in registry.names else f"{name} (plugin)",
                    languages,
                    "yes" if info.accepts_instruction else "no",
                    "yes" if info.gpu else "no",
                    extra,
                    rate,
                    ", ".join(needs) or "-",
                    info.version,
                )
            )
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        print(f"{kind}:")
        for row in [header, *rows]:
            print("  " + "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
        print()
    return 0


# -- parsers ------------------------------------------------------------------------------------------------------


def add_providers(sub: Subcommands) -> None:
    prov = sub.add_parser("providers", help="list the registered providers")
    prov.set_defaults(func=cmd_providers)


def add_voices(sub: Subcommands) -> None:
    vo = sub.add_parser("voices", help="list a TTS provider's voices (where its API offers a list)")
    vo.add_argument("spec", help="provider or spec, e.g. elevenlabs, openai::base_url=http://127.0.0.1:8880/v1")
    vo.set_defaults(func=cmd_voices)
