//! Configuration: raw YAML/env tree, validation with key paths, resilience merge, explain.
pub mod model;
pub mod status_set;
