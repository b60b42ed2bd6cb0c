//! [`LanceConfig`]: the `lance.*` session settings, each declared once in
//! [`SETTINGS`] — `SET`, `SHOW`, `information_schema.df_settings`, the
//! unknown-key hint and the README's table all come from there.

use std::any::Any;

use datafusion::common::config::{ConfigEntry, ConfigExtension, ExtensionOptions};
use datafusion::error::Result as DFResult;
use lance_file::version::LanceFileVersion;

use super::{
    CacheBudgets, CommitBudget, FilterPushdown, PREFIX, parse, parse_bool, parse_storage_version,
    positive,
};
use crate::error::{Error, Result};

/// Session settings of this crate, set with `SET lance.<key> = <value>`.
///
/// Every setting, its default and meaning: the README's settings table, or
/// `SELECT name, value, description FROM information_schema.df_settings
/// WHERE name LIKE 'lance.%'` (both generated from one declaration per
/// setting; see [`LanceConfig::reference`]).
///
/// The two cache budgets select which process-wide shared Lance session the
/// context uses: contexts with equal budgets share one session (and its cached
/// manifests); changing a budget moves this context to the shared session of
/// that size. Their defaults can be changed with the environment variables
/// `DATAFUSION_LANCE_METADATA_CACHE_BYTES` and `DATAFUSION_LANCE_INDEX_CACHE_BYTES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanceConfig {
    /// `lance.batch_size`.
    pub batch_size: usize,
    /// `lance.scan_partitions`.
    pub scan_partitions: usize,
    /// `lance.fragment_readahead`.
    pub fragment_readahead: usize,
    /// `lance.batch_readahead`.
    pub batch_readahead: usize,
    /// `lance.io_buffer_size`.
    pub io_buffer_size: u64,
    /// `lance.pushdown_filters`.
    pub pushdown_filters: FilterPushdown,
    /// `lance.use_scalar_index`.
    pub use_scalar_index: bool,
    /// `lance.use_vector_index`.
    pub use_vector_index: bool,
    /// `lance.metadata_cache_bytes`.
    pub metadata_cache_bytes: usize,
    /// `lance.index_cache_bytes`.
    pub index_cache_bytes: usize,
    /// `lance.max_rows_per_file`.
    pub max_rows_per_file: usize,
    /// `lance.max_rows_per_group`.
    pub max_rows_per_group: usize,
    /// `lance.data_storage_version`.
    pub data_storage_version: LanceFileVersion,
    /// `lance.commit_max_retries`.
    pub commit_max_retries: u32,
    /// `lance.commit_retry_timeout_ms`.
    pub commit_retry_timeout_ms: u64,
}

/// Default of `lance.commit_max_retries`.
pub const DEFAULT_COMMIT_MAX_RETRIES: u32 = 20;
/// Default of `lance.commit_retry_timeout_ms`.
pub const DEFAULT_COMMIT_RETRY_TIMEOUT_MS: u64 = 30_000;

/// The file format version of tables this crate creates unless told
/// otherwise (see the README's benchmark section for why).
pub const DEFAULT_STORAGE_VERSION: LanceFileVersion = LanceFileVersion::V2_1;

impl Default for LanceConfig {
    fn default() -> Self {
        let budgets = CacheBudgets::from_env();
        Self {
            batch_size: 0,
            scan_partitions: 0,
            fragment_readahead: 0,
            batch_readahead: 0,
            io_buffer_size: 0,
            pushdown_filters: FilterPushdown::Auto,
            use_scalar_index: true,
            use_vector_index: true,
            metadata_cache_bytes: budgets.metadata_bytes,
            index_cache_bytes: budgets.index_bytes,
            max_rows_per_file: 1024 * 1024,
            max_rows_per_group: 1024,
            data_storage_version: DEFAULT_STORAGE_VERSION,
            commit_max_retries: DEFAULT_COMMIT_MAX_RETRIES,
            commit_retry_timeout_ms: DEFAULT_COMMIT_RETRY_TIMEOUT_MS,
        }
    }
}

