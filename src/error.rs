//! The crate's error type and its bridge into [`DataFusionError`].
//!
//! Every fallible function in this crate returns [`Result`]. Errors raised by
//! Lance are kept as the `source` of [`Error::Lance`] (never stringified), so a
//! caller holding a [`DataFusionError`] can walk the chain and downcast, for
//! example to tell a commit conflict from a corrupt file.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;

/// A specialised `Result` for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors raised by `datafusion-lance`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Lance failed while doing `action` on the dataset at `uri`.
    #[error("Lance error while {action} '{uri}': {}", plain(source))]
    Lance {
        /// What the crate was doing, e.g. "opening".
        action: &'static str,
        /// The dataset URI, with any credentials removed.
        uri: String,
        /// The error Lance returned.
        #[source]
        source: lance::Error,
    },

    /// No Lance dataset exists at `uri`.
    #[error("no Lance dataset found at '{uri}'")]
    DatasetNotFound {
        /// The dataset URI.
        uri: String,
        /// The error Lance returned.
        #[source]
        source: lance::Error,
    },

    /// The requested version or tag does not exist in the dataset at `uri`.
    #[error("{what} does not exist in the Lance dataset at '{uri}' (latest version: {latest})")]
    VersionNotFound {
        /// The dataset URI.
        uri: String,
        /// The version or tag asked for, e.g. "version 9".
        what: String,
        /// The dataset's latest version.
        latest: u64,
        /// The error Lance returned.
        #[source]
        source: lance::Error,
    },

    /// A concurrent commit conflicts with this statement's; nothing was committed.
    #[error(
        "table '{table}': a concurrent write conflicts with this statement, which was not committed; retry it ({})",
        plain(source)
    )]
    CommitConflict {
        /// The table written.
        table: String,
        /// The conflict Lance reported.
        #[source]
        source: lance::Error,
    },

    /// Other writers kept committing first until the statement's commit
    /// budget was spent; nothing was committed.
    #[error(
        "table '{table}': gave up committing after {seconds:.1} s because other writers kept \
         committing first ({raced} commits landed since this statement read version \
         {read_version}; budget: {max_retries} attempts, {timeout_ms} ms); nothing was \
         committed. Retry the statement, or give commits more room with SET \
         lance.commit_max_retries / lance.commit_retry_timeout_ms"
    )]
    WriteContention {
        /// The table written.
        table: String,
        /// Time spent committing.
        seconds: f64,
        /// `lance.commit_max_retries` of the statement.
        max_retries: u32,
        /// `lance.commit_retry_timeout_ms` of the statement.
        timeout_ms: u128,
        /// The version the statement read.
        read_version: u64,
        /// Versions committed by others since then.
        raced: u64,
        /// What Lance reported.
        #[source]
        source: lance::Error,
    },

    /// A table or session option key is not known.
    #[error("unknown option '{key}'{hint}")]
    UnknownOption {
        /// The key as written by the user.
        key: String,
        /// An optional hint, starting with "; ".
        hint: String,
    },

    /// An option was given a value it cannot take.
    #[error("invalid value '{value}' for option '{key}': {reason}")]
    InvalidOption {
        /// The option key.
        key: String,
        /// The value as written by the user (never a secret: secret options are
        /// reported without their value).
        value: String,
        /// Why the value is rejected.
        reason: String,
    },

    /// The table, schema, namespace or location named does not exist (a
    /// missing dataset or version has its own variant).
    #[error("{message}")]
    NotFound {
        /// What is missing, naming it.
        message: String,
    },

    /// A table, schema or dataset of that name or location already exists.
    #[error("{message}")]
    AlreadyExists {
        /// What exists, naming it.
        message: String,
    },

    /// The table is pinned to a version or tag: it can be read, not written.
    #[error("{message}")]
    ReadOnly {
        /// The table and what pins it.
        message: String,
    },

    /// Data or a declaration does not match the table: columns, types, keys,
    /// vector dimensions.
    #[error("{message}")]
    SchemaMismatch {
        /// What differs, naming the table and column.
        message: String,
    },

    /// Valid SQL, or a table or catalog feature, that this crate or Lance
    /// does not support.
    #[error("{message}")]
    NotSupported {
        /// What is not supported, naming the table or clause.
        message: String,
    },

    /// An argument that can never be valid: a name, an index type, an empty
    /// key list.
    #[error("{message}")]
    InvalidInput {
        /// What is wrong, naming the argument.
        message: String,
    },

    /// A Lance namespace (a catalog's service or directory) failed or
    /// answered what the statement cannot use.
    #[error("{message}")]
    Namespace {
        /// The namespace (credentials removed) and what failed.
        message: String,
    },

    /// A LanceDB Cloud or Enterprise service (a `db://` table) refused or
    /// failed a request, or answered what cannot be read.
    #[error("{message}")]
    Cloud {
        /// The table, the request, the attempts made and what failed.
        message: String,
        /// The HTTP status of the last answer, if one came.
        status: Option<u16>,
    },

    /// An Arrow error.
    #[error(transparent)]
    Arrow {
        /// The Arrow error.
        #[from]
        source: ArrowError,
    },

    /// An error raised by DataFusion inside this crate.
    #[error(transparent)]
    DataFusion {
        /// The DataFusion error.
        #[from]
        source: DataFusionError,
    },
}

