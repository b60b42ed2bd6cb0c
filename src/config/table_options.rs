//! [`LanceTableOptions`]: the `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED
//! AS LANCE` and `COPY ... STORED AS LANCE`, each declared once in
//! [`TABLE_OPTIONS`].

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;

use datafusion::common::config::{ConfigEntry, ConfigExtension, ExtensionOptions};
use datafusion::error::Result as DFResult;
use lance_file::version::LanceFileVersion;

use super::{PREFIX, parse, parse_bool, parse_storage_version, positive};
use crate::error::{Error, Result};

/// Which version of a table a provider reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum VersionSpec {
    /// The latest version, resolved once per query at planning time.
    #[default]
    Latest,
    /// A fixed version number.
    Version(u64),
    /// The version a tag points to (resolved when the table is registered).
    Tag(String),
}

impl VersionSpec {
    /// True for [`VersionSpec::Latest`].
    pub fn is_latest(&self) -> bool {
        matches!(self, VersionSpec::Latest)
    }
}

impl Display for VersionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionSpec::Latest => write!(f, "latest"),
            VersionSpec::Version(v) => write!(f, "version {v}"),
            VersionSpec::Tag(t) => write!(f, "tag '{t}'"),
        }
    }
}

/// Per-table options given in `CREATE EXTERNAL TABLE ... OPTIONS (...)` (and
/// `COPY ... OPTIONS (...)`); the README's table of them, generated from
/// their declarations, is [`LanceTableOptions::reference`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LanceTableOptions {
    /// The version to read.
    pub version: VersionSpec,
    /// Storage options handed to Lance's object store (credentials, endpoints).
    pub storage_options: BTreeMap<String, String>,
    /// Rows per fragment written through this table.
    pub max_rows_per_file: Option<usize>,
    /// Rows per row group written through this table.
    pub max_rows_per_group: Option<usize>,
    /// File format of a table created with these options.
    pub data_storage_version: Option<LanceFileVersion>,
    /// Stable row ids for a table created with these options.
    pub enable_stable_row_ids: Option<bool>,
}

