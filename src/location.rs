//! Table locations: one spelling per dataset, and a form safe to show.

/// A table location that cannot be used (converts into the crate's
/// [`Error`](crate::Error), naming the location).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid table location '{location}': {reason}")]
pub struct InvalidLocation {
    /// The location as given.
    pub location: String,
    /// Why it cannot be used.
    pub reason: String,
}

fn invalid(location: &str, reason: impl Into<String>) -> InvalidLocation {
    InvalidLocation {
        location: location.to_string(),
        reason: reason.into(),
    }
}

/// Where a table lives, as plan nodes carry it: everything a task needs to
/// open the table on whichever process runs it.
///
/// `storage_options` (credentials, endpoints) are never displayed; `Debug`
/// shows their keys only.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TableLocation {
    /// The normalised location ([`normalize_uri`]).
    pub uri: String,
    /// The location without credentials, for plans and messages.
    pub display_uri: String,
    /// Lance storage options of the table (may hold secrets).
    pub storage_options: std::collections::BTreeMap<String, String>,
}

impl TableLocation {
    /// A location with the given storage options; `uri` must be normalised.
    pub fn new(
        uri: impl Into<String>,
        storage_options: std::collections::BTreeMap<String, String>,
    ) -> Self {
        let uri = uri.into();
        Self {
            display_uri: redact_uri(&uri),
            uri,
            storage_options,
        }
    }
}

impl std::fmt::Debug for TableLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableLocation")
            .field("uri", &self.display_uri)
            .field(
                "storage_options",
                &self.storage_options.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// One committed version of a table: the version number and the e_tag of
/// its manifest (which tells it from a later manifest with the same number,
/// e.g. after the table was deleted and created again).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Snapshot {
    /// The version number.
    pub version: u64,
    /// The manifest's e_tag, when the store reports one.
    pub e_tag: Option<String>,
}

impl Snapshot {
    /// The snapshot a dataset handle is at.
    pub fn of(dataset: &lance::Dataset) -> Self {
        Self {
            version: dataset.version_id(),
            e_tag: dataset.manifest_location().e_tag.clone(),
        }
    }
}

/// The prefix of a Lance REST namespace's URL (`rest+http://host:port`),
/// and of the location a `CREATE TABLE` in one is planned with before the
/// server names the real one when the statement runs.
pub(crate) const REST_PREFIX: &str = "rest+";

/// Removes credentials (user info, query string) from a URI before it is shown.
pub fn redact_uri(uri: &str) -> String {
    match url::Url::parse(uri) {
        Ok(mut url) if url.scheme().len() > 1 => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.to_string()
        }
        _ => uri.to_string(),
    }
}

/// Normalises a table location so that one dataset has one cache key:
/// local paths become absolute with no trailing slash, `file://` URLs become
/// plain paths.
pub fn normalize_uri(uri: &str) -> Result<String, InvalidLocation> {
    let trimmed = uri.trim();
    if trimmed.is_empty() {
        return Err(invalid(uri, "empty table location"));
    }
    let local = if let Ok(url) = url::Url::parse(trimmed) {
        match url.scheme() {
            "file" => url
                .to_file_path()
                .map_err(|_| invalid(uri, "not a valid file URL"))?,
            // A one-letter "scheme" is a Windows drive letter.
            s if s.len() > 1 => return Ok(trimmed.trim_end_matches('/').to_string()),
            _ => std::path::PathBuf::from(trimmed),
        }
    } else {
        std::path::PathBuf::from(trimmed)
    };
    let absolute = std::path::absolute(&local).map_err(|e| invalid(uri, e.to_string()))?;
    let mut s = absolute.to_string_lossy().to_string();
    while s.len() > 1 && s.ends_with('/') {
        s.pop();
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_normalised() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            normalize_uri("t.lance/").unwrap(),
            cwd.join("t.lance").to_string_lossy()
        );
        assert_eq!(
            normalize_uri("file:///tmp/a.lance").unwrap(),
            "/tmp/a.lance"
        );
        assert_eq!(normalize_uri("/tmp/a.lance//").unwrap(), "/tmp/a.lance");
        assert_eq!(normalize_uri("s3://b/a.lance/").unwrap(), "s3://b/a.lance");
        assert!(normalize_uri("  ").is_err());
    }

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(
            redact_uri("s3://key:secret@bucket/t.lance?sig=abc"),
            "s3://bucket/t.lance"
        );
        assert_eq!(redact_uri("/tmp/t.lance"), "/tmp/t.lance");
    }
}
