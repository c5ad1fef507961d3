//! The `nccl-sim` command.
//!
//! Temporary: only the `bench` subcommand so far; the emulation's subcommands come later.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "nccl-sim", version, about = "A CPU-only NCCL stand-in for profiler plugins")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Bench(nccl_sim::bench::BenchArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Bench(args) => nccl_sim::bench::main(args),
    }
}
