// The grpc-java reference server of `rpcmeter lab warmup` (docs/experiments.md, "Echo
// warm-up: the latch benchmark"): the article's Java EchoService, with its builder's default
// executor, plus the lab's Stats and server reflection.
//   java -jar labs.jar [--port 9000]      binds 127.0.0.1; --port 0 takes a free port
// echo.proto has no package (as the article has it), so its generated classes live in Java's
// unnamed package, and only classes there can use them: hence no package here either.

import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.ProtoReflectionServiceV1;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import sun.misc.Signal;

public final class EchoServer {
    /** How long calls in flight may finish after SIGINT/SIGTERM. */
    private static final long DRAIN_SECONDS = 5;

    /** The article's EchoService: answers with the request. */
    static final class EchoService extends EchoServiceGrpc.EchoServiceImplBase {
        @Override
        public void echo(Echo.Message request, StreamObserver<Echo.Message> responseObserver) {
            responseObserver.onNext(request);
            responseObserver.onCompleted();
        }
    }

    public static void main(String[] args) throws InterruptedException {
        int port = 9000;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--port") && i + 1 < args.length) {
                port = parsePort(args[++i]);
            } else {
                fail("EchoServer: unexpected argument " + args[i] + " (usage: [--port N], 0 = a free port)");
            }
        }
        // Signals are handled before the first line: one sent as soon as it is read drains, and
        // the process exits 0 (a JVM shutdown hook would exit 130/143).
        CountDownLatch stop = new CountDownLatch(1);
        Signal.handle(new Signal("INT"), s -> stop.countDown());
        Signal.handle(new Signal("TERM"), s -> stop.countDown());

        LabStats stats = new LabStats("/EchoService/echo");
        Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
                .addService(ServerInterceptors.intercept(new EchoService(), stats))
                .addService(stats)
                .addService(ProtoReflectionServiceV1.newInstance())
                .build();
        try {
            server.start();
        } catch (IOException e) {
            System.err.println("EchoServer: cannot listen on 127.0.0.1:" + port + ": " + e.getMessage());
            System.exit(1);
        }
        System.out.println("listening on 127.0.0.1:" + server.getPort());
        System.out.flush();

        stop.await();
        server.shutdown();
        if (!server.awaitTermination(DRAIN_SECONDS, TimeUnit.SECONDS)) {
            server.shutdownNow();
        }
        System.out.print(LabStats.summary(stats.snapshot()));
        System.out.flush();
        System.exit(0);
    }

    private static int parsePort(String text) {
        try {
            int port = Integer.parseInt(text);
            if (port >= 0 && port <= 65535) {
                return port;
            }
        } catch (NumberFormatException e) {
            // falls through to the one message below
        }
        fail("EchoServer: --port must be 0..65535, got " + text);
        return 0;
    }

    static void fail(String line) {
        System.err.println(line);
        System.exit(2);
    }
}
