// mimalloc instead of glibc's malloc: a profile of `serve` under h2load put glibc's malloc,
// free and consolidation at ~10% of the server's CPU (buffers allocated on one runtime thread
// and freed on another). bench/serve.sh measures the difference.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    rpcmeter::cli::main()
}
