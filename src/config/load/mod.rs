//! Loading: the file's text → `${VAR}` interpolation → YAML with the line of every key
//! (`yaml`) → seed aliases and `SWITCHYARD_*` overrides (`env`, merged in `source`) → the raw
//! sections (`sections`, `raw`), with serde's errors worded in the config's terms (`lenient`)
//! and the scalar forms (durations, sizes) every section shares (`scalars`).

pub(in crate::config) mod env;
pub(in crate::config) mod lenient;
pub(in crate::config) mod raw;
pub mod scalars;
pub(in crate::config) mod sections;
pub mod source;
pub(in crate::config) mod yaml;
