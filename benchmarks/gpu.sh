#!/usr/bin/env bash
# The GPU check in one command, for an air-gapped node (see benchmarks/README.md):
#   1. install hfsweep from the wheelhouse, without an index, into the node's Python
#      (built here by: python tools/wheelhouse.py .wheelhouse --python-version 3.12 \
#         --platform manylinux_2_28_x86_64 --have benchmarks/gpu_target_packages.txt --slim \
#         --leave-out virtualenv --leave-out py-spy)
#   2. python benchmarks/gpu.py: the default sweep on the GPU, pytest -m gpu, GPT-2 small against a
#      plain Trainer with its MFU, four packed trials against one, FSDP on one GPU; each step
#      under its own timeout, all in one log with a summary at its end.
#
#   bash benchmarks/gpu.sh [--wheelhouse DIR] [--extra-wheels DIR] [--out DIR] [--cpu-smoke] [--steps a,b]
#                          [--budget SECONDS] [--gpt2-overrides "k=v k=v"]
#
# --extra-wheels DIR installs DIR's wheels as they are (--no-deps) after the wheelhouse: what does not
# fit beside it in one call's 64 MiB (bitsandbytes for QLoRA, 42 MB), carried by a second call to the
# same warm machine. That call needs no wheelhouse: hfsweep is already installed there, and said so.
#
# --cpu-smoke skips the install and runs every step on this CPU, tiny and short (GPU-only parts
# say they are skipped). The log is OUT/gpu.log (OUT: --out, else $OUT, else ./gpu-check).
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELHOUSE=.wheelhouse
OUT_DIR="${OUT:-$PWD/gpu-check}"
EXTRA=""
GPT2=""
SMOKE=""
STEPS=""
BUDGET=""
PYTHON="${PYTHON:-python3}"
while [ $# -gt 0 ]; do
  case "$1" in
    --wheelhouse) WHEELHOUSE="$2"; shift 2 ;;
    --extra-wheels) EXTRA="$2"; shift 2 ;;
    --out) OUT_DIR="$2"; shift 2 ;;
    --cpu-smoke) SMOKE=--cpu-smoke; shift ;;
    --steps) STEPS="$2"; shift 2 ;;
    --budget) BUDGET="$2"; shift 2 ;;
    --gpt2-overrides) GPT2="$2"; shift 2 ;;
    *) echo "gpu.sh: error: unknown argument '$1'; use --wheelhouse DIR, --extra-wheels DIR, --out DIR, --cpu-smoke, --steps a,b, --budget SECONDS, --gpt2-overrides 'k=v k=v'" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu.log"
export PYTHONUNBUFFERED=1

install_wheelhouse() {
  echo "== install from $WHEELHOUSE ($(du -sm "$WHEELHOUSE" | cut -f1) MiB) into $($PYTHON -c 'import sys; print(sys.prefix)')" | tee -a "$LOG"
  start=$(date +%s)
  # Everything hfsweep needs, resolved against what the node has; where the node's own versions do
  # not meet a pin of the wheelhouse's, install its wheels as they are and say what pip check finds.
  if ! timeout 180 $PYTHON -m pip install -q --no-index --no-cache-dir --find-links "$WHEELHOUSE" hfsweep >>"$LOG" 2>&1; then
    echo "   resolved install failed (above); installing every wheel of the wheelhouse with --no-deps" | tee -a "$LOG"
    timeout 180 $PYTHON -m pip install -q --no-index --no-cache-dir --no-deps "$WHEELHOUSE"/*.whl >>"$LOG" 2>&1 \
      || { echo "gpu.sh: error: the wheelhouse did not install (see $LOG)" | tee -a "$LOG" >&2; exit 1; }
  fi
  $PYTHON -m pip check >>"$LOG" 2>&1 || echo "   pip check found conflicts (above in $LOG)" | tee -a "$LOG"
  echo "== installed in $(( $(date +%s) - start )) s" | tee -a "$LOG"
}

if [ -z "$SMOKE" ]; then
  if ls "$WHEELHOUSE"/hfsweep-*.whl >/dev/null 2>&1; then
    install_wheelhouse
  elif [ -n "$EXTRA" ] && $PYTHON -m pip show hfsweep >/dev/null 2>&1; then  # installed, not the source tree
    echo "== no wheelhouse in $WHEELHOUSE: hfsweep is installed already (an earlier call on this machine)" | tee -a "$LOG"
  else
    echo "gpu.sh: error: no hfsweep wheel in $WHEELHOUSE; build the wheelhouse first (see the top of this script)" >&2
    exit 2
  fi
  if [ -n "$EXTRA" ]; then
    echo "== install $EXTRA's wheels as they are: $(cd "$EXTRA" && ls ./*.whl | xargs -n1 basename | tr '\n' ' ')" | tee -a "$LOG"
    timeout 180 $PYTHON -m pip install -q --no-index --no-cache-dir --no-deps "$EXTRA"/*.whl >>"$LOG" 2>&1 \
      || { echo "gpu.sh: error: $EXTRA's wheels did not install (see $LOG)" | tee -a "$LOG" >&2; exit 1; }
  fi
fi

$PYTHON benchmarks/gpu.py --out "$OUT_DIR" $SMOKE ${STEPS:+--steps "$STEPS"} ${BUDGET:+--budget "$BUDGET"} \
  ${GPT2:+--gpt2-overrides "$GPT2"}
