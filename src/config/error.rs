//! `ConfigError` / `ConfigErrors`: every problem found in a config file, each with its key path,
//! the line it is written on, or the environment variable it came from (R2.3, R2.6).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::config::load::env::Origins;
use crate::config::load::yaml::Lines;

/// One problem: `FILE:LINE: KEY: REASON`, or `environment variable VAR: KEY: REASON` when
/// the value came from the environment. `key` is a dotted path such as
/// `channels.sensenova-1.weight` (empty when the problem is the file itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// The line (1-based) the key is written on, or its nearest written ancestor.
    pub line: Option<u32>,
    /// The environment variable that set the value, when it did not come from the file.
    pub env: Option<String>,
    pub key: String,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.env, self.line) {
            (Some(var), _) => write!(f, "environment variable {var}")?,
            (None, Some(line)) => write!(f, "{}:{line}", self.file.display())?,
            (None, None) => write!(f, "{}", self.file.display())?,
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// All problems found in one load, in the order they were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// True when some error's key equals `key` (or starts with `key.` / `key[`).
    pub fn has_key(&self, key: &str) -> bool {
        self.0.iter().any(|error| under(&error.key, key))
    }
}

/// `key` is `prefix` or lies below it.
pub(crate) fn under(key: &str, prefix: &str) -> bool {
    key == prefix
        || key
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects errors for one file; [`Collector::finish`] attaches lines and variables.
pub(crate) struct Collector {
    file: PathBuf,
    pub(crate) errors: Vec<ConfigError>,
    pub(crate) lines: Lines,
    pub(crate) origins: Origins,
    /// Line → the `${VAR}`s interpolated on it.
    pub(crate) uses: HashMap<u32, Vec<String>>,
}

impl Collector {
    pub(crate) fn new(file: &Path) -> Self {
        Collector {
            file: file.to_path_buf(),
            errors: Vec::new(),
            lines: Lines::default(),
            origins: Origins::default(),
            uses: HashMap::new(),
        }
    }

    pub(crate) fn push(&mut self, key: impl Into<String>, reason: impl Into<String>) {
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line: None,
            env: None,
            key: key.into(),
            reason: reason.into(),
        });
    }

    /// An error about a line of the file itself (syntax, `${…}` references).
    pub(crate) fn push_line(&mut self, line: Option<u32>, reason: impl Into<String>) {
        self.push("", reason);
        if let Some(last) = self.errors.last_mut() {
            last.line = line;
        }
    }

    /// An error about an environment variable.
    pub(crate) fn push_env(
        &mut self,
        var: &str,
        key: impl Into<String>,
        reason: impl Into<String>,
    ) {
        self.push(key, reason);
        if let Some(last) = self.errors.last_mut() {
            last.env = Some(var.to_string());
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    pub(crate) fn finish(self) -> ConfigErrors {
        let Collector {
            mut errors,
            lines,
            origins,
            uses,
            ..
        } = self;
        for error in &mut errors {
            if error.env.is_some() || (error.key.is_empty() && error.line.is_some()) {
                continue;
            }
            if let Some(var) = origins.var_for(&error.key) {
                error.env = Some(var.to_string());
                continue;
            }
            error.line = error.line.or_else(|| lines.line_of(&error.key));
            if let Some(vars) = error.line.and_then(|line| uses.get(&line)) {
                let list: Vec<String> = vars.iter().map(|var| format!("${{{var}}}")).collect();
                error.reason = format!(
                    "{} (the value comes from {})",
                    error.reason,
                    list.join(", ")
                );
            }
        }
        // File order: whole-file problems, then by line; variables last.
        errors.sort_by_key(|error| (error.env.is_some(), error.line.unwrap_or(0)));
        ConfigErrors(errors)
    }
}
