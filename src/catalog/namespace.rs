//! The Lance namespace behind a catalog: where it lives ([`NamespaceSpec`],
//! plain data), how to reach it, and how its answers and errors read in SQL
//! terms.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use lance_namespace::LanceNamespace;
use lance_namespace::error::{ErrorCode, NamespaceError};

use crate::cloud::address::CLOUD_SCHEME;
use crate::cloud::options::{DATABASE_PREFIX, valid_prefix};
use crate::cloud::{CloudAddress, CloudOptions, Service};
use crate::config::VersionSpec;
use crate::error::{Error, Result};
use crate::location::{REST_PREFIX, normalize_uri, redact_uri};
use crate::session::LanceSessionCache;

/// The options of a REST namespace that configure its client rather than
/// the object store of its tables: `header.<name>` (e.g.
/// `header.Authorization`), `tls.*` and `delimiter`.
const REST_CLIENT_OPTIONS: [&str; 4] = ["header.", "headers.", "tls.", "delimiter"];

/// What kind of Lance namespace a catalog is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamespaceKind {
    /// Lance's directory namespace: tables are directories under a root on
    /// a file system or object store, which this crate reads and writes
    /// directly.
    Directory,
    /// Lance's REST namespace protocol: a server names the tables and their
    /// locations; their data is read and written directly.
    Rest,
    /// A LanceDB Cloud or Enterprise database (`db://DATABASE`): the
    /// service never says where its tables are stored; they are read
    /// through its REST data plane.
    Cloud,
}

/// A Lance namespace: its kind, root and the options used to reach it
/// (which may hold secrets: they are never shown).
#[derive(Clone, PartialEq, Eq)]
pub struct NamespaceSpec {
    /// Directory or REST.
    pub kind: NamespaceKind,
    /// The normalised root ([`normalize_uri`]) of a directory namespace;
    /// the server's URL of a REST namespace (without its `rest+` prefix).
    pub root: String,
    /// Lance storage options for the root and every table under it; for a
    /// REST namespace also the client's `header.<name>`, `tls.*` and
    /// `delimiter` options, which are sent to the server only.
    pub storage_options: BTreeMap<String, String>,
}

impl fmt::Debug for NamespaceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceSpec")
            .field("kind", &self.kind)
            .field("root", &redact_uri(&self.root))
            .field("storage_options", &self.storage_options.keys())
            .finish()
    }
}

