//! A workload call's captures and checks, applied to each of its answers (a stream's: its
//! last response message). Only a call that has some decodes its answer (prost-reflect's
//! dynamic message); a capture-free, check-free run keeps its hot path as it was: nothing
//! kept, nothing decoded.
use super::workload::{Check, Field, Op, Test, WorkloadCall, MAX_CAPTURE_BYTES};
use crate::grpc::Reply;
use crate::schema::TextTemplate;
use bytes::Bytes;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, MethodDescriptor, ReflectMessage, Value,
};
use std::borrow::Cow;
use std::cmp::Ordering;

/// A flow's captured values so far, by variable name (bounded: each value at most
/// `MAX_CAPTURE_BYTES`, one per capture of its steps).
pub type Captured = Vec<(String, String)>;

/// What one call of a workload does with its answers.
pub struct Rules {
    captures: Vec<(String, Field)>,
    /// Each check as written (its name in every report), where it reads and what it tests.
    checks: Vec<(String, Field, Compiled)>,
    input: MessageDescriptor,
    output: MessageDescriptor,
    /// Index of this call's first check among the workload's (`stage::Mix::check_names`).
    pub first_check: usize,
}

enum Compiled {
    Exists,
    Compare(Op, TextTemplate),
}

impl Rules {
    /// The call's captures and checks, their paths checked against the method's messages;
    /// `vars` are every variable the workload captures (a check's value may name them).
    pub fn new(
        call: &WorkloadCall,
        method: &MethodDescriptor,
        vars: &[String],
        first_check: usize,
    ) -> Result<Option<Rules>, String> {
        if call.captures.is_empty() && call.checks.is_empty() {
            return Ok(None);
        }
        let (input, output) = (method.input(), method.output());
        // A client stream's requests are many: which one would request.PATH read?
        let one_request = |field: &Field| match field {
            Field::Request(path) if method.is_client_streaming() => {
                Err(format!("request.{path}: {} sends a stream of requests; read the response", method.full_name()))
            }
            _ => Ok(()),
        };
        let mut captures = Vec::new();
        for capture in &call.captures {
            let at = |e: String| format!("capture {:?}: {e}", capture.var);
            one_request(&capture.from).map_err(at)?;
            let path = match &capture.from {
                Field::Request(path) => Some((&input, path)),
                Field::Response(path) => Some((&output, path)),
                _ => None,
            };
            if let Some((message, path)) = path {
                let last = fields(message, path).map_err(at)?;
                if last.is_list() || last.is_map() || matches!(last.kind(), Kind::Message(_)) {
                    return Err(at(format!("{path} is not a single value (a number, text, bytes, bool or enum)")));
                }
            }
            captures.push((capture.var.clone(), capture.from.clone()));
        }
        let mut checks = Vec::new();
        for Check { text, field, test } in &call.checks {
            let at = |e: String| format!("check {text:?}: {e}");
            one_request(field).map_err(at)?;
            let path = match field {
                Field::Request(path) => Some((&input, path)),
                Field::Response(path) => Some((&output, path)),
                _ => None,
            };
            let test = match test {
                Test::Exists => Compiled::Exists,
                Test::Compare(op, value) => {
                    let last = match path {
                        Some((message, path)) => Some(fields(message, path).map_err(at)?),
                        None => None,
                    };
                    if let Some(last) = &last {
                        if last.is_list() || last.is_map() || matches!(last.kind(), Kind::Message(_)) {
                            return Err(at(format!("{} is not a single value to compare (use exists)", last.name())));
                        }
                    }
                    operands_fit(last.as_ref(), *op, value).map_err(at)?;
                    Compiled::Compare(*op, TextTemplate::parse(value, vars).map_err(at)?)
                }
            };
            if let (Compiled::Exists, Some((message, path))) = (&test, path) {
                fields(message, path).map_err(at)?;
            }
            checks.push((text.clone(), field.clone(), test));
        }
        Ok(Some(Rules { captures, checks, input, output, first_check }))
    }

    pub fn checks(&self) -> usize {
        self.checks.len()
    }

    /// The checks as written, in order: their names in every report.
    pub fn check_texts(&self) -> impl Iterator<Item = &str> {
        self.checks.iter().map(|(text, _, _)| text.as_str())
    }

