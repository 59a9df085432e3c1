#!/usr/bin/env bash
# Whether an open loop's Poisson sends (`run --arrival poisson`) keep the exponential law of their
# gaps (issue 41): RUNS runs (default 3) of SECS s (default 10) at RATE calls/s (default 500), 2
# client threads and 2 connections as tests/run_load_shapes.rs runs them, each with its own seed,
# against `rpcmeter serve` on 127.0.0.1, every call's actual and intended send time written by
# `--csv-details`. One line per run (bench/poisson_ks.py): the Kolmogorov-Smirnov D and p-value of
# the intended gaps and of the actual ones against the exponential of the rate, the share of gaps
# under 10 µs (the law's, the schedule's, the sends'), how many of the short actual gaps follow a
# send late by 10 µs or more, the schedule lag, how many sends were bunched and how many left more
# than 1 ms late; then what the run itself told of it (its late counts and notices). The load
# average before and after: numbers from a busy machine say how it was busy, not how rpcmeter
# paces. About 40 s with a built binary.
#
#   bench/poisson_ks.sh                     RATE, SECS, RUNS, THREADS (default 2) as above
#   RPCMETER_BIN=target/debug/rpcmeter bench/poisson_ks.sh     a built binary instead of building
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-500}
SECS=${SECS:-10}
RUNS=${RUNS:-3}
THREADS=${THREADS:-2}
source bench/lib.sh
rpcmeter_or_build
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
echo "load average before: $(loadavg) ($(nproc) cores); $RUNS runs of ${SECS} s at $RATE calls/s, Poisson," \
  "$THREADS client threads, $("$rpcmeter" --version)"
start_serve
runs=()
for run in $(seq "$RUNS"); do
  seed=$((run * 1000 + 7))
  "$rpcmeter" run --plaintext --no-save --no-calibrate --no-server-stats -q --format json \
    --call EchoService/echo -d '{"content":"hi"}' --rps "$RATE" --arrival poisson --seed "$seed" -z "${SECS}s" \
    --threads "$THREADS" --connections "$THREADS" --max-in-flight 256 --csv-details "$work/run$run.csv" \
    "$serve_addr" >"$work/run$run.json"
  runs+=("run $run, seed $seed=$work/run$run.csv,$work/run$run.json")
done
python3 bench/poisson_ks.py "$RATE" "${runs[@]}"
echo "load average after: $(loadavg)"
