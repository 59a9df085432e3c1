# The two execution models of test_service (docs/experiments.md, "Threaded vs async servers"),
# as grpc's own thread pool (GRPC::Pool, grpc/generic/rpc_server.rb) with two changes:
# - LabPool (threaded): a job carries its Stats call, so that the counting interceptor of
#   server.rb finds it; otherwise grpc's pool: --threads workers, one call each.
# - AsyncPool (async): the write-up's patch, "wrap each thread's main loop in Fiber scheduler
#   provided by the async gem": each worker thread runs its loop inside `Async`, each job in a
#   task of its own, at most --per-thread tasks per thread. A thread is listed as ready once
#   per free task slot, so grpc's own admission (RpcServer#available?: RESOURCE_EXHAUSTED when
#   no worker is ready) refuses a call exactly when no task can start.
require 'grpc'
require 'async'

module RubyLab
  # Runs one job with its Stats call in a fiber-local, where Counting (server.rb) finds it; a
  # call whose job ended before Counting saw it (a failed read of the request) is counted failed.
  def self.run_job(call, args, blk)
    Thread.current[:lab_call] = call # Thread#[] is fiber-local: one per task in the async model
    blk.call(*args)
  ensure
    call.finish(FAILED)
    Thread.current[:lab_call] = nil
  end

  class LabPool < GRPC::Pool
    # Pool#schedule without its check that the chosen worker's queue is empty: an async
    # thread is listed once per free task slot, so a job may wait in its queue for a moment,
    # until the thread's loop takes it. A job's args are [[ActiveCall, method, Stats call]]
    # (server.rb); a call not counted (Stats, reflection) runs on a thread of its own: it
    # neither takes a worker from the measured calls nor is refused when they are all busy.
    def schedule(*args, &blk)
      return if blk.nil?

      call = args.first.is_a?(Array) ? args.first[2] : nil
      return Thread.new { blk.call(*args) } if call.nil?

      job = proc { |*a| RubyLab.run_job(call, a, blk) }
      @stop_mutex.synchronize do
        return if @stopped
        fail 'No worker threads available' if @ready_workers.empty?

        @ready_workers.pop << [job, args]
      end
    end
  end

  class AsyncPool < LabPool
    def initialize(size, per_thread:, keep_alive:)
      super(size, keep_alive: keep_alive)
      @per_thread = per_thread
    end

    protected

    # Pool#loop_execute_jobs under the async gem's Fiber scheduler: the loop takes a job and
    # starts it in a task; a task that waits (pg, sleep, a Queue or a Mutex) lets the thread's
    # other tasks run. A CPU-bound task keeps its thread until it ends, as a fiber does.
    def loop_execute_jobs(worker_queue)
      Async do |task|
        # Pool#start listed the thread once; these are its other task slots.
        @stop_mutex.synchronize { (@per_thread - 1).times { @ready_workers << worker_queue } unless @stopped }
        loop do
          blk, args = worker_queue.pop
          break if blk.nil? || @stop_mutex.synchronize { @stopped } # Pool#stop's `throw :exit`, or a task's wake-up

          task.async do
            blk.call(*args)
          rescue StandardError, GRPC::Core::CallError => e
            GRPC.logger.warn('Error in worker task')
            GRPC.logger.warn(e)
          ensure
            @stop_mutex.synchronize do
              # Stopping: wake the loop, which may have no slot listed to be told by Pool#stop.
              @stopped ? worker_queue << [nil, []] : @ready_workers << worker_queue
            end
          end
        end
      end
      # `Async` at the top of a thread returns when every task of the thread has ended.
    end
  end
end