/// One `lance.*` setting.
pub(crate) struct Setting {
    /// The key after `lance.`.
    key: &'static str,
    /// The default as documented, when it is not the value `Default` gives
    /// (budgets that depend on the environment).
    default_label: Option<&'static str>,
    description: &'static str,
    get: fn(&LanceConfig) -> String,
    /// Parses and stores a value; `key` is the full key, for errors.
    set: fn(&mut LanceConfig, key: &str, value: &str) -> Result<()>,
}

/// Every session setting, in documentation order.
pub(crate) const SETTINGS: &[Setting] = &[
    Setting {
        key: "batch_size",
        default_label: None,
        description: "rows per scanned batch; 0 = automatic: `datafusion.execution.batch_size`, \
            up to 4× that for narrow rows, and at most 2 MiB per batch, sized by Lance from the \
            data it decodes (long strings give fewer rows; only a single row larger than that \
            exceeds it)",
        get: |c| c.batch_size.to_string(),
        set: |c, key, value| {
            // Lance takes at most u32::MAX rows per batch.
            c.batch_size = parse::<u32>(key, value, "a row count of at most 4294967295")? as usize;
            Ok(())
        },
    },
    Setting {
        key: "scan_partitions",
        default_label: None,
        description: "max fragment groups (partitions) per scan; 0 = \
            `datafusion.execution.target_partitions`",
        get: |c| c.scan_partitions.to_string(),
        set: |c, key, value| {
            c.scan_partitions = parse(key, value, "a partition count")?;
            Ok(())
        },
    },
    Setting {
        key: "fragment_readahead",
        default_label: None,
        description: "fragments read concurrently per partition; 0 = automatic (on local \
            disk about one batch of rows in flight: 1 for fragments of a batch or more, at most \
            32 for tiny ones; Lance's default on object stores)",
        get: |c| c.fragment_readahead.to_string(),
        set: |c, key, value| {
            c.fragment_readahead = parse(key, value, "a fragment count")?;
            Ok(())
        },
    },
    Setting {
        key: "batch_readahead",
        default_label: None,
        description: "batches decoded concurrently per partition; 0 = Lance's default",
        get: |c| c.batch_readahead.to_string(),
        set: |c, key, value| {
            c.batch_readahead = parse(key, value, "a batch count")?;
            Ok(())
        },
    },
    Setting {
        key: "io_buffer_size",
        default_label: None,
        description: "I/O buffer bytes per partition; 0 = Lance's default",
        get: |c| c.io_buffer_size.to_string(),
        set: |c, key, value| {
            c.io_buffer_size = parse(key, value, "a byte count")?;
            Ok(())
        },
    },
    Setting {
        key: "pushdown_filters",
        default_label: None,
        description: "who evaluates the filters whose semantics Lance matches exactly: `auto` \
            (Lance when a scalar index covers a filter column or the scan reads wide columns, \
            else DataFusion right above the scan), `true` (Lance), `false` (DataFusion)",
        get: |c| c.pushdown_filters.to_string(),
        set: |c, key, value| {
            c.pushdown_filters = match value.trim().to_ascii_lowercase().as_str() {
                "auto" => FilterPushdown::Auto,
                _ => match parse_bool(key, value) {
                    Ok(true) => FilterPushdown::Lance,
                    Ok(false) => FilterPushdown::DataFusion,
                    Err(_) => {
                        return Err(Error::invalid_option(
                            key,
                            value,
                            "expected auto, true or false",
                        ));
                    }
                },
            };
            Ok(())
        },
    },
    Setting {
        key: "use_scalar_index",
        default_label: None,
        description: "let Lance answer pushed filters from scalar indices, and prune the fragments an \
                      index rules out while planning (`pruned_fragments=` in `EXPLAIN`)",
        get: |c| c.use_scalar_index.to_string(),
        set: |c, key, value| {
            c.use_scalar_index = parse_bool(key, value)?;
            Ok(())
        },
    },
    Setting {
        key: "use_vector_index",
        default_label: None,
        description: "answer `ORDER BY <distance>(<vector column>, <vector>) LIMIT k` from the \
            column's vector index when it has one of that metric (approximate, as \
            `lance_vector_search`); false: exact, by DataFusion",
        get: |c| c.use_vector_index.to_string(),
        set: |c, key, value| {
            c.use_vector_index = parse_bool(key, value)?;
            Ok(())
        },
    },
    Setting {
        key: "metadata_cache_bytes",
        default_label: Some("1 GiB"),
        description: "metadata cache budget of the shared Lance session (contexts with equal \
            budgets share one session)",
        get: |c| c.metadata_cache_bytes.to_string(),
        set: |c, key, value| {
            c.metadata_cache_bytes = parse(key, value, "a byte count")?;
            Ok(())
        },
    },
    Setting {
        key: "index_cache_bytes",
        default_label: Some("6 GiB"),
        description: "index cache budget of the shared Lance session (contexts with equal \
            budgets share one session)",
        get: |c| c.index_cache_bytes.to_string(),
        set: |c, key, value| {
            c.index_cache_bytes = parse(key, value, "a byte count")?;
            Ok(())
        },
    },
    Setting {
        key: "max_rows_per_file",
        default_label: None,
        description: "rows per data file (fragment) written by INSERT / UPDATE / COPY",
        get: |c| c.max_rows_per_file.to_string(),
        set: |c, key, value| {
            c.max_rows_per_file = positive(key, value)?;
            Ok(())
        },
    },
    Setting {
        key: "max_rows_per_group",
        default_label: None,
        description: "rows per row group written",
        get: |c| c.max_rows_per_group.to_string(),
        set: |c, key, value| {
            c.max_rows_per_group = positive(key, value)?;
            Ok(())
        },
    },
    Setting {
        key: "data_storage_version",
        default_label: None,
        description: "file format of tables this crate creates: `2.0`, `2.1`, `2.2` or \
            `stable` (see Benchmarks)",
        get: |c| c.data_storage_version.to_string(),
        set: |c, key, value| {
            c.data_storage_version = parse_storage_version(key, value)?;
            Ok(())
        },
    },
    Setting {
        key: "commit_max_retries",
        default_label: None,
        description: "the most commit attempts a write makes in all when other writers keep \
            committing first (each attempt rebases onto their versions; Lance's \
            `CommitBuilder::with_max_retries`)",
        get: |c| c.commit_max_retries.to_string(),
        set: |c, key, value| {
            c.commit_max_retries = parse(key, value, "a number of retries")?;
            Ok(())
        },
    },
    Setting {
        key: "commit_retry_timeout_ms",
        default_label: None,
        description: "wall-clock budget of those attempts and of Lance's backoff between them \
            (random slots of 1.1× the first attempt's time: 4, 8, 16, … slots; not \
            configurable in Lance 14)",
        get: |c| c.commit_retry_timeout_ms.to_string(),
        set: |c, key, value| {
            c.commit_retry_timeout_ms = parse(key, value, "milliseconds")?;
            Ok(())
        },
    },
];

