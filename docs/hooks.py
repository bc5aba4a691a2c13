"""MkDocs hook: the reference pages, generated at build time from what the code declares.

Nothing here is committed as Markdown: each build imports ttseval (read-only) and writes

    reference/settings.md   the pydantic `Settings` model (ttseval.core.config) and its nested models
    reference/tables.md     every table's schema and key (ttseval.core.schemas.TABLES), column descriptions
    reference/metrics.md    the metric registry (ttseval.metrics.registry.METRICS)
    reference/providers.md  every registry of ttseval.providers.registries.REGISTRIES, with each class's declared
                            metadata
    reference/cli.md        every command's help, from the real parser (ttseval.cli.build_parser)

so a renamed setting, a new column or a new provider shows in the next build, and a page can never drift from
the code. mkdocs.yml names this file under `hooks:` and excludes it from the pages (`exclude_docs`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import typing
from collections.abc import Callable
from typing import Any

from mkdocs.structure.files import File, Files

GENERATED = "<!-- Generated at build time by docs/hooks.py from the code's declarations; do not edit. -->\n\n"


# -- helpers ------------------------------------------------------------------------------------------------------


def _cell(text: Any) -> str:
    """One Markdown table cell: no newlines, pipes escaped, and `<`/`>` outside code spans escaped (a description's
    `files:<folder>` would otherwise be read as an HTML tag and vanish)."""
    parts = re.split(r"(`+[^`]*`+)", " ".join(str(text).split()))
    return "".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts)).replace(
        "|", "\\|"
    )


def _code(text: Any) -> str:
    text = str(text)
    return f"``{text}``" if "`" in text else f"`{text}`"


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _type_name(annotation: Any) -> str:
    """A readable type: `int`, `str | None`, `dict[str, VendorLimit]`, `'exclude' | 'count'`."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _toml_value(value: Any) -> str:
    """A default as it would be written in ttseval.toml (None: not set)."""
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if hasattr(value, "model_dump"):
        return _toml_value(value.model_dump())
    return str(value)


def _constraints(field: Any) -> str:
    """The bounds pydantic checks (ge, gt, le, lt), as `>= 1, <= 12`."""
    signs = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    out = []
    for meta in field.metadata:
        for attr, sign in signs.items():
            bound = getattr(meta, attr, None)
            if bound is not None:
                out.append(f"{sign} {bound}")
    return ", ".join(out)


def _default(field: Any) -> Any:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        return field.default_factory()
    return None if field.default is PydanticUndefined else field.default


def _required(field: Any) -> bool:
    return field.is_required()


