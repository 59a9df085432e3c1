//! Request bodies: JSON in the protobuf mapping, parsed and checked before the run; encoded
//! once unless a string in it holds templates, which are rendered per call (ghz's names).
use super::DataSource;
use crate::error::bad_input;
use crate::grpc::wire::frame;
use bytes::Bytes;
use prost::Message;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, MethodDescriptor};
use rand::RngExt;
use serde_json::Value;
use std::time::{SystemTime, UNIX_EPOCH};

/// Produces the framed request body of each call; encodes once when the body never changes.
pub struct RequestSource {
    /// One per data record; calls cycle through them (replayed data).
    bodies: Vec<Body>,
}

enum Body {
    /// Encoded and framed once: every call shares these bytes.
    Fixed(Bytes),
    /// Holds templates: rendered and encoded per call.
    Templated { desc: MessageDescriptor, json: Node },
}

impl RequestSource {
    /// Parses and checks all data up front; errors name the field at fault (`bad_input`).
    pub fn new(method: &MethodDescriptor, data: &DataSource) -> anyhow::Result<RequestSource> {
        Self::with_vars(method, data, &[])
    }

    /// `new` where `{{.NAME}}` of each of `vars` (a workload flow's captures) is a template too.
    /// A method with a client stream may have no record at all (`-d '[]'`, an empty `-D`):
    /// its streams send no message (grpc interop's empty_stream).
    pub fn with_vars(method: &MethodDescriptor, data: &DataSource, vars: &[String]) -> anyhow::Result<RequestSource> {
        let desc = method.input();
        let none_is_fine = method.is_client_streaming();
        let records = match data {
            DataSource::Empty => vec![("-d".to_owned(), Value::Object(Default::default()))],
            DataSource::Json(text) => {
                let value = serde_json::from_str(text).map_err(|e| bad_input(format!("-d: invalid JSON: {e}")))?;
                vec![("-d".to_owned(), value)]
            }
            DataSource::File(path) => read_records(path, none_is_fine)?,
        };
        // Unless the message itself is written as a JSON array (google.protobuf.ListValue
        // or Value), a top-level array is a list of records, as ghz reads it.
        let array_is_message = matches!(desc.full_name(), "google.protobuf.ListValue" | "google.protobuf.Value");
        let records = if array_is_message {
            records
        } else {
            records.into_iter().map(|r| elements(r, none_is_fine)).collect::<anyhow::Result<Vec<_>>>()?.concat()
        };
        let bodies = records
            .into_iter()
            .map(|(origin, value)| {
                body(&desc, value, vars).map_err(|problem| bad_input(format!("{origin}: {problem}")))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(RequestSource { bodies })
    }

    /// Always these framed bytes, whatever the method (a replayed log's calls bring their own).
    pub fn fixed(framed: Bytes) -> RequestSource {
        RequestSource { bodies: vec![Body::Fixed(framed)] }
    }

    /// The framed body for call number `call` (0-based, run-wide) made by worker `worker`.
    pub fn request(&self, call: u64, worker: u32) -> Bytes {
        self.message(call, call, worker)
    }

    /// Message `index` of streaming call `call`: the records are replayed message by message
    /// within each stream (as ghz does), templates rendered with the call's number.
    pub fn message(&self, call: u64, index: u64, worker: u32) -> Bytes {
        // Cannot fail without captured values: `body` rendered this record with every
        // random int at both bounds.
        self.message_with(call, index, worker, &[]).unwrap_or_else(|_| frame(&[]))
    }

    /// `message` with a flow's captured values for its `{{.var}}`s: one that does not fit
    /// its field (text into a number) is an error naming the field.
    pub fn message_with(
        &self,
        call: u64,
        index: u64,
        worker: u32,
        captured: &[(String, String)],
    ) -> Result<Bytes, String> {
        if self.bodies.is_empty() {
            // No record (an empty client stream): nothing of it is ever sent.
            return Ok(frame(&[]));
        }
        match &self.bodies[(index % self.bodies.len() as u64) as usize] {
            Body::Fixed(bytes) => Ok(bytes.clone()),
            Body::Templated { desc, json } => {
                let vars = Vars { call, worker, captured };
                let json = json.render(&vars, &mut |lo, hi| rand::rng().random_range(lo..=hi));
                to_message(desc, json).map(|m| frame(&m.encode_to_vec()))
            }
        }
    }

    /// How many records calls cycle through.
    pub fn records(&self) -> usize {
        self.bodies.len()
    }

    /// True when every call sends the same bytes.
    pub fn is_static(&self) -> bool {
        matches!(self.bodies[..], [Body::Fixed(_)])
    }
}

/// `-D` records: every JSON value in the file (one object or array, or JSON lines), each
/// labelled with where it starts for error messages.
fn read_records(path: &std::path::Path, none_is_fine: bool) -> anyhow::Result<Vec<(String, Value)>> {
    let name = path.display().to_string();
    let text = crate::input::read_string(path, crate::input::Kind::RequestData, &format!("-D {name}"))?;
    let mut records = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
    // Where the previous record ended, and the line it ended on (counted as we go: files
    // of many records stay linear).
    let (mut end, mut line) = (0, 1);
    while let Some(value) = stream.next() {
        let value = value.map_err(|e| bad_input(format!("-D {name}: invalid JSON: {e}")))?;
        let rest = &text[end..];
        line += rest[..rest.len() - rest.trim_start().len()].matches('\n').count();
        records.push((format!("-D {name} line {line}"), value));
        line += text[end..stream.byte_offset()].trim_start().matches('\n').count();
        end = stream.byte_offset();
    }
    match records.len() {
        0 if none_is_fine => Ok(records),
        0 => Err(bad_input(format!("-D {name}: no JSON object in the file"))),
        // A single record needs no position.
        1 => Ok(vec![(format!("-D {name}"), records.pop().unwrap().1)]),
        _ => Ok(records),
    }
}

/// The records a top-level JSON array holds, one per element, each named by its index
/// after `origin`; any other value is one record. An empty array is refused unless
/// `none_is_fine`.
fn elements((origin, value): (String, Value), none_is_fine: bool) -> anyhow::Result<Vec<(String, Value)>> {
    match value {
        Value::Array(items) if items.is_empty() && !none_is_fine => {
            Err(bad_input(format!("{origin}: empty JSON array: no request to send")))
        }
        Value::Array(items) => Ok(items.into_iter().enumerate().map(|(i, v)| (format!("{origin}[{i}]"), v)).collect()),
        value => Ok(vec![(origin, value)]),
    }
}

/// One record checked against the message type: encoded now, or kept as a template after
/// rendering it once with every random int at its lower and once at its upper bound.
fn body(desc: &MessageDescriptor, value: Value, vars: &[String]) -> Result<Body, String> {
    let json = Node::parse(value, "", vars)?.typed(&Slot::Message(desc.clone()));
    // Each {{randomString N}} is bounded; so must their sum be, or a few hundred of them in
    // one request would take gigabytes at every call.
    let random = json.random_bytes();
    if random > MAX_RANDOM_STRING {
        return Err(format!(
            "the {{{{randomString N}}}} of one request add up to {random} characters, more than \
             {MAX_RANDOM_STRING} (4 MiB, the usual gRPC max message size)"
        ));
    }
    if let Node::Json(value) = json {
        return Ok(Body::Fixed(frame(&to_message(desc, value)?.encode_to_vec())));
    }
    // A captured value is checked when it is used; here a value that fits its field (its
    // type read from the descriptor) stands in for it.
    let slot = Slot::Message(desc.clone());
    to_message(desc, json.stand_in(&slot, &mut |lo, _| lo))?;
    to_message(desc, json.stand_in(&slot, &mut |_, hi| hi))?;
    Ok(Body::Templated { desc: desc.clone(), json })
}

/// A wrapper's (google.protobuf.BytesValue, BoolValue, ...) value kind: the JSON mapping
/// writes a wrapper as its value.
fn unwrapped(kind: Kind) -> Kind {
    match &kind {
        Kind::Message(m) if m.package_name() == "google.protobuf" && m.full_name().ends_with("Value") => {
            m.get_field_by_name("value").map_or(kind.clone(), |f| f.kind())
        }
        _ => kind,
    }
}

/// Where a JSON node sits in a message, as far as the descriptor tells: what a captured
/// value standing in there must fit.
#[derive(Clone)]
enum Slot {
    Message(MessageDescriptor),
    /// A repeated field's array: its elements are of this kind.
    List(Kind),
    /// A map field's object: its values are of this kind.
    Map(Kind),
    Value(Kind),
    /// Not known (a well-known type written its own way, an unknown key): `to_message` says.
    Unknown,
}

impl Slot {
    fn of_field(field: FieldDescriptor) -> Slot {
        match field.kind() {
            Kind::Message(entry) if field.is_map() => Slot::Map(unwrapped(entry.map_entry_value_field().kind())),
            kind if field.is_list() => Slot::List(unwrapped(kind)),
            kind => Slot::Value(unwrapped(kind)),
        }
    }

    /// The slot of an object's member `key`.
    fn key(&self, key: &str) -> Slot {
        match self {
            Slot::Message(m) | Slot::Value(Kind::Message(m)) => {
                m.get_field_by_json_name(key).or_else(|| m.get_field_by_name(key)).map_or(Slot::Unknown, Slot::of_field)
            }
            Slot::Map(kind) => Slot::Value(kind.clone()),
            _ => Slot::Unknown,
        }
    }

    fn element(&self) -> Slot {
        match self {
            Slot::List(kind) => Slot::Value(kind.clone()),
            _ => Slot::Unknown,
        }
    }

    /// A value of the slot's type, as the JSON mapping writes it in a string.
    fn stand_in(&self) -> String {
        match self {
            Slot::Value(Kind::Bytes) => "AAAA".to_owned(),
            Slot::Value(Kind::Bool) => "true".to_owned(),
            Slot::Value(Kind::Enum(e)) => e.default_value().name().to_owned(),
            Slot::Value(Kind::Message(m)) => match m.full_name() {
                "google.protobuf.Timestamp" => "1970-01-01T00:00:00Z".to_owned(),
                "google.protobuf.Duration" => "0s".to_owned(),
                _ => "0".to_owned(),
            },
            _ => "0".to_owned(),
        }
    }
}

/// Protobuf JSON mapping to a message; unknown fields are errors. The error names the field
/// at fault by its JSON path and type, since the mapping's own messages often say neither.
fn to_message(desc: &MessageDescriptor, value: Value) -> Result<DynamicMessage, String> {
    let mut track = serde_path_to_error::Track::new();
    DynamicMessage::deserialize(desc.clone(), serde_path_to_error::Deserializer::new(value, &mut track)).map_err(|e| {
        let path = track.path();
        if path.iter().next().is_none() {
            return format!("{e} in {}", desc.full_name());
        }
        match type_at(desc, &path) {
            Some(kind) => format!("field \"{path}\" ({kind}): {e}"),
            None => format!("field \"{path}\": {e}"),
        }
    })
}

/// The protobuf type of the field a JSON path leads to ("uint32", "google.protobuf.Timestamp").
fn type_at(desc: &MessageDescriptor, path: &serde_path_to_error::Path) -> Option<String> {
    use serde_path_to_error::Segment;
    let mut message = desc.clone();
    let mut field: Option<FieldDescriptor> = None;
    for segment in path {
        match segment {
            Segment::Seq { .. } => {} // an element of a repeated field: same type
            Segment::Map { key } => {
                if let Some(outer) = field.take() {
                    let inner = outer.kind().as_message()?.clone();
                    if outer.is_map() {
                        // `key` is the map's own key: what follows is its value.
                        field = Some(inner.map_entry_value_field());
                        continue;
                    }
                    message = inner;
                }
                field = Some(message.get_field_by_json_name(key).or_else(|| message.get_field_by_name(key))?);
            }
            _ => return None,
        }
    }
    Some(match field?.kind() {
        Kind::Message(m) => m.full_name().to_owned(),
        Kind::Enum(e) => e.full_name().to_owned(),
        scalar => format!("{scalar:?}").to_lowercase(),
    })
}

/// A JSON value with its template strings parsed; template-free subtrees stay plain JSON.
#[derive(Debug)]
enum Node {
    Json(Value),
    Text(Vec<Piece>),
    /// A template in a bool field: a JSON bool once rendered (the JSON mapping takes no
    /// "true" string there), so that a captured bool fits back into one.
    Bool(Vec<Piece>),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Literal(String),
    RequestNumber,
    WorkerId,
    TimestampUnix,
    TimestampUnixMilli,
    TimestampUnixNano,
    Uuid,
    RandomString(usize),
    RandomInt(i64, i64),
    /// A workload flow's captured value, by name.
    Var(String),
}

const KNOWN: &str = "{{.RequestNumber}}, {{.WorkerID}}, {{.TimestampUnix}}, {{.TimestampUnixMilli}}, \
                     {{.TimestampUnixNano}}, {{.UUID}}, {{randomString N}}, {{randomInt MIN MAX}}";

struct Vars<'a> {
    call: u64,
    worker: u32,
    captured: &'a [(String, String)],
}

/// Whether `.name` is one of ghz's own templates rather than a workload's variable.
pub fn is_builtin_template(name: &str) -> bool {
    matches!(name, "RequestNumber" | "WorkerID" | "TimestampUnix" | "TimestampUnixMilli" | "TimestampUnixNano" | "UUID")
}

/// A text with `{{.var}}` templates (a workload check's expected value), rendered per call.
#[derive(Debug)]
pub struct TextTemplate(Vec<Piece>);

impl TextTemplate {
    pub fn parse(text: &str, vars: &[String]) -> Result<TextTemplate, String> {
        parse_template(text, vars).map(TextTemplate)
    }

