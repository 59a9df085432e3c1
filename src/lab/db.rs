//! The database behind `TestService/Db` (docs/experiments.md, "Threaded vs async servers"):
//! N inserts, SELECT COUNT(*), then a database-side sleep that holds the pooled connection.
//! SQLite (embedded, the default) or real Postgres, behind one type.
use crate::error::bad_input;
use rusqlite::functions::FunctionFlags;
use rusqlite::TransactionBehavior;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Which database `serve --db` uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DbSpec {
    /// A fresh SQLite file in a temporary directory, removed when the server ends, so
    /// COUNT(*) counts this server's inserts only.
    #[default]
    TempSqlite,
    /// `sqlite:PATH`: a SQLite file that is kept.
    Sqlite(PathBuf),
    /// `postgres://…` (or `postgresql://…`).
    Postgres(String),
}

impl FromStr for DbSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<DbSpec, String> {
        if let Some(path) = s.strip_prefix("sqlite:").filter(|p| !p.is_empty()) {
            Ok(DbSpec::Sqlite(path.into()))
        } else if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Ok(DbSpec::Postgres(s.to_string()))
        } else {
            Err(format!("expected sqlite:PATH or postgres://…, got {s:?}"))
        }
    }
}

impl fmt::Display for DbSpec {
    /// Never shows a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbSpec::TempSqlite => f.write_str("a temporary SQLite file"),
            DbSpec::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            DbSpec::Postgres(url) => {
                let hidden = url.split_once("://").and_then(|(scheme, rest)| {
                    let (user_info, host) = rest.rsplit_once('@')?;
                    let (user, _password) = user_info.split_once(':')?;
                    Some(format!("{scheme}://{user}:***@{host}"))
                });
                f.write_str(hidden.as_deref().unwrap_or(url))
            }
        }
    }
}

const TABLE: &str = "rpcmeter_rows";

pub struct Db {
    backend: Backend,
    /// `--db-max-rows`.
    max_rows: u64,
}

/// A call refused: its inserts would take the table past `--db-max-rows` (they were rolled back).
#[derive(Debug, thiserror::Error)]
#[error("the table is full: it holds {held} rows and this call adds {adding}, above --db-max-rows {max}")]
pub struct TableFull {
    held: u64,
    adding: u32,
    max: u64,
}

enum Backend {
    Sqlite {
        pool: Pool<rusqlite::Connection>,
        /// Declared after the pool, so the connections close before the directory goes.
        _temp_dir: Option<tempfile::TempDir>,
    },
    Postgres(Pool<tokio_postgres::Client>),
}

impl Db {
    /// Opens `pool` connections and creates the table; a database that cannot be used
    /// fails here, with one line naming it, not at the first call.
    pub async fn open(spec: &DbSpec, pool: usize, max_rows: u64) -> anyhow::Result<Db> {
        let backend = match spec {
            DbSpec::TempSqlite => open_temp_sqlite(pool),
            DbSpec::Sqlite(path) => {
                open_sqlite(path.clone(), pool).map(|pool| Backend::Sqlite { pool, _temp_dir: None })
            }
            DbSpec::Postgres(url) => open_postgres(url, pool).await.map(Backend::Postgres),
        };
        backend
            .map(|backend| Db { backend, max_rows })
            .map_err(|err| bad_input(format!("cannot use database {spec}: {err}")))
    }

    /// Inserts `rows` rows and counts the table in one transaction, then sleeps `sleep`
    /// inside the database on the same connection (after the commit: it holds the pooled
    /// connection, not the write lock). Returns the count. A count above `max_rows` rolls
    /// the inserts back and is a `TableFull` error: the work is the same, the table stays bounded.
    pub async fn insert_count_sleep(&self, rows: u32, sleep: Duration) -> anyhow::Result<u64> {
        let max = self.max_rows;
        let full = move |count: u64| TableFull { held: count.saturating_sub(rows.into()), adding: rows, max };
        match &self.backend {
            Backend::Sqlite { pool, .. } => {
                let mut conn = pool.get().await;
                // SQLite blocks: off the runtime threads (in the threaded model the worker
                // thread that awaits this is blocked all the same, as it should be).
                tokio::task::spawn_blocking(move || sqlite_call(&mut conn, rows, sleep, max, full)).await?
            }
            Backend::Postgres(pool) => {
                let mut client = pool.get().await;
                let tx = client.transaction().await?;
                // One writer at a time (the mode conflicts with itself, not with plain reads),
                // so under READ COMMITTED the COUNT sees this call's inserts and every earlier
                // call's: each call its own total, as on SQLite. The sleep is after the commit.
                tx.batch_execute(&format!("LOCK TABLE {TABLE} IN SHARE ROW EXCLUSIVE MODE")).await?;
                let insert = tx.prepare(&format!("INSERT INTO {TABLE} (payload) VALUES ($1)")).await?;
                for i in 0..rows {
                    tx.execute(&insert, &[&format!("row {i}")]).await?;
                }
                let count: i64 = tx.query_one(&format!("SELECT COUNT(*) FROM {TABLE}"), &[]).await?.get(0);
                if count as u64 > max {
                    tx.rollback().await?;
                    return Err(full(count as u64).into());
                }
                tx.commit().await?;
                client.execute("SELECT pg_sleep($1)", &[&sleep.as_secs_f64()]).await?;
                Ok(count as u64)
            }
        }
    }
}

fn open_temp_sqlite(size: usize) -> Result<Backend, String> {
    let dir = tempfile::Builder::new().prefix("rpcmeter-lab-").tempdir().map_err(|e| e.to_string())?;
    let pool = open_sqlite(dir.path().join("lab.db"), size)?;
    Ok(Backend::Sqlite { pool, _temp_dir: Some(dir) })
}

