//! The rules file, as `--rules` reads it: nesting guard, then the YAML parse and checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if manifest::check_text(text, "fuzz", "rules").is_err()
        || manifest::check_yaml_nesting(text, "fuzz").is_err()
    {
        return;
    }
    let _ = heuristics::Rules::parse(text, "fuzz");
});