    pub fn render(&self, call: u64, worker: u32, captured: &[(String, String)]) -> String {
        let vars = Vars { call, worker, captured };
        self.0.iter().map(|p| p.render(&vars, &mut |lo, hi| rand::rng().random_range(lo..=hi))).collect()
    }
}

impl Node {
    /// `path` names where `value` sits, for errors.
    fn parse(value: Value, path: &str, vars: &[String]) -> Result<Node, String> {
        let node = match value {
            Value::String(s) if s.contains("{{") => {
                Node::Text(parse_template(&s, vars).map_err(|e| format!("field \"{path}\": {e}"))?)
            }
            Value::Array(items) => Node::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| Node::parse(v, &format!("{path}[{i}]"), vars))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Node::Object(
                map.into_iter()
                    .map(|(k, v)| {
                        let at = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                        Node::parse(v, &at, vars).map(|n| (k, n))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            plain => return Ok(Node::Json(plain)),
        };
        Ok(node.collapse())
    }

    /// The characters every {{randomString N}} inside adds, together.
    fn random_bytes(&self) -> usize {
        match self {
            Node::Json(_) => 0,
            Node::Text(pieces) | Node::Bool(pieces) => pieces
                .iter()
                .map(|p| match p {
                    Piece::RandomString(n) => *n,
                    _ => 0,
                })
                .fold(0, usize::saturating_add),
            Node::Array(items) => items.iter().map(Node::random_bytes).fold(0, usize::saturating_add),
            Node::Object(fields) => fields.iter().map(|(_, n)| n.random_bytes()).fold(0, usize::saturating_add),
        }
    }

    /// Each template in a bool field made a `Bool`.
    fn typed(self, slot: &Slot) -> Node {
        match self {
            Node::Text(pieces) if matches!(slot, Slot::Value(Kind::Bool)) => Node::Bool(pieces),
            Node::Array(items) => Node::Array(items.into_iter().map(|n| n.typed(&slot.element())).collect()),
            Node::Object(fields) => Node::Object(
                fields
                    .into_iter()
                    .map(|(k, n)| {
                        let n = n.typed(&slot.key(&k));
                        (k, n)
                    })
                    .collect(),
            ),
            node => node,
        }
    }

    /// A composite with no template inside becomes plain JSON again.
    fn collapse(self) -> Node {
        match self {
            Node::Array(items) if items.iter().all(|n| matches!(n, Node::Json(_))) => {
                Node::Json(Value::Array(items.into_iter().map(Node::into_json).collect()))
            }
            Node::Object(fields) if fields.iter().all(|(_, n)| matches!(n, Node::Json(_))) => {
                Node::Json(Value::Object(fields.into_iter().map(|(k, n)| (k, n.into_json())).collect()))
            }
            node => node,
        }
    }

    fn into_json(self) -> Value {
        match self {
            Node::Json(value) => value,
            _ => unreachable!("only called on plain JSON nodes"),
        }
    }

    /// `render` before the run: each captured variable is a value that fits where it sits.
    fn stand_in(&self, slot: &Slot, random_int: &mut dyn FnMut(i64, i64) -> i64) -> Value {
        let vars = Vars { call: 0, worker: 0, captured: &[] };
        let mut text = |pieces: &[Piece]| -> String {
            let each = pieces.iter().map(|p| match p {
                Piece::Var(_) => slot.stand_in(),
                p => p.render(&vars, random_int),
            });
            each.collect()
        };
        match self {
            Node::Json(value) => value.clone(),
            Node::Text(pieces) => Value::String(text(pieces)),
            Node::Bool(pieces) => {
                let text = text(pieces);
                text.parse().map_or(Value::String(text), Value::Bool)
            }
            Node::Array(items) => Value::Array(items.iter().map(|n| n.stand_in(&slot.element(), random_int)).collect()),
            Node::Object(fields) => {
                Value::Object(fields.iter().map(|(k, n)| (k.clone(), n.stand_in(&slot.key(k), random_int))).collect())
            }
        }
    }

    /// `random_int(lo, hi)` draws each {{randomInt}}.
    fn render(&self, vars: &Vars, random_int: &mut dyn FnMut(i64, i64) -> i64) -> Value {
        match self {
            Node::Json(value) => value.clone(),
            Node::Text(pieces) => Value::String(pieces.iter().map(|p| p.render(vars, random_int)).collect()),
            Node::Bool(pieces) => {
                let text: String = pieces.iter().map(|p| p.render(vars, random_int)).collect();
                // Anything but true or false stays text, refused naming the field.
                text.parse().map_or(Value::String(text), Value::Bool)
            }
            Node::Array(items) => Value::Array(items.iter().map(|n| n.render(vars, random_int)).collect()),
            Node::Object(fields) => {
                Value::Object(fields.iter().map(|(k, n)| (k.clone(), n.render(vars, random_int))).collect())
            }
        }
    }
}

impl Piece {
    fn render(&self, vars: &Vars, random_int: &mut dyn FnMut(i64, i64) -> i64) -> String {
        let now = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        match self {
            Piece::Literal(text) => text.clone(),
            Piece::RequestNumber => vars.call.to_string(),
            Piece::WorkerId => vars.worker.to_string(),
            Piece::TimestampUnix => now().as_secs().to_string(),
            Piece::TimestampUnixMilli => now().as_millis().to_string(),
            Piece::TimestampUnixNano => now().as_nanos().to_string(),
            Piece::Uuid => uuid::Uuid::new_v4().to_string(),
            Piece::RandomString(n) => {
                rand::rng().sample_iter(rand::distr::Alphanumeric).take(*n).map(char::from).collect()
            }
            Piece::RandomInt(lo, hi) => random_int(*lo, *hi).to_string(),
            Piece::Var(name) => vars.captured.iter().find(|(n, _)| n == name).map_or(String::new(), |(_, v)| v.clone()),
        }
    }
}

/// Splits "id-{{.RequestNumber}}" into its literal text and template actions.
fn parse_template(text: &str, vars: &[String]) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            pieces.push(Piece::Literal(rest[..open].to_owned()));
        }
        let close = rest[open..].find("}}").ok_or_else(|| format!("unclosed \"{{{{\" in {text:?}"))? + open;
        pieces.push(parse_action(&rest[open + 2..close], vars)?);
        rest = &rest[close + 2..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest.to_owned()));
    }
    Ok(pieces)
}

