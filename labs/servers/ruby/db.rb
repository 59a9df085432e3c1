# The database behind TestService/Db (docs/experiments.md, "Threaded vs async servers"), as
# labs/servers/python/db.py has it: `rows` inserts and SELECT COUNT(*) in one transaction,
# then a sleep that holds the pooled connection. Postgres (ruby-pg; the sleep is pg_sleep, on
# the database side) or SQLite (the sleep is Ruby's, connection held). One form serves both
# models: under the async gem's Fiber scheduler pg's waits, Ruby's sleep, Queue and Mutex
# yield to the other tasks of the thread, as the write-up's patched server relied on.
require 'tmpdir'
require 'fileutils'

module RubyLab
  TABLE = 'rpcmeter_rows'
  CREATE_SQLITE = "CREATE TABLE IF NOT EXISTS #{TABLE} (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)"
  CREATE_POSTGRES = "CREATE TABLE IF NOT EXISTS #{TABLE} (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL)"
  CONNECT_TIMEOUT_S = 10 # how long Postgres may take to connect at start-up

  # The database could not be opened: one line for the user.
  class DbError < StandardError; end

  # The --db value without its password.
  def self.describe_db(url)
    return 'a temporary SQLite file' if url.nil?

    url.sub(%r{\A(\w+://[^:/@]*):[^@]*@}, '\1:***@')
  end

  def self.first_line(err)
    text = err.message.to_s.strip
    text.empty? ? err.class.name : text.lines.first.strip
  end

  class Db
    def initialize(url, size, sleep_s)
      @sleep_s = sleep_s
      @postgres = !url.nil? && !url.start_with?('sqlite:')
      @free = Queue.new # the pool: a call takes a connection and holds it to its end
      @postgres ? open_postgres(url, size) : open_sqlite(url, size)
    end

    def insert_count_sleep(rows)
      conn = @free.pop
      begin
        @postgres ? postgres_call(conn, rows) : sqlite_call(conn, rows)
      ensure
        @free << conn
      end
    end

    def close
      @all.each(&:close)
      FileUtils.rm_rf(@tmp) if @tmp
    end

    private

    def open_postgres(url, size)
      begin
        require 'pg'
      rescue LoadError
        raise DbError, 'Postgres needs ruby-pg: apt-get install ruby-pg'
      end
      begin
        @all = Array.new(size) { PG.connect(url, connect_timeout: CONNECT_TIMEOUT_S) }
        @all.each { |c| c.set_notice_processor { |_| } } # CREATE ... IF NOT EXISTS notices
        @all.first.exec(CREATE_POSTGRES)
      rescue PG::Error => e
        (@all || []).each(&:close)
        raise DbError, "cannot connect to #{RubyLab.describe_db(url)}: #{RubyLab.first_line(e)}"
      end
      @all.each { |c| @free << c }
    end

    def postgres_call(conn, rows)
      count = nil
      conn.transaction do
        rows.times { conn.exec_params("INSERT INTO #{TABLE} (payload) VALUES ($1)", ['row']) }
        count = conn.exec("SELECT COUNT(*) FROM #{TABLE}").getvalue(0, 0).to_i
      end
      conn.exec_params('SELECT pg_sleep($1)', [@sleep_s])
      count
    rescue PG::Error
      conn.reset if conn.status != PG::CONNECTION_OK # a broken connection is renewed for the next call
      raise
    end

    def open_sqlite(url, size)
      require 'sqlite3'
      if url.nil?
        @tmp = Dir.mktmpdir('rpcmeter-lab-')
        path = File.join(@tmp, 'lab.sqlite3')
      else
        path = url.delete_prefix('sqlite:')
      end
      begin
        @all = Array.new(size) do
          c = SQLite3::Database.new(path)
          c.busy_timeout = 30_000
          c
        end
        @all.first.execute('PRAGMA journal_mode=WAL') # readers never wait for the writer
        @all.first.execute(CREATE_SQLITE)
      rescue SQLite3::Exception => e
        raise DbError, "cannot open SQLite file #{path}: #{RubyLab.first_line(e)}"
      end
      # sqlite3's busy wait holds the GVL: a writer waiting on another thread's transaction
      # would keep that thread from ever committing. SQLite has one writer anyway, so writers
      # take turns on a Mutex instead (which yields to the scheduler in the async model).
      @writer = Mutex.new
      @all.each { |c| @free << c }
    end

    def sqlite_call(conn, rows)
      count = nil
      @writer.synchronize do
        conn.transaction(:immediate) do # returns true, not the block's value
          rows.times { conn.execute("INSERT INTO #{TABLE} (payload) VALUES (?)", ['row']) }
          count = conn.get_first_value("SELECT COUNT(*) FROM #{TABLE}")
        end
      end
      sleep(@sleep_s) # holding the connection, as pg_sleep would
      count
    end
  end
end
