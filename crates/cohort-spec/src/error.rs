//! The one error type of a spec: which flag (or plan key) is wrong, and what to do.

/// Why a cohort specification was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// A flag's value, or its relation to another flag, is wrong. `message` names the flag and
    /// says what to do.
    #[error("{message}")]
    Flag {
        /// The flag at fault, as typed on the command line (`--window-s`).
        flag: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
    /// The workload mix is malformed or missing.
    #[error("{0}")]
    Mix(String),
    /// A plan key is not a flag of the spec, or is set by something else (the policy, the node).
    #[error("{0}")]
    PlanKey(String),
    /// A plan value does not have the flag's type.
    #[error("`{key}`: {message}")]
    PlanValue {
        /// The key, as the plan writes it (`window_s`).
        key: String,
        /// What serde said.
        message: String,
    },
}

impl SpecError {
    /// A [`SpecError::Flag`].
    pub(crate) fn flag(flag: &'static str, message: impl Into<String>) -> Self {
        SpecError::Flag {
            flag,
            message: message.into(),
        }
    }

    /// The flag at fault, where one is.
    #[must_use]
    pub fn flag_name(&self) -> Option<&'static str> {
        match self {
            SpecError::Flag { flag, .. } => Some(flag),
            _ => None,
        }
    }
}
