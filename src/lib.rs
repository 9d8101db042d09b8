//! switchyard: a single-binary LLM API gateway (see ARCHITECTURE.md for the code map).
pub mod config;
pub mod mock;
pub mod routing;
pub mod secret;