impl LanceConfig {
    /// The settings of a DataFusion session, or the defaults when the session
    /// has no `lance` namespace registered.
    pub fn from_options(options: &datafusion::config::ConfigOptions) -> Self {
        options
            .extensions
            .get::<LanceConfig>()
            .cloned()
            .unwrap_or_default()
    }

    /// The commit budget these settings give a write.
    pub fn commit_budget(&self) -> CommitBudget {
        CommitBudget {
            max_retries: self.commit_max_retries,
            retry_timeout: std::time::Duration::from_millis(self.commit_retry_timeout_ms),
        }
    }

    /// The cache budgets these settings select.
    pub fn cache_budgets(&self) -> CacheBudgets {
        CacheBudgets {
            metadata_bytes: self.metadata_cache_bytes,
            index_bytes: self.index_cache_bytes,
        }
    }

    /// Every setting with its default and meaning, as the markdown table the
    /// README shows.
    pub fn reference() -> String {
        let defaults = Self::default();
        let mut table = String::from("| setting | default | meaning |\n|---|---|---|\n");
        for s in SETTINGS {
            let default = s
                .default_label
                .map_or_else(|| (s.get)(&defaults), str::to_string);
            table.push_str(&format!(
                "| `{PREFIX}.{}` | {default} | {} |\n",
                s.key, s.description
            ));
        }
        table
    }