/// Each known template that is malformed gets its own message; anything else is unknown.
fn parse_action(action: &str, vars: &[String]) -> Result<Piece, String> {
    let bad = |problem: String| format!("template \"{{{{{action}}}}}\": {problem}");
    let words: Vec<&str> = action.split_whitespace().collect();
    let piece = match words[..] {
        [".RequestNumber"] => Piece::RequestNumber,
        [".WorkerID"] => Piece::WorkerId,
        [".TimestampUnix"] => Piece::TimestampUnix,
        [".TimestampUnixMilli"] => Piece::TimestampUnixMilli,
        [".TimestampUnixNano"] => Piece::TimestampUnixNano,
        [".UUID"] => Piece::Uuid,
        ["randomString", n] => Piece::RandomString(string_length(n).map_err(bad)?),
        ["randomString", ..] => return Err(bad("expected {{randomString N}}".to_owned())),
        ["randomInt", lo, hi] => {
            let bound = |name: &str, text: &str| {
                text.parse::<i64>().map_err(|_| bad(format!("{name} must be a 64-bit integer, not {text:?}")))
            };
            let (lo, hi) = (bound("MIN", lo)?, bound("MAX", hi)?);
            if lo > hi {
                return Err(bad(format!("MIN must not exceed MAX ({lo} > {hi})")));
            }
            Piece::RandomInt(lo, hi)
        }
        ["randomInt", ..] => return Err(bad("expected {{randomInt MIN MAX}}".to_owned())),
        [name] if name.strip_prefix('.').is_some_and(|n| vars.iter().any(|v| v == n)) => {
            Piece::Var(name[1..].to_owned())
        }
        _ => return Err(format!("unknown template \"{{{{{action}}}}}\" (known: {KNOWN})")),
    };
    Ok(piece)
}

