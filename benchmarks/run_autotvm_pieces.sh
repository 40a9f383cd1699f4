#!/usr/bin/env bash
# Runs benchmarks/bench_autotvm.py as pinned parallel pieces, one batch per call (each call
# stays under 10 minutes: every piece is stopped by `timeout` and keeps what it finished;
# call the same phase again to resume it).
#
#   benchmarks/run_autotvm_pieces.sh OUT tune      # tuners + template-free, pinned slots
#   benchmarks/run_autotvm_pieces.sh OUT models    # cost-model records (shards), then scores
#   benchmarks/run_autotvm_pieces.sh OUT summary   # merge -> OUT/merged.json, OUT/tables.md
#
# Each phase prints the summary at its end: a "(partial)" or n/a figure means "call the phase
# again" (`grep -c '"partial": true' OUT/*.json` counts what is unfinished). OUT/*.log hold
# each piece's progress.
#
# Measured on a 16-core Intel Xeon (Python 3.12; 4 pieces side by side, 4 cores each, on
# 2026-11-24 with the code of main): 200 trials took 154 s for XGB on task 1 (the early 3x3),
# 117 s for XGB on task 10, 111-122 s for GA on tasks 10 and 11, 140-150 s for the
# template-free search on tasks 1 and 11; random search on task 1 did 100 trials in 151 s
# (1.5 s each: random configurations are slow ones), on task 2 0.93 s per trial. So the jobs
# of task 1 take about 14 minutes and those of each other task 8-10, 45 slot-minutes in all
# plus the runs a stop cuts off (they restart; the template-free search goes on from its
# log): call `tune` twice (500 s each), a third time if the summary still shows gaps.
# The models phase measures 16 x 64 random configurations in 4 shards (4-5 minutes): once.
# `summary` runs nothing (fine anywhere the OUT directory is).
#
# On a machine without a package registry that has Python 3.12, numpy, llvmlite and
# scikit-learn (the GPU machines), install lightgbm first from the checkout's .gpu-env
# (`source .gpu-env/setup.sh`); XGBTuner, the template-free search and the models need it.
# A machine that is handed back between calls keeps nothing: bring OUT back after every call
# and send it again with the next one (its logs let the template-free search and the
# cost-model records go on), e.g. from the repository root:
#   source .gpu-env/setup.sh >/dev/null &&
#     bash benchmarks/run_autotvm_pieces.sh bench-autotvm tune; cp -r bench-autotvm "$OUT"/
#
# Environment (defaults for a 16-core machine):
#   TASKS="1 2 10 11"   resnet-18 conv2d task indices (python bench_autotvm.py --list-tasks):
#                       early 3x3 and 1x1, late 3x3 and 1x1 stride 2
#   SLOTS=4             pinned pieces side by side in `tune`, each running one (task, tuner)
#                       job after the other: OUT/tune-TASK-TUNER.json and .log
#   CORES_PER_PIECE=4   cores pinned per piece (slot k gets cores k*4 .. k*4+3); every piece
#                       builds 4 candidates at once and times kernels with 4 threads
#   TRIALS=50,100,200   budgets; the tuners and the template-free search run max(TRIALS)
#   MODEL_TASKS=8 MODEL_RECORDS=64   cost models: first 8 conv2d tasks of resnet-18 and of
#                       mobilenet, 64 random configurations each; trained on resnet-18 0-3
#                       and the mobilenet ones, tested on resnet-18 4-7
#   MODEL_SHARDS=4      pinned pieces that measure the cost-model records
#   PIECE_S=500         seconds a call may run the pieces; in `models`, SCORE_S=120 of them
#                       are kept for the scoring piece
#   PYTHON=python3      EXTRA="..."  more bench_autotvm.py options for every piece
#                       (e.g. EXTRA="--number 2 --repeat 2" if trials are too slow)
set -u
OUT=${1:?usage: run_autotvm_pieces.sh OUT_DIR tune|models|summary}
PHASE=${2:?usage: run_autotvm_pieces.sh OUT_DIR tune|models|summary}
TASKS=${TASKS:-"1 2 10 11"}
CORES_PER_PIECE=${CORES_PER_PIECE:-4}
TRIALS=${TRIALS:-50,100,200}
MODEL_TASKS=${MODEL_TASKS:-8}
MODEL_RECORDS=${MODEL_RECORDS:-64}
MODEL_SHARDS=${MODEL_SHARDS:-4}
SLOTS=${SLOTS:-4}
PIECE_S=${PIECE_S:-500}
SCORE_S=${SCORE_S:-120}
PYTHON=${PYTHON:-python3}
EXTRA=${EXTRA:-}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH="$(dirname "$HERE")${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's packages
BENCH="$PYTHON $HERE/bench_autotvm.py --trials $TRIALS --log-dir $OUT/logs --resume $EXTRA"
mkdir -p "$OUT/logs"

