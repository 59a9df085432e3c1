#!/usr/bin/env bash
# Builds the grpc-go echo server into OUTDIR (labs/servers/README.md).
#   cd labs/servers/go && bash build.sh OUTDIR      (PROTO_DIR: the repository's proto/)
# stdout: one line, `server: COMMAND`; build logs on stderr. Exit 3: Go is missing.
set -euo pipefail
if [[ $# -ne 1 ]]; then echo "usage: bash build.sh OUTDIR" >&2; exit 2; fi
if ! command -v go >/dev/null; then
    echo "go not found: install Go 1.21 or newer (https://go.dev/doc/install, or apt-get install golang)" >&2
    exit 3
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
proto_dir=${PROTO_DIR:-../../../proto}
if [[ ! -f $proto_dir/echo.proto ]]; then echo "no echo.proto in PROTO_DIR=$proto_dir: point it at the repository's proto/" >&2; exit 1; fi
# The stubs in gen/ are committed (gen.sh made them, protoc is not needed here): refuse to
# build a server whose stubs no longer match the repository's protos.
if ! (cd "$proto_dir" && sha256sum --quiet --check) <proto.sha256 >&2; then
    echo "the protos in $proto_dir differ from those gen/ was generated from: run gen.sh (see its header)" >&2
    exit 1
fi
GOFLAGS=-mod=readonly go build -trimpath -o "$out/echo-server" . >&2
echo "server: $out/echo-server"