fn open_sqlite(path: PathBuf, size: usize) -> Result<Pool<rusqlite::Connection>, String> {
    let open = || -> rusqlite::Result<rusqlite::Connection> {
        let conn = rusqlite::Connection::open(&path)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        // The database-side sleep: on the connection's thread, like pg_sleep.
        conn.create_scalar_function("rpcmeter_sleep", 1, FunctionFlags::SQLITE_UTF8, |ctx| {
            let ms: i64 = ctx.get(0)?;
            std::thread::sleep(Duration::from_millis(ms.max(0) as u64));
            Ok(ms)
        })?;
        Ok(conn)
    };
    let first = open().map_err(|e| e.to_string())?;
    // WAL: readers and the sleep never wait for the writer.
    first
        .query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
        .and_then(|_| {
            first.execute_batch(&format!(
                "CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)"
            ))
        })
        .map_err(|e| e.to_string())?;
    let mut conns = vec![first];
    for _ in 1..size {
        conns.push(open().map_err(|e| e.to_string())?);
    }
    Ok(Pool::new(conns))
}

fn sqlite_call(
    conn: &mut rusqlite::Connection,
    rows: u32,
    sleep: Duration,
    max: u64,
    full: impl Fn(u64) -> TableFull,
) -> anyhow::Result<u64> {
    // IMMEDIATE takes the write lock up front: a deferred transaction that upgrades from
    // read to write can fail with SQLITE_BUSY without waiting.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    {
        let mut insert = tx.prepare_cached(&format!("INSERT INTO {TABLE} (payload) VALUES (?1)"))?;
        for i in 0..rows {
            insert.execute([format!("row {i}")])?;
        }
    }
    let count: i64 = tx.query_row(&format!("SELECT COUNT(*) FROM {TABLE}"), [], |r| r.get(0))?;
    if count as u64 > max {
        tx.rollback()?;
        return Err(full(count as u64).into());
    }
    tx.commit()?;
    conn.query_row("SELECT rpcmeter_sleep(?1)", [sleep.as_millis() as i64], |_| Ok(()))?;
    Ok(count as u64)
}

async fn open_postgres(url: &str, size: usize) -> Result<Pool<tokio_postgres::Client>, String> {
    let connect = || async {
        let (client, connection) =
            tokio::time::timeout(Duration::from_secs(10), tokio_postgres::connect(url, tokio_postgres::NoTls))
                .await
                .map_err(|_| "no answer within 10 s".to_string())?
                .map_err(|e| with_sources(&e))?;
        // The connection's I/O runs as its own task; it ends when the client is dropped.
        tokio::spawn(connection);
        Ok::<_, String>(client)
    };
    let first = connect().await?;
    first
        .batch_execute(&format!("CREATE TABLE IF NOT EXISTS {TABLE} (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL)"))
        .await
        .map_err(|e| with_sources(&e))?;
    let rest = futures::future::try_join_all((1..size).map(|_| connect())).await?;
    Ok(Pool::new(std::iter::once(first).chain(rest).collect()))
}

/// An error and its sources on one line: tokio-postgres says only "error connecting to
/// server", its source says why ("Connection refused").
fn with_sources(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !line.contains(&cause_text) {
            line = format!("{line}: {cause_text}");
        }
        source = cause.source();
    }
    line.replace('\n', " ")
}

/// A fixed set of connections, each used by one call at a time; a call waits for a free one.
pub struct Pool<C> {
    idle: Arc<Mutex<Vec<C>>>,
    free: Arc<Semaphore>,
}

impl<C> Pool<C> {
    fn new(conns: Vec<C>) -> Pool<C> {
        Pool { free: Arc::new(Semaphore::new(conns.len())), idle: Arc::new(Mutex::new(conns)) }
    }

    async fn get(&self) -> Pooled<C> {
        let permit = self.free.clone().acquire_owned().await.expect("the pool semaphore is never closed");
        let conn = self.idle.lock().expect("pool lock").pop().expect("a permit guarantees an idle connection");
        Pooled { conn: Some(conn), idle: self.idle.clone(), _permit: permit }
    }
}

/// A connection taken from the pool; it goes back when dropped.
pub struct Pooled<C> {
    conn: Option<C>,
    idle: Arc<Mutex<Vec<C>>>,
    /// Released after `drop` has put the connection back.
    _permit: OwnedSemaphorePermit,
}

impl<C> std::ops::Deref for Pooled<C> {
    type Target = C;
    fn deref(&self) -> &C {
        self.conn.as_ref().expect("present until dropped")
    }
}

impl<C> std::ops::DerefMut for Pooled<C> {
    fn deref_mut(&mut self) -> &mut C {
        self.conn.as_mut().expect("present until dropped")
    }
}

impl<C> Drop for Pooled<C> {
    fn drop(&mut self) {
        if let (Some(conn), Ok(mut idle)) = (self.conn.take(), self.idle.lock()) {
            idle.push(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_spec_parses_and_hides_passwords() {
        assert_eq!("sqlite:/tmp/x.db".parse(), Ok(DbSpec::Sqlite("/tmp/x.db".into())));
        assert!("sqlite:".parse::<DbSpec>().is_err());
        assert!("mysql://x".parse::<DbSpec>().is_err());
        let pg: DbSpec = "postgres://me:secret@127.0.0.1:5432/db".parse().unwrap();
        assert_eq!(pg.to_string(), "postgres://me:***@127.0.0.1:5432/db");
    }
}
