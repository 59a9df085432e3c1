# The Ruby reference server of `rpcmeter lab threaded-vs-async` (docs/experiments.md,
# "Threaded vs async servers: test_service"): the write-up's own runtime, grpc's RpcServer in
# two execution models (async_pool.rb):
#   --model threaded  grpc's thread pool of --threads workers: at most --threads calls run
#   --model async     (or --async) each worker's loop under the async gem's Fiber scheduler,
#                     at most --per-thread tasks per thread: --threads x --per-thread calls
# Calls beyond that are answered RESOURCE_EXHAUSTED at once, by grpc's own check
# (RpcServer#available?). Serves EchoService, rpcmeter.lab.v1.TestService (Cpu: naive fib(n);
# Db: inserts, COUNT(*), a sleep holding the connection), rpcmeter.lab.v1.Stats and server
# reflection.
#   ruby server.rb [--port 9000] [--model threaded|async] [--async] [--threads 5] [--per-thread 5]
#                  [--fib 30] [--db-sleep 250ms] [--db postgres://...|sqlite:PATH] [--db-pool 25]
$LOAD_PATH.unshift(File.join(__dir__, 'gen'), __dir__)
require 'optparse'
require 'grpc'
require 'echo_services_pb'
require 'rpcmeter/lab/v1/lab_services_pb'
require 'stats'
require 'db'
require 'async_pool'
require 'reflection'

