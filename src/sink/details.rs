//! `--csv-details FILE`: one row per call, streamed to disk from a bounded channel by a
//! writer thread (the columns of the throughput experiment's client, docs/experiments.md,
//! "Throughput measured by the client", plus status, attempts, warm-up, worker and the intended
//! send time). Memory stays flat. Times are Unix ns: `timestamp` is the actual first send,
//! `intended` the open loop's due time (empty in closed loop and bursts, which have no schedule).
//! After them: `name`, a `--workload` call's name; then `header:KEY` and `trailer:KEY`, each
//! response header and trailer asked for (`--csv-details-header`, `--csv-details-trailer`).
use super::Sink;
use crate::record::intervals::IntervalRow;
use crate::record::{intervals::Interval, CallRecord};
use prost_reflect::{DynamicMessage, MessageDescriptor, Value};
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::UNIX_EPOCH;

/// Calls buffered between the workers and the disk before workers wait.
const BUFFER: usize = 16 * 1024;

pub struct DetailsWriter {
    path: PathBuf,
    sender: mpsc::SyncSender<CallRecord>,
    thread: JoinHandle<std::io::Result<u64>>,
}

/// A response header or trailer written in a column of its own.
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataColumn {
    Header(String),
    Trailer(String),
}

/// One call of the run's mix, as its rows read it: its name (a workload's, written in the
/// `name` column) and its method (None: a replay's calls, which have no schema to read).
pub struct Call {
    pub name: Option<String>,
    pub method: Option<prost_reflect::MethodDescriptor>,
}

/// A call's messages, as its rows decode them.
struct Columns {
    name: Option<String>,
    messages: Option<(MessageDescriptor, MessageDescriptor)>,
}

impl DetailsWriter {
    /// Starts the writer on `file` (opened by the caller before the run, with the other
    /// outputs); `calls` by the index of `CallRecord::which`, each with its own name and method.
    pub fn start(path: PathBuf, file: File, calls: Vec<Call>, metadata: Vec<MetadataColumn>) -> DetailsWriter {
        let (sender, receiver) = mpsc::sync_channel::<CallRecord>(BUFFER);
        let calls = calls
            .into_iter()
            .map(|c| Columns { name: c.name, messages: c.method.map(|m| (m.input(), m.output())) })
            .collect();
        let thread = std::thread::spawn(move || write_all(BufWriter::new(file), receiver, calls, metadata));
        DetailsWriter { path, sender, thread }
    }
}

impl Sink for DetailsWriter {
    fn interval(&mut self, _interval: &Interval, _row: &IntervalRow) {}

    fn calls(&self) -> Option<mpsc::SyncSender<CallRecord>> {
        Some(self.sender.clone())
    }

    /// Waits until every row is on disk.
    fn finish(self: Box<Self>) -> anyhow::Result<()> {
        drop(self.sender);
        match self.thread.join() {
            Ok(Ok(_rows)) => Ok(()),
            Ok(Err(e)) => Err(crate::error::output_failed(&self.path, e)),
            Err(_) => Err(crate::error::output_failed(&self.path, std::io::Error::other("the writer thread failed"))),
        }
    }
}

/// A field's value rendered for the CSV, when the message has that field.
fn field(message: Option<&MessageDescriptor>, bytes: Option<&[u8]>, name: &str) -> String {
    let (Some(message), Some(bytes)) = (message, bytes) else { return String::new() };
    let Some(f) = message.get_field_by_name(name) else { return String::new() };
    let Ok(decoded) = DynamicMessage::decode(message.clone(), bytes) else { return String::new() };
    match &*decoded.get_field(&f) {
        Value::String(s) => s.clone(),
        Value::U64(v) => v.to_string(),
        Value::U32(v) => v.to_string(),
        Value::I64(v) => v.to_string(),
        Value::I32(v) => v.to_string(),
        other => format!("{other:?}"),
    }
}

