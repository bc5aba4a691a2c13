"""The documentation's commands: every `ttseval ...` command shown in README.md or docs/ is accepted by the real
command-line parser (the site build and its reference pages: tests/system/test_docs_site.py)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.support.harness import ROOT

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
    """The README's examples of report, export, serve and leaderboard left --store out."""
    readers = [
        c for c in documented_commands(ROOT / "README.md") if c.argv[0] in {"report", "export", "serve", "leaderboard"}
    ]
    assert {c.argv[0] for c in readers} >= {"report", "export", "leaderboard"}, readers
    assert [c.text for c in readers if "--store" not in c.argv] == []