    /// Applies the rules to one answer: each check's pass or fail goes to `record` (by its
    /// index in the workload), each capture into `captured`. A check on a failed call fails
    /// (k6 counts it so). Err: a capture that could not be taken (the flow cannot go on).
    pub fn apply(
        &self,
        request: &Bytes,
        reply: &Reply,
        numbers: (u64, u32),
        captured: &mut Captured,
        mut record: impl FnMut(usize, bool),
    ) -> Result<(), String> {
        let ok = reply.status == tonic::Code::Ok;
        let needs = |which: fn(&Field) -> bool| {
            ok && (self.captures.iter().any(|(_, f)| which(f)) || self.checks.iter().any(|(_, f, _)| which(f)))
        };
        // A server stream that sent nothing has no response to read.
        let response = needs(|f| matches!(f, Field::Response(_)))
            .then(|| reply.response.as_ref().and_then(|r| DynamicMessage::decode(self.output.clone(), r.clone()).ok()))
            .flatten();
        let request = needs(|f| matches!(f, Field::Request(_)))
            .then(|| DynamicMessage::decode(self.input.clone(), request.get(5..).unwrap_or_default()).ok())
            .flatten();
        let read = |field: &Field| -> Option<Read> {
            match field {
                Field::Request(path) => request.as_ref().map(|m| value_at(m, path)),
                Field::Response(path) => response.as_ref().map(|m| value_at(m, path)),
                Field::Header(key) => Some(Read::Text(reply.metadata.header(key)?.to_owned())),
                Field::Trailer(key) => Some(Read::Text(reply.metadata.trailer(key)?.to_owned())),
            }
        };
        // Captures first: a check may compare with a value its own call captured.
        let mut failed = None;
        for (var, from) in &self.captures {
            let value = match (ok, read(from)) {
                (false, _) => continue,
                (true, Some(Read::Value(v))) => text(&v),
                (true, Some(Read::Text(t) | Read::Enum(_, Some(t)))) => t,
                (true, Some(Read::Enum(n, None))) => n.to_string(),
                (true, Some(Read::Absent) | None) => {
                    failed.get_or_insert_with(|| format!("capture {var:?}: nothing at {}", describe(from)));
                    continue;
                }
            };
            if value.len() > MAX_CAPTURE_BYTES {
                failed.get_or_insert_with(|| format!("capture {var:?}: {} bytes, more than 64 KiB", value.len()));
                continue;
            }
            match captured.iter_mut().find(|(name, _)| name == var) {
                Some((_, old)) => *old = value,
                None => captured.push((var.clone(), value)),
            }
        }
        for (i, (_, field, test)) in self.checks.iter().enumerate() {
            let pass = ok
                && match (test, read(field)) {
                    (Compiled::Exists, Some(Read::Value(_) | Read::Text(_) | Read::Enum(..))) => true,
                    (Compiled::Exists, _) => false,
                    (Compiled::Compare(op, expected), Some(found)) => {
                        let expected = expected.render(numbers.0, numbers.1, captured);
                        compare(&found, &expected, !matches!(op, Op::Eq | Op::Ne)).is_some_and(|o| op.holds(o))
                    }
                    (Compiled::Compare(..), None) => false,
                };
            record(self.first_check + i, pass);
        }
        failed.map_or(Ok(()), Err)
    }
}

/// Whether a check's operator and value suit the field it reads (None: a header or trailer,
/// text), so that a check that could never pass is refused before the run. Only `==` and `!=`
/// apply to text, bytes and bools; `<` `<=` `>` `>=` order numbers (a header's too). A value
/// with templates is checked when rendered.
fn operands_fit(field: Option<&FieldDescriptor>, op: Op, value: &str) -> Result<(), String> {
    let ordering = !matches!(op, Op::Eq | Op::Ne);
    let literal = (!value.contains("{{")).then_some(value.trim());
    let name = field.map_or("a header or trailer".to_owned(), |f| f.name().to_owned());
    // The literal value, if any, must read as the field's kind of number.
    let number = |what: &str, reads: fn(&str) -> bool| match literal {
        Some(v) if !reads(v) => Err(format!("{name} is {what}: {v:?} is not one")),
        _ => Ok(()),
    };
    let float = |v: &str| v.parse::<f64>().is_ok();
    let Some(field) = field else {
        // A header is text: ordered, it is read as a number.
        return if ordering { number("compared as a number", float) } else { Ok(()) };
    };
    let text_only = |what: &str| match ordering {
        true => Err(format!("{name} is {what}: compare it with == or != (< <= > >= order numbers)")),
        false => Ok(()),
    };
    match field.kind() {
        Kind::Bool => {
            text_only("a bool")?;
            match literal {
                Some(v) if v != "true" && v != "false" => {
                    Err(format!("{name} is a bool: compare it with true or false, not {v:?}"))
                }
                _ => Ok(()),
            }
        }
        Kind::String => text_only("text (string)"),
        Kind::Bytes => {
            text_only("bytes")?;
            use base64::Engine as _;
            match literal {
                Some(v) if base64::engine::general_purpose::STANDARD.decode(v).is_err() => {
                    Err(format!("{name} is bytes, compared as base64: {v:?} is not base64"))
                }
                _ => Ok(()),
            }
        }
        Kind::Float | Kind::Double => number("a number (float)", float),
        Kind::Enum(e) => match literal {
            Some(v) if v.parse::<i32>().is_ok() => Ok(()),
            Some(v) if e.get_value_by_name(v).is_none() => {
                Err(format!("{name} is the enum {}: {v:?} is neither one of its names nor a number", e.full_name()))
            }
            Some(_) if ordering => Err(format!("{name} is an enum: < <= > >= order it by number, not by name")),
            _ => Ok(()),
        },
        Kind::Message(_) => Ok(()),
        // Every integer kind.
        kind => number(&format!("a number ({})", format!("{kind:?}").to_lowercase()), |v| v.parse::<i128>().is_ok()),
    }
}

