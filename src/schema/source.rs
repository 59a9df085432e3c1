//! Where descriptors come from: a .proto compiled by protox, a protoset, or the target's
//! server reflection.
use crate::error::{bad_input, run_failed};
use crate::grpc::wire::frame;
use crate::grpc::{CallSpec, Connection, Connector, Target};
use anyhow::Context;
use prost::Message;
use prost_reflect::DescriptorPool;
use prost_types::{FileDescriptorProto, FileDescriptorSet};
use protox::file::{FileResolver, GoogleFileResolver};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic_reflection::pb::v1::{
    server_reflection_request::MessageRequest, server_reflection_response::MessageResponse, ServerReflectionRequest,
    ServerReflectionResponse,
};

/// Compiles `file` and its imports. The include paths are the given ones, then the file's own
/// directory, so that a lone file and the files beside it resolve with no flag; the
/// google/protobuf well-known types always resolve (protox ships them).
pub(super) fn compile(file: &Path, import_paths: &[PathBuf]) -> anyhow::Result<DescriptorPool> {
    let mut includes = import_paths.to_vec();
    if file.is_file() {
        let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        includes.push(dir.to_owned());
    } else if !import_paths.iter().any(|dir| dir.join(file).is_file()) {
        // protox would say "not in any include path", which hides the real problem.
        let problem = if file.is_dir() || import_paths.iter().any(|dir| dir.join(file).is_dir()) {
            "is a directory; expected a .proto file (import directories go in -i)"
        } else if file.exists() {
            "not a regular file (a device, pipe or socket); expected a .proto file"
        } else {
            "no such file"
        };
        return Err(bad_input(format!("--proto {}: {problem}", file.display())));
    }
    let fail = |e: protox::Error| bad_input(format!("--proto {}: {}", file.display(), one_line(&format!("{e:?}"))));
    let mut chain = protox::file::ChainFileResolver::new();
    for dir in &includes {
        chain.add(protox::file::IncludeFileResolver::new(dir.clone()));
    }
    chain.add(GoogleFileResolver::new());
    let bounded = Bounded { includes, inner: chain, limit: crate::input::limit(crate::input::Kind::Proto) };
    let mut compiler = protox::Compiler::with_file_resolver(bounded);
    compiler.open_file(file).map_err(fail)?;
    Ok(compiler.descriptor_pool())
}

/// protox's include-path resolver, with each file's size held to the limit for .proto files
/// before protox reads it (protox's own bound is 2 GiB, read into memory whole).
struct Bounded {
    includes: Vec<PathBuf>,
    inner: protox::file::ChainFileResolver,
    limit: crate::input::ByteSize,
}

/// A refusal as protox carries it: its Debug is the line shown.
struct Refused(String);

impl std::fmt::Debug for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl FileResolver for Bounded {
    fn resolve_path(&self, path: &Path) -> Option<String> {
        self.inner.resolve_path(path)
    }

    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        // The first include path holding `name` is the one the chain opens.
        let found = self.includes.iter().map(|dir| dir.join(name)).find_map(|p| Some((std::fs::metadata(&p).ok()?, p)));
        match found {
            Some((meta, _)) if meta.is_file() && meta.len() > self.limit.0 => {
                let refusal = crate::input::too_large(name, Some(meta.len()), crate::input::Kind::Proto, self.limit);
                Err(protox::Error::new(Refused(refusal.to_string())))
            }
            // A pipe or a device says no size: read it with the bound.
            Some((meta, path)) if !meta.is_file() && !meta.is_dir() => {
                let text = crate::input::read_string(&path, crate::input::Kind::Proto, name)
                    .map_err(|e| protox::Error::new(Refused(e.to_string())))?;
                protox::file::File::from_source(name, &text)
            }
            _ => self.inner.open_file(name),
        }
    }
}

/// A FileDescriptorSet as `protoc -o` or `buf build -o` write it. Well-known types it imports
/// but lacks (protoc without --include_imports) are filled in.
pub(super) fn protoset(path: &Path) -> anyhow::Result<DescriptorPool> {
    let fail = |problem: String| bad_input(format!("--protoset {}: {problem}", path.display()));
    let label = format!("--protoset {}", path.display());
    let bytes = crate::input::read(path, crate::input::Kind::Proto, &label)?;
    let set = FileDescriptorSet::decode(bytes.as_slice())
        .map_err(|e| fail(format!("not a FileDescriptorSet (protoc -o / buf build -o output): {e}")))?;
    if set.file.is_empty() {
        return Err(fail("no files in the descriptor set".to_owned()));
    }
    pool_of(set.file).map_err(fail)
}

