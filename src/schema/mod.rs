//! Schema: which method to call and what to send, from a .proto compiled at run time
//! (protox), a protoset, or server reflection.
use crate::error::bad_input;
use crate::grpc::transport::Target;
use prost_reflect::{DescriptorPool, MethodDescriptor};
use std::path::PathBuf;

mod metadata;
mod request;
mod source;

pub use metadata::{metadata, metadata_of};
pub use request::{is_builtin_template, RequestSource, TextTemplate};

#[derive(Debug, Clone)]
pub enum SchemaSource {
    Proto {
        file: PathBuf,
        import_paths: Vec<PathBuf>,
    },
    Protoset(PathBuf),
    /// Ask the target through grpc.reflection (v1, then v1alpha), with this metadata (`-m`
    /// and `--reflect-metadata`: servers that want authentication on reflection too).
    Reflection {
        metadata: http::HeaderMap,
    },
}

/// Finds `call` ("pkg.Svc/Method" or "pkg.Svc.Method") in the schema. Unknown names are
/// `bad_input` errors that list what the schema has, with a did-you-mean.
pub async fn resolve_method(source: &SchemaSource, call: &str, target: &Target) -> anyhow::Result<MethodDescriptor> {
    let (service, _) = split_call(call)?;
    let pool = match source {
        SchemaSource::Proto { file, import_paths } => source::compile(file, import_paths)?,
        SchemaSource::Protoset(path) => source::protoset(path)?,
        SchemaSource::Reflection { metadata } => {
            source::reflect(target, metadata, |services| pick_service(call, service, services)).await?
        }
    };
    find_method(&pool, call)
}

/// Compiles a .proto as `run --proto FILE -i DIRS` does (for `kube`, which ships the files
/// it reads).
pub fn compile_proto(file: &std::path::Path, import_paths: &[PathBuf]) -> anyhow::Result<DescriptorPool> {
    source::compile(file, import_paths)
}

/// Where request bodies come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSource {
    /// `-d`: one JSON object (protobuf JSON mapping), or an array of them cycled call by
    /// call; may hold templates.
    Json(String),
    /// `-D`: a file ("-" = stdin): one JSON object, an array or JSON lines cycled call by call.
    File(PathBuf),
    /// Neither: the empty message.
    Empty,
}

/// Finds `call` in `pool`: the service by its full name, or without its package when that
/// is unambiguous; then the method by its exact name (any kind: unary or streaming).
pub fn find_method(pool: &DescriptorPool, call: &str) -> anyhow::Result<MethodDescriptor> {
    let (service, method) = split_call(call)?;
    let names: Vec<String> = pool.services().map(|s| s.full_name().to_owned()).collect();
    let service =
        pool.get_service_by_name(pick_service(call, service, &names)?).expect("picked from the pool's own names");
    let Some(found) = service.methods().find(|m| m.name() == method) else {
        let methods: Vec<String> = service.methods().map(|m| m.name().to_owned()).collect();
        return Err(bad_input(format!(
            "--call {call}: no method \"{method}\" in {} (methods: {}){}",
            service.full_name(),
            methods.join(", "),
            did_you_mean(method, &methods)
        )));
    };
    Ok(found)
}

/// "pkg.Svc/Method", "pkg.Svc.Method" (or "/pkg.Svc/Method", the HTTP path) → ("pkg.Svc", "Method").
fn split_call(call: &str) -> anyhow::Result<(&str, &str)> {
    let trimmed = call.strip_prefix('/').unwrap_or(call);
    let split = trimmed.rsplit_once('/').or_else(|| trimmed.rsplit_once('.'));
    match split {
        Some((service, method)) if !service.is_empty() && !method.is_empty() => Ok((service, method)),
        _ => Err(bad_input(format!(
            "--call {call:?}: expected SERVICE/METHOD or SERVICE.METHOD, e.g. rpcmeter.lab.v1.TestService/Cpu"
        ))),
    }
}

