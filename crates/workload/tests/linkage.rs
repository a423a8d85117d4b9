//! The linker must keep `libtorch_cuda.so` as a runtime dependency of binaries that link
//! libtorch: nothing references its symbols (CUDA kernels register themselves when it loads), so
//! `--as-needed` drops it and CUDA is silently unavailable at run time. build.rs adds
//! `-Wl,--no-as-needed,-ltorch_cuda,--as-needed` when the library exists; this test reads this
//! very test binary's dynamic section and fails if the entry went missing.

use std::process::Command;

/// The `NEEDED` entries of an ELF file, from `readelf -d` (or `ldd` where readelf is missing).
fn needed_libraries(path: &std::path::Path) -> Vec<String> {
    if let Ok(out) = Command::new("readelf").arg("-d").arg(path).output()
        && out.status.success()
    {
        return String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("(NEEDED)"))
            .filter_map(|l| l.split('[').nth(1)?.split(']').next().map(str::to_owned))
            .collect();
    }
    let out = Command::new("ldd")
        .arg(path)
        .output()
        .expect("neither readelf nor ldd could run");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn a_binary_linking_libtorch_needs_libtorch_cuda_when_it_exists() {
    let exe = std::env::current_exe().unwrap();
    let needed = needed_libraries(&exe);
    assert!(
        needed.iter().any(|l| l.starts_with("libtorch_cpu")),
        "this binary should link libtorch at all: {needed:?}"
    );
    let has_cuda = needed.iter().any(|l| l.starts_with("libtorch_cuda.so"));
    if env!("COLOAD_LIBTORCH_CUDA_EXPECTED") == "1" {
        assert!(
            has_cuda,
            "libtorch_cuda.so exists in the libtorch lib dir but {} does not need it: {needed:?}",
            exe.display()
        );
    } else {
        // A CPU-only libtorch has no libtorch_cuda.so to keep.
        assert!(!has_cuda);
    }
}

#[test]
fn a_tensor_computes_on_the_cpu() {
    let t = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
    let doubled = &t * 2.0;
    assert_eq!(Vec::<f32>::try_from(&doubled).unwrap(), vec![2.0, 4.0, 6.0]);
}
