//! The Lance namespace behind a catalog: where it lives ([`NamespaceSpec`],
//! plain data), how to reach it, and how its answers and errors read in SQL
//! terms.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use lance_namespace::LanceNamespace;
use lance_namespace::error::{ErrorCode, NamespaceError};
use lance_namespace_impls::DirectoryNamespaceBuilder;

use crate::error::{Error, Result};
use crate::location::{normalize_uri, redact_uri};
use crate::session::LanceSessionCache;

/// A directory namespace: its root and the storage options used to reach it
/// (which may hold secrets: they are never shown).
#[derive(Clone, PartialEq, Eq)]
pub struct NamespaceSpec {
    /// The normalised root ([`normalize_uri`]).
    pub root: String,
    /// Lance storage options for the root and every table under it.
    pub storage_options: BTreeMap<String, String>,
}

impl fmt::Debug for NamespaceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceSpec")
            .field("root", &redact_uri(&self.root))
            .field("storage_options", &self.storage_options.keys())
            .finish()
    }
}

impl NamespaceSpec {
    /// The namespace rooted at `root` (a local path or object-store URL).
    pub fn new(root: &str, storage_options: BTreeMap<String, String>) -> Result<Self> {
        Ok(Self {
            root: normalize_uri(root)?.trim_end_matches('/').to_string(),
            storage_options,
        })
    }

    /// The root as shown in plans and messages.
    pub fn display_root(&self) -> String {
        redact_uri(&self.root)
    }

    /// Opens the namespace through the Lance session of `cache`.
    pub(crate) async fn connect(
        &self,
        cache: &LanceSessionCache,
    ) -> Result<Arc<dyn LanceNamespace>> {
        let options: HashMap<String, String> = self.storage_options.clone().into_iter().collect();
        let namespace = DirectoryNamespaceBuilder::new(self.root.clone())
            .storage_options(options)
            .session(Arc::clone(cache.session()))
            .build()
            .await
            .map_err(|e| self.error("opening the namespace at", e))?;
        Ok(Arc::new(namespace))
    }

    /// The full location of a table stored at `relative` under the root.
    pub(crate) fn location_of(&self, relative: &str) -> String {
        format!("{}/{relative}", self.root)
    }

    /// A namespace error, naming the root.
    pub(crate) fn error(&self, action: &str, e: lance_core::Error) -> Error {
        Error::unsupported(format!(
            "Lance namespace '{}': {action} failed: {}",
            self.display_root(),
            crate::error::plain(&e)
        ))
    }
}

/// The [`ErrorCode`] of a namespace error, if it is one.
pub(crate) fn code(e: &lance_core::Error) -> Option<ErrorCode> {
    let lance_core::Error::Namespace { source, .. } = e else {
        return None;
    };
    source
        .downcast_ref::<NamespaceError>()
        .map(NamespaceError::code)
}

/// True when `e` says the table or namespace asked for does not exist.
pub(crate) fn is_not_found(e: &lance_core::Error) -> bool {
    matches!(
        code(e),
        Some(ErrorCode::TableNotFound | ErrorCode::NamespaceNotFound)
    )
}
