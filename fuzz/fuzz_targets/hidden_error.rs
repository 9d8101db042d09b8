//! libFuzzer entry for the `hidden_error` harness (see src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard_fuzz::hidden_error(data));
