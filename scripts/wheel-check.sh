#!/usr/bin/env bash
# The one-import-root check: build ttseval's wheel, install it in a new virtual environment (no editable install,
# no checkout on the path), and run the demo from a folder that holds its own `metrics.py`, `tasks/`, `flows.py`
# and `corpus.py`, with that folder first on sys.path (`python -m`), as a Prefect worker's folder can be.
#   scripts/wheel-check.sh [WORKDIR]     (default: a new temporary folder; prints where the report landed)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"; mkdir -p "$work"; cd "$work"
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
"$PYTHON" -m venv venv
venv/bin/python -m pip install -q --upgrade pip
mkdir -p src && git -C "$repo" archive HEAD | tar -x -C src  # the committed tree: no stale build/ folder
venv/bin/python -m pip wheel -q --no-deps -w wheels ./src
wheel="$(ls wheels/ttseval-*.whl)"
echo "wheel $wheel: top level $(venv/bin/python -c "import zipfile,sys; print(sorted({n.split('/')[0] for n in zipfile.ZipFile(sys.argv[1]).namelist()}))" "$wheel")"
venv/bin/python -m pip install -q ${TORCH_PIP_ARGS:-} "$TORCH_SPEC"
venv/bin/python -m pip install -q -c "$repo/constraints.txt" "${wheel}[engines,models]"
venv/bin/python -m pip install -q --no-deps -r "$repo/requirements-nodeps.txt"
mkdir -p user/tasks
for f in user/metrics.py user/tasks/__init__.py user/flows.py user/corpus.py; do
  echo "raise ImportError('the user\\'s own module $f was imported instead of ttseval\\'s')" > "$f"
done
cd user
../venv/bin/python -m ttseval.cli evaluate --store "$work/store" --run-id wheel-demo
echo "report: $work/store/runs/wheel-demo/report.md"
