//! The options of a `db://` table: `OPTIONS (...)` keys, catalog options and
//! the `LANCEDB_*` environment variables, resolved once into plain data.

use std::collections::{BTreeMap, HashMap};

use super::address::CloudAddress;
use crate::config::VersionSpec;
use crate::error::{Error, Result};
use crate::location::TableLocation;

/// The option holding the API key (a secret: never displayed or encoded
/// unless the embedder opts in).
pub(crate) const API_KEY: &str = "api_key";
const REGION: &str = "region";
const HOST_OVERRIDE: &str = "host_override";
/// The option naming the database prefix a catalog `db://DATABASE/PREFIX`
/// gives.
pub(crate) const DATABASE_PREFIX: &str = "database_prefix";
const TIMEOUT: &str = "request_timeout_ms";
const RETRIES: &str = "max_retries";
const BACKOFF: &str = "retry_backoff_ms";
const READ_ROWS: &str = "read_rows_per_request";
const WRITE_ROWS: &str = "write_rows_per_request";
const WRITE_BYTES: &str = "write_bytes_per_request";
const VERSION: &str = "lance.version";

/// Environment variables that supply an option no `OPTIONS` key gives.
pub(crate) const API_KEY_ENV: &str = "LANCEDB_API_KEY";
const REGION_ENV: &str = "LANCEDB_REGION";
const HOST_OVERRIDE_ENV: &str = "LANCEDB_HOST_OVERRIDE";

/// Every option of a `db://` table and its meaning (the README's table).
pub(crate) const CLOUD_OPTIONS: &[(&str, &str)] = &[
    (
        API_KEY,
        "the API key (else `LANCEDB_API_KEY`); never shown or encoded",
    ),
    (
        REGION,
        "the LanceDB Cloud region (else `LANCEDB_REGION`; default `us-east-1`)",
    ),
    (
        HOST_OVERRIDE,
        "the service's URL, e.g. `http://127.0.0.1:8080` for LanceDB Enterprise (else \
         `LANCEDB_HOST_OVERRIDE`; default `https://DATABASE.REGION.api.lancedb.com`)",
    ),
    (
        DATABASE_PREFIX,
        "the database prefix (LanceDB Enterprise), sent as `x-lancedb-database-prefix`; a \
         catalog `db://DATABASE/PREFIX` gives it (default none)",
    ),
    (TIMEOUT, "timeout of one request in ms (default 30000)"),
    (
        RETRIES,
        "retries of a failed request that may be retried (reads, merges; appends only when nothing was applied) (default 3)",
    ),
    (
        BACKOFF,
        "wait before the first retry in ms, doubled for each further retry (at most 64×), plus up to as much again of random jitter (default 250)",
    ),
    (
        READ_ROWS,
        "rows asked for in one read request (default 65536)",
    ),
    (
        WRITE_ROWS,
        "rows sent in one `INSERT` or `merge_insert` request (default 100000); each request makes a version",
    ),
    (
        WRITE_BYTES,
        "bytes (in memory) sent in one `INSERT` request (default 67108864)",
    ),
    (VERSION, "read this version; the table is read-only"),
];

/// How requests to the service are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RequestPolicy {
    /// Timeout of one request, in milliseconds.
    pub timeout_ms: u64,
    /// Retries of a read request that failed in a retryable way.
    pub max_retries: u32,
    /// Wait before the first retry, in milliseconds.
    pub backoff_ms: u64,
    /// Rows asked for in one read request.
    pub read_rows: u32,
    /// Rows sent in one write request.
    pub write_rows: u64,
    /// Bytes (in memory) sent in one write request.
    pub write_bytes: u64,
}

impl Default for RequestPolicy {
    fn default() -> Self {
        Self {
            timeout_ms: 30_000,
            max_retries: 3,
            backoff_ms: 250,
            read_rows: 65_536,
            write_rows: 100_000,
            write_bytes: 64 << 20,
        }
    }
}

/// One `db://` table as plan nodes carry it: plain data, the API key among
/// the location's storage options (where the codecs' credential rule
/// applies to it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CloudTable {
    /// `db://DATABASE/…/TABLE`; the API key is the storage option `api_key`.
    pub location: TableLocation,
    /// The service's base URL (no secret).
    pub endpoint: String,
    /// Timeouts, retries and page sizes.
    pub requests: RequestPolicy,
    /// The database prefix, if any (sent with every request).
    pub prefix: Option<String>,
}

impl CloudTable {
    /// The table at `location` of the service at `endpoint`; with a prefix,
    /// its messages and plans show it.
    pub(crate) fn new(
        mut location: TableLocation,
        endpoint: String,
        requests: RequestPolicy,
        prefix: Option<String>,
    ) -> Self {
        if let Some(prefix) = &prefix {
            location.display_uri = format!("{} (prefix {prefix})", location.display_uri);
        }
        Self {
            location,
            endpoint,
            requests,
            prefix,
        }
    }