fn describe(field: &Field) -> String {
    match field {
        Field::Request(p) => format!("request.{p}"),
        Field::Response(p) => format!("response.{p}"),
        Field::Header(k) => format!("header {k}"),
        Field::Trailer(k) => format!("trailer {k}"),
    }
}

/// The field a dotted path names, every step but the last a singular message field.
fn fields(message: &MessageDescriptor, path: &str) -> Result<FieldDescriptor, String> {
    let mut message = message.clone();
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let field = message
            .get_field_by_name(part)
            .or_else(|| message.get_field_by_json_name(part))
            .ok_or_else(|| format!("{} has no field {part:?} (path {path})", message.full_name()))?;
        if parts.peek().is_none() {
            return Ok(field);
        }
        message = match field.kind() {
            Kind::Message(inner) if !field.is_list() && !field.is_map() => inner,
            _ => return Err(format!("{part} in {path} is not a message field to go into")),
        };
    }
    Err(format!("empty path {path:?}"))
}

/// A value found in an answer.
enum Read {
    Value(Value),
    /// A header or trailer.
    Text(String),
    /// An enum field's number, and its name when the enum has one for it.
    Enum(i32, Option<String>),
    /// A field without presence, or inside a message that is not there.
    Absent,
}

/// The value at `path` (checked against the descriptor before the run).
fn value_at(message: &DynamicMessage, path: &str) -> Read {
    let mut current = Cow::Borrowed(message);
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let Ok(field) = fields(&current.descriptor(), part) else { return Read::Absent };
        if parts.peek().is_none() {
            // A proto3 field without presence is there with its default value (as the
            // server meant it); `exists` asks for presence only of fields that have it.
            if field.supports_presence() && !current.has_field(&field) {
                return Read::Absent;
            }
            let value = current.get_field(&field).into_owned();
            if let (Value::EnumNumber(n), Kind::Enum(e)) = (&value, field.kind()) {
                return Read::Enum(*n, e.get_value(*n).map(|v| v.name().to_owned()));
            }
            return Read::Value(value);
        }
        if !current.has_field(&field) {
            return Read::Absent;
        }
        let next = match current.get_field(&field).into_owned() {
            Value::Message(m) => m,
            _ => return Read::Absent,
        };
        current = Cow::Owned(next);
    }
    Read::Absent
}

