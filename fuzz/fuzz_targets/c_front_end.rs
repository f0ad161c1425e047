//! The C front end on one file: preprocessor (against a config with the options the RDMA code
//! tests), tree-sitter extraction, uverbs table scan, completeness criteria.
#![no_main]

use analyzer::KernelConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let config = KernelConfig::parse(
        "CONFIG_INFINIBAND=m\nCONFIG_INFINIBAND_USER_ACCESS=m\nCONFIG_MLX5_INFINIBAND=m\n# CONFIG_SECURITY_INFINIBAND is not set\n",
    );
    let text = String::from_utf8_lossy(data);
    let pre = analyzer::preprocess(&text, &config);
    let mut parser = analyzer::new_parser();
    for path in ["drivers/infiniband/core/fuzz.c", "include/rdma/fuzz.h"] {
        let mut t = pre.text.clone();
        if path.ends_with(".h") {
            analyzer::blank_type_bodies(&mut t);
        }
        let facts = analyzer::extract(&mut parser, path, &t);
        let _ = analyzer::file_gaps(
            &facts,
            data,
            &t,
            &pre.unterminated,
            &pre.unbalanced,
        );
    }
});
