// The lab's server-side counters, rpcmeter.lab.v1.Stats, as docs/design.md, "The lab
// messages" defines them, with the semantics of the Rust lab's src/lab/stats.rs: per method
// path, atomics only; Stats' own calls are not counted; Reset answers with what it zeroed.
// In Java's unnamed package because echo.proto has no package (see EchoServer).

import io.grpc.ForwardingServerCall;
import io.grpc.ForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.ToLongFunction;
import rpcmeter.lab.v1.Lab.MethodStats;
import rpcmeter.lab.v1.Lab.StatsReply;
import rpcmeter.lab.v1.Lab.StatsRequest;
import rpcmeter.lab.v1.StatsGrpc;

final class LabStats extends StatsGrpc.StatsImplBase implements ServerInterceptor {
    private static final class Counters {
        final AtomicLong received = new AtomicLong();
        final AtomicLong ok = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicLong rejected = new AtomicLong();
        // A unary call: one message in at arrival, one out when answered OK (as src/lab/mod.rs).
        final AtomicLong messagesIn = new AtomicLong();
        final AtomicLong messagesOut = new AtomicLong();
    }

    /** Filled before serving, then only read: by path ("/EchoService/echo"), and by gRPC-java's
     *  full method name, the path without its first slash, so that no call builds a string. */
    private final Map<String, Counters> methods = new LinkedHashMap<>();
    private final Map<String, Counters> byName = new HashMap<>();
    /** Unix nanoseconds; 0 = no call yet. */
    private final AtomicLong firstArrival = new AtomicLong();
    private final AtomicLong lastArrival = new AtomicLong();
    private final AtomicLong inFlight = new AtomicLong();
    private final long startedNanos = System.nanoTime();

    LabStats(String... paths) {
        for (String path : paths) {
            Counters counters = new Counters();
            methods.put(path, counters);
            byName.put(path.substring(1), counters);
        }
    }

    @Override
    public <Q, A> ServerCall.Listener<Q> interceptCall(
            ServerCall<Q, A> call, Metadata headers, ServerCallHandler<Q, A> next) {
        Counters counters = byName.get(call.getMethodDescriptor().getFullMethodName());
        if (counters == null) {
            return next.startCall(call, headers);
        }
        long now = unixNanos();
        counters.received.incrementAndGet();
        counters.messagesIn.incrementAndGet();
        firstArrival.accumulateAndGet(now, (first, n) -> first == 0 || n < first ? n : first);
        lastArrival.accumulateAndGet(now, Math::max);
        inFlight.incrementAndGet();
        // A call ends once: at its close (counted by status), or cancelled first (failed).
        AtomicBoolean ended = new AtomicBoolean();
        Runnable failed = () -> end(ended, counters.failed);
        ServerCall<Q, A> counted = new ForwardingServerCall.SimpleForwardingServerCall<Q, A>(call) {
            @Override
            public void close(Status status, Metadata trailers) {
                end(ended, switch (status.getCode()) {
                    case OK -> {
                        counters.messagesOut.incrementAndGet();
                        yield counters.ok;
                    }
                    case RESOURCE_EXHAUSTED -> counters.rejected;
                    default -> counters.failed;
                });
                super.close(status, trailers);
            }
        };
        return new ForwardingServerCallListener.SimpleForwardingServerCallListener<Q>(next.startCall(counted, headers)) {
            @Override
            public void onCancel() {
                failed.run();
                super.onCancel();
            }
        };
    }

    private void end(AtomicBoolean ended, AtomicLong outcome) {
        if (ended.compareAndSet(false, true)) {
            outcome.incrementAndGet();
            inFlight.decrementAndGet();
        }
    }

    @Override
    public void get(StatsRequest request, StreamObserver<StatsReply> reply) {
        reply.onNext(snapshot());
        reply.onCompleted();
    }

    /** Answers with the counts it zeroed: a call counted meanwhile is in this reply or the next. */
    @Override
    public void reset(StatsRequest request, StreamObserver<StatsReply> reply) {
        reply.onNext(read(n -> n.getAndSet(0)));
        reply.onCompleted();
    }

    StatsReply snapshot() {
        return read(AtomicLong::get);
    }

    /** Reads outcomes before arrivals, so ok + failed + rejected <= received in every reply. */
    private StatsReply read(ToLongFunction<AtomicLong> read) {
        StatsReply.Builder reply = StatsReply.newBuilder();
        long received = 0;
        for (Map.Entry<String, Counters> method : methods.entrySet()) {
            Counters c = method.getValue();
            long ok = read.applyAsLong(c.ok), failed = read.applyAsLong(c.failed), rejected = read.applyAsLong(c.rejected);
            MethodStats m = MethodStats.newBuilder()
                    .setMethod(method.getKey())
                    .setReceived(read.applyAsLong(c.received))
                    .setOk(ok)
                    .setFailed(failed)
                    .setRejected(rejected)
                    .setMessagesIn(read.applyAsLong(c.messagesIn))
                    .setMessagesOut(read.applyAsLong(c.messagesOut))
                    .build();
            reply.addMethods(m);
            received += m.getReceived();
        }
        double first = read.applyAsLong(firstArrival) / 1e9, last = read.applyAsLong(lastArrival) / 1e9;
        // n arrivals span n - 1 intervals (docs/experiments.md, "Throughput measured by the client").
        double serverRps = received >= 2 && last > first ? (received - 1) / (last - first) : 0;
        return reply.setReceived(received)
                .setFirstArrivalUnixS(first)
                .setLastArrivalUnixS(last)
                .setServerRps(serverRps)
                .setCpuSeconds(cpuSeconds())
                .setRssBytes(rssBytes())
                .setInFlight(Math.max(inFlight.get(), 0))
                .setUptimeS((System.nanoTime() - startedNanos) / 1e9)
                .build();
    }

    /** The final Stats in the table `rpcmeter serve` prints at exit. */
    static String summary(StatsReply s) {
        StringBuilder b = new StringBuilder(String.format("%-36s %10s %10s %10s %10s%n", "method", "received", "ok", "failed", "rejected"));
        for (MethodStats m : s.getMethodsList()) {
            b.append(String.format("%-36s %10d %10d %10d %10d%n", m.getMethod(), m.getReceived(), m.getOk(), m.getFailed(), m.getRejected()));
        }
        b.append(String.format("received %d calls; server-side throughput %.1f calls/s ((received - 1) / (last - first arrival)); "
                + "cpu %.2f s; rss %.1f MiB; uptime %.1f s; still in flight %d%n",
                s.getReceived(), s.getServerRps(), s.getCpuSeconds(), s.getRssBytes() / (double) (1 << 20), s.getUptimeS(), s.getInFlight()));
        return b.toString();
    }

    private static long unixNanos() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    /** User + system CPU of the whole process (all threads, JIT and GC included). */
    private static double cpuSeconds() {
        var os = ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean sun ? sun.getProcessCpuTime() / 1e9 : 0;
    }

    /** Resident set size now (VmRSS of /proc/self/status; 0 where that file is absent). */
    private static long rssBytes() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                }
            }
        } catch (IOException | NumberFormatException e) {
            return 0;
        }
        return 0;
    }
}
