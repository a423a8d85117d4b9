//! Saved `nvidia-smi` text and visible-device lists come from users: whatever they hold, the
//! parsers answer with a value or an error, never a panic.

use coload_device::visible::{self, VisibleEntry};
use coload_device::{MigProfile, Topology};
use proptest::prelude::*;

/// Text made of the pieces these formats are built from, so that near misses are common.
fn listing_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("GPU ".to_owned()),
        Just("MIG ".to_owned()),
        Just("Device ".to_owned()),
        Just(": ".to_owned()),
        Just("(UUID: ".to_owned()),
        Just(")".to_owned()),
        Just("\n".to_owned()),
        Just("  ".to_owned()),
        Just("GPU-".to_owned()),
        Just("MIG-".to_owned()),
        Just("MIG-GPU-".to_owned()),
        Just("/".to_owned()),
        Just(", ".to_owned()),
        Just("Enabled".to_owned()),
        Just("[N/A]".to_owned()),
        Just("index, uuid, mig.mode.current\n".to_owned()),
        Just("1c.3g.40gb".to_owned()),
        Just("+me".to_owned()),
        "[0-9]{1,3}",
        "[a-f0-9-]{1,8}",
        "\\PC{0,3}",
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn parsers_never_panic(text in listing_like()) {
        let listing = Topology::from_listing(&text);
        let csv = Topology::from_query_csv(&text);
        let _ = MigProfile::parse(&text);
        let _ = VisibleEntry::parse(&text);
        for t in [listing.ok(), csv.ok()].into_iter().flatten() {
            // Whatever parsed can be resolved against, and every device it resolves to is one
            // of the node's.
            let all = visible::all_devices(&t).len();
            let r = visible::resolve_like_cuda(&t, &text);
            prop_assert!(r.devices.len() <= all * text.split(',').count().max(1));
            let _ = t.clone().with_query_csv(&text);
        }
    }
}
