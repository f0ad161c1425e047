//! The replay reader, JSONL and raw.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for raw in [false, true] {
        let _ = collector::read_replay(data, raw, |_| Ok(()));
    }
});
