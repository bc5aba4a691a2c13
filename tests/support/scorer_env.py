"""A second Python environment for the scorer-protocol tests (providers/quality/command.py): a venv with only the
standard library and `tinylevel`, a package built here as a wheel and installed with pip, which the main
environment does not have, so a scorer that runs there proves it runs in an environment of its own."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.harness import ROOT

SCORER = ROOT / "tests" / "data" / "scorers" / "level_scorer.py"
TINYLEVEL_VERSION = "1.2.3"
TINYLEVEL = f'''"""RMS and peak level in dBFS of float samples in [-1, 1]."""
import math

__version__ = "{TINYLEVEL_VERSION}"


def rms_dbfs(values):
    return 20 * math.log10(max(math.sqrt(sum(v * v for v in values) / len(values)), 1e-10))


def peak_dbfs(values):
    return 20 * math.log10(max(max(abs(v) for v in values), 1e-10))
'''


def build_tinylevel_wheel(folder: Path) -> Path:
    """A pure-Python wheel of `tinylevel`, written as the wheel format (PEP 427) lays it out."""
    files = {
        "tinylevel/__init__.py": TINYLEVEL,
        f"tinylevel-{TINYLEVEL_VERSION}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: tinylevel\nVersion: {TINYLEVEL_VERSION}\n"
        ),
        f"tinylevel-{TINYLEVEL_VERSION}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: ttseval-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = f"tinylevel-{TINYLEVEL_VERSION}.dist-info/RECORD"
    lines = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(text.encode())}")
    files[record] = "\n".join([*lines, f"{record},,"]) + "\n"
    wheel = folder / f"tinylevel-{TINYLEVEL_VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return wheel


def make_scorer_venv(folder: Path) -> Path:
    """A venv at `folder` holding tinylevel and nothing of ours; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    python = folder / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            str(build_tinylevel_wheel(folder)),
        ],
        check=True,
        capture_output=True,
    )
    return python
