use std::path::PathBuf;

/// Why a document could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The document is not valid JSON, or not of the expected shape.
    #[error("{path}: invalid document: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What serde said.
        message: String,
    },
    /// The document has no `schema_version`.
    #[error("{path}: no schema_version field (is this a coload document?)")]
    MissingVersion {
        /// The file.
        path: PathBuf,
    },
    /// The document's version is one this reader does not know.
    #[error(
        "{path}: schema_version {found} is not supported by this reader (it reads up to {supported}); \
         upgrade coload to read it"
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u64,
        /// The newest version this reader knows.
        supported: u32,
    },
    /// One line of a JSON-lines file is bad.
    #[error("{path}:{line}: {message}")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong with it.
        message: String,
    },
}

/// A flag's or a field's value that does not parse: what was given and what is expected, in one
/// message (`unknown mode \`slices\` (expected exclusive, mig, ...)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ValueError {
    message: String,
}

impl ValueError {
    /// The message.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<String> for ValueError {
    fn from(message: String) -> Self {
        ValueError { message }
    }
}

impl From<&str> for ValueError {
    fn from(message: &str) -> Self {
        ValueError {
            message: message.to_owned(),
        }
    }
}

impl From<ValueError> for String {
    fn from(e: ValueError) -> String {
        e.message
    }
}

/// The message as text (`contains`, `starts_with`), as the `String` it replaces offered.
impl std::ops::Deref for ValueError {
    type Target = str;

    fn deref(&self) -> &str {
        &self.message
    }
}

impl PartialEq<&str> for ValueError {
    fn eq(&self, other: &&str) -> bool {
        self.message == *other
    }
}
