# Sourced by the GLUE experiment scripts: what every start ran with, kept for the record.
# record_start DATA_FOLDER RECORD appends this start (date, hfsweep commit, the sha256 of the data
# files) to RECORD.starts, and keeps the first start's hashes in RECORD.sha256. A start whose data
# differ from the first start's is refused in one line (exit 2), before anything runs: a resumed
# run must read the data it began with.
record_start() {
  local folder=$1 record=$2 script hashes
  script=$(basename "$0")
  hashes=$(cd "$folder" 2>/dev/null && sha256sum train.tsv dev.tsv 2>/dev/null) || {
    echo "$script: $folder holds no train.tsv and dev.tsv; set GLUE_DIR to the folder that holds the GLUE task folders" >&2
    exit 2
  }
  if [ -f "$record.sha256" ] && [ "$hashes" != "$(cat "$record.sha256")" ]; then
    echo "$script: the data in $folder differ from the first start's ($record.sha256); put those files back, or use a new OUT" >&2
    exit 2
  fi
  [ -f "$record.sha256" ] || echo "$hashes" > "$record.sha256"
  { echo "$(date +'%F %T') $(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse HEAD)"; echo "$hashes"; } >> "$record.starts"
}
