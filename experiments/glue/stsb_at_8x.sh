#!/usr/bin/env bash
# #38 item 6's cost target on STS-B (experiments/glue/notebook/fair_test.md, "STS-B at 8x"). The fair test's STS-B
# search cost 19.2x one defaults run and its anytime curve was not kept, so whether a search of 8x
# hands back a winner as good is not known. This runs the fair test's recipe unchanged
# (+experiment=glue_minilm_search glue=stsb: the defaults trial, search_space=finetune, TPE with the
# same seed, its start-up fitted to the budget, ASHA in epochs), stopped by budget.trial_hours=3.31:
# 8x one defaults run (0.414 trial-hours, the mean of the fair selection's three). Then its winner
# re-trained over seeds 1, 2, 3 (python -m hfsweep.replay), set against the fair selection's
# defaults re-trainings on the same seeds (training here is deterministic for a configuration and
# seed: re-running the defaults would repeat them):
#   python -m hfsweep.glue --methods OUT/stsb_8x --defaults experiments/glue/minilm/fair/stsb
# Resumable: run it again and a started search resumes (python -m hfsweep.resume), a started replay
# goes on; each start is appended with its commit to OUT/stsb_8x/commits. Trial-hours count each
# trial's running time, so run it with the two cores to itself, as the defaults runs were.
#   GLUE_DIR=/data/glue OUT=/data/runs experiments/glue/stsb_at_8x.sh
set -u
: "${GLUE_DIR:?set GLUE_DIR to the folder that holds the GLUE task folders (STS-B, ...)}" "${OUT:?set OUT to a folder for the runs}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
RUNS="$OUT/stsb_8x"
run="$RUNS/tpe/s42"  # METHOD/sSEED, as glue --methods reads it; 42: the fair test's search seed
[ -d "$GLUE_DIR/STS-B" ] || { echo "stsb_at_8x.sh: $GLUE_DIR/STS-B does not exist; set GLUE_DIR to the folder that holds it" >&2; exit 2; }
mkdir -p "$RUNS/tpe"
source "$(dirname "$0")/provenance.sh"
record_start "$GLUE_DIR/STS-B" "$RUNS/stsb"
log() {  # to the console, and dated to the commits file
  echo "=== $(date +%T) $*"
  echo "$(date +'%F %T') $*" >> "$RUNS/commits"
}
commit=$(git -C "$(dirname "$0")" rev-parse --short HEAD)

if [ ! -f "$run/best.json" ]; then
  if [ -f "$run/resolved_config.yaml" ]; then
    log "search: resuming at $commit"
    python -m hfsweep.resume "$run" >> "$run.log" 2>&1
  else
    log "search: starting at $commit"
    python -m hfsweep +experiment=glue_minilm_search glue=stsb budget.trial_hours=3.31 select.top_k=0 \
      hydra.run.dir="$run" name=stsb_8x >> "$run.log" 2>&1
  fi
  rc=$?
  log "search: exit $rc"
  [ "$rc" -eq 0 ] || exit "$rc"
fi
if [ ! -f "$run/replay/replay.md" ]; then
  log "seeds: at $commit"
  python -m hfsweep.replay "$run" --seeds 1 2 3 >> "$run.replay.log" 2>&1
  rc=$?
  log "seeds: exit $rc"
  [ "$rc" -eq 0 ] || exit "$rc"
fi
python -m hfsweep.glue --methods "$RUNS" --defaults "$(dirname "$0")/minilm/fair/stsb"
