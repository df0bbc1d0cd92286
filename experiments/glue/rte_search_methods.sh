#!/usr/bin/env bash
# #38 item 7: search methods compared on RTE in the fair test's space, at equal compute
# (experiments/glue/notebook/rte_methods.md). Every search is
# +experiment=glue_minilm_search glue=rte (all-MiniLM-L6-v2, search_space=finetune, the defaults
# trial first), stopped by the same budget.trial_hours: 8x one run of run_glue.py's defaults (0.195
# trial-hours, the mean of the fair test's three defaults runs), the fair test's cost target. Each
# method runs with two search seeds (the searcher's seed; every trial trains with seed 42):
#   random  random search under ASHA in epochs
#   tpe     Optuna's TPE under ASHA in epochs, startup_trials=3 (a third of the ~9 trials the budget
#           buys): it draws at random until 3 trials have finished, about 4 with two running
#   pbt     PBT over the same space: a population of 8 (the defaults and 7 draws), 2 running at a
#           time, each ranked against the population and perturbed at every epoch it reaches (Ray's
#           asynchronous PBT: synch=true hung once a 2-epoch trial ended before a perturbation point,
#           and is refused with searched epochs); batch size and epochs are drawn once per trial,
#           learning rate, warm-up and weight decay perturbed within the space
# Then each search's winner re-trained over seeds 1, 2, 3 (python -m hfsweep.replay; PBT's winner at
# its final values, not as its schedule; a winner two searches found, once), and every search's
# anytime curve on one plot
# (python -m hfsweep.report --compare). Seed 1 runs random, tpe, pbt; seed 2 the reverse.
# Each stage skips what is finished and resumes what was interrupted, so the script continues
# across sessions; the commit of each start or resume is appended to OUT/rte_methods/commits.
#   GLUE_DIR=/data/glue OUT=/data/runs experiments/glue/rte_search_methods.sh searches seeds compare
set -u
: "${GLUE_DIR:?set GLUE_DIR to the folder that holds the GLUE task folders (RTE, ...)}" "${OUT:?set OUT to a folder for the runs}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
RUNS="$OUT/rte_methods"
BUDGET=1.56
mkdir -p "$RUNS"
source "$(dirname "$0")/provenance.sh"
record_start "$GLUE_DIR/RTE" "$RUNS/rte"
# one report, checkpoint and ASHA look a quarter epoch at batch 8 and an epoch at batch 32 (run_fair.sh)
COMMON=(+experiment=glue_minilm_search glue=rte training.eval_steps=78 training.save_steps=78
        training.logging_steps=78 budget.trial_hours=$BUDGET select.top_k=0)
declare -A METHOD=(
  [random]="search_alg=random num_samples=20"
  [tpe]="search_alg=optuna num_samples=20 search_alg.startup_trials=3"
  [pbt]="search_alg=random num_samples=7 scheduler=pbt ~scheduler.grace_period scheduler.time_attr=epoch
         scheduler.perturbation_interval=1 checkpoints.keep_per_trial=null
         +search_space.training.per_device_train_batch_size.perturb=false
         +search_space.training.num_train_epochs.perturb=false"
)
declare -A SEED_KEY=([random]=search_alg.random_state [tpe]=search_alg.seed [pbt]=search_alg.random_state)

log() {  # to the console, and dated to the commits file
  echo "=== $(date +%T) $*"
  echo "$(date +'%F %T') $*" >> "$RUNS/commits"
}

search() {  # method, search seed
  local run="$RUNS/$1/s$2" rc
  if [ -f "$run/best.json" ]; then echo "=== $1 s$2: finished already"; return; fi
  log "$1 s$2: $( [ -f "$run/resolved_config.yaml" ] && echo resuming || echo starting ) at $(git -C "$(dirname "$0")" rev-parse --short HEAD)"
  if [ -f "$run/resolved_config.yaml" ]; then
    python -m hfsweep.resume "$run" >> "$run.log" 2>&1
  else
    mkdir -p "$(dirname "$run")"
    # shellcheck disable=SC2086  # METHOD's words are overrides
    python -m hfsweep "${COMMON[@]}" ${METHOD[$1]} "${SEED_KEY[$1]}=$2" hydra.run.dir="$run" name="rte_$1_s$2" >> "$run.log" 2>&1
  fi
  rc=$?
  log "$1 s$2: exit $rc"
}

for step in "$@"; do
  case $step in
    searches)
      for pair in "random 1" "tpe 1" "pbt 1" "pbt 2" "tpe 2" "random 2"; do search $pair; done ;;
    seeds)
      for run in "$RUNS"/{tpe,random,pbt}/s{1,2}; do
        if [ ! -f "$run/best.json" ]; then echo "=== $run: no finished search yet"; continue; fi
        # shellcheck disable=SC2016  # the Python is single-quoted on purpose
        by=$(python -c 'import sys, pathlib; from hfsweep.cli.glue_fair import retrained_in
print(retrained_in(pathlib.Path(sys.argv[1])) or "")' "$run")
        if [ -n "$by" ]; then echo "=== $run seeds: its winner is re-trained in $by"; continue; fi
        log "${run#"$RUNS"/} seeds: at $(git -C "$(dirname "$0")" rev-parse --short HEAD)"
        python -m hfsweep.replay "$run" --seeds 1 2 3 >> "$run.replay.log" 2>&1
        log "${run#"$RUNS"/} seeds: exit $?"
      done ;;
    compare)
      python -m hfsweep.report "$RUNS"/{random,tpe,pbt}/s{1,2} --compare "$RUNS/compare" ;;
    *) echo "unknown step '$step': use searches, seeds or compare" >&2; exit 2 ;;
  esac
done