impl std::fmt::Debug for LanceTableOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Storage option values are secrets: show the keys only.
        f.debug_struct("LanceTableOptions")
            .field("version", &self.version)
            .field("max_rows_per_file", &self.max_rows_per_file)
            .field("data_storage_version", &self.data_storage_version)
            .field(
                "storage_options",
                &self.storage_options.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// One table option.
pub(crate) struct TableOption {
    /// The full key (`lance.version`); `lance.storage.<name>` stands for a
    /// family of keys.
    key: &'static str,
    description: &'static str,
    /// The value as `SHOW`-like listings display it (`None`: unset or secret).
    get: fn(&LanceTableOptions) -> Option<String>,
    /// Parses and stores a value; `key` is the key as given.
    set: fn(&mut LanceTableOptions, key: &str, value: &str) -> Result<()>,
}

const STORAGE_KEY: &str = "lance.storage.<name>";

/// Every table option, in documentation order.
pub(crate) const TABLE_OPTIONS: &[TableOption] = &[
    TableOption {
        key: "lance.version",
        description: "read this version (≥ 1); the table is read-only",
        get: |o| match &o.version {
            VersionSpec::Version(v) => Some(v.to_string()),
            _ => None,
        },
        set: |o, key, value| {
            let v: u64 = parse(key, value, "a version number (1, 2, ...)")?;
            if v == 0 {
                return Err(Error::invalid_option(
                    key,
                    value,
                    "Lance versions start at 1",
                ));
            }
            o.pin(key, VersionSpec::Version(v))
        },
    },
    TableOption {
        key: "lance.tag",
        description: "read the version the tag points to when the table is registered; \
            read-only",
        get: |o| match &o.version {
            VersionSpec::Tag(t) => Some(t.clone()),
            _ => None,
        },
        set: |o, key, value| {
            if value.trim().is_empty() {
                return Err(Error::invalid_option(key, value, "empty tag name"));
            }
            o.pin(key, VersionSpec::Tag(value.trim().to_string()))
        },
    },
    TableOption {
        key: STORAGE_KEY,
        description: "a Lance storage option (`lance.storage.aws_region`, credentials, \
            endpoints); values are never displayed",
        get: |_| None,
        set: |o, key, value| {
            let name = key.strip_prefix("lance.storage.").unwrap_or_default();
            if name.is_empty() {
                return Err(Error::invalid_option(key, "", "empty storage option name"));
            }
            o.storage_options
                .insert(name.to_string(), value.to_string());
            Ok(())
        },
    },
    TableOption {
        key: "lance.max_rows_per_file",
        description: "rows per fragment written through this table (default: the session \
            setting)",
        get: |o| o.max_rows_per_file.map(|n| n.to_string()),
        set: |o, key, value| {
            o.max_rows_per_file = Some(positive(key, value)?);
            Ok(())
        },
    },
    TableOption {
        key: "lance.max_rows_per_group",
        description: "rows per row group written through this table",
        get: |o| o.max_rows_per_group.map(|n| n.to_string()),
        set: |o, key, value| {
            o.max_rows_per_group = Some(positive(key, value)?);
            Ok(())
        },
    },
    TableOption {
        key: "lance.data_storage_version",
        description: "file format of a table this statement creates: `2.0`, `2.1`, `2.2` \
            (default: `lance.data_storage_version`)",
        get: |o| o.data_storage_version.map(|v| v.to_string()),
        set: |o, key, value| {
            o.data_storage_version = Some(parse_storage_version(key, value)?);
            Ok(())
        },
    },
    TableOption {
        key: "lance.enable_stable_row_ids",
        description: "stable row ids for a table this statement creates",
        get: |o| o.enable_stable_row_ids.map(|b| b.to_string()),
        set: |o, key, value| {
            o.enable_stable_row_ids = Some(parse_bool(key, value)?);
            Ok(())
        },
    },
];

fn known_keys() -> String {
    TABLE_OPTIONS
        .iter()
        .map(|o| o.key)
        .collect::<Vec<_>>()
        .join(", ")
}

impl LanceTableOptions {
    /// Parses the `OPTIONS` of a `CREATE EXTERNAL TABLE` statement.
    ///
    /// Keys arrive lowercased; unprefixed keys arrive as `format.<key>` (a
    /// DataFusion convention) and are rejected with a hint to use `lance.<key>`.
    pub fn from_options(options: &HashMap<String, String>) -> Result<Self> {
        let mut parsed = Self::default();
        let mut keys: Vec<_> = options.keys().collect();
        keys.sort();
        for key in keys {
            parsed.set_key(key, &options[key])?;
        }
        Ok(parsed)
    }

    /// Every table option and its meaning, as the markdown table the README
    /// shows.
    pub fn reference() -> String {
        let mut table = String::from("| option | meaning |\n|---|---|\n");
        for o in TABLE_OPTIONS {
            table.push_str(&format!("| `{}` | {} |\n", o.key, o.description));
        }
        table
    }

    fn set_key(&mut self, key: &str, value: &str) -> Result<()> {
        if !key.starts_with("lance.") {
            let bare = key.strip_prefix("format.").unwrap_or(key);
            return Err(Error::UnknownOption {
                key: bare.to_string(),
                hint: format!(
                    " for STORED AS LANCE; Lance options are prefixed, e.g. 'lance.{bare}' (known: {})",
                    known_keys()
                ),
            });
        }
        let option = if key.starts_with("lance.storage.") {
            TABLE_OPTIONS.iter().find(|o| o.key == STORAGE_KEY)
        } else {
            TABLE_OPTIONS.iter().find(|o| o.key == key)
        };
        match option {
            Some(option) => (option.set)(self, key, value),
            None => Err(Error::UnknownOption {
                key: key.to_string(),
                hint: format!(" for STORED AS LANCE (known: {})", known_keys()),
            }),
        }
    }

    fn pin(&mut self, key: &str, spec: VersionSpec) -> Result<()> {
        if !self.version.is_latest() {
            return Err(Error::invalid_option(
                key,
                spec.to_string(),
                "'lance.version' and 'lance.tag' cannot both be given",
            ));
        }
        self.version = spec;
        Ok(())
    }
}

impl ExtensionOptions for LanceTableOptions {
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
        // DataFusion hands table-option extensions the full key ("lance.x").
        let key = if key.starts_with("lance.") {
            key.to_string()
        } else {
            format!("lance.{key}")
        };
        Ok(self.set_key(&key, value)?)
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        TABLE_OPTIONS
            .iter()
            .filter(|o| o.key != STORAGE_KEY)
            .map(|o| ConfigEntry {
                key: o.key.to_string(),
                value: (o.get)(self),
                description: o.description,
            })
            .collect()
    }
}

impl ConfigExtension for LanceTableOptions {
    const PREFIX: &'static str = PREFIX;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn table_options_parse_and_reject() {
        let o = LanceTableOptions::from_options(&opts(&[
            ("lance.version", "3"),
            ("lance.storage.aws_region", "eu-west-1"),
            ("lance.max_rows_per_file", "10"),
        ]))
        .unwrap();
        assert_eq!(o.version, VersionSpec::Version(3));
        assert_eq!(o.storage_options["aws_region"], "eu-west-1");
        assert_eq!(o.max_rows_per_file, Some(10));
        assert!(!format!("{o:?} {:?}", o.entries()).contains("eu-west-1"));

        let err = LanceTableOptions::from_options(&opts(&[("format.version", "3")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown option 'version'") && err.contains("'lance.version'"));

        let err = LanceTableOptions::from_options(&opts(&[("lance.verison", "3")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown option 'lance.verison'"), "{err}");
        assert!(err.contains("lance.enable_stable_row_ids"), "{err}");

        let err = LanceTableOptions::from_options(&opts(&[("lance.version", "x")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("invalid value 'x' for option 'lance.version'"),
            "{err}"
        );

        let err =
            LanceTableOptions::from_options(&opts(&[("lance.version", "2"), ("lance.tag", "a")]))
                .unwrap_err()
                .to_string();
        assert!(err.contains("cannot both be given"), "{err}");

        let err = LanceTableOptions::from_options(&opts(&[("lance.storage.", "x")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("empty storage option name"), "{err}");
    }

    /// The README's table-options table is the generated one.
    #[test]
    fn the_readme_shows_every_table_option_as_declared() {
        let readme = include_str!("../../README.md");
        let table = LanceTableOptions::reference();
        assert!(
            readme.contains(&table),
            "README's table-options table differs from LanceTableOptions::reference():\n{table}"
        );
    }
}
