//! libFuzzer entry for the `usage` harness (see src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard_fuzz::usage(data));
