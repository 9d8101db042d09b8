//! libFuzzer entry for the `request_peek` harness (see src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard_fuzz::request_peek(data));
