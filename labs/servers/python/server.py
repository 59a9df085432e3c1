"""The Python reference server of `rpcmeter lab threaded-vs-async` (docs/experiments.md,
"Threaded vs async servers: test_service"): grpcio in two execution models, the GIL standing
in for Ruby's GVL.
  --model threaded  grpc.server on a pool of --threads workers: at most --threads calls run
  --model async     grpc.aio on one event loop: at most --threads x --per-thread calls run
Calls beyond that are answered RESOURCE_EXHAUSTED at once, as the Ruby pool did.
Serves EchoService, rpcmeter.lab.v1.TestService (Cpu: naive fib(n); Db: inserts, COUNT(*),
a sleep holding the connection), rpcmeter.lab.v1.Stats, and server reflection.
  python server.py [--port 9000] [--model async|threaded] [--threads 5] [--per-thread 5]
                   [--fib 30] [--db-sleep 250ms] [--db postgres://...|sqlite:PATH] [--db-pool 25]
"""

import argparse
import asyncio
import os
import re
import signal
import sys
import threading
from concurrent import futures

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

import grpc  # noqa: E402
from grpc_reflection.v1alpha import reflection  # noqa: E402

import db  # noqa: E402
import echo_pb2  # noqa: E402
import echo_pb2_grpc  # noqa: E402
import stats  # noqa: E402
from rpcmeter.lab.v1 import lab_pb2, lab_pb2_grpc  # noqa: E402

# Naive fib(n) grows x1.6 per step: fib(45) already runs for minutes in CPython. The Rust
# lab's bound (src/lab/test_service.rs, MAX_FIB).
MAX_FIB = 45
DEFAULT_ROWS = 10  # a Db request with rows = 0, as in test_service
MAX_ROWS = 10_000  # one request cannot fill the disk
DRAIN_S = 5  # how long calls in flight may finish after SIGINT/SIGTERM
COUNTED = [
    "/EchoService/echo",
    "/rpcmeter.lab.v1.TestService/Cpu",
    "/rpcmeter.lab.v1.TestService/Db",
]


def fib(n):
    """Naive on purpose: test_service's CPU load is exponential recursion, not a loop."""
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Lab:
    """What both models share: settings, Stats, and the checks of a request."""

    def __init__(self, args):
        self.args = args
        self.stats = stats.Stats(COUNTED)

    def fib_n(self, request, context_abort):
        n = request.n or self.args.fib
        if n > MAX_FIB:
            context_abort(grpc.StatusCode.INVALID_ARGUMENT, f"n = {n} is above {MAX_FIB}: naive fib(n) would run too long")
        return n

    def rows(self, request, context_abort):
        rows = request.rows or DEFAULT_ROWS
        if rows > MAX_ROWS:
            context_abort(grpc.StatusCode.INVALID_ARGUMENT, f"rows = {rows} is above {MAX_ROWS}")
        return rows


class BlockingServices(echo_pb2_grpc.EchoServiceServicer, lab_pb2_grpc.TestServiceServicer, lab_pb2_grpc.StatsServicer):
    def __init__(self, lab, database):
        self.lab, self.db = lab, database

    def echo(self, request, context):
        return request

    def Cpu(self, request, context):
        return lab_pb2.CpuReply(result=fib(self.lab.fib_n(request, context.abort)))

    def Db(self, request, context):
        rows = self.lab.rows(request, context.abort)
        try:
            return lab_pb2.DbReply(count=self.db.insert_count_sleep(rows))
        except Exception as err:  # the database's own error, to the client
            context.abort(grpc.StatusCode.INTERNAL, f"database: {err}")

    def Get(self, request, context):
        return self.lab.stats.snapshot()

    def Reset(self, request, context):
        return self.lab.stats.take()


class AsyncServices(echo_pb2_grpc.EchoServiceServicer, lab_pb2_grpc.TestServiceServicer, lab_pb2_grpc.StatsServicer):
    def __init__(self, lab, database):
        self.lab, self.db = lab, database

    async def echo(self, request, context):
        return request

    async def Cpu(self, request, context):
        n = self.lab.fib_n(request, _sync_abort)
        # Computed on the event loop, which it monopolises, as a CPU-bound Ruby fiber does.
        return lab_pb2.CpuReply(result=fib(n))

    async def Db(self, request, context):
        rows = self.lab.rows(request, _sync_abort)
        try:
            return lab_pb2.DbReply(count=await self.db.insert_count_sleep(rows))
        except Exception as err:
            await context.abort(grpc.StatusCode.INTERNAL, f"database: {err}")

    async def Get(self, request, context):
        return self.lab.stats.snapshot()

    async def Reset(self, request, context):
        return self.lab.stats.take()


class _Refused(Exception):
    def __init__(self, code, details):
        self.code, self.details = code, details


def _sync_abort(code, details):
    """grpc.aio's abort is a coroutine: the async services raise this, and _answer_refusals
    turns it into the status."""
    raise _Refused(code, details)


def _add_services(server, services):
    echo_pb2_grpc.add_EchoServiceServicer_to_server(services, server)
    lab_pb2_grpc.add_TestServiceServicer_to_server(services, server)
    lab_pb2_grpc.add_StatsServicer_to_server(services, server)
    names = (
        echo_pb2.DESCRIPTOR.services_by_name["EchoService"].full_name,
        lab_pb2.DESCRIPTOR.services_by_name["TestService"].full_name,
        lab_pb2.DESCRIPTOR.services_by_name["Stats"].full_name,
        reflection.SERVICE_NAME,
    )
    reflection.enable_server_reflection(names, server)


