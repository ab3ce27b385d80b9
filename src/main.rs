//! The `shardgate` command; everything is in [`shardgate::cli`].

fn main() -> std::process::ExitCode {
    shardgate::cli::main()
}