def _first_paragraph(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n\n")[0].strip()


# -- settings -----------------------------------------------------------------------------------------------------

MISSING = "*(no description declared)*"


def _model_rows(model: type, toml_prefix: str, env_prefix: str | None) -> tuple[list[list[Any]], list[type]]:
    """Rows of one pydantic model's fields, and the nested models its fields hold (documented after it)."""
    from pydantic import BaseModel

    rows, nested = [], []
    for name, field in model.model_fields.items():
        key = f"{toml_prefix}{name}"
        env = f"`{env_prefix}{name.upper()}`" if env_prefix is not None else "-"
        value = None if _required(field) else _default(field)
        default = "*(required)*" if _required(field) else "not set" if value is None else _code(_toml_value(value))
        bounds = _constraints(field)
        type_ = _code(_type_name(field.annotation)) + (f" ({bounds})" if bounds else "")
        rows.append([_code(key), type_, default, env, field.description or MISSING])
        for arg in (field.annotation, *typing.get_args(field.annotation)):
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in nested:
                nested.append(arg)
    return rows, nested


def settings_page() -> str:
    from ttseval.core import config

    settings = config.Settings
    prefix = settings.model_config.get("env_prefix", "")
    delimiter = settings.model_config.get("env_nested_delimiter", "__")
    header = ["setting", "type", "default", "environment", "description"]
    rows, nested = _model_rows(settings, "", prefix)
    out = [
        GENERATED,
        "# Settings\n\n",
        (
            f"Every field of the pydantic model `{settings.__module__}.{settings.__name__}`, its type, default and "
            "description as declared in the code. "
        ),
        _first_paragraph(settings),
        "\n\n",
        (
            f"Precedence: command-line flags over environment variables (`{prefix}*`) over the TOML file "
            f"(`$TTSEVAL_CONFIG`, else `./ttseval.toml`) over these defaults. Nested values use `{delimiter}` in the "
            f"environment (`{prefix}ASR{delimiter}EN`); list and table values take JSON there. How the settings are "
            "used: [Deploying](../deploying.md#settings).\n\n"
        ),
        "## Top level\n\n",
        _table(header, rows),
    ]
    # Where each nested model is used: the fields that hold it.
    holders: dict[type, list[str]] = {}
    for name, field in settings.model_fields.items():
        for arg in (field.annotation, *typing.get_args(field.annotation)):
            if arg in nested:
                keyed = typing.get_origin(field.annotation) is dict
                holders.setdefault(arg, []).append(f"{name}.<name>." if keyed else f"{name}.")
    for model in nested:
        for holder in holders.get(model, [f"{model.__name__.lower()}."]):
            direct = "<name>" not in holder
            env = f"{prefix}{holder.rstrip('.').upper()}{delimiter}" if direct else None
            rows, _ = _model_rows(model, holder, env)
            out += [
                f"## `{holder.rstrip('.')}`: {model.__name__}\n\n",
                _first_paragraph(model),
                "\n\n",
                _table(header, rows),
                "\n",
            ]
    return "".join(out)


def missing_setting_descriptions() -> list[str]:
    """Fields of Settings and its nested models declared without a description (listed in the docs' build log)."""
    from pydantic import BaseModel

    from ttseval.core import config

    missing, seen, todo = [], set(), [("", config.Settings)]
    while todo:
        prefix, model = todo.pop(0)
        for name, field in model.model_fields.items():
            if not field.description:
                missing.append(prefix + name)
            for arg in (field.annotation, *typing.get_args(field.annotation)):
                if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in seen:
                    seen.add(arg)
                    todo.append((f"{name}.", arg))
    return missing


# -- tables -------------------------------------------------------------------------------------------------------


def _description(field: Any) -> str:
    meta = field.metadata or {}
    doc = meta.get(b"description") or meta.get("description")
    return doc.decode() if isinstance(doc, bytes) else (doc or MISSING)


def _schema_table(schema: Any, key: tuple[str, ...]) -> str:
    rows = [
        [
            _code(f.name) + (" (key)" if f.name in key else ""),
            _code(str(f.type)),
            "no" if not f.nullable else "yes",
            _description(f),
        ]
        for f in schema
    ]
    return _table(["column", "type", "nullable", "description"], rows)


def tables_page() -> str:
    from markdown.extensions.toc import slugify

    from ttseval.core import schemas

    out = [
        GENERATED,
        "# Tables\n\n",
        (
            f"Every table the store holds, as declared once in `{schemas.__name__}` (`TABLES`): its key, and each "
            "column's Arrow type, whether it may be null, and its description. A run's table lives at "
            "`<store>/runs/<run-id>/<table>/` as Parquet parts and reads with "
            '`pandas.read_parquet("<store>/runs/<run-id>/<table>")`. Where the rest of a run\'s files land: '
            "[Getting started](../getting-started.md#where-results-land).\n\n"
        ),
    ]
    out.append(
        _table(
            ["table", "key", "columns"],
            [
                [f"[{_code(t.name)}](#{slugify(t.name, '-')})", ", ".join(t.key), len(t.schema)]
                for t in schemas.TABLES.values()
            ],
        )
    )
    for table in schemas.TABLES.values():
        out += [
            f"\n## {table.name}\n\nKey: {', '.join(_code(k) for k in table.key)}.\n\n",
            _schema_table(table.schema, table.key),
        ]
    generated = getattr(schemas, "GENERATED", None)
    if generated is not None:
        out += [
            "\n## A generated dataset (`generation.parquet`)\n\n",
            (
                "Not a run table: `<store>/datasets/<name>/<version>/generation.parquet` holds every row "
                "`ttseval generate-dataset` or `ttseval generate-instructions` made, failed ones with the reason; "
                "`items.parquet` beside it is its ok rows. Declared as `GENERATED`.\n\n"
            ),
            _schema_table(generated, ("item_id",)),
        ]
    return "".join(out)


def missing_column_descriptions() -> list[str]:
    from ttseval.core import schemas

    return [f"{t.name}.{f.name}" for t in schemas.TABLES.values() for f in t.schema if _description(f) == MISSING]


# -- metrics ------------------------------------------------------------------------------------------------------


def metrics_page() -> str:
    from ttseval.metrics import registry

    rows = [
        [
            _code(name),
            ("↑ higher" if info.higher_is_better else "↓ lower") + " is better",
            info.aggregate,
            ", ".join(_code(c) for c in info.ci) if info.ci else "-",
        ]
        for name, info in registry.METRICS.items()
    ]
    return "".join(
        [
            GENERATED,
            "# Metrics\n\n",
            (
                f"Every metric ttseval reports, declared once in `{registry.__name__}` (`METRICS`), keyed by its "
                "column name in the output tables. Summaries name their CI columns from it, drift reads the direction "
                "to call a change better or worse, and report headers carry its arrow.\n\n"
            ),
            _table(["metric", "direction", "aggregation", "95% CI columns"], rows),
        ]
    )


# -- providers ----------------------------------------------------------------------------------------------------


def _languages(info: Any) -> str:
    languages = info.languages
    if callable(languages):
        return "asked of the engine when it runs"
    if isinstance(languages, str):
        return languages
    return ", ".join(sorted(languages)) or "-"


KIND_TITLES = {
    "tts": "Text to speech (`--systems`)",
    "asr": "Recognisers (setting `asr`)",
    "quality": "MOS predictors (setting `quality`)",
    "lid": "Spoken language identification (setting `lid`)",
    "speaker": "Speaker encoders (setting `similarity`)",
    "judge": "Judges (`--judges`, `--instruction-judges`)",
    "llm": "LLMs (`generate-dataset --llm`, `generate-instructions`)",
}


def providers_page() -> str:
    from ttseval.providers import registries as reg

    out = [
        GENERATED,
        "# Providers and judges\n\n",
        (
            f"Every entry of the registries in `{reg.__name__}` (`REGISTRIES`) with the metadata its class declares "
            "(read without building it, as `ttseval providers` reads it): the languages it covers, whether a "
            "style instruction changes its output, whether it can use a GPU, the pip extra that installs its Python "
            "packages, the sample rate it returns, the system programs it runs and the modules it imports. The "
            "description is the first paragraph of the class's docstring. A spec is "
            "`provider[:voice][:key=value...]`: [Systems](../systems.md).\n\n"
        ),
    ]
    for kind, registry in reg.REGISTRIES.items():
        rows = []
        for name in registry.names:
            info = registry.info(name)
            rows.append(
                [
                    _code(name),
                    _languages(info),
                    "yes" if info.accepts_instruction else "no",
                    "yes" if info.gpu else "no",
                    info.extra or "-",
                    f"{info.output_sample_rate_hz} Hz" if info.output_sample_rate_hz else "varies",
                    ", ".join(info.requires) or "-",
                    ", ".join(_code(m) for m in info.imports) or "-",
                    _first_paragraph(info.cls) or MISSING,
                ]
            )
        out += [
            f"## {KIND_TITLES.get(kind, kind)}\n\n",
            f"Registry `{kind}`, protocol `{registry.protocol.__name__}`.\n\n",
            _table(
                ["name", "languages", "instruction", "gpu", "extra", "sample rate", "needs", "imports", "description"],
                rows,
            ),
            "\n",
        ]
    return "".join(out)


def missing_provider_descriptions() -> list[str]:
    from ttseval.providers import registries as reg

    return [
        f"{kind}:{name}"
        for kind, r in reg.REGISTRIES.items()
        for name in r.names
        if not _first_paragraph(r.info(name).cls)
    ]


# -- the command line ---------------------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers here; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_page() -> str:
    from ttseval.cli import build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "110"  # argparse wraps help at the terminal's width; the page should not depend on it
    try:
        parser = build_parser()
        out = [
            GENERATED,
            "# Command line\n\n",
            (
                "Every `ttseval` command with its options, as the real parser (`ttseval.cli.build_parser`) prints "
                "them with `--help`. Exit codes: `0` done, `1` the run failed, `2` bad input (nothing written).\n\n"
            ),
            "```text\n",
            parser.format_help(),
            "```\n",
        ]
        for name, sub in _subcommands(parser).items():
            out += [f"\n## ttseval {name}\n\n```text\n", sub.format_help(), "```\n"]
        return "".join(out)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


# -- the hook -----------------------------------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/settings.md": settings_page,
    "reference/tables.md": tables_page,
    "reference/metrics.md": metrics_page,
    "reference/providers.md": providers_page,
    "reference/cli.md": cli_page,
}


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages before the navigation is built, so mkdocs.yml's nav and links can name them."""
    import logging

    log = logging.getLogger("mkdocs.hooks.reference")
    for what, missing in (
        ("settings", missing_setting_descriptions()),
        ("columns", missing_column_descriptions()),
        ("providers", missing_provider_descriptions()),
    ):
        if missing:  # info, not a warning: a strict build does not fail on it, the log says it
            log.info("%s declared without a description: %s", what, ", ".join(missing))
    for path, render in PAGES.items():
        existing = files.get_file_from_path(path)
        if existing is not None:  # a hand-written copy would be stale: the generated page wins
            files.remove(existing)
        files.append(File.generated(config, path, content=render()))
    return files
