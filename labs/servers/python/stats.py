"""The lab's server-side counters, rpcmeter.lab.v1.Stats, as docs/design.md, "The lab
messages" defines them, with the semantics of the Rust lab's src/lab/stats.rs; and the
admission control of both models (at most `capacity` calls run, others are answered
RESOURCE_EXHAUSTED at once), which counts every call it sees."""

import os
import resource
import threading
import time

import grpc
from rpcmeter.lab.v1 import lab_pb2

OK, FAILED, REJECTED = "ok", "failed", "rejected"
BUSY = "server busy: every worker is running a call"


class Stats:
    """Per method path: received, ok, failed, rejected; Stats' own calls are not counted."""

    def __init__(self, paths):
        # Python has no atomics: one lock, held for a few additions per call.
        self._lock = threading.Lock()
        self._paths = list(paths)
        self._started = time.monotonic()
        self.in_flight = 0
        self._zero()

    def _zero(self):
        # A unary call: one message in at arrival, one out when answered OK (as src/lab/mod.rs).
        self._counts = {p: {"received": 0, OK: 0, FAILED: 0, REJECTED: 0, "messages_in": 0, "messages_out": 0} for p in self._paths}
        self._first_ns = 0  # unix nanoseconds; 0 = no call yet
        self._last_ns = 0

    def counts(self, path):
        return path in self._counts

    def arrive(self, path):
        """Counts an arrival; the returned Call counts the outcome, once."""
        now = time.time_ns()
        with self._lock:
            self._counts[path]["received"] += 1
            self._counts[path]["messages_in"] += 1
            if self._first_ns == 0 or now < self._first_ns:
                self._first_ns = now
            self._last_ns = max(self._last_ns, now)
            self.in_flight += 1
        return Call(self, path)

    def _end(self, path, outcome):
        with self._lock:
            self._counts[path][outcome] += 1
            if outcome == OK:
                self._counts[path]["messages_out"] += 1
            self.in_flight -= 1

    def snapshot(self):
        with self._lock:
            return self._reply()

    def take(self):
        """Zeroes the counters and arrival times and answers with what they held; in_flight is
        a gauge and stays, and calls in flight across a reset are counted when they end."""
        with self._lock:
            reply = self._reply()
            self._zero()
            return reply

    def _reply(self):
        methods = [lab_pb2.MethodStats(method=p, **c) for p, c in self._counts.items()]
        received = sum(m.received for m in methods)
        first, last = self._first_ns / 1e9, self._last_ns / 1e9
        # n arrivals span n - 1 intervals (docs/experiments.md, "Throughput measured by the client").
        server_rps = (received - 1) / (last - first) if received >= 2 and last > first else 0.0
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return lab_pb2.StatsReply(
            methods=methods,
            received=received,
            first_arrival_unix_s=first,
            last_arrival_unix_s=last,
            server_rps=server_rps,
            cpu_seconds=usage.ru_utime + usage.ru_stime,
            rss_bytes=rss_bytes(),
            in_flight=max(self.in_flight, 0),
            uptime_s=time.monotonic() - self._started,
        )


class Call:
    """One counted call between arrival and answer; the first outcome counts."""

    def __init__(self, stats, path):
        self._stats, self._path, self._ended = stats, path, False

    def finish(self, outcome):
        if not self._ended:
            self._ended = True
            self._stats._end(self._path, outcome)


class Admission:
    """At most `capacity` calls run at once; the rest are refused, never queued."""

    def __init__(self, capacity):
        self._lock = threading.Lock()
        self._free = capacity

    def try_enter(self):
        with self._lock:
            if self._free == 0:
                return False
            self._free -= 1
            return True

    def leave(self):
        with self._lock:
            self._free += 1


def rss_bytes():
    """Resident set size now, from /proc/self/statm (0 where it is absent)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def summary(s):
    """The final Stats in the table `rpcmeter serve` prints at exit."""
    lines = [f"{'method':<36} {'received':>10} {'ok':>10} {'failed':>10} {'rejected':>10}"]
    lines += [f"{m.method:<36} {m.received:>10} {m.ok:>10} {m.failed:>10} {m.rejected:>10}" for m in s.methods]
    lines.append(
        f"received {s.received} calls; server-side throughput {s.server_rps:.1f} calls/s "
        f"((received - 1) / (last - first arrival)); cpu {s.cpu_seconds:.2f} s; "
        f"rss {s.rss_bytes / (1 << 20):.1f} MiB; uptime {s.uptime_s:.1f} s; still in flight {s.in_flight}"
    )
    return "\n".join(lines) + "\n"


def _wrap(handler, behavior):
    return grpc.unary_unary_rpc_method_handler(
        behavior,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


class ThreadedInterceptor(grpc.ServerInterceptor):
    """grpc calls this on its polling thread before a call goes to the thread pool, so a call
    beyond capacity is refused there at once. (grpc's own maximum_concurrent_rpcs refuses
    before any interceptor sees the outcome, so the Stats could not count its refusals.)"""

    def __init__(self, stats, admission):
        self._stats, self._admission = stats, admission

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or not self._stats.counts(details.method):
            return handler
        call = self._stats.arrive(details.method)
        if not self._admission.try_enter():
            call.finish(REJECTED)

            def refuse(request, context):
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, BUSY)

            return _wrap(handler, refuse)

        def counted(request, context):
            try:
                reply = handler.unary_unary(request, context)
            except BaseException:
                call.finish(FAILED)
                raise
            finally:
                self._admission.leave()
            # A client that went away never gets the reply: failed, as the Rust lab counts it.
            call.finish(OK if context.is_active() else FAILED)
            return reply

        return _wrap(handler, counted)


class AsyncInterceptor(grpc.aio.ServerInterceptor):
    """The same for grpc.aio: runs on the event loop as the call arrives."""

    def __init__(self, stats, admission):
        self._stats, self._admission = stats, admission

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None or not self._stats.counts(details.method):
            return handler
        call = self._stats.arrive(details.method)
        if not self._admission.try_enter():
            call.finish(REJECTED)

            async def refuse(request, context):
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, BUSY)

            return _wrap(handler, refuse)

        async def counted(request, context):
            try:
                reply = await handler.unary_unary(request, context)
            except BaseException:  # a cancelled call ends here too (CancelledError)
                call.finish(FAILED)
                raise
            finally:
                self._admission.leave()
            call.finish(OK)
            return reply

        return _wrap(handler, counted)
