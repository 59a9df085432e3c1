//! Schema from server reflection: a tonic server with the lab's echo service and
//! tonic-reflection (v1, or v1alpha only) on 127.0.0.1, asked through rpcmeter's own transport.
use prost::Message as _;
use rpcmeter::grpc::transport::Target;
use rpcmeter::lab::proto::echo::echo_service_server::{EchoService, EchoServiceServer};
use rpcmeter::lab::proto::echo::Message;
use rpcmeter::schema::{resolve_method, SchemaSource};
use std::net::SocketAddr;
use tonic::{Request, Response, Status};

struct Echo;

#[tonic::async_trait]
impl EchoService for Echo {
    async fn echo(&self, request: Request<Message>) -> Result<Response<Message>, Status> {
        Ok(Response::new(request.into_inner()))
    }
}

#[derive(Clone, Copy)]
enum Reflection {
    V1,
    V1Alpha,
    None,
}

/// Serves echo (and reflection over `files`, an encoded FileDescriptorSet) until the test ends.
async fn serve(reflection: Reflection, files: Vec<u8>) -> Target {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let builder = || {
        tonic_reflection::server::Builder::configure()
            .register_file_descriptor_set(prost_types::FileDescriptorSet::decode(files.as_slice()).unwrap())
    };
    let router = tonic::transport::Server::builder().add_service(EchoServiceServer::new(Echo));
    let router = match reflection {
        Reflection::V1 => router.add_service(builder().build_v1().unwrap()),
        Reflection::V1Alpha => router.add_service(builder().build_v1alpha().unwrap()),
        Reflection::None => router,
    };
    tokio::spawn(router.serve_with_incoming(incoming));
    target(addr)
}

fn target(addr: SocketAddr) -> Target {
    Target::new(addr.ip().to_string(), addr.port())
}

/// Reflection without metadata.
fn reflection() -> SchemaSource {
    SchemaSource::Reflection { metadata: Default::default() }
}

fn lab() -> Vec<u8> {
    rpcmeter::lab::proto::FILE_DESCRIPTOR_SET.to_vec()
}

#[tokio::test]
async fn v1_reflection_resolves_the_echo_method_and_lab_services() {
    let target = serve(Reflection::V1, lab()).await;
    let echo = resolve_method(&reflection(), "EchoService/echo", &target).await.unwrap();
    assert_eq!(echo.full_name(), "EchoService.echo");
    assert_eq!(echo.input().full_name(), "Message");
    let cpu = resolve_method(&reflection(), "TestService.Cpu", &target).await.unwrap();
    assert_eq!(cpu.input().full_name(), "rpcmeter.lab.v1.CpuRequest");
}

#[tokio::test]
async fn v1alpha_only_server_is_used_after_v1_is_unimplemented() {
    let target = serve(Reflection::V1Alpha, lab()).await;
    let echo = resolve_method(&reflection(), "EchoService/echo", &target).await.unwrap();
    assert_eq!(echo.full_name(), "EchoService.echo");
}

#[tokio::test]
async fn unknown_service_lists_what_the_server_has() {
    let target = serve(Reflection::V1, lab()).await;
    let e = resolve_method(&reflection(), "EchoServic/echo", &target).await.unwrap_err();
    assert_eq!(rpcmeter::error::exit_code(&e), 2);
    let e = e.to_string();
    assert!(e.contains("no service \"EchoServic\"") && e.contains("rpcmeter.lab.v1.Stats"), "{e}");
    assert!(e.ends_with("did you mean \"EchoService\"?"), "{e}");
}

#[tokio::test]
async fn imports_are_fetched_by_name_and_well_known_types_filled_in() {
    // a.proto imports b.proto and google/protobuf/timestamp.proto; the server knows the first
    // two only (no --include_imports), so the timestamp must come from rpcmeter's own copy.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.proto"), "syntax = \"proto3\"; package b; message Inner { string s = 1; }")
        .unwrap();
    std::fs::write(
        dir.path().join("a.proto"),
        "syntax = \"proto3\"; package a; import \"b.proto\"; import \"google/protobuf/timestamp.proto\";\n\
         message Req { b.Inner inner = 1; google.protobuf.Timestamp at = 2; }\n\
         service Api { rpc Do(Req) returns (b.Inner); }",
    )
    .unwrap();
    let set =
        protox::Compiler::new([dir.path()]).unwrap().open_files(["a.proto", "b.proto"]).unwrap().file_descriptor_set();
    assert!(set.file.iter().all(|f| !f.name().starts_with("google/")));

    let target = serve(Reflection::V1, set.encode_to_vec()).await;
    let method = resolve_method(&reflection(), "a.Api/Do", &target).await.unwrap();
    let req = method.input();
    assert_eq!(req.get_field_by_name("inner").unwrap().kind().as_message().unwrap().full_name(), "b.Inner");
    assert_eq!(
        req.get_field_by_name("at").unwrap().kind().as_message().unwrap().full_name(),
        "google.protobuf.Timestamp"
    );
}

#[tokio::test]
async fn a_server_without_reflection_is_bad_input() {
    let target = serve(Reflection::None, lab()).await;
    let e = resolve_method(&reflection(), "EchoService/echo", &target).await.unwrap_err();
    assert_eq!(rpcmeter::error::exit_code(&e), 2);
    let e = format!("{e:#}");
    assert!(e.contains("has no server reflection") && e.contains("--proto"), "{e}");
}

#[tokio::test]
async fn an_unreachable_target_fails_the_run() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let e = resolve_method(&reflection(), "EchoService/echo", &target(closed)).await.unwrap_err();
    assert_eq!(rpcmeter::error::exit_code(&e), 1, "{e:#}");
    assert!(!format!("{e:#}").contains('\n'));
}
