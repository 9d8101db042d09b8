//! Tests of the translation: fixture tables per direction, refusals, flags and properties.

mod assemble;
mod clients;
mod collect;
mod fixtures_tests;
mod harness;
mod prop_nopanic;
mod prop_request;
mod prop_stream;
mod stream_commit;
mod stream_tests;
mod validate;
