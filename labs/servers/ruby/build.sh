#!/usr/bin/env bash
# Builds the Ruby gRPC server into OUTDIR: the stubs generated from the repository's protos
# (grpc_tools_ruby_protoc), their descriptor set for server reflection, and the server's
# files (labs/servers/README.md). Ruby and its gems come from Debian's packages (no bundler).
#   cd labs/servers/ruby && bash build.sh OUTDIR      (PROTO_DIR: the repository's proto/)
# stdout: one line, `server: COMMAND`; build logs on stderr. Exit 3: Ruby or a gem is missing.
set -euo pipefail
if [[ $# -ne 1 ]]; then echo "usage: bash build.sh OUTDIR" >&2; exit 2; fi
packages="apt-get install ruby ruby-grpc ruby-grpc-tools ruby-async ruby-sqlite3 ruby-pg ruby-google-protobuf"
ruby=${RUBY:-ruby}
if ! command -v "$ruby" >/dev/null; then echo "$ruby not found: $packages" >&2; exit 3; fi
if ! "$ruby" -e 'require "grpc"; require "async"; require "sqlite3"; require "google/protobuf/descriptor_pb"; exit RUBY_VERSION >= "3.1"' 2>/dev/null; then
    echo "$ruby is older than 3.1 or lacks grpc, async or sqlite3: $packages" >&2
    exit 3
fi
if ! command -v grpc_tools_ruby_protoc >/dev/null; then echo "grpc_tools_ruby_protoc not found: $packages" >&2; exit 3; fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
proto_dir=${PROTO_DIR:-../../../proto}
if [[ ! -f $proto_dir/echo.proto ]]; then echo "no echo.proto in PROTO_DIR=$proto_dir: point it at the repository's proto/" >&2; exit 1; fi
rm -rf "$out/gen" && mkdir -p "$out/gen"
grpc_tools_ruby_protoc -I "$proto_dir" -I . --ruby_out="$out/gen" --grpc_out="$out/gen" \
    --include_imports --descriptor_set_out="$out/gen/served.protoset" \
    echo.proto rpcmeter/lab/v1/lab.proto reflection.proto >&2
cp server.rb stats.rb db.rb async_pool.rb reflection.rb "$out/"
echo "server: $ruby $out/server.rb"
