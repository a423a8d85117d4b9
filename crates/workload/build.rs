//! Compiles the C++ shim against the libtorch torch-sys found, and keeps `libtorch_cuda.so` as a
//! runtime dependency of this package's own test and example binaries.
//!
//! torch-sys exports the libtorch lib dir to crates that depend on it directly as
//! `DEP_TCH_LIBTORCH_LIB`. The headers sit beside it (`<lib>/../include`) both in a libtorch
//! archive and in the PyPI torch wheel. The flags match torch-sys's own C++ (C++17, the
//! `_GLIBCXX_USE_CXX11_ABI` libtorch was built with: 1 for torch 2.11 wheels, overridable with
//! `LIBTORCH_CXX11_ABI` as in torch-sys).
//!
//! `rustc-link-arg` reaches this package's tests and examples only, not the binaries of crates
//! that depend on it: bench-worker carries the same two lines in its own build script. Without
//! `--no-as-needed` the linker drops `libtorch_cuda.so` (nothing references its symbols; CUDA
//! kernels register themselves when it loads) and CUDA reports unavailable at run time. See
//! docs/design.md ("libtorch").

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/shim.cpp");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    let lib_dir = PathBuf::from(
        env::var("DEP_TCH_LIBTORCH_LIB")
            .expect("torch-sys exports DEP_TCH_LIBTORCH_LIB; build through scripts/with-libtorch"),
    );
    let include = lib_dir.join("..").join("include");
    let abi = env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_owned());
    // CUDA graphs need libtorch_cuda.so's `at::cuda::CUDAGraph` (see shim.cpp for why it is
    // declared there rather than included); a CPU-only libtorch builds the shim without them and
    // `--execution cuda-graph` says so at run time.
    let has_cuda = lib_dir.join("libtorch_cuda.so").exists();

    cc::Build::new()
        .cpp(true)
        .pic(true)
        .std("c++17")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .define("GLOG_USE_GLOG_EXPORT", None)
        .define("COLOAD_CUDA_GRAPH", if has_cuda { "1" } else { "0" })
        .warnings(false)
        .file("src/shim.cpp")
        .compile("coload_shim");

    // The shim calls into these directly; listed after the static shim so that `--as-needed`
    // keeps them whatever order torch-sys's own libraries land in.
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    if has_cuda {
        println!("cargo:rustc-link-lib=dylib=torch_cuda");
    }

    if has_cuda {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
        // Lets tests/gpu_linkage.rs know the library was there to keep.
        println!("cargo:rustc-env=COLOAD_LIBTORCH_CUDA_EXPECTED=1");
    } else {
        println!("cargo:rustc-env=COLOAD_LIBTORCH_CUDA_EXPECTED=0");
    }
    // Convenience for local runs; LD_LIBRARY_PATH (searched first with RUNPATH) wins elsewhere.
    println!(
        "cargo:rustc-link-arg=-Wl,--enable-new-dtags,-rpath,{}",
        lib_dir.display()
    );
}
