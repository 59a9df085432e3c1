//! Compiles the lab's .proto files with protox (no protoc on the machine needed),
//! generates the tonic stubs and keeps the encoded descriptor set for server reflection; and
//! gRPC's binary log format (grpc.binarylog.v1, gRFC A16) as messages only, apart, so that the
//! lab's reflection does not serve it.
use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["echo.proto", "rpcmeter/lab/v1/lab.proto"];
    println!("cargo:rerun-if-changed=proto");
    // The labs' servers are embedded (include_dir! in src/experiments/servers.rs), which cargo
    // does not track by itself.
    println!("cargo:rerun-if-changed=labs/servers");
    let fds = protox::compile(files, ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("lab_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(fds)?;
    let binlog = protox::compile(["grpc/binlog/v1/binarylog.proto"], ["proto"])?;
    tonic_prost_build::configure().build_client(false).build_server(false).compile_fds(binlog)?;
    Ok(())
}
