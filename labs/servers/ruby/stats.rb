# The lab's server-side counters, rpcmeter.lab.v1.Stats, as docs/design.md, "The lab
# messages" defines them, with the semantics of the Rust lab's src/lab/stats.rs (and of
# labs/servers/python/stats.py): per method path received, ok, failed, rejected; Stats' own
# calls are not counted.
require 'etc'

module RubyLab
  OK = :ok
  FAILED = :failed
  REJECTED = :rejected

  class Stats
    def initialize(paths)
      # A Mutex, not atomics: held for a few additions per call (fiber-aware since Ruby 3.0).
      @lock = Mutex.new
      @paths = paths
      @started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      @in_flight = 0
      zero
    end

    def counts?(path)
      @counts.key?(path)
    end

    # Counts an arrival; the returned Call counts the outcome, once.
    def arrive(path)
      now = Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)
      @lock.synchronize do
        c = @counts[path]
        c[:received] += 1
        c[:messages_in] += 1
        @first_ns = now if @first_ns.zero? || now < @first_ns
        @last_ns = now if now > @last_ns
        @in_flight += 1
      end
      Call.new(self, path)
    end

    def finish(path, outcome)
      @lock.synchronize do
        @counts[path][outcome] += 1
        @counts[path][:messages_out] += 1 if outcome == OK
        @in_flight -= 1
      end
    end

    def snapshot
      @lock.synchronize { reply }
    end

    # Zeroes the counters and arrival times and answers with what they held; in_flight is a
    # gauge and stays, and calls in flight across a reset are counted when they end.
    def take
      @lock.synchronize do
        r = reply
        zero
        r
      end
    end

    private

    def zero
      # A unary call: one message in at arrival, one out when answered OK (as src/lab/mod.rs).
      @counts = @paths.to_h do |p|
        [p, { received: 0, ok: 0, failed: 0, rejected: 0, messages_in: 0, messages_out: 0 }]
      end
      @first_ns = 0 # unix nanoseconds; 0 = no call yet
      @last_ns = 0
    end

    def reply
      methods = @counts.map { |p, c| Rpcmeter::Lab::V1::MethodStats.new(method: p, **c) }
      received = methods.sum(&:received)
      first = @first_ns / 1e9
      last = @last_ns / 1e9
      # n arrivals span n - 1 intervals (docs/experiments.md, "Throughput measured by the client").
      server_rps = received >= 2 && last > first ? (received - 1) / (last - first) : 0.0
      t = Process.times
      Rpcmeter::Lab::V1::StatsReply.new(
        methods: methods, received: received, first_arrival_unix_s: first, last_arrival_unix_s: last,
        server_rps: server_rps, cpu_seconds: t.utime + t.stime, rss_bytes: Stats.rss_bytes,
        in_flight: [@in_flight, 0].max,
        uptime_s: Process.clock_gettime(Process::CLOCK_MONOTONIC) - @started
      )
    end

    # Resident set size now, from /proc/self/statm (0 where it is absent).
    def self.rss_bytes
      File.read('/proc/self/statm').split[1].to_i * Etc.sysconf(Etc::SC_PAGESIZE)
    rescue StandardError
      0
    end
  end

  # One counted call between arrival and answer; the first outcome counts.
  class Call
    def initialize(stats, path)
      @stats = stats
      @path = path
      @ended = false
    end

    def finish(outcome)
      return if @ended

      @ended = true
      @stats.finish(@path, outcome)
    end
  end

  # The final Stats in the table `rpcmeter serve` prints at exit.
  def self.summary(s)
    lines = [format('%-36s %10s %10s %10s %10s', 'method', 'received', 'ok', 'failed', 'rejected')]
    s['methods'].each do |m| # not s.methods: Object#methods
      lines << format('%-36s %10d %10d %10d %10d', m['method'], m.received, m.ok, m.failed, m.rejected)
    end
    lines << format('received %d calls; server-side throughput %.1f calls/s ((received - 1) / (last - first arrival)); ' \
                    'cpu %.2f s; rss %.1f MiB; uptime %.1f s; still in flight %d',
                    s.received, s.server_rps, s.cpu_seconds, s.rss_bytes / 1048576.0, s.uptime_s, s.in_flight)
    lines.join("\n") + "\n"
  end
end