    /// The table's database and id.
    pub(crate) fn address(&self) -> Result<CloudAddress> {
        Ok(CloudAddress::parse(&self.location.uri)?)
    }

    /// The API key: the table's own, else `LANCEDB_API_KEY` of this process.
    pub(crate) fn api_key(&self) -> Result<String> {
        self.location
            .storage_options
            .get(API_KEY)
            .cloned()
            .or_else(|| non_empty_env(API_KEY_ENV))
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "LanceDB table '{}': no API key; give OPTIONS ('{API_KEY}' '…') or set \
                     {API_KEY_ENV}",
                    self.location.display_uri
                ))
            })
    }
}

/// A `db://` table's options, parsed.
#[derive(Debug, Clone)]
pub(crate) struct CloudOptions {
    /// The table and how to reach it.
    pub table: CloudTable,
    /// `lance.version`, if given.
    pub version: VersionSpec,
}

impl CloudOptions {
    /// Parses the options of the table at `uri` (keys may carry DataFusion's
    /// `format.` prefix); unknown keys are errors naming the known ones.
    pub(crate) fn parse(uri: &str, options: &HashMap<String, String>) -> Result<Self> {
        let address = CloudAddress::parse(uri)?;
        let service = Service::parse(&address.database, options)?;
        Ok(Self {
            table: service.table(&address),
            version: service.version,
        })
    }
}

/// How to reach one database: what its tables share.
#[derive(Clone)]
pub(crate) struct Service {
    endpoint: String,
    requests: RequestPolicy,
    /// The API key, if given (never shown).
    secrets: BTreeMap<String, String>,
    version: VersionSpec,
    prefix: Option<String>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The API key is never shown.
        f.debug_struct("Service")
            .field("endpoint", &self.endpoint)
            .field("requests", &self.requests)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("version", &self.version)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Service {
    /// Parses the options of database `database` (keys may carry DataFusion's
    /// `format.` prefix), falling back on the `LANCEDB_*` variables.
    pub(crate) fn parse(database: &str, options: &HashMap<String, String>) -> Result<Self> {
        let mut given: BTreeMap<&str, &str> = BTreeMap::new();
        for (key, value) in options {
            let bare = key.strip_prefix("format.").unwrap_or(key);
            let Some((known, _)) = CLOUD_OPTIONS.iter().find(|(k, _)| *k == bare) else {
                return Err(Error::UnknownOption {
                    key: bare.to_string(),
                    hint: format!(" for a LanceDB table (db://); known: {}", known_keys()),
                });
            };
            given.insert(known, value.as_str());
        }
        let get = |key: &str, env: Option<&str>| {
            given
                .get(key)
                .map(|v| v.trim().to_string())
                .or_else(|| env.and_then(non_empty_env))
        };
        let region = get(REGION, Some(REGION_ENV)).unwrap_or_else(|| "us-east-1".to_string());
        if region.is_empty()
            || !region
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(Error::invalid_option(REGION, &region, "not a region name"));
        }
        let endpoint = match get(HOST_OVERRIDE, Some(HOST_OVERRIDE_ENV)) {
            Some(host) => {
                let parsed = url::Url::parse(&host)
                    .ok()
                    .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
                if parsed.is_none() {
                    return Err(Error::invalid_option(
                        HOST_OVERRIDE,
                        &host,
                        "expected a URL such as https://host:port",
                    ));
                }
                host.trim_end_matches('/').to_string()
            }
            None => format!("https://{database}.{region}.api.lancedb.com"),
        };
        let mut requests = RequestPolicy::default();
        if let Some(v) = given.get(TIMEOUT) {
            requests.timeout_ms = positive(TIMEOUT, v)?;
        }
        if let Some(v) = given.get(RETRIES) {
            requests.max_retries = v
                .trim()
                .parse()
                .map_err(|_| Error::invalid_option(RETRIES, *v, "expected 0, 1, 2, ..."))?;
        }
        if let Some(v) = given.get(BACKOFF) {
            requests.backoff_ms = positive(BACKOFF, v)?;
        }
        if let Some(v) = given.get(READ_ROWS) {
            requests.read_rows = u32::try_from(positive(READ_ROWS, v)?)
                .ok()
                .filter(|n| *n <= i32::MAX as u32)
                .ok_or_else(|| Error::invalid_option(READ_ROWS, *v, "at most 2147483647"))?;
        }
        if let Some(v) = given.get(WRITE_ROWS) {
            requests.write_rows = positive(WRITE_ROWS, v)?;
        }
        if let Some(v) = given.get(WRITE_BYTES) {
            requests.write_bytes = positive(WRITE_BYTES, v)?;
        }
        let version = match given.get(VERSION) {
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => VersionSpec::Version(n),
                _ => {
                    return Err(Error::invalid_option(
                        VERSION,
                        *v,
                        "a version number (1, 2, ...)",
                    ));
                }
            },
            None => VersionSpec::Latest,
        };
        let mut secrets = BTreeMap::new();
        if let Some(key) = get(API_KEY, Some(API_KEY_ENV)) {
            secrets.insert(API_KEY.to_string(), key);
        }
        let prefix = match get(DATABASE_PREFIX, None) {
            Some(p) if !valid_prefix(&p) => {
                return Err(Error::invalid_option(
                    DATABASE_PREFIX,
                    &p,
                    "a prefix of printable ASCII characters without spaces or '/'",
                ));
            }
            p => p,
        };
        Ok(Self {
            endpoint,
            requests,
            secrets,
            version,
            prefix,
        })
    }

    /// The table at `address` of this service.
    pub(crate) fn table(&self, address: &CloudAddress) -> CloudTable {
        CloudTable::new(
            TableLocation::new(address.uri(), self.secrets.clone()),
            self.endpoint.clone(),
            self.requests,
            self.prefix.clone(),
        )
    }

    /// The database prefix, if any.
    #[cfg(feature = "namespaces")]
    pub(crate) fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// The service's base URL.
    #[cfg(feature = "namespaces")]
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The API key given, or `LANCEDB_API_KEY`.
    #[cfg(feature = "namespaces")]
    pub(crate) fn api_key(&self) -> Option<&str> {
        self.secrets.get(API_KEY).map(String::as_str)
    }

    /// `lance.version`, if given.
    pub(crate) fn version(&self) -> &VersionSpec {
        &self.version
    }
}

