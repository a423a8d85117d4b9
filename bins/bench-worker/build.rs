//! Keeps libtorch_cuda.so as a runtime dependency of the binary.
//!
//! Nothing in the binary references a symbol of libtorch_cuda.so directly (CUDA kernels register
//! themselves when the library loads), so the linker's `--as-needed` drops it and CUDA then
//! reports unavailable at run time. See docs/design.md ("libtorch") and ../shared/docs/gpu.md.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib_dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        return;
    };
    if Path::new(&lib_dir).join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg-bins=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
    }
    // Convenience for local runs; LD_LIBRARY_PATH (searched first with RUNPATH) wins elsewhere.
    println!("cargo:rustc-link-arg-bins=-Wl,--enable-new-dtags,-rpath,{lib_dir}");
}
