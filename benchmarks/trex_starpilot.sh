#!/usr/bin/env bash
# T-REX end to end on starpilot at the procedural-generalization seed's scale, with the length
# control it lacked, and the same control on coinrun (docs/trex.md, "Results").
#
#   bash benchmarks/trex_starpilot.sh [STAGE ...]
#
# Stages, in order: experts demos grid parity control policy coinrun. With no STAGE every stage
# runs; naming stages runs only those (each reads what the earlier ones left in $TREX, default
# ./trex-starpilot). Every stage can be run again to continue where it stopped: the experts resume
# their run, demos are topped up to the numbers asked, grid cells that have a row are skipped,
# policies resume. Every command prints one JSON line (appended to $TREX/timings.jsonl): wall
# time, peak resident memory and exit status from GNU time, with the load average before and
# after it, since a busy machine stretches wall times.
set -euo pipefail
TREX=${TREX:-trex-starpilot}
PROCLAB=${PROCLAB:-proclab}
PYTHON=${PYTHON:-python}
NICE=${NICE:-}                        # e.g. "nice -n 19" on a shared machine
EXPERT_STEPS=${EXPERT_STEPS:-25000000}
EXPERT_SECONDS=${EXPERT_SECONDS:-0}   # time limit of this session of expert training (0: none)
EXPERT_ARGS=${EXPERT_ARGS:-}          # e.g. "--num-envs 32 --num-steps 64" for more updates per step on a CPU
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-250000}
NUM_TRAIN=${NUM_TRAIN:-1500}
NUM_TEST=${NUM_TEST:-500}
GRID_DEMOS=${GRID_DEMOS:-12 25 50 100 300 1000}
PARITY_DEMOS=${PARITY_DEMOS:-100 300}
SEEDS=${SEEDS:-5}
WORKERS=${WORKERS:-2}
TRAIN_ARGS=${TRAIN_ARGS:-}            # e.g. "--train.time-limit 600" to bound each grid cell
POLICY_STEPS=${POLICY_STEPS:-25000000}
POLICY_SECONDS=${POLICY_SECONDS:-0}
POLICY_DEMOS=${POLICY_DEMOS:-300}     # the reward models of this grid row drive the learned-reward policies (seed s-1 for s)
POLICY_SEEDS=${POLICY_SEEDS:-5}       # seeds per arm; 5 + 5 is the fewest for which an exact test between arms can reach p < 0.05
POLICY_ARGS=${POLICY_ARGS:-}          # given to every policy, e.g. "--num-envs 32 --num-steps 64"
COINRUN_AGENT=${COINRUN_AGENT:-}      # interpreting-rl-behavior's model_78053376.pth (docs/import.md)
COINRUN_TRAIN=${COINRUN_TRAIN:-500}
COINRUN_TEST=${COINRUN_TEST:-200}
COINRUN_DEMOS=${COINRUN_DEMOS:-100 300}
EXPERTS=$TREX/runs/ppo/starpilot/experts
mkdir -p "$TREX"

stage() {  # stage NAME COMMAND...: run it under GNU time, print and keep its JSON line
    local name=$1
    shift
    local before
    before=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -o "$TREX/.time" -f "%e %M %x" $NICE "$@"
    read -r wall rss status < "$TREX/.time"
    local line="{\"stage\": \"$name\", \"wall_s\": $wall, \"peak_rss_mb\": $((rss / 1024)), \"exit\": $status, \"load_before\": $before, \"load_after\": $(cut -d' ' -f1 /proc/loadavg), \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\", \"cores\": $(getconf _NPROCESSORS_ONLN)}"
    echo "$line" | tee -a "$TREX/timings.jsonl"
}

# last_run DIR [GLOB]: the newest run directory in DIR (matching GLOB, default all), empty (not a failure) before
# the first run
last_run() { { ls -d "$1"/${2:-*}/ 2>/dev/null || true; } | tail -1; }

experts() {  # PPO on the true reward, checkpoints spread over training: experts of varied skill
    local run
    run=$(last_run "$EXPERTS")
    if [ -n "$run" ]; then
        stage experts "$PROCLAB" train --resume "$run" --total-steps "$EXPERT_STEPS" --time-limit "$EXPERT_SECONDS"
    else
        # shellcheck disable=SC2086
        stage experts "$PROCLAB" train --preset cleanrl --game starpilot --total-steps "$EXPERT_STEPS" \
            --checkpoint-every "$CHECKPOINT_EVERY" --time-limit "$EXPERT_SECONDS" --run-root "$TREX/runs" \
            --name experts --seed 1 $EXPERT_ARGS
    fi
}

have() {  # have STORE GAME SPLIT: demos of that split already in the store
    "$PYTHON" -c "import sys, numpy as np; from proclab.store import EpisodeStore
p = sys.argv[1]
from pathlib import Path
if not Path(p).exists(): print(0); raise SystemExit
t = EpisodeStore(p).episodes
print(int(((np.asarray(t['game']) == sys.argv[2]) & (np.asarray(t['split']) == sys.argv[3])).sum()) if len(t.get('game', [])) else 0)" "$@"
}

