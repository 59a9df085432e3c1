//! test_service's two APIs (docs/experiments.md, "Threaded vs async servers"): one CPU-bound,
//! one bound by the database.
use super::db::TableFull;
use super::proto::lab::{test_service_server::TestService, CpuReply, CpuRequest, DbReply, DbRequest};
use super::stats::Method;
use super::Lab;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The largest n a Cpu call (or `--fib`) may ask for. Naive fib(n) takes time exponential in
/// n (x1.6 per step): fib(45) runs about 3 s in a release build, fib(60) would run for hours
/// and, in the async model, hold a runtime thread all along. (fib(93) would not fit in a u64.)
pub const MAX_FIB: u32 = 45;
/// Rows per Db call when the request says 0, as in test_service.
const DEFAULT_ROWS: u32 = 10;
/// A bound on one call's inserts, so that one request cannot fill the disk.
const MAX_ROWS: u32 = 10_000;

/// Naive on purpose: test_service's CPU load is exponential recursion, not a loop.
pub fn fib(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

#[tonic::async_trait]
impl TestService for Arc<Lab> {
    async fn cpu(&self, request: Request<CpuRequest>) -> Result<Response<CpuReply>, Status> {
        let n = match request.into_inner().n {
            0 => self.config.fib,
            n => n,
        };
        // Computed right where the call runs: on a runtime thread in the async model,
        // which it monopolises exactly like a Ruby fiber, or on a worker thread.
        self.call(Method::Cpu, async move {
            if n > MAX_FIB {
                return Err(Status::invalid_argument(format!(
                    "n = {n} is above {MAX_FIB}: naive fib(n) would run too long"
                )));
            }
            Ok(CpuReply { result: fib(n) })
        })
        .await
    }

    async fn db(&self, request: Request<DbRequest>) -> Result<Response<DbReply>, Status> {
        let rows = match request.into_inner().rows {
            0 => DEFAULT_ROWS,
            n => n,
        };
        let lab = self.clone();
        self.call(Method::Db, async move {
            if rows > MAX_ROWS {
                return Err(Status::invalid_argument(format!("rows = {rows} is above {MAX_ROWS}")));
            }
            match lab.db.insert_count_sleep(rows, lab.config.db_sleep).await {
                Ok(count) => Ok(DbReply { count }),
                Err(err) => match err.downcast_ref::<TableFull>() {
                    Some(full) => Err(Status::resource_exhausted(full.to_string())),
                    None => Err(Status::internal(format!("database: {err:#}"))),
                },
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fib_is_fibonacci() {
        let got: Vec<u64> = (0..10).map(super::fib).collect();
        assert_eq!(got, [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]);
        assert_eq!(super::fib(30), 832_040);
    }
}