/// Builds a pool from files in any order, adding the well-known types they import but lack
/// (and the ones those import).
fn pool_of(files: Vec<FileDescriptorProto>) -> Result<DescriptorPool, String> {
    let google = GoogleFileResolver::new();
    let mut files: HashMap<String, FileDescriptorProto> = files.into_iter().map(|f| (f.name().to_owned(), f)).collect();
    let mut wanted: Vec<String> = files.values().flat_map(|f| f.dependency.clone()).collect();
    while let Some(dep) = wanted.pop() {
        if files.contains_key(&dep) {
            continue;
        }
        if let Ok(wkt) = google.open_file(&dep) {
            let wkt = wkt.file_descriptor_proto().clone();
            wanted.extend(wkt.dependency.iter().cloned());
            files.insert(dep, wkt);
        }
    }
    let mut pool = DescriptorPool::new();
    pool.add_file_descriptor_protos(files.into_values()).map_err(|e| one_line(&format!("{e:?}")))?;
    Ok(pool)
}

/// Whether protox ships `name` (google/protobuf/*.proto), so that `pool_of` fills it in.
fn well_known(name: &str) -> bool {
    GoogleFileResolver::new().open_file(name).is_ok()
}

/// Asks the target for its schema: lists its services, lets `pick` choose the wanted one
/// (its errors list what the server has), then fetches the file defining it and, one by
/// one, the files it imports.
pub(super) async fn reflect(
    target: &Target,
    metadata: &http::HeaderMap,
    pick: impl FnOnce(&[String]) -> anyhow::Result<&str>,
) -> anyhow::Result<DescriptorPool> {
    let addr = target.server();
    let conn = Connector::new(target)?.connect().await.with_context(|| format!("server reflection on {addr}"))?;
    let mut reflection = Reflection { conn, addr, version: Version::V1, metadata: metadata.clone() };

    let services = match reflection.ask(MessageRequest::ListServices(String::new())).await? {
        MessageResponse::ListServicesResponse(list) => list.service.into_iter().map(|s| s.name).collect::<Vec<_>>(),
        other => return Err(reflection.unexpected(other)),
    };
    let service = pick(&services)?.to_owned();

    let mut files: HashMap<String, FileDescriptorProto> = HashMap::new();
    let mut next = VecDeque::from([MessageRequest::FileContainingSymbol(service)]);
    while let Some(request) = next.pop_front() {
        let received = match reflection.ask(request).await? {
            MessageResponse::FileDescriptorResponse(r) => r.file_descriptor_proto,
            other => return Err(reflection.unexpected(other)),
        };
        for bytes in received {
            let file = FileDescriptorProto::decode(bytes.as_slice()).map_err(|e| {
                bad_input(format!("server reflection on {}: undecodable file descriptor: {e}", reflection.addr))
            })?;
            files.insert(file.name().to_owned(), file);
        }
        // Imports neither received nor asked for yet; well-known types need no round trip.
        for dep in files.values().flat_map(|f| f.dependency.iter()) {
            let request = MessageRequest::FileByFilename(dep.clone());
            if !files.contains_key(dep) && !next.contains(&request) && !well_known(dep) {
                next.push_back(request);
            }
        }
    }
    pool_of(files.into_values().collect())
        .map_err(|e| bad_input(format!("server reflection on {}: {e}", reflection.addr)))
}

#[derive(Clone, Copy, PartialEq)]
enum Version {
    V1,
    V1Alpha,
}

/// One reflection exchange per request: a bidi-streaming RPC answered over a single request
/// message works as a unary call at the wire level. v1alpha carries the very same messages
/// (same fields and numbers), so the v1 types serve both; only the path differs.
struct Reflection {
    conn: Connection,
    addr: String,
    version: Version,
    metadata: http::HeaderMap,
}

