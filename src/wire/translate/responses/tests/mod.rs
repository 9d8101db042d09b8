//! Tests of the Responses translation: request and answer tables, every Codex fixture, stream
//! events, and the split and no-panic properties.

mod harness;
mod request_tests;
mod validate;