impl Error {
    /// Wraps a Lance error raised while doing `action` on `uri`.
    ///
    /// "Dataset not found" errors become [`Error::DatasetNotFound`].
    pub fn lance(action: &'static str, uri: &str, source: lance::Error) -> Self {
        let uri = crate::location::redact_uri(uri);
        match source {
            lance::Error::DatasetNotFound { .. } => Self::DatasetNotFound { uri, source },
            source => Self::Lance {
                action,
                uri,
                source,
            },
        }
    }

    /// Shorthand for [`Error::InvalidOption`].
    pub(crate) fn invalid_option(
        key: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self::InvalidOption {
            key: key.into(),
            value: value.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::NotFound`].
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound {
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::AlreadyExists`].
    pub(crate) fn already_exists(message: impl Into<String>) -> Self {
        Self::AlreadyExists {
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::ReadOnly`].
    pub(crate) fn read_only(message: impl Into<String>) -> Self {
        Self::ReadOnly {
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::SchemaMismatch`].
    pub(crate) fn schema_mismatch(message: impl Into<String>) -> Self {
        Self::SchemaMismatch {
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::NotSupported`].
    pub(crate) fn not_supported(message: impl Into<String>) -> Self {
        Self::NotSupported {
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::InvalidInput`].
    pub(crate) fn invalid_input(message: impl Into<String>) -> Self {
        Self::InvalidInput {
            message: message.into(),
        }
    }

    /// Shorthand for [`Error::Namespace`].
    pub(crate) fn namespace(message: impl Into<String>) -> Self {
        Self::Namespace {
            message: message.into(),
        }
    }

    /// `self` with `context: ` before its message, keeping its variant where
    /// the variant is a message (an option error becomes
    /// [`Error::InvalidInput`]; errors with a source are kept as they are).
    pub(crate) fn prefixed(self, context: &str) -> Self {
        let with = |message: String| format!("{context}: {message}");
        match self {
            Self::NotFound { message } => Self::not_found(with(message)),
            Self::AlreadyExists { message } => Self::already_exists(with(message)),
            Self::ReadOnly { message } => Self::read_only(with(message)),
            Self::SchemaMismatch { message } => Self::schema_mismatch(with(message)),
            Self::NotSupported { message } => Self::not_supported(with(message)),
            Self::InvalidInput { message } => Self::invalid_input(with(message)),
            Self::Namespace { message } => Self::namespace(with(message)),
            Self::Cloud { message, status } => Self::Cloud {
                message: with(message),
                status,
            },
            e @ (Self::UnknownOption { .. } | Self::InvalidOption { .. }) => {
                Self::invalid_input(with(e.to_string()))
            }
            other => other,
        }
    }

    /// This crate's error inside `error`, as a statement run through
    /// DataFusion returns it (behind `External`, `Context`, `Diagnostic` or
    /// `Shared`), for a caller to match:
    ///
    /// ```
    /// # async fn demo(ctx: datafusion::prelude::SessionContext) -> datafusion::error::Result<()> {
    /// use datafusion_lance::Error;
    /// // Planned at `sql`, refused when it runs.
    /// let insert = ctx.sql("INSERT INTO pinned VALUES (1)").await?;
    /// if let Err(e) = insert.collect().await {
    ///     if let Some(Error::ReadOnly { .. }) = Error::find(&e) {
    ///         // register the table without 'lance.version' to write it
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn find(error: &DataFusionError) -> Option<&Error> {
        match error {
            DataFusionError::External(inner) => inner.downcast_ref::<Error>(),
            DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
                Self::find(inner)
            }
            DataFusionError::Shared(inner) => Self::find(inner),
            _ => None,
        }
    }
}

/// `Err` of the crate's [`Error`] of kind `$kind` (the name of its shorthand
/// constructor: `not_found`, `invalid_input`, …) with a `format!` message,
/// converted into the caller's error type: this crate's `plan_err!`.
macro_rules! fail {
    ($kind:ident, $($arg:tt)+) => {
        Err($crate::error::Error::$kind(format!($($arg)+)).into())
    };
}
pub(crate) use fail;

/// A Lance error's message without the source locations Lance appends
/// (`, /path/to/lance-x.y.z/src/file.rs:12:34`): users get no build paths.
pub(crate) fn plain(error: &lance::Error) -> String {
    strip_locations(&error.to_string())
}

fn strip_locations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(".rs:") {
        // The location starts after the last ", " (or space) before ".rs:".
        let head = &rest[..pos];
        let start = head
            .rfind(", ")
            .map(|i| (i, i + 2))
            .or_else(|| head.rfind(' ').map(|i| (i, i + 1)));
        let tail = &rest[pos + 4..];
        let digits = tail
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_digit() || *c == ':'))
            .map_or(tail.len(), |(i, _)| i);
        let is_location = digits > 0
            && tail[..digits].split(':').filter(|p| !p.is_empty()).count() == 2
            && start.is_some_and(|(_, path)| !head[path..].contains(char::is_whitespace));
        match (is_location, start) {
            (true, Some((cut, _))) => {
                out.push_str(&rest[..cut]);
                rest = &tail[digits..];
            }
            _ => {
                out.push_str(&rest[..pos + 4]);
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

impl From<crate::location::InvalidLocation> for Error {
    fn from(e: crate::location::InvalidLocation) -> Self {
        Error::invalid_option("location", e.location, e.reason)
    }
}

impl From<crate::location::InvalidLocation> for DataFusionError {
    fn from(e: crate::location::InvalidLocation) -> Self {
        Error::from(e).into()
    }
}

impl From<Error> for DataFusionError {
    fn from(error: Error) -> Self {
        match error {
            Error::DataFusion { source } => source,
            Error::Arrow { source } => DataFusionError::ArrowError(Box::new(source), None),
            e @ (Error::UnknownOption { .. } | Error::InvalidOption { .. }) => {
                DataFusionError::Configuration(e.to_string())
            }
            e => DataFusionError::External(Box::new(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lance_errors_stay_downcastable() {
        let err = Error::lance(
            "opening",
            "/tmp/t.lance",
            lance::Error::invalid_input("boom"),
        );
        let df: DataFusionError = err.into();
        let DataFusionError::External(inner) = &df else {
            panic!("expected External, got {df:?}");
        };
        let ours = inner.downcast_ref::<Error>().expect("our error inside");
        assert!(matches!(
            ours,
            Error::Lance {
                action: "opening",
                ..
            }
        ));
        let source = std::error::Error::source(ours).expect("lance source kept");
        assert!(source.downcast_ref::<lance::Error>().is_some());
    }

    #[test]
    fn lance_source_locations_are_not_shown() {
        let text = "Commit conflict for version 7: Failed to commit the transaction after 20 \
                    retries., /root/.cargo/registry/src/index/lance-14.0.2/src/io/commit.rs:2083:5";
        assert_eq!(
            strip_locations(text),
            "Commit conflict for version 7: Failed to commit the transaction after 20 retries."
        );
        let nested = "Not found: a, src/x.rs:1:2, outer, lance-core/src/y.rs:10:20 end";
        assert_eq!(strip_locations(nested), "Not found: a, outer end");
        assert_eq!(strip_locations("file.rs: fine"), "file.rs: fine");
        let err = Error::lance("opening", "/t", lance::Error::invalid_input("boom"));
        assert!(!err.to_string().contains(".rs:"), "{err}");
    }

    #[test]
    fn option_errors_are_configuration_errors() {
        let df: DataFusionError = Error::UnknownOption {
            key: "lance.nope".into(),
            hint: String::new(),
        }
        .into();
        assert!(matches!(df, DataFusionError::Configuration(_)));
        assert!(df.to_string().contains("unknown option 'lance.nope'"));
    }
}