/// The full name among `services` that `wanted` means: itself, or the only service whose
/// name without its package is `wanted`.
fn pick_service<'a>(call: &str, wanted: &str, services: &'a [String]) -> anyhow::Result<&'a str> {
    if let Some(exact) = services.iter().find(|s| *s == wanted) {
        return Ok(exact);
    }
    let unqualified: Vec<&String> = services.iter().filter(|s| short_name(s) == wanted).collect();
    match unqualified[..] {
        [only] => Ok(only),
        [] => Err(bad_input(format!(
            "--call {call}: no service \"{wanted}\" in the schema (services: {}){}",
            if services.is_empty() { "none".to_owned() } else { services.join(", ") },
            did_you_mean(wanted, services)
        ))),
        _ => Err(bad_input(format!(
            "--call {call}: service \"{wanted}\" is ambiguous ({}); give its package",
            unqualified.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

fn short_name(full_name: &str) -> &str {
    full_name.rsplit('.').next().unwrap_or(full_name)
}

/// `; did you mean "X"?` for the candidate closest to `wanted` (by full or short name,
/// ignoring case), or nothing when none is close.
fn did_you_mean(wanted: &str, candidates: &[String]) -> String {
    let wanted = wanted.to_lowercase();
    let score = |c: &str| {
        let full = strsim::normalized_levenshtein(&wanted, &c.to_lowercase());
        full.max(strsim::normalized_levenshtein(&wanted, &short_name(c).to_lowercase()))
    };
    candidates
        .iter()
        .map(|c| (score(c), c))
        .filter(|(s, _)| *s >= 0.5)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| format!("; did you mean \"{c}\"?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab_pool() -> DescriptorPool {
        DescriptorPool::decode(crate::lab::proto::FILE_DESCRIPTOR_SET).unwrap()
    }

    fn err(call: &str) -> String {
        find_method(&lab_pool(), call).unwrap_err().to_string()
    }

    #[test]
    fn both_call_syntaxes_and_the_path_find_the_method() {
        let pool = lab_pool();
        for call in
            ["rpcmeter.lab.v1.TestService/Cpu", "rpcmeter.lab.v1.TestService.Cpu", "/rpcmeter.lab.v1.TestService/Cpu"]
        {
            assert_eq!(find_method(&pool, call).unwrap().full_name(), "rpcmeter.lab.v1.TestService.Cpu", "{call}");
        }
        assert_eq!(find_method(&pool, "EchoService/echo").unwrap().full_name(), "EchoService.echo");
        assert_eq!(find_method(&pool, "EchoService.echo").unwrap().full_name(), "EchoService.echo");
    }

    #[test]
    fn a_service_without_its_package_is_found_when_unambiguous() {
        assert_eq!(find_method(&lab_pool(), "TestService/Db").unwrap().full_name(), "rpcmeter.lab.v1.TestService.Db");
        let services = ["a.Svc".to_owned(), "b.Svc".to_owned()];
        let e = pick_service("Svc/M", "Svc", &services).unwrap_err().to_string();
        assert!(e.contains("ambiguous") && e.contains("a.Svc, b.Svc"), "{e}");
    }

    #[test]
    fn unknown_method_lists_the_methods_and_suggests_one() {
        let e = err("rpcmeter.lab.v1.TestService/Cpuu");
        assert_eq!(
            e,
            "--call rpcmeter.lab.v1.TestService/Cpuu: no method \"Cpuu\" in rpcmeter.lab.v1.TestService \
             (methods: Cpu, Db); did you mean \"Cpu\"?"
        );
    }

    #[test]
    fn unknown_service_lists_the_services_and_suggests_one() {
        let e = err("rpcmeter.lab.v1.TestServce/Cpu");
        assert!(e.contains("no service \"rpcmeter.lab.v1.TestServce\""), "{e}");
        assert!(e.contains("EchoService") && e.contains("rpcmeter.lab.v1.Storage"), "{e}");
        assert!(e.ends_with("did you mean \"rpcmeter.lab.v1.TestService\"?"), "{e}");
        // Nothing close: no suggestion, still the list.
        let e = err("Zzzzzz/Q");
        assert!(e.contains("(services: ") && !e.contains("did you mean"), "{e}");
    }

    #[test]
    fn a_call_without_a_method_is_rejected() {
        for call in ["EchoService", "EchoService/", "/echo"] {
            assert!(err(call).contains("expected SERVICE/METHOD"), "{call}: {}", err(call));
        }
    }

    #[test]
    fn streaming_methods_are_found_with_their_kind() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.proto");
        std::fs::write(&file, "syntax = \"proto3\"; message M {} service S { rpc Watch(M) returns (stream M); }")
            .unwrap();
        let pool = source::compile(&file, &[]).unwrap();
        let found = find_method(&pool, "S/Watch").unwrap();
        assert!(found.is_server_streaming() && !found.is_client_streaming());
    }
}
