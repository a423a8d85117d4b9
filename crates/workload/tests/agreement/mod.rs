//! How far two training runs of the same model ended apart, measured against how far training
//! moved the weights: shared by the CPU test that shows the measure can fail
//! (`tests/models.rs`) and the GPU test that compares CUDA-graph replay with eager
//! (`tests/gpu_graph.rs`).
#![allow(dead_code, unreachable_pub, reason = "each test crate uses a part")]

use tch::Tensor;

/// `‖a − b‖ / ‖a − initial‖` over every variable at once (weights and batch-norm statistics,
/// flattened into one vector), with the variable that contributes most to the numerator.
///
/// Relative to the update rather than to each tensor's own magnitude: a batch-norm bias starts
/// at zero and moves by float noise in a few steps, so a per-tensor ratio reads reduction-order
/// noise (cuDNN's algorithms are not bitwise deterministic) as a disagreement. Over the whole
/// update, noise stays orders of magnitude below a real difference (a missed, repeated or stale
/// update moves the ratio towards 1).
pub fn update_gap(
    initial: &[(String, Tensor)],
    a: &[(String, Tensor)],
    b: &[(String, Tensor)],
) -> (f64, String) {
    assert_eq!(initial.len(), a.len());
    assert_eq!(a.len(), b.len());
    let (mut apart, mut moved, mut worst) = (0.0, 0.0, (0.0, String::new()));
    for (((name, start), (name_a, ta)), (name_b, tb)) in initial.iter().zip(a).zip(b) {
        assert_eq!(name, name_a);
        assert_eq!(name, name_b);
        let part = squared_distance(ta, tb);
        apart += part;
        moved += squared_distance(ta, start);
        if part > worst.0 {
            worst = (part, name.clone());
        }
    }
    assert!(moved > 0.0, "training did not move the weights at all");
    ((apart / moved).sqrt(), worst.1)
}

/// `‖a − b‖` over every variable at once.
pub fn distance(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|((_, ta), (_, tb))| squared_distance(ta, tb))
        .sum::<f64>()
        .sqrt()
}

/// The squared Euclidean distance of two tensors of one shape, in double precision.
fn squared_distance(ta: &Tensor, tb: &Tensor) -> f64 {
    (ta.to_kind(tch::Kind::Double) - tb.to_kind(tch::Kind::Double))
        .square()
        .sum(tch::Kind::Double)
        .double_value(&[])
}
