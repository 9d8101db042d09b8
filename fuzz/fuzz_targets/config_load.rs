//! libFuzzer entry for the `config_load` harness (see src/lib.rs).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard_fuzz::config_load(data));