impl NamespaceSpec {
    /// The namespace at `root`: a local path or object-store URL for a
    /// directory namespace, `rest+http(s)://…` for a REST namespace.
    pub fn new(root: &str, storage_options: BTreeMap<String, String>) -> Result<Self> {
        let trimmed = root.trim();
        if CloudAddress::is_cloud(trimmed) {
            return Self::cloud(trimmed, storage_options);
        }
        if let Some(url) = trimmed.strip_prefix(REST_PREFIX) {
            let parsed = url::Url::parse(url).map_err(|e| {
                Error::invalid_input(format!(
                    "Lance REST namespace '{}': not a URL: {e}",
                    redact_uri(url)
                ))
            })?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(Error::invalid_input(format!(
                    "Lance REST namespace '{}': the URL must start with rest+http:// or \
                     rest+https://",
                    redact_uri(url)
                )));
            }
            return Ok(Self {
                kind: NamespaceKind::Rest,
                root: url.trim_end_matches('/').to_string(),
                storage_options,
            });
        }
        Ok(Self {
            kind: NamespaceKind::Directory,
            root: normalize_uri(root)?.trim_end_matches('/').to_string(),
            storage_options,
        })
    }

    /// A LanceDB database: `db://DATABASE[/PREFIX]` and the options of its
    /// tables (a prefix becomes the option `database_prefix`).
    fn cloud(root: &str, mut options: BTreeMap<String, String>) -> Result<Self> {
        let rest = root[CLOUD_SCHEME.len()..].trim_end_matches('/');
        let (database, prefix) = match rest.split_once('/') {
            Some((database, prefix)) => (database, Some(prefix)),
            None => (rest, None),
        };
        if database.is_empty() {
            return Err(Error::invalid_input(format!(
                "LanceDB catalog '{root}': no database; expected db://DATABASE[/PREFIX]"
            )));
        }
        if let Some(prefix) = prefix {
            if !valid_prefix(prefix) {
                return Err(Error::invalid_input(format!(
                    "LanceDB catalog '{root}': '{prefix}' is not a database prefix (printable \
                     ASCII without spaces or '/'); expected db://DATABASE[/PREFIX]"
                )));
            }
            let given = options
                .iter()
                .find(|(k, _)| k.strip_prefix("format.").unwrap_or(k) == DATABASE_PREFIX);
            if let Some((_, other)) = given
                && other.trim() != prefix
            {
                return Err(Error::invalid_input(format!(
                    "LanceDB catalog '{root}': the option '{DATABASE_PREFIX}' ('{other}') \
                     differs from the prefix in the location"
                )));
            }
            options.insert(DATABASE_PREFIX.to_string(), prefix.to_string());
        }
        let spec = Self {
            kind: NamespaceKind::Cloud,
            root: format!("{CLOUD_SCHEME}{rest}"),
            storage_options: options,
        };
        if !spec.cloud_service()?.version().is_latest() {
            return Err(Error::not_supported(format!(
                "LanceDB catalog '{root}': 'lance.version' pins one table; give it in the \
                 OPTIONS of a CREATE EXTERNAL TABLE"
            )));
        }
        Ok(spec)
    }

    /// The database of a LanceDB catalog.
    fn database(&self) -> &str {
        let rest = self.root.strip_prefix(CLOUD_SCHEME).unwrap_or(&self.root);
        rest.split_once('/').map_or(rest, |(database, _)| database)
    }

    /// How a LanceDB catalog's service is reached.
    pub(crate) fn cloud_service(&self) -> Result<Service> {
        let options = self.storage_options.clone().into_iter().collect();
        Service::parse(self.database(), &options)
    }

    /// Table `table` of namespace `namespace` of a LanceDB catalog.
    pub(crate) fn cloud_table(&self, namespace: &[String], table: &str) -> Result<CloudOptions> {
        let mut id = namespace.to_vec();
        id.push(table.to_string());
        let address = CloudAddress {
            database: self.database().to_string(),
            id,
        };
        let service = self.cloud_service()?;
        Ok(CloudOptions {
            table: service.table(&address),
            version: VersionSpec::Latest,
        })
    }

    /// The storage options of the tables (for a REST namespace, without
    /// its client options).
    pub(crate) fn table_storage_options(&self) -> BTreeMap<String, String> {
        self.storage_options
            .iter()
            .filter(|(key, _)| self.kind == NamespaceKind::Directory || !is_rest_client_option(key))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The root as shown in plans and messages.
    pub fn display_root(&self) -> String {
        match self.kind {
            NamespaceKind::Directory => redact_uri(&self.root),
            NamespaceKind::Cloud => self.root.clone(),
            NamespaceKind::Rest => format!(
                "{REST_PREFIX}{}",
                redact_uri(&self.root).trim_end_matches('/')
            ),
        }
    }

    /// Opens the namespace through the Lance session of `cache`.
    #[cfg(feature = "namespaces")]
    pub(crate) async fn connect(
        &self,
        cache: &LanceSessionCache,
    ) -> Result<Arc<dyn LanceNamespace>> {
        use crate::cloud::options::{API_KEY, API_KEY_ENV};
        use lance_namespace_impls::{DirectoryNamespaceBuilder, RestNamespaceBuilder};
        use std::collections::HashMap;
        if self.kind == NamespaceKind::Cloud {
            let service = self.cloud_service()?;
            let Some(key) = service.api_key() else {
                return Err(Error::invalid_input(format!(
                    "LanceDB catalog '{}': no API key; give the option '{API_KEY}' or set \
                     {API_KEY_ENV}",
                    self.root
                )));
            };
            let mut builder = RestNamespaceBuilder::new(service.endpoint())
                .header("x-api-key", key)
                .header("x-lancedb-database", self.database());
            if let Some(prefix) = service.prefix() {
                builder = builder.header("x-lancedb-database-prefix", prefix);
            }
            let namespace = builder.build();
            return Ok(Arc::new(namespace));
        }
        if self.kind == NamespaceKind::Rest {
            let mut properties: HashMap<String, String> = self
                .storage_options
                .iter()
                .filter(|(key, _)| is_rest_client_option(key))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            properties.insert("uri".to_string(), self.root.clone());
            let builder = RestNamespaceBuilder::from_properties(properties)
                .map_err(|e| self.error("connecting to", e))?;
            return Ok(Arc::new(builder.build()));
        }
        let options: HashMap<String, String> = self.storage_options.clone().into_iter().collect();
        let namespace = DirectoryNamespaceBuilder::new(self.root.clone())
            .storage_options(options)
            .session(Arc::clone(cache.session()))
            .build()
            .await
            .map_err(|e| self.error("opening the namespace at", e))?;
        Ok(Arc::new(namespace))
    }

    /// Without the `namespaces` feature there is no client for a namespace.
    #[cfg(not(feature = "namespaces"))]
    pub(crate) async fn connect(
        &self,
        _cache: &LanceSessionCache,
    ) -> Result<Arc<dyn LanceNamespace>> {
        Err(Error::not_supported(format!(
            "Lance namespace '{}': this build of datafusion-lance has no namespace \
             client; enable the `namespaces` feature",
            self.display_root()
        )))
    }

    /// The full location of a table stored at `relative` under the root of
    /// a directory namespace; for a REST namespace, where the server is
    /// asked for a location when the table is created (see
    /// `super::ddl`).
    pub(crate) fn location_of(&self, relative: &str) -> String {
        match self.kind {
            NamespaceKind::Directory => format!("{}/{relative}", self.root),
            NamespaceKind::Cloud => format!("{CLOUD_SCHEME}{}/{relative}", self.database()),
            NamespaceKind::Rest => format!("{REST_PREFIX}{}/{relative}", self.root),
        }
    }

    /// A namespace error, naming the root.
    pub(crate) fn error(&self, action: &str, e: lance_core::Error) -> Error {
        Error::namespace(format!(
            "Lance namespace '{}': {action} failed: {}",
            self.display_root(),
            crate::error::plain(&e)
        ))
    }
}

fn is_rest_client_option(key: &str) -> bool {
    REST_CLIENT_OPTIONS.iter().any(|p| key.starts_with(p))
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