    fn set_key(&mut self, key: &str, value: &str) -> Result<()> {
        let full = format!("{PREFIX}.{key}");
        match SETTINGS.iter().find(|s| s.key == key) {
            Some(setting) => (setting.set)(self, &full, value),
            None => Err(Error::UnknownOption {
                key: full,
                hint: format!(
                    "; settings in the lance namespace are: {}",
                    SETTINGS
                        .iter()
                        .map(|s| format!("{PREFIX}.{}", s.key))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }
}

impl ExtensionOptions for LanceConfig {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, value: &str) -> DFResult<()> {
        let key = key.strip_prefix("lance.").unwrap_or(key);
        Ok(self.set_key(key, value)?)
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        SETTINGS
            .iter()
            .map(|s| ConfigEntry {
                key: format!("{PREFIX}.{}", s.key),
                value: Some((s.get)(self)),
                description: s.description,
            })
            .collect()
    }
}

impl ConfigExtension for LanceConfig {
    const PREFIX: &'static str = PREFIX;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_config_set_and_errors() {
        let mut c = LanceConfig::default();
        ExtensionOptions::set(&mut c, "batch_size", "1024").unwrap();
        assert_eq!(c.batch_size, 1024);
        let err = ExtensionOptions::set(&mut c, "batch_size", "-1")
            .unwrap_err()
            .to_string();
        assert!(err.contains("'lance.batch_size'"), "{err}");
        let err = ExtensionOptions::set(&mut c, "nope", "1")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown option 'lance.nope'"), "{err}");
        assert!(err.contains("lance.commit_retry_timeout_ms"), "{err}");
    }

    /// Every setting reads back what was set, and SHOW lists each once.
    #[test]
    fn every_setting_round_trips() {
        let values = [
            ("batch_size", "7"),
            ("scan_partitions", "3"),
            ("fragment_readahead", "2"),
            ("batch_readahead", "5"),
            ("io_buffer_size", "4096"),
            ("pushdown_filters", "true"),
            ("use_scalar_index", "false"),
            ("use_vector_index", "false"),
            ("metadata_cache_bytes", "1000"),
            ("index_cache_bytes", "2000"),
            ("max_rows_per_file", "11"),
            ("max_rows_per_group", "13"),
            ("data_storage_version", "2.2"),
            ("commit_max_retries", "3"),
            ("commit_retry_timeout_ms", "500"),
        ];
        assert_eq!(values.len(), SETTINGS.len());
        let mut c = LanceConfig::default();
        for (key, value) in values {
            ExtensionOptions::set(&mut c, key, value).unwrap();
        }
        let entries = c.entries();
        for (key, value) in values {
            let shown: Vec<_> = entries
                .iter()
                .filter(|e| e.key == format!("lance.{key}"))
                .collect();
            assert_eq!(shown.len(), 1, "{key}");
            assert_eq!(shown[0].value.as_deref(), Some(value), "{key}");
        }
    }

    /// The README's settings table is the generated one.
    #[test]
    fn the_readme_shows_every_setting_as_declared() {
        let readme = include_str!("../../README.md");
        let table = LanceConfig::reference();
        assert!(
            readme.contains(&table),
            "README's settings table differs from LanceConfig::reference():\n{table}"
        );
    }
}