top_up() {  # top_up STORE GAME SPLIT NUM SEED AGENT...: record demos until the store has NUM
    local store=$1 game=$2 split=$3 num=$4 seed=$5
    shift 5
    local n
    n=$(have "$store" "$game" "$split")
    if [ "$n" -lt "$num" ]; then  # a new seed per top-up, so that a second top-up draws new levels
        stage "demos-$game-$split" "$PROCLAB" trex demos --agents "$@" --game "$game" --out "$store" \
            --num $((num - n)) --split "$split" --seed $((seed + n)) --precision fp32
    fi
}

demos() {  # each demo on its own level, by a checkpoint drawn at random: 1,500 train, 500 test
    top_up "$TREX/demos" starpilot train "$NUM_TRAIN" 1 "$(last_run "$EXPERTS")"
    top_up "$TREX/demos" starpilot test "$NUM_TEST" 100000 "$(last_run "$EXPERTS")"
}

grid() {  # batched (the default), one row of num-demos at a time, one torch thread per run
    for n in $GRID_DEMOS; do
        # shellcheck disable=SC2086
        stage "grid-n$n" "$PROCLAB" trex grid --data "$TREX/demos" --num-demos "$n" --seeds "$SEEDS" \
            --workers "$WORKERS" --torch-threads 1 --out "$TREX/grid.csv" --train.run-root "$TREX/runs" $TRAIN_ARGS
    done
}

parity() {  # the seed's one pair per step, beside the batched rows
    for n in $PARITY_DEMOS; do
        # shellcheck disable=SC2086
        stage "parity-n$n" "$PROCLAB" trex grid --preset parity --data "$TREX/demos" --num-demos "$n" \
            --seeds "$SEEDS" --workers "$WORKERS" --torch-threads 1 --out "$TREX/parity.csv" \
            --train.run-root "$TREX/runs" $TRAIN_ARGS
    done
}

control() {  # the table beside the published one, with the length control; the figures
    local csvs=("$TREX/grid.csv")
    [ -f "$TREX/parity.csv" ] && csvs+=("$TREX/parity.csv")
    "$PYTHON" "$(dirname "$0")/trex_table.py" "${csvs[@]}" | tee "$TREX/table.md"
    stage plot "$PROCLAB" trex plot --summary "$TREX/grid.csv" --out "$TREX/plots" --precision fp32 \
        --reward-model "$(last_run "$TREX/runs/trex/starpilot/grid-n$POLICY_DEMOS")"
}

policy() {  # PPO on the learned reward, on the true reward and on +1 per step, the same steps, POLICY_SEEDS each
    local s rm
    for s in $(seq 1 "$POLICY_SEEDS"); do
        rm=$(last_run "$TREX/runs/trex/starpilot/grid-n$POLICY_DEMOS" "$((s - 1))-*")
        : "${rm:?no seed-$((s - 1)) reward model of the grid row $POLICY_DEMOS yet: run the grid stage first}"
        policy_arm "trex-s$s" --reward-model "$rm" --seed "$s"
        policy_arm "true-reward-s$s" --preset trex-policy --seed "$s"
        policy_arm "per-step-s$s" --reward-model per-step --seed "$s"
    done
    "$PYTHON" "$(dirname "$0")/trex_policies.py" "$TREX/runs/ppo/starpilot" --steps "$POLICY_STEPS" \
        --plot "$TREX/policies.png" | tee "$TREX/policies.md"
}

policy_arm() {  # policy_arm NAME ARGS...: train (or resume) runs/ppo/starpilot/NAME to POLICY_STEPS
    local name=$1 run
    shift
    run=$(last_run "$TREX/runs/ppo/starpilot/$name")
    if [ -n "$run" ]; then
        stage "policy-$name" "$PROCLAB" train --resume "$run" --time-limit "$POLICY_SECONDS"
    else
        # shellcheck disable=SC2086
        stage "policy-$name" "$PROCLAB" train "$@" --game starpilot --name "$name" --total-steps "$POLICY_STEPS" \
            --time-limit "$POLICY_SECONDS" --run-root "$TREX/runs" $POLICY_ARGS
    fi
}

coinrun() {  # a game where length and return disagree: long coinrun episodes are failures
    # (the agent plays coinrun hard without backgrounds; its demos keep those settings)
    : "${COINRUN_AGENT:?set COINRUN_AGENT to the CoinRun agent model_78053376.pth (docs/import.md)}"
    [ -d "$TREX/coinrun-agent" ] ||
        stage coinrun-import "$PROCLAB" import "$COINRUN_AGENT" --out "$TREX/coinrun-agent"
    top_up "$TREX/coinrun-demos" coinrun train "$COINRUN_TRAIN" 1 "$TREX/coinrun-agent"
    top_up "$TREX/coinrun-demos" coinrun test "$COINRUN_TEST" 100000 "$TREX/coinrun-agent"
    for n in $COINRUN_DEMOS; do
        # shellcheck disable=SC2086
        stage "coinrun-grid-n$n" "$PROCLAB" trex grid --data "$TREX/coinrun-demos" --num-demos "$n" --train.mode hard \
            --seeds "$SEEDS" --workers "$WORKERS" --torch-threads 1 --out "$TREX/coinrun-grid.csv" \
            --train.run-root "$TREX/runs" $TRAIN_ARGS
    done
    "$PYTHON" "$(dirname "$0")/trex_table.py" "$TREX/coinrun-grid.csv" | tee "$TREX/coinrun-table.md"
}

STAGES=(experts demos grid parity control policy coinrun)
for s in "${@:-${STAGES[@]}}"; do
    "$s"
done
