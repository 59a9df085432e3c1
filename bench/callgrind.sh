#!/usr/bin/env bash
# Instructions per call of `rpcmeter run`'s worker threads, counted by valgrind's callgrind
# (docs/design.md, "The lean transport": counting it on a shared machine). Load beside the
# client barely moves an instruction count, where it moves CPU time ±10%, and a VM without a
# PMU has no `perf stat -e instructions`. Each binary runs `-c 8` against one `serve` (the
# first binary's, or $SERVE_BIN's; one thread) at -n 2000 and at -n 12000; the difference of
# its worker threads' counts over 10,000 is a call's cost without the start-up. `--interval 1h`
# keeps the per-interval hand-over out: valgrind runs the client 10-40 times slower, which
# multiplies all that is done per second. The binaries take turns within each round.
#
#   bench/callgrind.sh [ROUNDS] LABEL=BINARY ...     (ROUNDS: 3)
#   bench/callgrind.sh 3 base=/tmp/rpcmeter-old branch=target/release/rpcmeter
#
# Prints, per binary, worker-thread instructions per call: min / median / max over the rounds.
# A run takes 10-60 s under valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
if [[ ${1:-} =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
(($# > 0)) || { echo "usage: bench/callgrind.sh [ROUNDS] LABEL=BINARY ..." >&2; exit 2; }
for arg in "$@"; do
  [[ $arg == *=* && -x ${arg#*=} ]] || { echo "bench/callgrind.sh: $arg is not LABEL=BINARY (an executable)" >&2; exit 2; }
done
source bench/lib.sh
have valgrind || apt_install valgrind
have cc || apt_install gcc libc6-dev
# rustix reads the auxiliary vector with prctl(PR_GET_AUXV), which valgrind 3.19 passes through
# to the host, and the client faults: this wrapper fails that prctl, and rustix reads
# /proc/self/auxv, which valgrind emulates.
cc -O2 bench/noauxv.c -o "$work/noauxv"
rpcmeter=${SERVE_BIN:-${1#*=}}
if have taskset && (($(nproc) > 1)); then SERVE_CPU=${SERVE_CPU:-1}; fi
start_serve
"$rpcmeter" protos "$work/protos" >/dev/null
for round in $(seq "$rounds"); do
  for n in 2000 12000; do
    for arg in "$@"; do
      label=${arg%%=*} out="$work/cg/${arg%%=*}.$n.$round"
      mkdir -p "$work/cg"
      "$work/noauxv" valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out.cg" \
        "${arg#*=}" run --plaintext --proto "$work/protos/echo.proto" --call EchoService/echo \
        -d '{"content":"hi"}' -c 8 -n "$n" --interval 1h -q --format json "$serve_addr" >"$out.json" 2>"$out.err" \
        || { echo "$label -n $n failed: $(tail -n 3 "$out.err")" >&2; exit 1; }
    done
  done
done
python3 - "$work/cg" "$rounds" "$@" <<'PY'
import glob, json, re, statistics, sys
folder, rounds, labels = sys.argv[1], int(sys.argv[2]), [a.split('=', 1)[0] for a in sys.argv[3:]]

def worker_ir(label, n, r):
    """The Ir of the run's worker threads: those that ran worker_thread."""
    path = f"{folder}/{label}.{n}.{r}"
    ok = json.load(open(path + ".json"))["requests"]["ok"]
    if ok != n:
        sys.exit(f"{label} -n {n}: {ok} calls OK")
    total = 0
    for part in glob.glob(path + ".cg-*"):
        text = open(part, errors="replace").read()
        # Thread 1 is the main one (the collector), which starts the workers.
        if "worker_thread" in text and not re.search(r"^thread: 1$", text, re.M):
            total += int(re.search(r"^(?:summary|totals): (\d+)", text, re.M).group(1))
    return total

print("worker-thread instructions per call, min / median / max over", rounds, "rounds")
for label in labels:
    per_call = [(worker_ir(label, 12000, r) - worker_ir(label, 2000, r)) / 10000 for r in range(1, rounds + 1)]
    print(f"{label:>12}  {min(per_call):8,.0f} {statistics.median(per_call):8,.0f} {max(per_call):8,.0f}")
PY