fn write_all(
    out: BufWriter<File>,
    records: mpsc::Receiver<CallRecord>,
    calls: Vec<Columns>,
    metadata: Vec<MetadataColumn>,
) -> std::io::Result<u64> {
    let mut w = csv::Writer::from_writer(out);
    let mut head: Vec<String> = [
        "msg",
        "key",
        "version",
        "timestamp",
        "latency_ns",
        "bytes",
        "success",
        "status",
        "attempts",
        "warmup",
        "worker",
        "intended",
    ]
    .map(String::from)
    .to_vec();
    let named = calls.iter().any(|c| c.name.is_some());
    if named {
        head.push("name".into());
    }
    head.extend(metadata.iter().map(|m| match m {
        MetadataColumn::Header(key) => format!("header:{key}"),
        MetadataColumn::Trailer(key) => format!("trailer:{key}"),
    }));
    w.write_record(&head)?;
    let mut rows = 0;
    for c in records {
        let call = calls.get(c.which);
        // A replayed log's calls have no schema: no key or version to read.
        let (input, output) = call.and_then(|call| call.messages.as_ref()).map(|(i, o)| (i, o)).unzip();
        let request = c.request.get(5..); // past the gRPC frame header
        let unix_ns = |t: std::time::SystemTime| t.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        let ts = unix_ns(c.sent_at);
        let record = [
            c.call.to_string(),
            field(input, request, "key"),
            field(output, c.reply.response.as_deref(), "version"),
            ts.to_string(),
            c.latency.as_nanos().to_string(),
            c.reply.response_bytes.to_string(),
            (c.reply.status == tonic::Code::Ok).to_string(),
            crate::grpc::status::name(c.reply.status).to_string(),
            c.attempts.to_string(),
            c.warmup.to_string(),
            c.worker.to_string(),
            c.intended.map(|t| unix_ns(t).to_string()).unwrap_or_default(),
        ];
        let mut record = record.to_vec();
        if named {
            record.push(call.and_then(|call| call.name.clone()).unwrap_or_default());
        }
        record.extend(metadata.iter().map(|m| {
            let value = match m {
                MetadataColumn::Header(key) => c.reply.metadata.header(key),
                MetadataColumn::Trailer(key) => c.reply.metadata.trailer(key),
            };
            value.unwrap_or_default().to_owned()
        }));
        w.write_record(&record)?;
        rows += 1;
    }
    w.flush()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_reflect::{DescriptorPool, Value as Field};
    use std::time::{Duration, SystemTime};

    /// Each row reads its call's own name and method, one list by the index of `which` (before:
    /// the methods with a schema and the names were two lists, so a call without a schema
    /// shifted every later call's method onto the call before it).
    #[test]
    fn each_row_reads_its_own_calls_name_and_method() {
        let pool = DescriptorPool::decode(crate::lab::proto::FILE_DESCRIPTOR_SET).unwrap();
        let put = pool.get_service_by_name("rpcmeter.lab.v1.Storage").unwrap().methods().nth(1).unwrap();
        assert_eq!(put.name(), "PutValue");
        let mut request = DynamicMessage::new(put.input());
        request.set_field_by_name("key", Field::String("k1".into()));
        let request = crate::grpc::wire::frame(&prost::Message::encode_to_vec(&request));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("details.csv");
        let calls = vec![
            Call { name: Some("logged".into()), method: None },
            Call { name: Some("put".into()), method: Some(put) },
        ];
        let writer = Box::new(DetailsWriter::start(path.clone(), File::create(&path).unwrap(), calls, vec![]));
        let sender = writer.calls().unwrap();
        for which in [0, 1] {
            let reply = crate::grpc::Reply {
                status: tonic::Code::Ok,
                response_bytes: 0,
                response: None,
                message: None,
                metadata: Default::default(),
            };
            let record = CallRecord {
                call: which as u64,
                which,
                worker: 0,
                sent_at: SystemTime::now(),
                intended: None,
                latency: Duration::from_millis(1),
                request: request.clone(),
                reply,
                attempts: 1,
                warmup: false,
            };
            sender.send(record).unwrap();
        }
        drop(sender);
        writer.finish().unwrap();
        let mut rows = csv::Reader::from_path(&path).unwrap();
        let head = rows.headers().unwrap().clone();
        let at = |name: &str| head.iter().position(|h| h == name).unwrap();
        let read: Vec<(String, String)> =
            rows.records().map(|r| r.unwrap()).map(|r| (r[at("name")].to_string(), r[at("key")].to_string())).collect();
        assert_eq!(read, [("logged".to_string(), String::new()), ("put".to_string(), "k1".to_string())]);
    }
}