def _bind(server, port):
    try:
        bound = server.add_insecure_port(f"127.0.0.1:{port}")
    except RuntimeError as err:
        bound, reason = 0, err
    else:
        reason = "the port is taken or not allowed"
    if bound == 0:
        print(f"server.py: cannot listen on 127.0.0.1:{port}: {reason}", file=sys.stderr)
        sys.exit(1)
    return bound


def _describe(args):
    model = f"threaded, {args.threads} threads" if args.model == "threaded" else f"async, {args.threads} x {args.per_thread} calls"
    return f"model {model}; fib {args.fib}; db {db.describe(args.db)} (pool {args.db_pool}, sleep {args.db_sleep_s:g} s)"


def serve_threaded(args):
    lab = Lab(args)
    try:
        database = db.BlockingDb(args.db, args.db_pool, args.db_sleep_s)
    except db.DbError as err:
        print(f"server.py: {err}", file=sys.stderr)
        sys.exit(1)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    admission = stats.Admission(args.threads)
    # --threads workers run calls; as many more only answer refusals (and Stats), so that a
    # refusal never waits behind the busy workers.
    pool = futures.ThreadPoolExecutor(max_workers=2 * args.threads, thread_name_prefix="lab")
    server = grpc.server(pool, interceptors=[stats.ThreadedInterceptor(lab.stats, admission)])
    _add_services(server, BlockingServices(lab, database))
    port = _bind(server, args.port)
    server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    print(_describe(args), flush=True)
    while not stop.wait(3600):
        pass
    server.stop(DRAIN_S).wait()
    database.close()
    print(stats.summary(lab.stats.snapshot()), end="", flush=True)


async def serve_async(args):
    lab = Lab(args)
    try:
        database = await db.AsyncDb(args.db, args.db_pool, args.db_sleep_s).open()
    except db.DbError as err:
        print(f"server.py: {err}", file=sys.stderr)
        sys.exit(1)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    admission = stats.Admission(args.threads * args.per_thread)
    server = grpc.aio.server(interceptors=[_AnswerRefusals(), stats.AsyncInterceptor(lab.stats, admission)])
    _add_services(server, AsyncServices(lab, database))
    port = _bind(server, args.port)
    await server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    print(_describe(args), flush=True)
    await stop.wait()
    await server.stop(DRAIN_S)
    await database.close()
    print(stats.summary(lab.stats.snapshot()), end="", flush=True)


class _AnswerRefusals(grpc.aio.ServerInterceptor):
    """Turns _Refused into its status (outermost, so the counting interceptor sees it fail)."""

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler

        async def answered(request, context):
            try:
                return await handler.unary_unary(request, context)
            except _Refused as refused:
                await context.abort(refused.code, refused.details)

        return grpc.unary_unary_rpc_method_handler(
            answered, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        print(f"server.py: {message} (--help lists the flags)", file=sys.stderr)
        sys.exit(2)


def _bounded_int(low, high):
    def parse(text):
        try:
            n = int(text)
        except ValueError:
            n = None
        if n is None or not low <= n <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, got {text!r}")
        return n

    return parse


def _seconds(text):
    """'250ms', '1s', '1.5s', '0': at most an hour."""
    m = re.fullmatch(r"(\d{1,7}(?:\.\d+)?)(ms|s)?", text)
    seconds = None if m is None else float(m[1]) / (1000 if m[2] == "ms" else 1)
    if seconds is None or seconds > 3600:
        raise argparse.ArgumentTypeError(f"expected a duration such as 250ms or 1s (at most 1 hour), got {text!r}")
    return seconds


def _db_url(text):
    if text.startswith(("postgres://", "postgresql://")) or (text.startswith("sqlite:") and len(text) > 7):
        return text
    raise argparse.ArgumentTypeError(f"expected postgres://... or sqlite:PATH, got {db.describe(text)!r}")


def parse_args(argv):
    p = _OneLineParser(prog="server.py", description=__doc__.split("\n")[0])
    p.add_argument("--port", type=_bounded_int(0, 65535), default=9000, help="on 127.0.0.1; 0: a free port")
    p.add_argument("--model", choices=["threaded", "async"], default="async")
    p.add_argument("--threads", type=_bounded_int(1, 1024), default=5)
    p.add_argument("--per-thread", type=_bounded_int(1, 1024), default=5, help="async: calls per thread")
    p.add_argument("--fib", type=_bounded_int(1, MAX_FIB), default=30, help="n of a Cpu call that asks for 0")
    p.add_argument("--db-sleep", dest="db_sleep_s", type=_seconds, default=0.25, metavar="DURATION", help="default 250ms")
    p.add_argument("--db", type=_db_url, default=None, help="postgres://... or sqlite:PATH (default: a temporary SQLite file)")
    p.add_argument("--db-pool", type=_bounded_int(1, 1024), default=25)
    return p.parse_args(argv)


def main():
    args = parse_args(sys.argv[1:])
    if args.model == "threaded":
        serve_threaded(args)
    else:
        asyncio.run(serve_async(args))


if __name__ == "__main__":
    main()
