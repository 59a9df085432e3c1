# rpcmeter in a container, for distributed runs (`rpcmeter kube`): built with the repository's
# own toolchain file and dependencies, run from a slim image with the one binary.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin rpcmeter

FROM debian:bookworm-slim
COPY --from=build /src/target/release/rpcmeter /usr/local/bin/rpcmeter
ENTRYPOINT ["rpcmeter"]
