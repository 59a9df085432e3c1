#!/usr/bin/env bash
# Builds the grpcio server into OUTDIR: a venv with requirements.txt, the stubs generated from
# the repository's protos, and the server's files (labs/servers/README.md).
#   cd labs/servers/python && bash build.sh OUTDIR      (PROTO_DIR: the repository's proto/)
# stdout: one line, `server: COMMAND`; build logs on stderr. Exit 3: python3 or its venv is missing.
set -euo pipefail
if [[ $# -ne 1 ]]; then echo "usage: bash build.sh OUTDIR" >&2; exit 2; fi
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null; then
    echo "$python not found: install Python 3.9 or newer with venv (apt-get install python3 python3-venv)" >&2
    exit 3
fi
if ! "$python" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
    echo "$python is older than 3.9 or has no venv/ensurepip: install Python 3.9+ with venv (apt-get install python3-venv)" >&2
    exit 3
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
proto_dir=${PROTO_DIR:-../../../proto}
if [[ ! -f $proto_dir/echo.proto ]]; then echo "no echo.proto in PROTO_DIR=$proto_dir: point it at the repository's proto/" >&2; exit 1; fi
# A venv is made once; pip then only checks the pins (its cache keeps the wheels).
if [[ ! -x $out/venv/bin/python ]]; then "$python" -m venv "$out/venv" >&2; fi
"$out/venv/bin/python" -m pip install --disable-pip-version-check -q -r requirements.txt >&2
rm -rf "$out/gen" && mkdir -p "$out/gen"
"$out/venv/bin/python" -m grpc_tools.protoc -I "$proto_dir" --python_out="$out/gen" --grpc_python_out="$out/gen" \
    echo.proto rpcmeter/lab/v1/lab.proto >&2
cp server.py stats.py db.py "$out/"
echo "server: $out/venv/bin/python $out/server.py"