/// A prefix is sent as a header value and shown in plans: printable ASCII,
/// no spaces, no '/'.
pub(crate) fn valid_prefix(prefix: &str) -> bool {
    !prefix.is_empty() && prefix.chars().all(|c| c.is_ascii_graphic() && c != '/')
}

fn positive(key: &str, value: &str) -> Result<u64> {
    match value.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::invalid_option(
            key,
            value,
            "expected a positive integer",
        )),
    }
}

fn known_keys() -> String {
    CLOUD_OPTIONS
        .iter()
        .map(|(k, _)| *k)
        .collect::<Vec<_>>()
        .join(", ")
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<CloudOptions> {
        let options = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        CloudOptions::parse("db://mydb/t", &options)
    }

    #[test]
    fn options_resolve_into_an_endpoint_and_a_hidden_key() {
        let o = parse(&[("format.api_key", "sk-1"), ("region", "eu-west-1")]).unwrap();
        assert_eq!(o.table.endpoint, "https://mydb.eu-west-1.api.lancedb.com");
        assert_eq!(o.table.api_key().unwrap(), "sk-1");
        assert!(!format!("{o:?}").contains("sk-1"));
        let o = parse(&[
            ("host_override", "http://127.0.0.1:9/"),
            ("max_retries", "0"),
            ("retry_backoff_ms", "10"),
        ])
        .unwrap();
        assert_eq!(o.table.requests.backoff_ms, 10);
        assert_eq!(o.table.endpoint, "http://127.0.0.1:9");
        assert_eq!(o.table.requests.max_retries, 0);
    }

    #[test]
    fn a_prefix_is_checked_and_shown() {
        let o = parse(&[("database_prefix", "team-a")]).unwrap();
        assert_eq!(o.table.prefix.as_deref(), Some("team-a"));
        assert_eq!(o.table.location.display_uri, "db://mydb/t (prefix team-a)");
        assert_eq!(o.table.location.uri, "db://mydb/t");
        for bad in ["", "a b", "a/b", "é"] {
            let e = parse(&[("database_prefix", bad)]).unwrap_err().to_string();
            assert!(e.contains("database_prefix"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_readme_lists_every_option() {
        let readme = include_str!("../../README.md");
        for (key, meaning) in CLOUD_OPTIONS {
            let row = format!("| `{key}` | {meaning} |");
            assert!(readme.contains(&row), "README lacks: {row}");
        }
    }

    #[test]
    fn bad_options_are_named() {
        let e = parse(&[("apikey", "x")]).unwrap_err().to_string();
        assert!(
            e.contains("unknown option 'apikey'") && e.contains("api_key"),
            "{e}"
        );
        let e = parse(&[("host_override", "localhost")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'host_override'"), "{e}");
        let e = parse(&[("read_rows_per_request", "0")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("read_rows_per_request"), "{e}");
        let e = parse(&[("lance.version", "0")]).unwrap_err().to_string();
        assert!(e.contains("lance.version"), "{e}");
    }
}
