//! Tests of the Responses translation: request and answer tables, stream events, and the split and no-panic properties.

mod answer_tests;
mod harness;
mod prop;
mod request_tests;
mod stream_tests;
