#!/usr/bin/env bash
# Issue 39's tables for `rpcmeter compare` (docs/compare.md, "Measured"): single-run A/A pairs
# and `compare --runs N` tries (A/A, B +5/+10/+20 % server delay) against a test server of
# exact delay (20 ms), with HOGS busy-loop CPU hogs beside the client (default 0: the quiet
# table; the busy one used 2). Check `uptime` first: the quiet table wants load average < 1.
#
#   bench/compare_tables.sh                # quiet table: 10 rounds, --runs 5 of 10 s (~80 min)
#   SHIFTS=0.10 bench/compare_tables.sh    # only A/A and +10 % (~45 min)
#   HOGS=2 RUN_FOR=3s bench/compare_tables.sh   # the busy table of docs/compare.md (~25 min)
#   ROUNDS=3 SHIFT_ROUNDS=3 bench/compare_tables.sh   # a shorter look
#   MEASURE_DIR=DIR bench/compare_tables.sh --judge   # the tables again from DIR's kept files
#
# Environment (see tests/compare_measure.rs): RPCMETER_BIN (default: a release build), HOGS, ROUNDS, SHIFT_ROUNDS, SHIFTS, RUNS, RUN_FOR,
# CONCURRENCY, MEASURE_DIR (kept; default a new directory under /tmp). Prints markdown tables.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
if [[ -z ${RPCMETER_BIN:-} ]]; then
  build_rpcmeter
  RPCMETER_BIN="$PWD/$rpcmeter"
fi
export RPCMETER_BIN HOGS="${HOGS:-0}"
export MEASURE_DIR="${MEASURE_DIR:-$(mktemp -d /tmp/compare-tables.XXXXXX)}"
test=measure_tables
[[ ${1:-} == --judge ]] && test=judge_saved
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); files kept in $MEASURE_DIR" >&2
cargo test --quiet --test compare_measure -- --ignored --nocapture --exact "$test" 2>&1 |
  grep -v '^running \|^test \|^$'
