#!/usr/bin/env bash
# Copies what a GLUE run wrote that the committed tables read (and that a reader checks them by)
# into a folder of the repository, as soon as it exists: a run directory on one machine's disk can
# be lost. The search's files exist once its trials end, the selection's once it ends; run it
# again as the run goes on (what is there is overwritten with the newer copy).
#   experiments/glue/keep_run.sh OUT/rte/s1 experiments/glue/minilm/heldout/rte/s1
set -u
run=${1:?give the run directory} keep=${2:?give the folder to keep its files in}
[ -f "$run/resolved_config.yaml" ] || { echo "keep_run.sh: $run holds no resolved_config.yaml: not a run directory" >&2; exit 2; }
mkdir -p "$keep"
for file in resolved_config.yaml provenance.json results.csv results.md best.json anytime_curve.csv checkpoints.json \
            select/resolved_config.yaml select/results.csv select/selection.csv select/selection.md; do
  if [ -f "$run/$file" ]; then
    mkdir -p "$keep/$(dirname "$file")"
    cp "$run/$file" "$keep/$file"
    echo "kept $file"
  fi
done