/// Longest `{{randomString N}}`: 4 MiB, the usual gRPC max message size. A longer string
/// would exceed most servers' limit anyway, and a huge N would abort the process allocating it.
const MAX_RANDOM_STRING: usize = 4 * 1024 * 1024;

fn string_length(n: &str) -> Result<usize, String> {
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("N must be a whole number, not {n:?}"));
    }
    // All digits: too long for usize is too large too.
    n.parse().ok().filter(|&len| len <= MAX_RANDOM_STRING).ok_or_else(|| {
        format!("N must be at most {MAX_RANDOM_STRING} (4 MiB, the usual gRPC max message size), not {n}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_reflect::DescriptorPool;
    use std::path::PathBuf;

    fn method(name: &str) -> MethodDescriptor {
        let pool = DescriptorPool::decode(crate::lab::proto::FILE_DESCRIPTOR_SET).unwrap();
        super::super::find_method(&pool, name).unwrap()
    }

    fn cpu() -> MethodDescriptor {
        method("rpcmeter.lab.v1.TestService/Cpu")
    }

    fn put() -> MethodDescriptor {
        method("rpcmeter.lab.v1.Storage/PutValue")
    }

    fn json(m: &MethodDescriptor, text: &str) -> anyhow::Result<RequestSource> {
        RequestSource::new(m, &DataSource::Json(text.to_owned()))
    }

    fn err(m: &MethodDescriptor, text: &str) -> String {
        json(m, text).err().expect("should be rejected").to_string()
    }

    /// The request of `call` decoded back to JSON.
    fn decoded(source: &RequestSource, m: &MethodDescriptor, call: u64, worker: u32) -> Value {
        let framed = source.request(call, worker);
        assert_eq!(u32::from_be_bytes(framed[1..5].try_into().unwrap()) as usize, framed.len() - 5);
        let msg = DynamicMessage::decode(m.input(), &framed[5..]).unwrap();
        serde_json::to_value(&msg).unwrap()
    }

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.json");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn static_request_is_encoded_once_and_shared() {
        let source = json(&cpu(), r#"{"n": 25}"#).unwrap();
        assert!(source.is_static());
        let first = source.request(0, 0);
        for call in 1..100 {
            assert_eq!(source.request(call, (call % 7) as u32).as_ptr(), first.as_ptr());
        }
        assert_eq!(&first[..], &[0, 0, 0, 0, 2, 0x08, 25]);
    }

    #[test]
    fn no_data_is_the_empty_message() {
        let source = RequestSource::new(&cpu(), &DataSource::Empty).unwrap();
        assert_eq!(&source.request(3, 1)[..], &[0, 0, 0, 0, 0]);
    }

    #[test]
    fn malformed_json_is_bad_input_with_its_position() {
        let e = json(&cpu(), r#"{"n": 25"#).err().unwrap();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().starts_with("-d: invalid JSON: EOF while parsing an object at line 1"), "{e}");
    }

    #[test]
    fn unknown_field_names_the_field_and_the_message() {
        let e = err(&cpu(), r#"{"nme": 25}"#);
        assert!(e.starts_with("-d: ") && e.contains("nme") && e.contains("rpcmeter.lab.v1.CpuRequest"), "{e}");
    }

    #[test]
    fn mistyped_field_is_named() {
        let e = err(&cpu(), r#"{"n": "x"}"#);
        assert!(e.starts_with("-d: field \"n\" (uint32): "), "{e}");
        let e = err(&cpu(), r#"{"n": -3}"#);
        assert!(e.starts_with("-d: field \"n\" (uint32): "), "{e}");
        let e = err(&put(), r#"{"key": 5}"#);
        assert_eq!(e, "-d: field \"key\" (string): invalid type: integer `5`, expected a string");
        let e = err(&cpu(), r#"[1, 2]"#);
        assert!(e.starts_with("-d[0]: ") && e.contains("CpuRequest"), "{e}");
    }

    #[test]
    fn nested_errors_name_the_path_and_type() {
        let dir = tempfile::tempdir().unwrap();
        let proto = dir.path().join("n.proto");
        std::fs::write(
            &proto,
            "syntax = \"proto3\"; import \"google/protobuf/timestamp.proto\";\n\
             message Item { uint64 id = 1; google.protobuf.Timestamp at = 2; }\n\
             message Order { repeated Item items = 1; map<string, Item> by_name = 2; string customer_name = 3; }\n\
             service Shop { rpc Place(Order) returns (Order); }",
        )
        .unwrap();
        let m = super::super::find_method(&super::super::source::compile(&proto, &[]).unwrap(), "Shop/Place").unwrap();
        let e = err(&m, r#"{"items": [{"id": 1}, {"id": true}]}"#);
        assert!(e.starts_with("-d: field \"items[1].id\" (uint64): "), "{e}");
        let e = err(&m, r#"{"byName": {"x": {"at": "yesterday"}}}"#);
        assert!(e.starts_with("-d: field \"byName.x.at\" (google.protobuf.Timestamp): "), "{e}");
        let e = err(&m, r#"{"items": [{"idd": 1}]}"#);
        assert!(e.starts_with("-d: field \"items[0]\" (Item): ") && e.contains("idd"), "{e}");
        // Proto names and JSON names both map.
        let ok = json(&m, r#"{"customer_name": "a", "items": [{"at": "2024-01-01T00:00:00Z"}]}"#).unwrap();
        assert_eq!(decoded(&ok, &m, 0, 0)["customerName"], "a");
    }

    #[test]
    fn protobuf_json_mapping_applies() {
        // 64-bit ints and numbers in strings, bytes as base64, json_name or proto name.
        let source = json(&put(), r#"{"key": "k", "value": "aGk="}"#).unwrap();
        assert_eq!(decoded(&source, &put(), 0, 0), serde_json::json!({"key": "k", "value": "aGk="}));
        let source = json(&cpu(), r#"{"n": "7"}"#).unwrap();
        assert_eq!(decoded(&source, &cpu(), 0, 0), serde_json::json!({"n": 7}));
    }

    #[test]
    fn replayed_json_lines_cycle_by_call_number() {
        let (_dir, path) = file("{\"key\": \"a\"}\n{\"key\": \"b\"}\n\n{\"key\": \"c\"}\n");
        let source = RequestSource::new(&put(), &DataSource::File(path)).unwrap();
        assert_eq!(source.records(), 3);
        let keys: Vec<Value> = (0..7).map(|call| decoded(&source, &put(), call, 0)["key"].clone()).collect();
        assert_eq!(keys, ["a", "b", "c", "a", "b", "c", "a"]);
        assert_eq!(source.request(1, 0).as_ptr(), source.request(4, 3).as_ptr());
    }

    #[test]
    fn a_json_array_in_d_is_one_record_per_element_cycled_by_call() {
        let m = put();
        let source = json(&m, r#"[{"key": "a"}, {"key": "b-{{.RequestNumber}}"}, {"key": "c"}]"#).unwrap();
        assert_eq!(source.records(), 3);
        assert!(!source.is_static());
        let keys: Vec<Value> = (0..5).map(|call| decoded(&source, &m, call, 0)["key"].clone()).collect();
        assert_eq!(keys, ["a", "b-1", "c", "a", "b-4"]);
        // One element: every call sends the same bytes.
        assert!(json(&m, r#"[{"key": "a"}]"#).unwrap().is_static());
    }

    #[test]
    fn a_json_array_in_a_data_file_is_one_record_per_element() {
        let (_dir, path) = file("[\n  {\"key\": \"a\"},\n  {\"key\": \"b\"}\n]\n");
        let source = RequestSource::new(&put(), &DataSource::File(path)).unwrap();
        assert_eq!(source.records(), 2);
        let keys: Vec<Value> = (0..3).map(|call| decoded(&source, &put(), call, 0)["key"].clone()).collect();
        assert_eq!(keys, ["a", "b", "a"]);
    }

    #[test]
    fn array_element_errors_name_the_element() {
        let e = err(&cpu(), r#"[{"n": 1}, {"n": 2}, {"n": "x"}]"#);
        assert!(e.starts_with("-d[2]: field \"n\" (uint32): "), "{e}");
        let e = err(&put(), r#"[{"key": "a"}, {"key": "{{randomInt 5 1}}"}]"#);
        assert!(e.starts_with("-d[1]: field \"key\": template "), "{e}");
        let (_dir, path) = file("[{\"n\": 1}, {\"n\": 2}, {\"nn\": 3}]");
        let e = RequestSource::new(&cpu(), &DataSource::File(path.clone())).err().unwrap().to_string();
        assert!(e.starts_with(&format!("-D {}[2]: ", path.display())) && e.contains("nn"), "{e}");
        // An array on one of several JSON lines: the line, then the element.
        let (_dir, path) = file("{\"n\": 1}\n[{\"n\": 2}, {\"n\": -2}]\n");
        let e = RequestSource::new(&cpu(), &DataSource::File(path.clone())).err().unwrap().to_string();
        assert!(e.starts_with(&format!("-D {} line 2[1]: field \"n\" (uint32): ", path.display())), "{e}");
    }

    #[test]
    fn an_empty_json_array_is_an_error_naming_its_source() {
        let e = json(&cpu(), "[]").err().unwrap();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert_eq!(e.to_string(), "-d: empty JSON array: no request to send");
        let (_dir, path) = file(" [ ]\n");
        let e = RequestSource::new(&cpu(), &DataSource::File(path.clone())).err().unwrap().to_string();
        assert_eq!(e, format!("-D {}: empty JSON array: no request to send", path.display()));
    }

    #[test]
    fn an_array_is_one_message_when_the_message_is_a_json_array() {
        let dir = tempfile::tempdir().unwrap();
        let proto = dir.path().join("l.proto");
        std::fs::write(
            &proto,
            "syntax = \"proto3\"; import \"google/protobuf/struct.proto\";\n\
             service Lists { rpc Put(google.protobuf.ListValue) returns (google.protobuf.ListValue); }",
        )
        .unwrap();
        let m = super::super::find_method(&super::super::source::compile(&proto, &[]).unwrap(), "Lists/Put").unwrap();
        let source = json(&m, r#"[1, "two"]"#).unwrap();
        assert_eq!(source.records(), 1);
        assert_eq!(decoded(&source, &m, 0, 0), serde_json::json!([1.0, "two"]));
    }

    #[test]
    fn a_data_file_with_one_pretty_object_is_static() {
        let (_dir, path) = file("{\n  \"n\": 3\n}\n");
        let source = RequestSource::new(&cpu(), &DataSource::File(path)).unwrap();
        assert!(source.is_static());
        assert_eq!(decoded(&source, &cpu(), 9, 0), serde_json::json!({"n": 3}));
    }

    #[test]
    fn data_file_errors_name_the_file_and_line() {
        let (_dir, path) = file("{\"n\": 1}\n\n{\n  \"n\": 2\n}\n{\"n\": \"x\"}\n");
        let e = RequestSource::new(&cpu(), &DataSource::File(path.clone())).err().unwrap().to_string();
        assert!(e.starts_with(&format!("-D {} line 6: field \"n\" (uint32): ", path.display())), "{e}");
        let e = RequestSource::new(&cpu(), &DataSource::File("/no/such/data.json".into())).err().unwrap().to_string();
        assert!(e.starts_with("-D /no/such/data.json: cannot read: No such file"), "{e}");
        let (_dir, path) = file("  \n");
        let e = RequestSource::new(&cpu(), &DataSource::File(path)).err().unwrap().to_string();
        assert!(e.contains("no JSON object"), "{e}");
    }

    #[test]
    fn templates_render_call_number_and_worker() {
        let m = put();
        let source = json(&m, r#"{"key": "k{{.RequestNumber}}-w{{ .WorkerID }}"}"#).unwrap();
        assert!(!source.is_static());
        assert_eq!(decoded(&source, &m, 0, 0)["key"], "k0-w0");
        assert_eq!(decoded(&source, &m, 41, 3)["key"], "k41-w3");
    }

    #[test]
    fn random_templates_stay_within_their_bounds() {
        let m = cpu();
        let source = json(&m, r#"{"n": "{{randomInt 5 9}}"}"#).unwrap();
        let seen: std::collections::BTreeSet<u64> =
            (0..500).map(|call| decoded(&source, &m, call, 0)["n"].as_u64().unwrap()).collect();
        assert_eq!(seen, (5..=9).collect());

        let m = put();
        let source = json(&m, r#"{"key": "{{randomString 12}}|{{.UUID}}|{{.TimestampUnixMilli}}"}"#).unwrap();
        let key = decoded(&source, &m, 0, 0)["key"].as_str().unwrap().to_owned();
        let parts: Vec<&str> = key.split('|').collect();
        assert_eq!(parts[0].len(), 12);
        assert!(parts[0].chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(parts[1].len(), 36);
        assert_eq!(&parts[1][14..15], "4");
        assert!(parts[2].parse::<u64>().unwrap() > 1_600_000_000_000);
    }

    #[test]
    fn uuid_template_is_a_fresh_version_4_uuid_per_call() {
        let m = put();
        let source = json(&m, r#"{"key": "{{.UUID}}"}"#).unwrap();
        let ids: Vec<uuid::Uuid> = (0..3)
            .map(|call| uuid::Uuid::parse_str(decoded(&source, &m, call, 0)["key"].as_str().unwrap()).unwrap())
            .collect();
        for id in &ids {
            assert_eq!(id.get_version(), Some(uuid::Version::Random), "{id}");
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122, "{id}");
            // The hyphenated lowercase form, as ghz renders it.
            assert_eq!(id.to_string(), id.hyphenated().to_string());
        }
        assert!(ids[0] != ids[1] && ids[1] != ids[2], "{ids:?}");
    }

    #[test]
    fn a_malformed_known_template_says_what_is_wrong() {
        let e = err(&put(), r#"{"key": "{{randomInt 5 1}}"}"#);
        assert_eq!(e, "-d: field \"key\": template \"{{randomInt 5 1}}\": MIN must not exceed MAX (5 > 1)");
        let e = err(&put(), r#"{"key": "{{randomInt x 1}}"}"#);
        assert!(e.ends_with("MIN must be a 64-bit integer, not \"x\""), "{e}");
        let e = err(&put(), r#"{"key": "{{randomInt 1 99999999999999999999}}"}"#);
        assert!(e.ends_with("MAX must be a 64-bit integer, not \"99999999999999999999\""), "{e}");
        let e = err(&put(), r#"{"key": "{{randomInt 1}}"}"#);
        assert!(e.ends_with("template \"{{randomInt 1}}\": expected {{randomInt MIN MAX}}"), "{e}");
        let e = err(&put(), r#"{"key": "{{randomString abc}}"}"#);
        assert_eq!(e, "-d: field \"key\": template \"{{randomString abc}}\": N must be a whole number, not \"abc\"");
        let e = err(&put(), r#"{"key": "{{randomString -3}}"}"#);
        assert!(e.ends_with("N must be a whole number, not \"-3\""), "{e}");
        let e = err(&put(), r#"{"key": "{{randomString}}"}"#);
        assert!(e.ends_with("expected {{randomString N}}"), "{e}");
        // Equal bounds are a constant, not an error.
        assert!(json(&put(), r#"{"key": "{{randomInt 3 3}}"}"#).is_ok());
    }

    #[test]
    fn a_huge_random_string_is_refused_at_parse_time() {
        // Used to abort the whole process with "memory allocation failed".
        for n in ["99999999999", "99999999999999999999999", "4194305"] {
            let e = err(&put(), &format!(r#"{{"key": "{{{{randomString {n}}}}}"}}"#));
            assert_eq!(
                e,
                format!(
                    "-d: field \"key\": template \"{{{{randomString {n}}}}}\": N must be at most 4194304 \
                     (4 MiB, the usual gRPC max message size), not {n}"
                )
            );
        }
        // The cap itself is allowed (checked without rendering 4 MiB, slow in debug builds).
        assert_eq!(string_length("4194304"), Ok(MAX_RANDOM_STRING));
    }

    #[test]
    fn a_captured_value_stands_in_by_its_fields_type_before_the_run() {
        // Was refused: "-d: field \"value\" (bytes): invalid base64: Invalid input length: 1".
        let vars = ["k".to_owned(), "v".to_owned()];
        let data = DataSource::Json(r#"{"key": "a{{.k}}", "value": "{{.v}}"}"#.into());
        let source = RequestSource::with_vars(&put(), &data, &vars).unwrap();
        let captured = |v: &str| vec![("k".to_owned(), "x".to_owned()), ("v".to_owned(), v.to_owned())];
        let framed = source.message_with(0, 0, 0, &captured("aGk=")).unwrap();
        let sent = DynamicMessage::decode(put().input(), &framed[5..]).unwrap();
        assert_eq!(serde_json::to_value(&sent).unwrap(), serde_json::json!({"key": "ax", "value": "aGk="}));
        // A value that does not fit is still refused, when it is used.
        assert!(source.message_with(0, 0, 0, &captured("h")).unwrap_err().contains("(bytes)"));

        let dir = tempfile::tempdir().unwrap();
        let proto = dir.path().join("t.proto");
        std::fs::write(
            &proto,
            "syntax = \"proto3\"; import \"google/protobuf/timestamp.proto\";\n\
             import \"google/protobuf/wrappers.proto\";\n\
             enum Color { RED = 0; BLUE = 1; }\n\
             message Inner { bytes blob = 1; Color color = 2; }\n\
             message All { bool on = 1; Color color = 2; google.protobuf.Timestamp at = 3;\n\
               repeated bytes blobs = 4; map<string, bytes> by_key = 5; Inner inner = 6; uint64 n = 7;\n\
               google.protobuf.BytesValue wrapped = 8; google.protobuf.BoolValue maybe = 9; }\n\
             service S { rpc Put(All) returns (All); }",
        )
        .unwrap();
        let m = super::super::find_method(&super::super::source::compile(&proto, &[]).unwrap(), "S/Put").unwrap();
        let text = r#"{"on": "{{.x}}", "color": "{{.x}}", "at": "{{.x}}", "blobs": ["{{.x}}"],
                       "byKey": {"a": "{{.x}}"}, "inner": {"blob": "{{.x}}", "color": "{{.x}}"}, "n": "{{.x}}",
                       "wrapped": "{{.x}}", "maybe": "{{.x}}"}"#;
        RequestSource::with_vars(&m, &DataSource::Json(text.into()), &["x".to_owned()]).unwrap();
        // A captured bool goes into a bool field as a JSON bool (the mapping takes no "false").
        let on = RequestSource::with_vars(&m, &DataSource::Json(r#"{"on": "{{.x}}"}"#.into()), &["x".to_owned()]);
        let on = on.unwrap();
        let framed = on.message_with(0, 0, 0, &[("x".to_owned(), "true".to_owned())]).unwrap();
        assert_eq!(serde_json::to_value(DynamicMessage::decode(m.input(), &framed[5..]).unwrap()).unwrap()["on"], true);
        let e = on.message_with(0, 0, 0, &[("x".to_owned(), "maybe".to_owned())]).unwrap_err();
        assert!(e.starts_with("field \"on\" (bool): "), "{e}");
    }

    #[test]
    fn template_errors_are_caught_before_the_run() {
        let e = err(&put(), r#"{"key": "{{.Nope}}"}"#);
        assert!(e.starts_with("-d: field \"key\": unknown template \"{{.Nope}}\" (known: {{.RequestNumber}}"), "{e}");
        let e = err(&put(), r#"{"key": "{{.RequestNumber"}"#);
        assert!(e.contains("unclosed"), "{e}");
        // Rendered values are checked against the field's type, at both random bounds.
        let e = err(&cpu(), r#"{"n": "{{randomInt -5 5}}"}"#);
        assert!(e.starts_with("-d: field \"n\" (uint32): "), "{e}");
        let e = err(&cpu(), r#"{"n": "{{.TimestampUnixNano}}"}"#);
        assert!(e.starts_with("-d: field \"n\" (uint32): "), "{e}");
    }
}