module RubyLab
  # Naive fib(n) grows x1.6 per step; the Rust lab's bound (src/lab/test_service.rs, MAX_FIB).
  MAX_FIB = 45
  DEFAULT_ROWS = 10 # a Db request with rows = 0, as in test_service
  MAX_ROWS = 10_000 # one request cannot fill the disk
  DRAIN_S = 5 # how long calls in flight may finish after SIGINT/SIGTERM
  COUNTED = ['/EchoService/echo', '/rpcmeter.lab.v1.TestService/Cpu', '/rpcmeter.lab.v1.TestService/Db'].freeze
  V1 = Rpcmeter::Lab::V1

  # Naive on purpose: test_service's CPU load is exponential recursion, not a loop.
  def self.fib(n)
    n < 2 ? n : fib(n - 1) + fib(n - 2)
  end

  class Echo < EchoService::Service
    def echo(req, _call)
      req
    end
  end

  class TestService < V1::TestService::Service
    def initialize(fib, db)
      super()
      @fib = fib
      @db = db
    end

    def cpu(req, _call)
      n = req.n.zero? ? @fib : req.n
      raise GRPC::InvalidArgument, "n = #{n} is above #{MAX_FIB}: naive fib(n) would run too long" if n > MAX_FIB

      V1::CpuReply.new(result: RubyLab.fib(n))
    end

    def db(req, _call)
      rows = req.rows.zero? ? DEFAULT_ROWS : req.rows
      raise GRPC::InvalidArgument, "rows = #{rows} is above #{MAX_ROWS}" if rows > MAX_ROWS

      begin
        V1::DbReply.new(count: @db.insert_count_sleep(rows))
      rescue StandardError => e # the database's own error, to the client
        raise GRPC::Internal, "database: #{RubyLab.first_line(e)}"
      end
    end
  end

  class StatsService < V1::Stats::Service
    def initialize(stats)
      super()
      @stats = stats
    end

    def get(_req, _call)
      @stats.snapshot
    end

    def reset(_req, _call)
      @stats.take
    end
  end

  # Counts the outcome of an admitted call (its arrival was counted as it came in): OK once
  # the reply is sent, failed when the handler or the send raised.
  class Counting < GRPC::ServerInterceptor
    def request_response(request: nil, call: nil, method: nil)
      yield
      Thread.current[:lab_call]&.finish(OK)
    rescue StandardError, GRPC::Core::CallError
      Thread.current[:lab_call]&.finish(FAILED)
      raise
    end
  end

  # grpc's RpcServer, counting every call of COUNTED as it arrives (admitted or refused) and
  # running the others (Stats, reflection) on a thread of their own: they neither take a
  # worker from the measured calls nor are refused when every worker is busy.
  class Server < GRPC::RpcServer
    def initialize(stats, pool, **opts)
      super(**opts)
      @stats = stats
      @pool = pool
    end

    def available?(an_rpc)
      @stats.counts?(an_rpc.method) ? super : an_rpc
    end

    def new_active_server_call(an_rpc)
      return super if an_rpc.nil? || an_rpc.call.nil? || !@stats.counts?(an_rpc.method)

      call = @stats.arrive(an_rpc.method)
      admitted = super
      if admitted.nil?
        call.finish(REJECTED) # available? answered RESOURCE_EXHAUSTED
        return nil
      end
      admitted + [call] # the job's args: RubyLab.run_job hands the call to Counting
    end
  end

  def self.fail_usage(message)
    warn "server.rb: #{message} (--help lists the flags)"
    exit 2
  end

  def self.bounded(low, high)
    lambda do |text|
      n = Integer(text, 10, exception: false)
      fail_usage("expected a whole number from #{low} to #{high}, got #{text.inspect}") unless n && n.between?(low, high)
      n
    end
  end

  # '250ms', '1s', '1.5s', '0': at most an hour.
  def self.seconds(text)
    m = /\A(\d{1,7}(?:\.\d+)?)(ms|s)?\z/.match(text)
    s = m && m[1].to_f / (m[2] == 'ms' ? 1000 : 1)
    fail_usage("expected a duration such as 250ms or 1s (at most 1 hour), got #{text.inspect}") unless s && s <= 3600
    s
  end

  def self.parse_args(argv)
    o = { port: 9000, model: 'threaded', threads: 5, per_thread: 5, fib: 30, db_sleep_s: 0.25, db: nil, db_pool: 25 }
    parser = OptionParser.new do |p|
      p.banner = 'usage: ruby server.rb [flags]  (the Ruby server of rpcmeter lab threaded-vs-async)'
      p.on('--port N', 'on 127.0.0.1; 0: a free port (default 9000)') { |v| o[:port] = bounded(0, 65_535).call(v) }
      p.on('--model MODEL', %w[threaded async], 'threaded (default, as test_service.rb) or async') { |v| o[:model] = v }
      p.on('--async', 'the same as --model async (test_service.rb --async)') { o[:model] = 'async' }
      p.on('--threads N', 'worker threads (default 5)') { |v| o[:threads] = bounded(1, 1024).call(v) }
      p.on('--per-thread N', 'async: tasks per thread (default 5)') { |v| o[:per_thread] = bounded(1, 1024).call(v) }
      p.on('--fib N', "n of a Cpu call that asks for 0 (default 30, at most #{MAX_FIB})") do |v|
        o[:fib] = bounded(1, MAX_FIB).call(v)
      end
      p.on('--db-sleep DURATION', 'the sleep of a Db call (default 250ms)') { |v| o[:db_sleep_s] = seconds(v) }
      p.on('--db URL', 'postgres://... or sqlite:PATH (default: a temporary SQLite file)') do |v|
        unless v.start_with?('postgres://', 'postgresql://') || (v.start_with?('sqlite:') && v.size > 7)
          fail_usage("--db: expected postgres://... or sqlite:PATH, got #{describe_db(v).inspect}")
        end
        o[:db] = v
      end
      p.on('--db-pool N', 'database connections (default 25)') { |v| o[:db_pool] = bounded(1, 1024).call(v) }
    end
    begin
      rest = parser.parse(argv)
    rescue OptionParser::ParseError => e
      fail_usage(e.message)
    end
    fail_usage("unexpected argument #{rest.first.inspect}") unless rest.empty?
    o
  end

  def self.main(argv)
    o = parse_args(argv)
    begin
      db = Db.new(o[:db], o[:db_pool], o[:db_sleep_s])
    rescue DbError => e
      warn "server.rb: #{e.message}"
      exit 1
    end
    stats = Stats.new(COUNTED)
    pool = if o[:model] == 'async'
             AsyncPool.new(o[:threads], per_thread: o[:per_thread], keep_alive: DRAIN_S)
           else
             LabPool.new(o[:threads], keep_alive: DRAIN_S)
           end
    server = Server.new(stats, pool, pool_size: o[:threads], poll_period: DRAIN_S, pool_keep_alive: DRAIN_S,
                                     interceptors: [Counting.new])
    begin
      port = server.add_http2_port("127.0.0.1:#{o[:port]}", :this_port_is_insecure)
    rescue RuntimeError => e
      port = 0
      reason = e.message
    end
    if port.to_i.zero?
      warn "server.rb: cannot listen on 127.0.0.1:#{o[:port]}: #{reason || 'the port is taken or not allowed'}"
      exit 1
    end
    names = [Echo, TestService, StatsService].map(&:service_name)
    reflection = File.join(__dir__, 'gen', 'served.protoset')
    names += [Reflection.service_name, ReflectionV1.service_name]
    server.handle(Echo.new)
    server.handle(TestService.new(o[:fib], db))
    server.handle(StatsService.new(stats))
    server.handle(Reflection.new(reflection, names))
    server.handle(ReflectionV1.new(reflection, names))
    runner = Thread.new { server.run_till_terminated_or_interrupted(%w[INT TERM]) }
    server.wait_till_running(30)
    puts "listening on 127.0.0.1:#{port}"
    model = o[:model] == 'async' ? "async, #{o[:threads]} x #{o[:per_thread]} tasks" : "threaded, #{o[:threads]} threads"
    puts "model #{model}; fib #{o[:fib]}; db #{describe_db(o[:db])} (pool #{o[:db_pool]}, sleep #{o[:db_sleep_s]} s)"
    $stdout.flush
    runner.join
    db.close
    print summary(stats.snapshot)
    $stdout.flush
  end
end

RubyLab.main(ARGV) if $PROGRAM_NAME == __FILE__
