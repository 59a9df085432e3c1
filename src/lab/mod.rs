//! The lab: reference services with known behaviour (DESIGN.md, "rpcmeter serve").

/// Code generated from proto/ by build.rs.
pub mod proto {
    /// Seed 000's echo service: no package, as the article has it.
    pub mod echo {
        tonic::include_proto!("_");
    }
    pub mod lab {
        tonic::include_proto!("rpcmeter.lab.v1");
    }
    /// The encoded descriptor set of every lab proto, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lab_descriptor.bin"));
    /// The .proto sources, for `rpcmeter protos`.
    pub const SOURCES: &[(&str, &str)] = &[
        ("echo.proto", include_str!("../../proto/echo.proto")),
        ("rpcmeter/lab/v1/lab.proto", include_str!("../../proto/rpcmeter/lab/v1/lab.proto")),
    ];
}
