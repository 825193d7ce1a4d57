#!/usr/bin/env bash
# The study of interpreting-rl-behavior's own CoinRun agent at the seed's scale (docs/study-coinrun.md).
#
#   bash benchmarks/study_coinrun.sh CHECKPOINT [STAGE ...]
#
# CHECKPOINT is model_78053376.pth (docs/import.md says where it is published). With no STAGE every
# stage runs in order; naming stages reruns only those (each reads what the earlier ones left in
# $STUDY, default ./study-coinrun). Every stage prints one JSON line (and appends it to
# $STUDY/timings.jsonl): its wall time, peak resident memory and exit status, measured by GNU time,
# with the load average before and after it, since a busy machine stretches wall times.
set -euo pipefail
CHECKPOINT=${1:?usage: study_coinrun.sh CHECKPOINT [STAGE ...]}
shift
STUDY=${STUDY:-study-coinrun}
PROCLAB=${PROCLAB:-proclab}
SEED=${SEED:-0}
THREADS=${THREADS:-0}     # torch threads per process (0: torch's default); 1 on a machine other jobs share
RECORD_EPISODES=${RECORD_EPISODES:-4000}
EVAL_EPISODES=${EVAL_EPISODES:-1000}
SWEEP_LEVELS=${SWEEP_LEVELS:-1000}
RANDOM_DIRECTIONS=${RANDOM_DIRECTIONS:-64}   # the sweep's and the atlas's baseline of directions no method chose
WM_SECONDS=${WM_SECONDS:-3600}
WM_PRESET=${WM_PRESET:-small}  # paper's 27.8M parameters take ~9 s per update on a 2-core CPU
AGENT=$STUDY/agent
ANALYSIS=$STUDY/analysis
HELD_OUT=1000000:100000   # levels the agent never saw: it trained on [0, 1M)
mkdir -p "$STUDY"

stage() {  # stage NAME COMMAND...: run it under GNU time, print and keep its JSON line
    local name=$1
    shift
    local before
    before=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -o "$STUDY/.time-$name" -f "%e %M %x" "$@"  # a file per stage: stages may run side by side
    read -r wall rss status < "$STUDY/.time-$name"
    local line="{\"stage\": \"$name\", \"wall_s\": $wall, \"peak_rss_mb\": $((rss / 1024)), \"exit\": $status, \"load_before\": $before, \"load_after\": $(cut -d' ' -f1 /proc/loadavg), \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\", \"cores\": $(getconf _NPROCESSORS_ONLN)}"
    echo "$line" | tee -a "$STUDY/timings.jsonl"
}

import_agent() { stage import "$PROCLAB" import "$CHECKPOINT" --out "$AGENT" --force; }

evaluate() {  # held-out and training levels, sampled and greedy, beside a uniformly random agent
    stage eval-sampled "$PROCLAB" eval --agent "$AGENT" --split train-1m --split "$HELD_OUT" \
        --episodes "$EVAL_EPISODES" --envs-per-game 64 --random-baseline --seed "$SEED" --out "$STUDY/eval-sampled.json"
    stage eval-greedy "$PROCLAB" eval --agent "$AGENT" --split train-1m --split "$HELD_OUT" --greedy \
        --episodes "$EVAL_EPISODES" --envs-per-game 64 --seed "$SEED" --out "$STUDY/eval-greedy.json"
}

record() {
    rm -rf "$STUDY/episodes" "$STUDY/episodes-heldout"
    # fp32: the agent's exact outputs, as the study recorded them
    stage record "$PROCLAB" record --agent "$AGENT" --episodes "$RECORD_EPISODES" --seed "$SEED" \
        --out "$STUDY/episodes" --precision fp32 --torch-threads "$THREADS"
    stage record-heldout "$PROCLAB" record --agent "$AGENT" --episodes 256 --split "$HELD_OUT" --seed "$SEED" \
        --out "$STUDY/episodes-heldout" --precision fp32 --torch-threads "$THREADS"
}

