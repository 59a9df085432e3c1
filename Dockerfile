# rpcmeter in a container, for distributed runs (`rpcmeter kube`): built with stable Rust (the
# rust:1 image; Cargo.toml's rust-version is the least) and Cargo.lock's dependencies, run from
# a slim image with the one binary.
# `kube` pins the image to its own version, so tag it with that version (docs/kube.md, "The image"):
#   docker build -t rpcmeter:$(rpcmeter --version | cut -d' ' -f2) .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin rpcmeter

FROM debian:bookworm-slim
# A numeric non-root user: Kubernetes' runAsNonRoot can only check a number, and kube's
# pods run as 10001 (their fsGroup makes the mounted client key readable to it alone).
RUN groupadd --gid 10001 rpcmeter \
    && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/rpcmeter --shell /usr/sbin/nologin rpcmeter
COPY --from=build /src/target/release/rpcmeter /usr/local/bin/rpcmeter
USER 10001:10001
WORKDIR /home/rpcmeter
ENTRYPOINT ["rpcmeter"]
