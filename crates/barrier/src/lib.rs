//! The shared-directory rendezvous (see docs/methodology.md).
