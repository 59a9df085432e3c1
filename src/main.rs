fn main() -> std::process::ExitCode {
    rpcmeter::cli::main()
}