impl Reflection {
    async fn ask(&mut self, request: MessageRequest) -> anyhow::Result<MessageResponse> {
        let body =
            frame(&ServerReflectionRequest { host: String::new(), message_request: Some(request) }.encode_to_vec());
        loop {
            let path = match self.version {
                Version::V1 => "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                Version::V1Alpha => "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            };
            let spec = CallSpec {
                path: http::uri::PathAndQuery::from_static(path),
                metadata: self.metadata.clone(),
                deadline: Some(Duration::from_secs(10)),
                messages: Default::default(),
            };
            let reply = self.conn.unary(&spec, body.clone(), true).await;
            // An HTTP/2 server that is no gRPC server answers with an HTTP status (404 maps
            // to UNIMPLEMENTED): that is the target's doing, as an unreachable one is.
            if let Some(http) = reply.message.as_deref().filter(|m| m.starts_with("HTTP status")) {
                return Err(run_failed(format!("{} does not answer as a gRPC server ({http})", self.addr)));
            }
            let problem = match reply.status {
                tonic::Code::Ok => return self.decode(reply.response.unwrap_or_default()),
                tonic::Code::Unimplemented if self.version == Version::V1 => {
                    self.version = Version::V1Alpha;
                    continue;
                }
                tonic::Code::Unimplemented => {
                    return Err(bad_input(format!(
                        "{} has no server reflection (v1 nor v1alpha); give --proto or --protoset",
                        self.addr
                    )))
                }
                // A server that wants credentials on reflection too: say where they go.
                code @ (tonic::Code::Unauthenticated | tonic::Code::PermissionDenied) => format!(
                    "{code:?}: {} (metadata for reflection: -m, or --reflect-metadata for reflection only)",
                    reply.message.unwrap_or_default()
                ),
                code => format!("{code:?}: {}", reply.message.unwrap_or_default()),
            };
            // The target did not answer as a gRPC server: the run failed (exit 1), as when it
            // cannot be reached; nothing the user typed was wrong.
            return Err(run_failed(format!("server reflection on {}: {}", self.addr, one_line(&problem))));
        }
    }

    fn decode(&self, bytes: bytes::Bytes) -> anyhow::Result<MessageResponse> {
        let response = ServerReflectionResponse::decode(bytes)
            .map_err(|e| bad_input(format!("server reflection on {}: undecodable answer: {e}", self.addr)))?;
        match response.message_response {
            Some(MessageResponse::ErrorResponse(e)) => Err(bad_input(format!(
                "server reflection on {}: {} ({:?})",
                self.addr,
                one_line(&e.error_message),
                tonic::Code::from_i32(e.error_code)
            ))),
            Some(answer) => Ok(answer),
            None => Err(bad_input(format!("server reflection on {}: empty answer", self.addr))),
        }
    }

    fn unexpected(&self, answer: MessageResponse) -> anyhow::Error {
        let kind = match answer {
            MessageResponse::FileDescriptorResponse(_) => "file descriptors",
            MessageResponse::AllExtensionNumbersResponse(_) => "extension numbers",
            MessageResponse::ListServicesResponse(_) => "a service list",
            MessageResponse::ErrorResponse(_) => "an error",
        };
        bad_input(format!("server reflection on {}: unexpected answer ({kind})", self.addr))
    }
}

