//! libFuzzer entry for the `status_set` harness (see src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard_fuzz::status_set(data));
