"""The documentation site: the MkDocs site builds in strict mode and its reference pages hold what the code
declares. That every `ttseval ...` command shown in README.md or docs/ is accepted by the real command-line parser is
tests/unit/test_docs_commands.py."""

from __future__ import annotations

import html
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.harness import BIN, ROOT

# -- the site -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`mkdocs build --strict` of the repository's mkdocs.yml into a temporary folder (once for this module)."""
    target = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [
            str(BIN / "mkdocs"),
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(target),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "WARNING" not in out.stderr, out.stderr
    return target


def _rows(page: Path) -> list[str]:
    """The page's table rows as text (tags dropped, entities decoded, whitespace folded)."""
    text = page.read_text(encoding="utf-8")
    rows = re.findall(r"<tr>(.*?)</tr>", text, flags=re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split()) for row in rows]


def _row(page: Path, first_cell: str) -> str:
    """The one table row whose first cell is `first_cell`."""
    found = [row for row in _rows(page) if row.split(" ", 1)[0] == first_cell]
    assert len(found) == 1, (first_cell, found)
    return found[0]


def _folded(text: str) -> str:
    return " ".join(text.split())


def test_every_page_of_the_nav_is_built(site: Path) -> None:
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [p for n in node for p in pages(n)]
        if isinstance(node, dict):
            return [p for v in node.values() for p in pages(v)]
        return []

    nav = pages(config["nav"])
    assert len(nav) >= 17, nav
    for page in nav:
        stem = page[: -len(".md")]
        built = site / (stem + ".html" if stem == "index" or stem.endswith("/index") else stem + "/index.html")
        assert built.is_file(), page
    # The reference pages are generated, never committed.
    tracked = subprocess.run(
        ["git", "ls-files", "docs"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for generated in ("settings", "tables", "metrics", "providers", "cli"):
        assert f"docs/reference/{generated}.md" not in tracked
        assert (site / "reference" / generated / "index.html").is_file()
    assert (site / "html-report.png").is_file()


def test_the_settings_page_holds_every_declared_setting(site: Path) -> None:
    from ttseval.core.config import Settings

    page = site / "reference" / "settings" / "index.html"
    fields = Settings.model_fields
    for name, field in fields.items():
        row = _row(page, name)
        if field.description:
            assert _folded(field.description) in row, (name, row)
    # Defaults as the code declares them, with their environment variable.
    ttl = fields["lease_ttl_s"]
    assert f" {ttl.default!r} " in _row(page, "lease_ttl_s") + " "
    assert "TTSEVAL_LEASE_TTL_S" in _row(page, "lease_ttl_s")
    assert f'"{fields["store"].default}"' in _row(page, "store")
    assert f" {fields['shard_size'].default} " in _row(page, "shard_size")
    # Nested models: every field under its dotted key, with its default and description.
    insv = fields["insv"].default_factory()
    for name, field in type(insv).model_fields.items():
        row = _row(page, f"insv.{name}")
        assert repr(getattr(insv, name)).strip("'") in row, (name, row)
        assert _folded(field.description) in row
        assert f"TTSEVAL_INSV__{name.upper()}" in row
    assert "listening.sample_rate_hz" in " ".join(_rows(page))
    cascade_fields = fields["cascades"].annotation.__args__[1].model_fields
    assert _folded(cascade_fields["escalate_sample"].description) in _row(page, "cascades.<name>.escalate_sample")


def test_the_tables_page_holds_every_column_with_its_description(site: Path) -> None:
    from ttseval.core.schemas import TABLES

    page = (site / "reference" / "tables" / "index.html").read_text(encoding="utf-8")
    text = _folded(html.unescape(re.sub(r"<[^>]+>", " ", page)))
    for table in TABLES.values():
        assert f'id="{table.name}"' in page, table.name
        for field in table.schema:
            description = field.metadata[b"description"].decode()
            assert (f"{field.name} (key)" if field.name in table.key else field.name) in text
            assert _folded(description) in text, (table.name, field.name)
    # One column, read whole: synthesis.cost_usd with its type and its description in one row.
    cost = TABLES["synthesis"].schema.field("cost_usd")
    rows = [r for r in _rows(site / "reference" / "tables" / "index.html") if r.startswith("cost_usd ")]
    assert any(str(cost.type) in r and _folded(cost.metadata[b"description"].decode()) in r for r in rows), rows


def test_the_metrics_page_holds_the_metric_registry(site: Path) -> None:
    from ttseval.metrics.registry import METRICS

    page = site / "reference" / "metrics" / "index.html"
    for name, info in METRICS.items():
        row = _row(page, name)
        assert _folded(info.aggregate) in row
        assert ("higher is better" if info.higher_is_better else "lower is better") in row
        for column in info.ci or ():
            assert column in row


def test_the_providers_page_holds_every_registry_entry_and_its_metadata(site: Path) -> None:
    from ttseval.providers.registries import REGISTRIES

    page = site / "reference" / "providers" / "index.html"
    rows = _rows(page)
    for kind, registry in REGISTRIES.items():
        for name in registry.names:
            info = registry.info(name)
            matching = [
                r
                for r in rows
                if r.split(" ", 1)[0] == name and all(m in r for m in info.imports) and (info.extra or "-") in r
            ]
            assert matching, (kind, name)
            if info.output_sample_rate_hz:
                assert any(f"{info.output_sample_rate_hz} Hz" in r for r in matching), (kind, name)
    piper = REGISTRIES["tts"].info("piper")
    assert piper.extra == "engines" and any(r.startswith("piper ") and " engines " in r for r in rows)


def test_the_cli_page_holds_every_command(site: Path) -> None:
    from ttseval.cli import build_parser

    page = html.unescape((site / "reference" / "cli" / "index.html").read_text(encoding="utf-8"))
    parser = build_parser()
    [commands] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    assert len(commands.choices) >= 15
    for name, sub in commands.choices.items():
        assert f"ttseval {name}" in page, name
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in page, (name, flag)
