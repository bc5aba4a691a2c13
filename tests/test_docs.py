"""The documentation: the MkDocs site builds in strict mode, its reference pages hold what the code declares, and
every `ttseval ...` command shown in README.md or docs/ is accepted by the real command-line parser."""

from __future__ import annotations

import contextlib
import html
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


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


# -- documented commands ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    file: str
    line: int
    text: str  # as written (continuations joined)
    argv: tuple[str, ...]  # the words after `ttseval`


_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_SHELL = {"", "bash", "sh", "shell", "console", "zsh", "text"}  # fenced blocks whose lines may be commands


def _strip_comment(line: str) -> str:
    """`line` without a shell comment: a `#` outside quotes that starts a word (as bash reads it)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
            elif char == "\\" and quote == '"':
                continue
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


_COMMAND = re.compile(r"""^\s*(?:[A-Za-z_][A-Za-z0-9_]*=(?:"[^"]*"|'[^']*'|\S)*\s+)*ttseval(?:\s|$)""")


def _argv(text: str) -> tuple[str, ...] | None:
    """The words after `ttseval` when `text` is a ttseval command (leading env assignments dropped), else None."""
    if not _COMMAND.match(text):  # prose, a file layout, a drawing: not shell words at all
        return None
    words = shlex.split(_strip_comment(text))
    while words and _ENV.match(words[0]):
        words.pop(0)
    if not words or words[0] != "ttseval":
        return None
    return tuple(words[1:])


def documented_commands(path: Path, text: str | None = None) -> list[Command]:
    """Every `ttseval ...` command in a Markdown file: lines of fenced code blocks (continuations joined, comments
    and leading environment assignments stripped), and inline code that starts with `ttseval `."""
    text = path.read_text(encoding="utf-8") if text is None else text
    name = str(path.relative_to(ROOT)) if path.is_absolute() and ROOT in path.parents else str(path)
    found: list[Command] = []
    lines = text.split("\n")
    prose = list(lines)  # the file with fenced blocks blanked, for inline code (line numbers kept)
    fence = None
    shell = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(lines, 1):
        marker = _FENCE.match(line)
        if fence is None:
            if marker:
                fence = marker.group(1)
                shell = marker.group(2).lower() in _SHELL
                prose[number - 1] = ""
            continue
        prose[number - 1] = ""
        if marker and line.strip().startswith(fence) and pending is None:
            fence = None
            continue
        if not shell:
            continue
        start, joined = pending if pending else (number, "")
        stripped = line.rstrip()
        if stripped.endswith("\\") and _strip_comment(stripped) == stripped:
            pending = (start, joined + stripped[:-1] + " ")
            continue
        pending = None
        logical = joined + line
        argv = _argv(logical)
        if argv is not None:
            found.append(Command(name, start, " ".join(logical.split()), argv))
    body = "\n".join(prose)
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", body):
        code = " ".join(match.group(1).split())
        if code.startswith("ttseval "):
            argv = _argv(code)
            if argv is not None:
                found.append(Command(name, body.count("\n", 0, match.start()) + 1, code, argv))
    return found


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _refusal(argv: tuple[str, ...]) -> str | None:
    """None when the real parser accepts `argv`, else its error message."""
    from ttseval.cli import build_parser

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(list(argv))
        except SystemExit as e:
            if e.code not in (0, None):
                return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {e.code}"
    return None


def test_the_extractor_reads_blocks_continuations_env_comments_and_inline_code() -> None:
    text = "\n".join(
        [
            "Run `ttseval report --run-id demo` or `scripts/setup.sh demo`; `ttseval` alone is a name.",
            "```bash",
            "# a comment line",
            "TTSEVAL_GPU=true A=1 ttseval evaluate --dataset big.jsonl \\",
            "    --systems 'piper:joe,files:x:dir=a b'   # trailing comment, with a ` quote",
            "ttseval serve --store s3://bucket/x#y",
            "dask worker tcp://sched:8786",
            "```",
            "```toml",
            'ttseval = "not a command line"',
            "```",
            "and `ttseval human-eval analyze --run-id d",
            "results/t-r*/*.csv` across a line break.",
        ]
    )
    found = documented_commands(ROOT / "docs" / "x.md", text)
    assert [(c.line, c.argv) for c in found] == [
        (4, ("evaluate", "--dataset", "big.jsonl", "--systems", "piper:joe,files:x:dir=a b")),
        (6, ("serve", "--store", "s3://bucket/x#y")),
        (1, ("report", "--run-id", "demo")),
        (12, ("human-eval", "analyze", "--run-id", "d", "results/t-r*/*.csv")),
    ]
    assert found[0].file == "docs/x.md"


def test_the_parser_check_is_not_vacuous() -> None:
    assert _refusal(("evaluate", "--dataset", "items.jsonl", "--budget-usd", "5")) is None
    assert "unrecognized arguments: ..." in _refusal(("evaluate", "...", "--budget-usd", "5"))
    assert "required" in _refusal(("mos-forms",))
    assert "invalid choice" in _refusal(("evalute",))


def test_every_documented_command_is_accepted_by_the_parser() -> None:
    commands = [c for path in _documents() for c in documented_commands(path)]
    files = {c.file for c in commands}
    # The README's own examples and the pages' are all read (a broken extractor would find none).
    assert "README.md" in files and len(files) >= 10, files
    assert len(commands) >= 60, len(commands)
    assert {c.argv[0] for c in commands} >= {
        "evaluate",
        "report",
        "backfill-judge",
        "human-eval",
        "import-dataset",
        "generate-dataset",
        "stack",
        "nightly",
        "serve",
        "providers",
    }
    refused = [
        f"{c.file}:{c.line}: ttseval {' '.join(shlex.quote(a) for a in c.argv)}\n    -> {why}"
        for c in commands
        if (why := _refusal(c.argv)) is not None
    ]
    assert not refused, f"{len(refused)} of {len(commands)} documented commands are refused:\n" + "\n".join(refused)


def test_the_readme_s_commands_that_read_a_store_name_it() -> None:
    """Issue 34, item 5: the README's examples of report, export, serve and leaderboard left --store out."""
    readers = [
        c for c in documented_commands(ROOT / "README.md") if c.argv[0] in {"report", "export", "serve", "leaderboard"}
    ]
    assert {c.argv[0] for c in readers} >= {"report", "export", "leaderboard"}, readers
    assert [c.text for c in readers if "--store" not in c.argv] == []
