#!/usr/bin/env bash
# Peak RSS (and the JSON result's size) of `run --lb round_robin -n 2000 -c 8` over N loopback
# addresses of one `rpcmeter serve` (127.0.0.1, 127.0.0.2, ...: the 1000-address row of
# issue 41 and docs/design.md, "Backends"), RUNS times each, interleaved.
#
#   bench/backends.sh [N ...]     default: 2 1000; RUNS (default 3)
#   BIN=path/to/rpcmeter          measure that binary instead of building this tree's release
#
# The server listens on 0.0.0.0 so that every address of 127/8 reaches it; it is killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
RUNS=${RUNS:-3}
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(2 1000)
[[ -x /usr/bin/time ]] || apt_install time
if [[ -z ${BIN:-} ]]; then
  build_rpcmeter
  BIN=$rpcmeter
fi

port=$(free_port)
"$BIN" serve --addr "0.0.0.0:$port" >"$work/serve.log" 2>&1 &
pids+=($!)
wait_port "$port"

# N addresses of 127/8, none ending in .0 or .255.
addresses() {
  python3 -c 'import sys
n, port = int(sys.argv[1]), sys.argv[2]
out, i = [], 1
while len(out) < n:
    if i % 256 not in (0, 255):
        out.append(f"127.0.{i // 256}.{i % 256}:{port}")
    i += 1
print("ipv4:" + ",".join(out))' "$1" "$port"
}

echo "binary: $BIN; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq "$RUNS"); do
  for n in "${sizes[@]}"; do
    # Its text freshly read into the page cache before each run: peak RSS counts the binary's
    # resident text too, which is smaller for a binary that sat in the cache a while.
    cat "$BIN" >/dev/null
    /usr/bin/time -o "$work/time" -f %M "$BIN" run --plaintext --quiet --no-save --no-calibrate \
      --no-server-stats --lb round_robin -n 2000 -c 8 --call EchoService/echo \
      -d '{"content":"hi"}' --format json "$(addresses "$n")" >"$work/result.json"
    ok=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["requests"]["ok"])' "$work/result.json")
    echo "addresses $n run $run: peak RSS $(cat "$work/time") KiB, $ok OK, JSON $(wc -c <"$work/result.json") bytes"
  done
done
