//! A manifest, as every command reads it: parse and validate, then the collector's table.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(m) = manifest::Manifest::from_yaml(text, "fuzz") {
        let _ = collector::ProbeTable::from_manifest(&m);
        let _ = maintain::coverage_diff(&m, &m);
    }
});
