#!/usr/bin/env bash
# Scores one run on a Slurm cluster with the cluster's own scheduler: a job
# array of N shards (`scorer run --shard I/N`, each on the GPUs Slurm gives
# its task), then a merge job that starts once every shard has succeeded
# (--dependency=afterok) and writes one results file, the same as a run on
# one host would. A shard whose shapes fail their checks still succeeds
# here (the merged run reports them); a shard that could not run (no GPU,
# bad input, interrupted) cancels the merge.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/slurm-score.sh [options] [-- SCORER-RUN-ARGS...]

  --shards N           shards, one array task each (default 2)
  --gpus-per-task G    GPUs per shard; each shard scores on all of them (default 1)
  --scorer PATH        the scorer binary, on a filesystem the nodes share (default build/scorer)
  --dir DIR            where the shards' files and logs go (default results/slurm-<time>)
  --out FILE           the merged results (default results/latest.json)
  --sbatch-args ARGS   more sbatch options for both jobs, e.g. "--partition=h200 --time=30"
  --wait               wait for the merge and exit with its code (0 all correct, 1 a
                       correctness failure, 2 the shards did not merge), or 3 when a shard
                       failed and the merge was cancelled; else print the job ids and return
  -h, --help           this text

Arguments after -- go to every `scorer run`, e.g. -- --replicates 5 --filter 'moe_*'.
EOF
}

shards=2 gpus=1 scorer=build/scorer dir="" out=results/latest.json sbatch_args="" wait=0
while [ $# -gt 0 ]; do
  case "$1" in
    --shards) shards=${2:?--shards needs a value}; shift 2 ;;
    --gpus-per-task) gpus=${2:?--gpus-per-task needs a value}; shift 2 ;;
    --scorer) scorer=${2:?--scorer needs a value}; shift 2 ;;
    --dir) dir=${2:?--dir needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --sbatch-args) sbatch_args=${2?--sbatch-args needs a value}; shift 2 ;;
    --wait) wait=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "slurm-score.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$shards" "$gpus"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "slurm-score.sh: expected a count above 0, got '$n'" >&2; exit 2; }
done
[ -x "$scorer" ] || { echo "slurm-score.sh: $scorer: not an executable (build it: make build/scorer)" >&2; exit 2; }
command -v sbatch >/dev/null || { echo "slurm-score.sh: sbatch not found: this script submits to Slurm" >&2; exit 2; }

# Absolute paths: the jobs run wherever Slurm starts them.
scorer=$(cd "$(dirname "$scorer")" && pwd)/$(basename "$scorer")
dir=${dir:-results/slurm-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$dir" "$(dirname "$out")"
dir=$(cd "$dir" && pwd)
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
here=$(pwd)

# Each shard: its share on every GPU of its task. Exit 1 (shapes that failed
# their checks) is a result the merge reports, not a failed job.
run_args=()
[ "$gpus" -gt 1 ] && run_args+=(--gpus all)
run_args+=("$@")
shard_cmd="cd $(printf %q "$here") && $(printf %q "$scorer") run --shard \$SLURM_ARRAY_TASK_ID/$shards"
shard_cmd+=" --out $(printf %q "$dir")/shard-\$SLURM_ARRAY_TASK_ID-of-$shards.json"
for a in "${run_args[@]}"; do shard_cmd+=" $(printf %q "$a")"; done
shard_cmd+="; rc=\$?; [ \$rc -le 1 ] || exit \$rc"

# shellcheck disable=SC2086 # sbatch_args is split into options on purpose
array_id=$(sbatch --parsable --job-name=scorer-shards --array=1-"$shards" --ntasks=1 \
  --gpus-per-task="$gpus" --output="$dir/shard-%a.log" $sbatch_args --wrap "$shard_cmd")
array_id=${array_id%%;*}

merge_cmd="cd $(printf %q "$here") && $(printf %q "$scorer") merge"
for i in $(seq 1 "$shards"); do merge_cmd+=" $(printf %q "$dir/shard-$i-of-$shards.json")"; done
merge_cmd+=" --out $(printf %q "$out")"

echo "slurm-score.sh: shards: job $array_id (array 1-$shards, $gpus GPU(s) each), files in $dir"
wait_flag=()
[ "$wait" = 1 ] && wait_flag=(--wait)
set +e
# shellcheck disable=SC2086
merge_id=$(sbatch --parsable --job-name=scorer-merge --dependency=afterok:"$array_id" --kill-on-invalid-dep=yes \
  --ntasks=1 \
  --output="$dir/merge.log" $sbatch_args "${wait_flag[@]}" --wrap "$merge_cmd")
rc=$?
set -e
merge_id=${merge_id%%;*}
echo "slurm-score.sh: merge: job $merge_id (after every shard succeeds), results: $out, log: $dir/merge.log"
if [ "$wait" = 1 ]; then
  if [ ! -f "$dir/merge.log" ]; then
    echo "slurm-score.sh: the merge did not run: a shard failed (see $dir/shard-*.log)" >&2
    exit 3
  fi
  cat "$dir/merge.log"
  exit "$rc"
fi
