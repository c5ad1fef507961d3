//! The `nccl-sim` command.

fn main() {
    println!("nccl-sim {}", env!("CARGO_PKG_VERSION"));
}