/// A value as a template variable: what the JSON mapping takes back (bytes as base64).
fn text(value: &Value) -> String {
    use base64::Engine as _;
    match value {
        Value::Bool(b) => b.to_string(),
        Value::I32(n) | Value::EnumNumber(n) => n.to_string(),
        Value::I64(n) => n.to_string(),
        Value::U32(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::F32(n) => n.to_string(),
        Value::F64(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Bytes(b) => base64::engine::general_purpose::STANDARD.encode(b),
        other => format!("{other:?}"),
    }
}

/// How `found` orders against `expected` (text); None when they cannot be compared (text
/// where a number is, say), which fails the check. `ordering` (`<` `<=` `>` `>=`): a header
/// or trailer is read as a number.
fn compare(found: &Read, expected: &str, ordering: bool) -> Option<Ordering> {
    let expected = expected.trim();
    let value = match found {
        Read::Absent => return None,
        Read::Text(t) if ordering => return t.trim().parse::<f64>().ok()?.partial_cmp(&expected.parse::<f64>().ok()?),
        Read::Text(t) => return Some(t.as_str().cmp(expected)),
        // An enum compares by number with a number, by name with a name.
        Read::Enum(n, name) => {
            return match expected.parse::<i32>() {
                Ok(e) => Some(n.cmp(&e)),
                Err(_) => name.as_deref().map(|name| name.cmp(expected)),
            }
        }
        Read::Value(v) => v,
    };
    let int = |n: i128| expected.parse::<i128>().ok().map(|e| n.cmp(&e));
    let float = |n: f64| expected.parse::<f64>().ok().and_then(|e| n.partial_cmp(&e));
    match value {
        Value::Bool(b) => expected.parse::<bool>().ok().map(|e| b.cmp(&e)),
        Value::I32(n) => int(*n as i128),
        Value::I64(n) => int(*n as i128),
        Value::U32(n) => int(*n as i128),
        Value::U64(n) => int(*n as i128),
        Value::F32(n) => float(*n as f64),
        Value::F64(n) => float(*n),
        Value::EnumNumber(n) => int(*n as i128),
        other => Some(text(other).as_str().cmp(expected)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(method: &str, name: &str) -> FieldDescriptor {
        let pool = prost_reflect::DescriptorPool::decode(crate::lab::proto::FILE_DESCRIPTOR_SET).unwrap();
        let method = crate::schema::find_method(&pool, method).unwrap();
        method.output().get_field_by_name(name).unwrap()
    }

    #[test]
    fn a_checks_operator_and_value_must_suit_its_fields_type() {
        let get = |name| field("rpcmeter.lab.v1.Storage/GetValue", name);
        let fits = |f: Option<&FieldDescriptor>, op, v: &str| operands_fit(f, op, v);
        assert!(fits(Some(&get("found")), Op::Lt, "5").unwrap_err().contains("found is a bool"));
        assert!(fits(Some(&get("found")), Op::Eq, "yes").unwrap_err().contains("true or false, not \"yes\""));
        assert!(fits(Some(&get("found")), Op::Ne, "false").is_ok());
        assert!(fits(Some(&get("version")), Op::Eq, "banana").unwrap_err().contains("a number (uint64)"));
        assert!(fits(Some(&get("version")), Op::Ge, "{{.version}}").is_ok(), "rendered per call");
        assert!(fits(Some(&get("value")), Op::Gt, "aGk=").unwrap_err().contains("value is bytes"));
        assert!(fits(Some(&get("value")), Op::Eq, "aGk").unwrap_err().contains("is not base64"));
        let content = field("EchoService/echo", "content");
        assert!(fits(Some(&content), Op::Gt, "5").unwrap_err().contains("content is text (string)"));
        assert!(fits(Some(&content), Op::Eq, "5").is_ok());
        let dir = tempfile::tempdir().unwrap();
        let proto = dir.path().join("h.proto");
        std::fs::write(
            &proto,
            "syntax = \"proto3\"; enum S { UNKNOWN = 0; SERVING = 1; }\n\
                                message R { S status = 1; } service H { rpc Check(R) returns (R); }",
        )
        .unwrap();
        let pool = crate::schema::compile_proto(&proto, &[]).unwrap();
        let status =
            crate::schema::find_method(&pool, "H/Check").unwrap().output().get_field_by_name("status").unwrap();
        assert!(fits(Some(&status), Op::Eq, "SERVING").is_ok() && fits(Some(&status), Op::Lt, "2").is_ok());
        assert!(fits(Some(&status), Op::Eq, "UP").unwrap_err().contains("neither one of its names nor a number"));
        assert!(fits(Some(&status), Op::Gt, "SERVING").unwrap_err().contains("by number, not by name"));
        assert!(fits(None, Op::Lt, "many").unwrap_err().contains("a header or trailer is compared as a number"));
        assert!(fits(None, Op::Eq, "many").is_ok());
    }

    #[test]
    fn an_ordered_header_compares_as_a_number() {
        let header = |t: &str| Read::Text(t.to_owned());
        assert_eq!(compare(&header("10"), "9", true), Some(Ordering::Greater), "as text, 10 < 9");
        assert_eq!(compare(&header("10"), "9", false), Some(Ordering::Less), "== and != compare text");
        assert_eq!(compare(&header("x"), "9", true), None, "not a number: the check fails");
    }
}
