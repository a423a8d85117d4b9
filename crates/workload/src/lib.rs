//! The ResNet18 workloads, through libtorch (tch).
//!
//! This crate is the only library that links libtorch.

pub use tch;
