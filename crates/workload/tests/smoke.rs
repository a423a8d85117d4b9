//! The libtorch provisioning works: tch links and computes on the CPU.

#[test]
fn a_tensor_computes_on_the_cpu() {
    let t = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
    let doubled = &t * 2.0;
    assert_eq!(Vec::<f32>::try_from(&doubled).unwrap(), vec![2.0, 4.0, 6.0]);
}
