#!/usr/bin/env bash
# One entry point for a fresh machine: installs what ttseval needs, then runs the demo or the tests.
#   scripts/setup.sh demo    install, then `ttseval evaluate` on the bundled benchmark (the embedded default)
#   scripts/setup.sh test    install, then the static checks (as `check`), then the whole test suite
#   scripts/setup.sh check   install, then the static checks only: formatter, linter, import contracts, type checker
#   scripts/setup.sh install install only
# Re-running skips what is already installed (a stamp of pyproject.toml, constraints.txt, requirements-nodeps.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-demo}"; shift || true
PYTHON="${PYTHON:-python3}"
VENV="${TTSEVAL_VENV:-.venv}"
# This machine keeps a CPU build of torch 2.13.0 on disk; elsewhere set TORCH_SPEC/TORCH_PIP_ARGS, e.g.
# TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cu126" for CUDA (see README).
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
TORCH_PIP_ARGS="${TORCH_PIP_ARGS:-}"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# One line per install step; the step's own output goes to the install log, shown only when the step fails.
step() {
  local what="$1"; shift
  say "  $what"
  { echo "== $what: $*"; } >> "$log"
  if ! "$@" >> "$log" 2>&1; then
    say "failed: $what; the last lines of $log:"; tail -n 40 "$log" >&2; exit 1
  fi
}

system_packages() {
  local missing=()
  command -v espeak-ng >/dev/null || missing+=(espeak-ng)
  command -v flite >/dev/null || missing+=(flite)
  if [ "$mode" = test ]; then  # the UI tests drive the Prefect UI in headless Chromium
    command -v chromium >/dev/null || missing+=(chromium)
    command -v chromedriver >/dev/null || missing+=(chromium-driver)
    # tests/system/test_slurm.py runs an evaluate on a one-node Slurm (tests/support/slurm.py starts its daemons itself)
    command -v slurmctld >/dev/null || missing+=(slurm-wlm)
    command -v munged >/dev/null || missing+=(munge)
  fi
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing system packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo"; else
      say "need ${missing[*]}: install them with your package manager (apt-get install ${missing[*]}) and re-run"; exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null; then say "no apt-get here: install ${missing[*]} yourself and re-run"; exit 1; fi
  local log; log="$(mktemp -t ttseval-apt.XXXXXX.log)"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"; } \
    > "$log" 2>&1 || { tail -n 40 "$log" >&2; say "failed: apt-get install ${missing[*]} (log: $log)"; exit 1; }
}

python_env() {
  "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
    || { say "Python 3.11+ is needed (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11"; exit 1; }
  [ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
  local stamp; stamp="$(cat pyproject.toml constraints.txt requirements-nodeps.txt | sha256sum | cut -c1-16)"
  if [ "$(cat "$VENV/.ttseval-installed" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  local log="$VENV/install.log"; : > "$log"
  say "installing ttseval and its dependencies into $VENV (pinned by constraints.txt; pip's output: $log)"
  step "pip" "$VENV/bin/python" -m pip install --upgrade pip
  step "torch ($TORCH_SPEC)" "$VENV/bin/python" -m pip install $TORCH_PIP_ARGS "$TORCH_SPEC"
  step "ttseval and its extras" "$VENV/bin/python" -m pip install -c constraints.txt -e ".[all]"
  step "packages installed without their declared dependencies (requirements-nodeps.txt says why)" \
    "$VENV/bin/python" -m pip install --no-deps -r requirements-nodeps.txt
  # librosa's modules compile their numba helpers when first imported and cache them in site-packages; processes
  # importing them for the first time at once (a cluster's workers, the test workers) can leave a helper's two cache
  # files from different compilations, and a later call segfaults (numba#10128, librosa#1998: a test worker crashed
  # in librosa.pyin). So every module is imported once here, before any of those (about a minute).
  step "librosa's numba helpers, compiled once" "$VENV/bin/python" -c "import importlib, pkgutil, librosa
for m in pkgutil.walk_packages(librosa.__path__, 'librosa.'):
    '_cython' in m.name or importlib.import_module(m.name)"
  echo "$stamp" > "$VENV/.ttseval-installed"
}

# The static checks, each a line; the first that fails stops here with its own output.
checks() {
  local started=$SECONDS
  for check in "ruff format --check ." "ruff check ." "lint-imports --no-cache" "mypy"; do
    say "check: $check"
    (PATH="$VENV/bin:$PATH"; $check > "$VENV/check.log" 2>&1) || { cat "$VENV/check.log" >&2; say "failed: $check"; exit 1; }
  done
  say "static checks passed in $((SECONDS - started)) s"
}

system_packages
python_env
case "$mode" in
  # not exec: the command is its own process, so the wall time it prints starts with it, not with the install
  demo) "$VENV/bin/ttseval" evaluate "$@" ;;
  check) checks ;;
  # Test modules in parallel, one module per worker process (--dist loadfile keeps a module's shared servers in
  # one process): measured 13:22 with 2 workers against 22 min serial on this 2-core machine. --no-loadscope-reorder
  # hands files out in collection order, which puts the slowest first (tests/conftest.py SLOWEST_FIRST).
  # --durations=25: every run prints its 25 slowest tests, so growth is seen where it happens.
  test) checks; exec "$VENV/bin/python" -m pytest -n "${TTSEVAL_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder \
    --durations=25 "$@" ;;
  install) say "installed; activate with: source $VENV/bin/activate" ;;
  *) say "unknown mode $mode: use demo, test, check or install"; exit 2 ;;
esac
