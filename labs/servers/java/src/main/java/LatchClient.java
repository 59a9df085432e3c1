// The latch client of docs/experiments.md, "Echo warm-up: the latch benchmark", as the
// article wrote it: one channel on a work-stealing pool, N asynchronous echo("Hello") calls
// through a future stub, a CountDownLatch that waits for all of them; R rounds in ONE JVM,
// a pause between rounds. Unlike the article, it counts failed calls.
//   java -cp labs.jar LatchClient --target HOST:PORT [--calls 10000] [--rounds 10] [--pause 1s]
// Prints per round: `round K: Took: X ms  RPS: Y  failed: F` (RPS = calls / Took, answers of
// any status, as the article counted them; F says how many of them failed).
// In Java's unnamed package for the reason EchoServer gives.

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

public final class LatchClient {
    /** A round whose answers have not all come by then ends the run (exit 1): no hang. */
    private static final Duration ROUND_LIMIT = Duration.ofMinutes(2);
    private static final String USAGE =
            "usage: LatchClient --target HOST:PORT [--calls 10000] [--rounds 10] [--pause 1s]";

    public static void main(String[] args) throws InterruptedException {
        String target = null;
        long calls = 10_000, rounds = 10;
        Duration pause = Duration.ofSeconds(1);
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (i + 1 >= args.length) {
                EchoServer.fail("LatchClient: " + flag + " needs a value; " + USAGE);
            }
            String value = args[++i];
            switch (flag) {
                case "--target" -> target = value;
                case "--calls" -> calls = positive(flag, value);
                case "--rounds" -> rounds = positive(flag, value);
                case "--pause" -> pause = duration(flag, value);
                default -> EchoServer.fail("LatchClient: unknown flag " + flag + "; " + USAGE);
            }
        }
        if (target == null || !target.matches("[^:\\s]+:\\d{1,5}")) {
            EchoServer.fail("LatchClient: --target HOST:PORT is required, got " + target + "; " + USAGE);
        }

        ExecutorService executor = Executors.newWorkStealingPool();
        ManagedChannel channel = NettyChannelBuilder.forTarget(target).usePlaintext().executor(executor).build();
        EchoServiceGrpc.EchoServiceFutureStub client = EchoServiceGrpc.newFutureStub(channel);
        Echo.Message request = Echo.Message.newBuilder().setContent("Hello").build();
        long failedInAll = 0;
        for (long round = 1; round <= rounds; round++) {
            CountDownLatch latch = new CountDownLatch(Math.toIntExact(calls));
            AtomicLong failed = new AtomicLong();
            FutureCallback<Echo.Message> answered = new FutureCallback<>() {
                @Override
                public void onSuccess(Echo.Message reply) {
                    latch.countDown();
                }

                @Override
                public void onFailure(Throwable error) {
                    failed.incrementAndGet();
                    latch.countDown();
                }
            };
            long startedAt = System.nanoTime();
            for (long i = 0; i < calls; i++) {
                Futures.addCallback(client.echo(request), answered, executor);
            }
            if (!latch.await(ROUND_LIMIT.toMillis(), TimeUnit.MILLISECONDS)) {
                System.err.printf("LatchClient: round %d: %d of %d calls unanswered after %d s%n",
                        round, latch.getCount(), calls, ROUND_LIMIT.toSeconds());
                System.exit(1);
            }
            long took = System.nanoTime() - startedAt;
            System.out.printf("round %d: Took: %.3f ms  RPS: %.1f  failed: %d%n",
                    round, took / 1e6, calls * 1e9 / took, failed.get());
            System.out.flush();
            failedInAll += failed.get();
            if (round < rounds) {
                Thread.sleep(pause.toMillis());
            }
        }
        channel.shutdownNow();
        if (failedInAll == calls * rounds) {
            System.err.println("LatchClient: every call failed (is a server listening on " + target + "?)");
            System.exit(1);
        }
        System.exit(0);
    }

    private static long positive(String flag, String value) {
        try {
            long n = Long.parseLong(value);
            if (n >= 1 && n <= Integer.MAX_VALUE) {
                return n;
            }
        } catch (NumberFormatException e) {
            // falls through to the one message below
        }
        EchoServer.fail("LatchClient: " + flag + " must be a whole number from 1 to " + Integer.MAX_VALUE + ", got " + value);
        return 0;
    }

    /** "1s", "250ms", "0": the pause between rounds, at most a day. */
    private static Duration duration(String flag, String value) {
        var m = java.util.regex.Pattern.compile("(\\d{1,9})(ms|s)?").matcher(value);
        if (m.matches()) {
            long n = Long.parseLong(m.group(1));
            Duration d = "ms".equals(m.group(2)) ? Duration.ofMillis(n) : Duration.ofSeconds(n);
            if (d.compareTo(Duration.ofDays(1)) <= 0) {
                return d;
            }
        }
        EchoServer.fail("LatchClient: " + flag + " must be a duration such as 1s or 250ms (at most a day), got " + value);
        return Duration.ZERO;
    }
}
