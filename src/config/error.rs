//! `ConfigError` / `ConfigErrors`: every problem found in a config file, each with its key path.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem: `FILE: KEY: REASON`. `key` is a dotted path such as
/// `channels.sensenova-1.weight` (empty when the problem is the file itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    pub key: String,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.reason)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.key, self.reason)
        }
    }
}

impl std::error::Error for ConfigError {}

/// All problems found in one load, in the order they were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// True when some error's key equals `key` (or starts with `key.` / `key[`).
    pub fn has_key(&self, key: &str) -> bool {
        self.0.iter().any(|e| {
            e.key == key
                || e.key
                    .strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
        })
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects errors for one file.
pub(crate) struct Collector {
    file: PathBuf,
    pub(crate) errors: Vec<ConfigError>,
}

impl Collector {
    pub(crate) fn new(file: &Path) -> Self {
        Collector {
            file: file.to_path_buf(),
            errors: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, key: impl Into<String>, reason: impl Into<String>) {
        self.errors.push(ConfigError {
            file: self.file.clone(),
            key: key.into(),
            reason: reason.into(),
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    pub(crate) fn finish(self) -> ConfigErrors {
        ConfigErrors(self.errors)
    }
}
