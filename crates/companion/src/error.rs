//! The error of a companion command as a whole: bad input, a typed job failure, or the job
//! store's refusal, each with the failure kind and exit code the dispatcher reports.

use super::failure::{clean_message, FailureKind, JobFailure};
use super::jobs::StoreError;

/// An error of a companion command: what the dispatcher prints as one line
/// `devin-bridge companion: <message>` before exiting with [`CompanionError::exit_code`].
#[derive(Debug, thiserror::Error)]
pub enum CompanionError {
    /// Bad flags or input (exit 2); nothing was created or changed.
    #[error("{0}")]
    Input(String),
    /// A typed failure of the given kind.
    #[error("{0}")]
    JobFailure(JobFailure),
    /// The job store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CompanionError {
    /// An input error with a cleaned, bounded message.
    pub fn input(message: impl AsRef<str>) -> Self {
        CompanionError::Input(clean_message(message.as_ref()))
    }

    /// The failure kind this error reports.
    pub fn kind(&self) -> FailureKind {
        match self {
            CompanionError::Input(_) => FailureKind::Input,
            CompanionError::JobFailure(failure) => failure.kind,
            CompanionError::Store(error) => error.kind(),
        }
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        self.kind().exit_code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_errors_exit_2_with_a_cleaned_message() {
        let error = CompanionError::input("bad\u{1b}[31m flag");
        assert_eq!(error.exit_code(), 2);
        assert!(!error.to_string().contains('\u{1b}'), "{error}");
    }
}
