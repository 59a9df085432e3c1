#!/usr/bin/env bash
# Builds the grpc-java echo server and latch client into OUTDIR/labs.jar (labs/servers/README.md).
#   cd labs/servers/java && bash build.sh OUTDIR      (PROTO_DIR: the repository's proto/)
# stdout: two lines, `server: COMMAND` and `client: COMMAND`; build logs on stderr.
# Exit 3: Java 17+ or Maven is missing. Maven keeps what it downloads in ~/.m2.
set -euo pipefail
if [[ $# -ne 1 ]]; then echo "usage: bash build.sh OUTDIR" >&2; exit 2; fi
if ! command -v java >/dev/null || ! command -v javac >/dev/null; then
    echo "java/javac not found: install a JDK 17 or newer (apt-get install openjdk-17-jdk-headless)" >&2
    exit 3
fi
if ! command -v mvn >/dev/null; then
    echo "mvn not found: install Maven 3.6 or newer (apt-get install maven)" >&2
    exit 3
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
proto_dir=${PROTO_DIR:-../../../proto}
if [[ ! -f $proto_dir/echo.proto ]]; then echo "no echo.proto in PROTO_DIR=$proto_dir: point it at the repository's proto/" >&2; exit 1; fi
proto_dir=$(cd "$proto_dir" && pwd)
# The stubs are generated from the repository's protos as they are (pom.xml, protobuf-maven-plugin).
# Maven builds in OUTDIR/maven and always re-shades the jar (tens of seconds): skipped when
# nothing it reads is newer than the jar.
jar=$out/maven/labs.jar
if [[ ! -f $jar ]] || [[ -n $(find pom.xml src "$proto_dir" -newer "$jar" -print -quit) ]]; then
    # Debian's Maven prints colour resets even in batch mode: stripped from the log.
    mvn -B -q package -Dlab.protos="$proto_dir" -Dlab.build="$out/maven" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >&2
else
    echo "$jar is newer than pom.xml, src/ and $proto_dir: not rebuilt" >&2
fi
cp "$jar" "$out/labs.jar"
echo "server: java -jar $out/labs.jar"
echo "client: java -cp $out/labs.jar LatchClient"
