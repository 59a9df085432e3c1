#!/usr/bin/env python3
"""Writes a gRPC binary log (grpc.binarylog.v1.GrpcLogEntry, proto/grpc/binlog/v1) of unary
calls to `rpcmeter serve`'s methods, for bench/replay.sh: CALLS calls at RATE calls/s, 7 echoes
(/EchoService/echo, content of SIZE bytes) for every 3 puts (/rpcmeter.lab.v1.Storage/PutValue,
a key and a value of SIZE bytes), every tenth echo answered UNAVAILABLE, each call 4 entries
(client header, client message, server message, trailer 200 us after the header), framed as
grpc-go's file sink frames them (4-byte big-endian lengths) or --varint (grpc-java's).

    bench/replay_log.py OUT CALLS RATE SIZE [--varint]
"""
import struct
import sys


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, wire, value):
    key = varint(number << 3 | wire)
    if wire == 0:
        return key + varint(value)
    return key + varint(len(value)) + value


def entry(call, seq, ns, kind, payload_field=None, payload=b""):
    stamp = field(1, 0, ns // 1_000_000_000) + field(2, 0, ns % 1_000_000_000)
    body = field(1, 2, stamp) + field(2, 0, call) + field(3, 0, seq) + field(4, 0, kind) + field(5, 0, 2)
    if payload_field is not None:
        body += field(payload_field, 2, payload)
    return body


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    out, calls, rate, size = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    varint_framing = sys.argv[5:] == ["--varint"]
    start = 1_700_000_000 * 1_000_000_000
    filler = b"x" * size
    echo = field(1, 2, filler)
    with open(out, "wb", buffering=1 << 20) as f:
        for i in range(calls):
            ns = start + int(i * 1e9 / rate)
            call = i + 1
            if i % 10 < 7:
                method, request = b"/EchoService/echo", echo
                status = 14 if i % 10 == 0 else 0
            else:
                method, request = b"/rpcmeter.lab.v1.Storage/PutValue", field(1, 2, b"k%d" % (i % 1000)) + field(2, 2, filler)
                status = 0
            message = field(1, 0, len(request)) + field(2, 2, request)
            for e in (
                entry(call, 1, ns, 1, 6, field(2, 2, method)),
                entry(call, 2, ns + 10_000, 3, 8, message),
                entry(call, 3, ns + 150_000, 4, 8, field(1, 0, 4)),
                entry(call, 4, ns + 200_000, 6, 9, field(2, 0, status) if status else b""),
            ):
                f.write(varint(len(e)) if varint_framing else struct.pack(">I", len(e)))
                f.write(e)


if __name__ == "__main__":
    main()