hidden() { stage hidden "$PROCLAB" analyze hidden --preset paper --out "$ANALYSIS" --data "$STUDY/episodes"; }

sweep() {  # in SWEEP_PARTS blocks of levels, SWEEP_PROCESSES at a time (one thread each); rerun to resume
    local args=(analyze sweep --out "$ANALYSIS" --levels "$SWEEP_LEVELS" --split "$HELD_OUT" --no-greedy
        --seed "$SEED" --arms "${SWEEP_ARMS:-mean,resample,p05,p95}" --random-directions "$RANDOM_DIRECTIONS"
        --parts "${SWEEP_PARTS:-20}")
    local processes=${SWEEP_PROCESSES:-$(getconf _NPROCESSORS_ONLN)} part
    for ((part = 1; part <= ${SWEEP_PARTS:-20}; part += processes)); do
        for ((i = part; i < part + processes && i <= ${SWEEP_PARTS:-20}; i++)); do
            OMP_NUM_THREADS=1 stage "sweep-part-$i" "$PROCLAB" "${args[@]}" --part "$i" --torch-threads 1 &
        done
        wait
    done
    stage sweep "$PROCLAB" "${args[@]}" --torch-threads "$THREADS"  # every part saved: the tests
}

wm() {
    stage wm-train "$PROCLAB" wm train --preset "$WM_PRESET" --data "$STUDY/episodes" --run-root "$STUDY/runs" \
        --name study --time-limit "$WM_SECONDS" --torch-threads "$THREADS"
    local run
    run=$(ls -d "$STUDY"/runs/wm/coinrun/study/* | tail -1)
    rm -rf "$STUDY/samples"
    # fp32: saliency re-simulates the samples in fp32, and the study's dream numbers were measured so
    stage wm-sample "$PROCLAB" wm sample "$run" --n 1000 --out "$STUDY/samples" --seed "$SEED" \
        --precision fp32 --torch-threads "$THREADS"
    stage dream-quality "$PROCLAB" wm evaluate "$run" --data "$STUDY/episodes-heldout" --windows 256 \
        --horizon 5 --strip-windows 2 --out "$STUDY/dream" --overwrite --precision fp32 --torch-threads "$THREADS"
}

atlas() {  # one card per IC of the 1,000 first episodes, with what the sweep measured
    stage atlas "$PROCLAB" analyze atlas --out "$ANALYSIS" --episodes 1000 --torch-threads "$THREADS" \
        --random-directions "$RANDOM_DIRECTIONS" --stability-seeds 5 --stability-bootstraps 5
}

drift() {  # how far dreamed hidden states drift from real ones
    # in a folder of its own: refitting the basis of $ANALYSIS would make its sweep and atlas
    # describe an earlier fit
    stage hidden-dreams "$PROCLAB" analyze hidden --preset paper --out "$STUDY/analysis-dreams" \
        --data "$STUDY/episodes" --samples "$STUDY/samples"
}

dreams() {  # the analyses of the dreams
    stage env "$PROCLAB" analyze env --preset paper --out "$ANALYSIS" --samples "$STUDY/samples"
    stage saliency "$PROCLAB" analyze saliency --preset paper --out "$ANALYSIS" --samples "$STUDY/samples" \
        --target value --target action --target ic:0-15
    stage behaviours "$PROCLAB" analyze behaviours --preset paper --out "$ANALYSIS" --samples "$STUDY/samples"
}

panel() {
    stage panel "$PROCLAB" panel export "$ANALYSIS" --out "$STUDY/panel" --eval "$STUDY/eval-sampled.json" \
        --title "interpreting-rl-behavior's CoinRun agent"
    "${PYTHON:-python}" "$(dirname "$0")/panel_screenshot.py" "$STUDY/panel" "$STUDY/panel" | tee -a "$STUDY/timings.jsonl"
}

STAGES=(import_agent evaluate record hidden sweep atlas wm drift dreams panel)
for s in "${@:-${STAGES[@]}}"; do
    "$s"
done
