//! `rpcmeter lab threaded-vs-async --runtimes ruby`: the write-up's own runtime
//! (labs/servers/ruby), built from Debian's packages (`.ci/run` installs them; skipped, and
//! said so, where Ruby's grpc is missing). Ground truths: the server's admission limits
//! (5 threads; async 5 threads x 5 tasks) and its own Stats.
use assert_cmd::Command;
#[path = "common/md_table.rs"]
mod md_table;
use md_table::rows;

#[test]
fn ruby_threaded_and_async_rows_count_rejections_on_both_sides() {
    let has_grpc = std::process::Command::new("ruby").args(["-e", "require 'grpc'; require 'async'"]).output();
    if !has_grpc.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no Ruby with grpc and async here (Debian: ruby-grpc ruby-async; .ci/run installs them)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = Command::cargo_bin("rpcmeter")
        .unwrap()
        .args(["lab", "threaded-vs-async", "--quick", "--strict", "--runtimes", "ruby", "--out"])
        .arg(dir.path())
        .timeout(std::time::Duration::from_secs(240))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let md = std::fs::read_to_string(dir.path().join("threaded-vs-async.md")).unwrap();
    // Columns: server, Tasks, Loop, Duration, Successful, RetryMax, Retries, Retries as the
    // write-up counted, ResExh, server rejected, Other, Throughput, Avg/Max/Min.
    let rmeter = |model: &str| rows(&md, model).into_iter().filter(|r| r.len() == 13).collect::<Vec<_>>();
    let (threaded, asynchronous) = (rmeter("ruby threaded"), rmeter("ruby async"));
    assert_eq!(threaded.len(), 4, "Cpu and Db at 5 and 40 tasks: {md}");
    assert_eq!(asynchronous.len(), 4, "{md}");
    for row in threaded.iter().chain(&asynchronous) {
        assert_eq!(row[8], row[9], "client ResExh and server rejections differ: {row:?}");
        assert_eq!(row[10], "0", "statuses other than RESOURCE_EXHAUSTED: {row:?}");
        assert!(row[4].parse::<u64>().unwrap() > 0, "no call succeeded: {row:?}");
    }
    // Db (the last two rows of each model) holds its task 250 ms: 40 tasks overrun 5 threads,
    // and the async model's 25 tasks turn fewer away.
    let rejected = |r: &Vec<&str>| r[8].parse::<u64>().unwrap();
    assert!(rejected(&threaded[3]) > 0, "40 tasks on 5 threads: {:?}", threaded[3]);
    assert!(rejected(&asynchronous[3]) < rejected(&threaded[3]), "{asynchronous:?} vs {threaded:?}");
    let memory = rows(&md, "ruby async").into_iter().find(|r| r.len() == 4).expect("a memory row");
    assert!(memory[2].parse::<f64>().is_ok_and(|mib| mib > 1.0), "{memory:?}");
}
