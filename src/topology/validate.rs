//! Config validation: every problem, each with its line.

/// One problem in a config file. TODO(helper)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {message}")]
pub struct ConfigError {
    /// File name or other source label.
    pub source_name: String,
    /// 1-based line number (0 when unknown).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// All problems found in a config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} config error(s)", .0.len())]
pub struct ConfigErrors(pub Vec<ConfigError>);