cores() {  # cores of the k-th piece: "lo-hi"
  local lo=$(($1 * CORES_PER_PIECE))
  echo "$lo-$((lo + CORES_PER_PIECE - 1))"
}

run_pieces() {  # run_pieces SECONDS NAME ARGS...: one background piece, output to OUT/NAME.log
  local seconds=$1 name=$2
  shift 2
  echo "$(date -u +%T) start $name (${seconds} s at most): $*"
  # shellcheck disable=SC2086
  timeout -k 10 "$seconds" $BENCH --out "$OUT/$name.json" "$@" >>"$OUT/$name.log" 2>&1 &
}

next_job() {  # pop the first line of the queue file $1 (several slots pop at once)
  until mkdir "$1.lock" 2>/dev/null; do sleep 0.2; done
  head -n 1 "$1"
  sed -i 1d "$1"
  rmdir "$1.lock"
}

summary() {
  local pieces
  pieces=$(ls "$OUT"/tune-*.json "$OUT"/models.json 2>/dev/null)
  if [ -z "$pieces" ]; then
    echo "no piece JSON in $OUT yet: run the tune or models phase first" >&2
    return 1
  fi
  # shellcheck disable=SC2086
  $PYTHON "$HERE/bench_autotvm.py" --summarize $pieces --out "$OUT/merged.json" \
    --markdown "$OUT/tables.md"
}

case $PHASE in
  tune)
    # one job per (task, tuner), the template-free search last; SLOTS pinned workers take the
    # next job as they become free, until PIECE_S is spent (finished jobs are skipped at once)
    queue="$OUT/queue"
    : >"$queue"
    for tuner in xgb ga random grid ansor; do
      for t in $TASKS; do echo "$t $tuner" >>"$queue"; done
    done
    deadline=$(($(date +%s) + PIECE_S))
    for k in $(seq 0 $((SLOTS - 1))); do
      (
        while job=$(next_job "$queue") && [ -n "$job" ]; do
          left=$((deadline - $(date +%s)))
          [ "$left" -gt 20 ] || break
          set -- $job
          if [ "$2" = ansor ]; then part=(--skip tuners,transfer,models); else
            part=(--tuners "$2" --skip ansor,transfer,models); fi
          echo "$(date -u +%T) slot $k: task $1 $2 (${left} s at most)"
          # shellcheck disable=SC2086
          timeout -k 10 "$left" $BENCH --out "$OUT/tune-$1-$2.json" --task-ids "$1" \
            "${part[@]}" --cores "$(cores "$k")" >>"$OUT/tune-$1-$2.log" 2>&1
        done
      ) &
    done
    wait
    ;;
  models)
    # sample the records in MODEL_SHARDS pinned shards, then score (the scoring piece
    # measures whatever a killed shard left out, on a shard's cores so that every record
    # is timed with as many threads; calling this phase again finishes it)
    for s in $(seq 0 $((MODEL_SHARDS - 1))); do
      run_pieces $((PIECE_S - SCORE_S)) "records-$s" --skip tuners,ansor,transfer \
        --model-tasks "$MODEL_TASKS" --model-records "$MODEL_RECORDS" \
        --model-shard "$s/$MODEL_SHARDS" --cores "$(cores $s)"
    done
    wait
    run_pieces "$SCORE_S" models --skip tuners,ansor,transfer --model-tasks "$MODEL_TASKS" \
      --model-records "$MODEL_RECORDS" --cores "$(cores 0)"
    wait
    ;;
  summary) ;;
  *)
    echo "unknown phase $PHASE: use tune, models or summary" >&2
    exit 2
    ;;
esac
echo "$(date -u +%T) $PHASE batch ended; logs in $OUT/*.log"
summary