/// Errors end up on one stderr line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("proto")
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn lab_proto_compiles_with_and_without_import_paths() {
        let pool = compile(&lab().join("rpcmeter/lab/v1/lab.proto"), &[lab()]).unwrap();
        assert!(pool.get_service_by_name("rpcmeter.lab.v1.TestService").is_some());
        let pool = compile(&lab().join("echo.proto"), &[]).unwrap();
        assert!(pool.get_service_by_name("EchoService").is_some());
        // grpcurl/ghz style: the file named relative to an import path.
        let pool = compile(Path::new("rpcmeter/lab/v1/lab.proto"), &[lab()]).unwrap();
        assert!(pool.get_message_by_name("rpcmeter.lab.v1.CpuRequest").is_some());
    }

    #[test]
    fn well_known_types_import_with_no_flag() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(
            dir.path(),
            "t.proto",
            "syntax = \"proto3\"; import \"google/protobuf/timestamp.proto\";\n\
             message At { google.protobuf.Timestamp when = 1; }\n\
             service Clock { rpc Now(At) returns (At); }",
        );
        let pool = compile(&file, &[]).unwrap();
        let at = pool.get_message_by_name("At").unwrap();
        assert_eq!(
            at.get_field_by_name("when").unwrap().kind().as_message().unwrap().full_name(),
            "google.protobuf.Timestamp"
        );
    }

    #[test]
    fn a_neighbour_file_imports_with_no_flag() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "common.proto", "syntax = \"proto3\"; message Common { string id = 1; }");
        let file = write(
            dir.path(),
            "main.proto",
            "syntax = \"proto3\"; import \"common.proto\"; service S { rpc Get(Common) returns (Common); }",
        );
        assert!(compile(&file, &[]).unwrap().get_message_by_name("Common").is_some());
    }

    #[test]
    fn missing_import_is_one_line_naming_the_import() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "m.proto", "syntax = \"proto3\";\nimport \"nowhere/gone.proto\";\nmessage M {}");
        let e = compile(&file, &[]).unwrap_err().to_string();
        assert!(e.contains("import 'nowhere/gone.proto' not found"), "{e}");
        assert!(e.contains("m.proto:2:1"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn broken_proto_is_one_line_with_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "broken.proto", "syntax = \"proto3\";\nmessage M {\n  string name = ;\n}\n");
        let e = compile(&file, &[]).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        let e = e.to_string();
        assert!(e.starts_with(&format!("--proto {}: broken.proto:3:17: ", file.display())), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn an_undefined_type_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "u.proto", "syntax = \"proto3\";\nmessage M { Nope n = 1; }");
        let e = compile(&file, &[]).unwrap_err().to_string();
        assert!(e.contains("u.proto:2:") && e.contains("Nope"), "{e}");
    }

    #[test]
    fn missing_proto_file_names_the_path() {
        let e = compile(Path::new("/no/such/dir/x.proto"), &[]).unwrap_err().to_string();
        assert_eq!(e, "--proto /no/such/dir/x.proto: no such file");
    }

    #[test]
    fn a_device_or_pipe_given_as_proto_is_not_called_missing() {
        let e = compile(Path::new("/dev/zero"), &[]).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert_eq!(
            e.to_string(),
            "--proto /dev/zero: not a regular file (a device, pipe or socket); expected a .proto file"
        );
    }

    #[test]
    fn a_directory_given_as_proto_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let e = compile(dir.path(), &[]).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert_eq!(
            e.to_string(),
            format!(
                "--proto {}: is a directory; expected a .proto file (import directories go in -i)",
                dir.path().display()
            )
        );
        // Named relative to an import path, as a file would be.
        std::fs::create_dir(dir.path().join("api")).unwrap();
        let e = compile(Path::new("api"), &[dir.path().to_owned()]).unwrap_err().to_string();
        assert!(e.starts_with("--proto api: is a directory; expected a .proto file"), "{e}");
    }

    #[test]
    fn protoset_decodes_and_fills_in_well_known_types() {
        let dir = tempfile::tempdir().unwrap();
        let lab_set = write_bytes(dir.path(), "lab.pb", crate::lab::proto::FILE_DESCRIPTOR_SET);
        assert!(protoset(&lab_set).unwrap().get_service_by_name("EchoService").is_some());

        // As protoc -o writes it without --include_imports: the timestamp import is missing.
        let proto = write(dir.path(), "t.proto", "syntax = \"proto3\"; import \"google/protobuf/timestamp.proto\"; message At { google.protobuf.Timestamp when = 1; }");
        let set = protox::Compiler::new([dir.path()]).unwrap().open_file(&proto).unwrap().file_descriptor_set();
        assert_eq!(set.file.len(), 1);
        let path = write_bytes(dir.path(), "t.pb", &set.encode_to_vec());
        assert!(protoset(&path).unwrap().get_message_by_name("At").is_some());

        // api.proto imports type.proto, which imports any.proto: filled in transitively.
        let proto = write(dir.path(), "a.proto", "syntax = \"proto3\"; import \"google/protobuf/api.proto\"; import \"google/protobuf/timestamp.proto\"; message A { google.protobuf.Api api = 1; google.protobuf.Timestamp at = 2; }");
        let set = protox::Compiler::new([dir.path()])
            .unwrap()
            .open_files([&proto, &dir.path().join("t.proto")])
            .unwrap()
            .file_descriptor_set();
        assert_eq!(set.file.len(), 2);
        let path = write_bytes(dir.path(), "a.pb", &set.encode_to_vec());
        let pool = protoset(&path).unwrap();
        assert!(pool.get_message_by_name("google.protobuf.Any").is_some());
    }

    #[test]
    fn a_file_that_is_no_descriptor_set_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "x.pb", "syntax = \"proto3\"; message M {}");
        let e = protoset(&path).unwrap_err().to_string();
        assert!(e.starts_with(&format!("--protoset {}: not a FileDescriptorSet", path.display())), "{e}");
        let e = protoset(&dir.path().join("absent.pb")).unwrap_err().to_string();
        assert!(e.contains("absent.pb: cannot read: No such file"), "{e}");
    }

    fn write_bytes(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}
