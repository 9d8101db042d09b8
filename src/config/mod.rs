//! Configuration: raw YAML/env tree, validation with key paths, resilience merge, explain.
//!
//! [`load`] = read the file → `${VAR}` interpolation → YAML (serde-saphyr, keeping each
//! key's line) → seed env aliases → `SWITCHYARD_*` overrides (merged by figment) →
//! section-by-section deserialization → validation. Every problem is collected and
//! returned, each with its key path and its line, or the variable it came from.
//! Precedence, lowest first: built-in defaults < YAML < seed aliases < `SWITCHYARD_*`.
pub mod error;
pub mod explain;
pub mod load;
pub mod merge;
pub mod model;
pub mod validate;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;

pub use error::{ConfigError, ConfigErrors};
pub use explain::explain;
pub use validate::affinity::default_affinity_rules;

use error::Collector;
use model::Config;

/// Load and validate `path`, interpolating from the process environment.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    load_text(&read(path)?, path)
}

/// The text of `path` (one read, for a reload that fingerprints what it loads), or the error
/// [`load`] reports.
pub fn read(path: &Path) -> Result<String, ConfigErrors> {
    std::fs::read_to_string(path).map_err(|e| {
        let mut collector = Collector::new(path);
        collector.push("", format!("cannot read config file: {e}"));
        collector.finish()
    })
}

/// Validate `text` read from `path`, interpolating from the process environment.
pub fn load_text(text: &str, path: &Path) -> Result<Config, ConfigErrors> {
    let env: HashMap<String, String> = std::env::vars().collect();
    load_str(text, path, &env)
}

/// Load and validate `path` with an explicit environment.
pub fn load_with_env(path: &Path, env: &HashMap<String, String>) -> Result<Config, ConfigErrors> {
    load_str(&read(path)?, path, env)
}

/// Validate YAML text as if read from `source_name`.
pub fn load_str(
    yaml: &str,
    source_name: &Path,
    env: &HashMap<String, String>,
) -> Result<Config, ConfigErrors> {
    let mut collector = Collector::new(source_name);
    let Some(tree) = load::source::merged_tree(yaml, env, &mut collector) else {
        return Err(collector.finish());
    };
    let raw = load::sections::split(&tree, &mut collector);
    let cfg = validate::build(raw, source_name, &mut collector);
    if collector.is_empty() {
        for warning in validate::limits::warnings(source_name, &cfg.clients) {
            tracing::warn!("{warning}");
        }
        Ok(cfg)
    } else {
        Err(collector.finish())
    }
}
