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

/// What the columns after the fixed ones hold.
struct Extra {
    /// A workload's call names, by the index of `CallRecord::which`.
    names: Option<Vec<String>>,
    metadata: Vec<MetadataColumn>,
}

impl DetailsWriter {
    /// Starts the writer on `file` (opened by the caller before the run, with the other
    /// outputs); `methods` by the index of `CallRecord::which`, and their `names` for a workload.
    pub fn start(
        path: PathBuf,
        file: File,
        methods: Vec<prost_reflect::MethodDescriptor>,
        names: Option<Vec<String>>,
        metadata: Vec<MetadataColumn>,
    ) -> DetailsWriter {
        let (sender, receiver) = mpsc::sync_channel::<CallRecord>(BUFFER);
        let messages = methods.iter().map(|m| (m.input(), m.output())).collect();
        let extra = Extra { names, metadata };
        let thread = std::thread::spawn(move || write_all(BufWriter::new(file), receiver, messages, extra));
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
    calls: mpsc::Receiver<CallRecord>,
    messages: Vec<(MessageDescriptor, MessageDescriptor)>,
    extra: Extra,
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
    if extra.names.is_some() {
        head.push("name".into());
    }
    head.extend(extra.metadata.iter().map(|m| match m {
        MetadataColumn::Header(key) => format!("header:{key}"),
        MetadataColumn::Trailer(key) => format!("trailer:{key}"),
    }));
    w.write_record(&head)?;
    let mut rows = 0;
    for c in calls {
        // A replayed log's calls have no schema: no key or version to read.
        let (input, output) = messages.get(c.which).or(messages.first()).map(|(i, o)| (i, o)).unzip();
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
        if let Some(names) = &extra.names {
            record.push(names.get(c.which).cloned().unwrap_or_default());
        }
        record.extend(extra.metadata.iter().map(|m| {
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
