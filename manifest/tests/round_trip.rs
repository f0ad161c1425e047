//! The enums change nothing on disk: every checked-in manifest reads and writes back byte for
//! byte.

use std::path::Path;

use manifest::Manifest;

#[test]
fn checked_in_manifests_round_trip_byte_for_byte() {
    let generated = Path::new(env!("CARGO_MANIFEST_DIR")).join("../generated");
    let mut n = 0;
    for kernel in ["linux-6.1", "linux-6.12", "linux-7.2"] {
        for vendor in ["mlx5", "bnxt_re", "irdma", "rxe"] {
            let path = generated.join(kernel).join(vendor).join("manifest.yaml");
            let text = std::fs::read_to_string(&path).expect("read manifest");
            let m = Manifest::from_yaml(&text, &path.display().to_string()).expect("parse");
            assert!(m.to_yaml().ok() == Some(text), "{} changes on a round trip", path.display());
            n += 1;
        }
    }
    assert_eq!(n, 12);
}
