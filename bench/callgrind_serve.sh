#!/usr/bin/env bash
# Instructions per call of `rpcmeter serve`, all its threads, counted by valgrind's callgrind:
# bench/callgrind.sh's way (docs/design.md, "The lean transport"), turned round to the server.
# Each binary serves under valgrind (`--model async --threads 1 --spin 0`, pinned to one core
# when there are two, so one network thread) and a native rpcmeter client ($CLIENT_BIN, else
# the first binary) calls echo on it, `-c $CONCURRENCY` (8) at -n 2000 and at -n 12000, a new
# server each time; the difference of the server's counts over 10,000 is a call's cost without
# start-up and stop. `--spin 0`: valgrind runs the server 10-50 times slower, and a spin counts
# instructions by the time it waits, not by the calls. The binaries take turns within a round.
#
#   bench/callgrind_serve.sh [ROUNDS] LABEL=BINARY ...     (ROUNDS: 3)
#   CONCURRENCY=1 bench/callgrind_serve.sh 3 old=/tmp/rpcmeter-old new=target/release/rpcmeter
#
# Prints, per binary, server instructions per call: min / median / max over the rounds.
# KEEP=DIR keeps callgrind's files there (per thread), for callgrind_annotate.
# A server run takes 15-60 s under valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
if [[ ${1:-} =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
(($# > 0)) || { echo "usage: bench/callgrind_serve.sh [ROUNDS] LABEL=BINARY ..." >&2; exit 2; }
for arg in "$@"; do
  [[ $arg == *=* && -x ${arg#*=} ]] || { echo "bench/callgrind_serve.sh: $arg is not LABEL=BINARY (an executable)" >&2; exit 2; }
done
concurrency=${CONCURRENCY:-8}
source bench/lib.sh
have valgrind || apt_install valgrind
have cc || apt_install gcc libc6-dev
have python3 || apt_install python3
# The server reads the auxiliary vector as the client does (bench/callgrind.sh says why).
cc -O2 bench/noauxv.c -o "$work/noauxv"
client=${CLIENT_BIN:-${1#*=}}
pin=()
if have taskset && (($(nproc) > 1)); then pin=(taskset -c 1); fi
"$client" protos "$work/protos" >/dev/null
mkdir -p "$work/cg"

# serve_once BINARY OUT N: one server under callgrind, N echo calls on it, then SIGTERM.
serve_once() {
  local binary=$1 out=$2 n=$3 line= pid
  "${pin[@]}" "$work/noauxv" valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out.cg" \
    "$binary" serve --addr 127.0.0.1:0 --model async --threads 1 --spin 0 >"$out.serve" 2>"$out.serve.err" &
  pid=$!
  pids+=($pid)
  for _ in $(seq 1200); do
    line=$(head -n 1 "$out.serve" 2>/dev/null || true)
    [[ $line == "listening on "* ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ $line == "listening on "* ]] || { echo "serve ($binary) did not start: $(tail -n 3 "$out.serve.err")" >&2; exit 1; }
  "$client" run --plaintext --proto "$work/protos/echo.proto" --call EchoService/echo -d '{"content":"hi"}' \
    -c "$concurrency" -n "$n" --interval 1h -q --format json "${line#listening on }" >"$out.json" 2>"$out.err" \
    || { echo "-n $n against $binary failed: $(tail -n 3 "$out.err")" >&2; exit 1; }
  kill -TERM "$pid"
  wait "$pid" || { echo "serve ($binary) under valgrind failed: $(tail -n 3 "$out.serve.err")" >&2; exit 1; }
}

for round in $(seq "$rounds"); do
  for n in 2000 12000; do
    for arg in "$@"; do
      serve_once "${arg#*=}" "$work/cg/${arg%%=*}.$n.$round" "$n"
    done
  done
done
python3 - "$work/cg" "$rounds" "$concurrency" "$@" <<'PY'
import glob, json, re, statistics, sys
folder, rounds, concurrency = sys.argv[1], int(sys.argv[2]), sys.argv[3]
labels = [a.split('=', 1)[0] for a in sys.argv[4:]]

def server_ir(label, n, r):
    """The Ir of all the server's threads in one run."""
    path = f"{folder}/{label}.{n}.{r}"
    ok = json.load(open(path + ".json"))["requests"]["ok"]
    if ok != n:
        sys.exit(f"{label} -n {n}: {ok} calls OK")
    parts = glob.glob(path + ".cg-*")
    if not parts:
        sys.exit(f"{label} -n {n}: callgrind wrote nothing")
    total = 0
    for part in parts:
        text = open(part, errors="replace").read()
        total += int(re.search(r"^(?:summary|totals): (\d+)", text, re.M).group(1))
    return total

print(f"server instructions per echo call (-c {concurrency}), min / median / max over {rounds} rounds")
medians = {}
for label in labels:
    per_call = [(server_ir(label, 12000, r) - server_ir(label, 2000, r)) / 10000 for r in range(1, rounds + 1)]
    medians[label] = statistics.median(per_call)
    line = f"{label:>12}  {min(per_call):8,.0f} {medians[label]:8,.0f} {max(per_call):8,.0f}"
    if label != labels[0]:
        line += f"   median / {labels[0]}: {medians[label] / medians[labels[0]]:.4f}"
    print(line)
PY
if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$work"/cg/* "$KEEP"/; fi
