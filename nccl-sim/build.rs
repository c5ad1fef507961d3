fn main() {
    println!("cargo:rerun-if-changed=csrc/logger.c");
    cc::Build::new()
        .file("csrc/logger.c")
        .warnings(true)
        .compile("nccl_sim_logger");
}
