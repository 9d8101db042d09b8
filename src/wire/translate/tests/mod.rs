//! Tests of the translation: fixture tables per direction, refusals, flags and properties.

mod fixtures_tests;
mod harness;
