#!/usr/bin/env bash
# Regenerates the committed Go stubs in gen/ from the repository's protos (run by hand, once
# per proto change; build.sh only checks that the protos still match proto.sha256).
# Needs protoc (Debian: apt-get install protobuf-compiler, 3.21.12 was used) and the plugins:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.34.2
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.4.0
set -euo pipefail
proto_dir=${PROTO_DIR:-../../../proto}
export PATH="$(go env GOPATH)/bin:$PATH"
rm -rf gen && mkdir -p gen
# echo.proto and lab.proto carry no go_package: the M options name the Go packages here.
maps="Mecho.proto=rpcmeterlabs/gen/echopb,Mrpcmeter/lab/v1/lab.proto=rpcmeterlabs/gen/labpb"
protoc -I "$proto_dir" \
    --go_out=gen --go_opt=module=rpcmeterlabs/gen,$maps \
    --go-grpc_out=gen --go-grpc_opt=module=rpcmeterlabs/gen,$maps \
    echo.proto rpcmeter/lab/v1/lab.proto
(cd "$proto_dir" && sha256sum echo.proto rpcmeter/lab/v1/lab.proto) >proto.sha256
