//! [`LanceIndexExec`]: creates or drops an index of a table when executed
//! (`CREATE INDEX`, `DROP INDEX`, `lance_create_index`, `lance_drop_index`);
//! planning, and so `EXPLAIN`, changes nothing.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::memory_pool::{MemoryLimit, MemoryPool};
use lance::Dataset;
use lance::index::DatasetIndexExt;

use crate::config::parse_bool;
use crate::error::{Error, plain};
use crate::location::TableLocation;
use crate::physical_plan::index_memory::reserve_index_build;
use crate::physical_plan::index_options::IndexMethod;
use crate::physical_plan::maintenance::{Maintenance, MaintenanceExec};

/// An index to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDefinition {
    /// The index's name.
    pub name: String,
    /// The column it indexes.
    pub column: String,
    /// Its type.
    pub method: IndexMethod,
    /// Its `WITH` options, as `(key, value)` (checked when planned).
    pub options: Vec<(String, String)>,
    /// Rebuild an index of the same name instead of failing.
    pub replace: bool,
    /// Do nothing when an index of that name exists (`IF NOT EXISTS`).
    pub if_not_exists: bool,
}

impl IndexDefinition {
    /// The index `name` of type `method` on `column` with `options`
    /// (`key`, `value`; keys lower-cased here): `replace` is taken out of
    /// them, the others are checked against what `method` takes.
    pub fn new(
        name: impl Into<String>,
        column: impl Into<String>,
        method: IndexMethod,
        options: Vec<(String, String)>,
        if_not_exists: bool,
    ) -> Result<Self, Error> {
        let mut replace = false;
        let mut kept = Vec::new();
        for (key, value) in options {
            let key = key.trim().to_ascii_lowercase();
            if key == "replace" {
                replace = parse_bool(&key, &value)?;
            } else {
                kept.push((key, value.trim().to_string()));
            }
        }
        method.params(&kept, usize::MAX)?;
        let name = name.into();
        if name.trim().is_empty() {
            return Err(Error::invalid_input("an index needs a name"));
        }
        crate::name::check_new(crate::name::NameKind::Index, &name)?;
        Ok(Self {
            name,
            column: column.into(),
            method,
            options: kept,
            replace,
            if_not_exists,
        })
    }
}

/// What happens to an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexChange {
    /// `CREATE INDEX`.
    Create(IndexDefinition),
    /// `DROP INDEX [IF EXISTS] <name>`.
    Drop {
        /// The index's name.
        name: String,
        /// No error when there is no such index.
        if_exists: bool,
    },
}

impl IndexChange {
    /// The index's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Create(definition) => &definition.name,
            Self::Drop { name, .. } => name,
        }
    }
}

/// The schema of an index change's one-row report: the index, what was
/// done (`created`, `replaced`, `dropped`, or `unchanged` under `IF [NOT]
/// EXISTS`) and the version the table is at afterwards.
pub(crate) fn index_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("index", DataType::Utf8, false),
        Field::new("action", DataType::Utf8, false),
        Field::new("version", DataType::UInt64, false),
    ]))
}

/// `CREATE INDEX` / `DROP INDEX`: when executed, builds (Lance trains it
/// over the rows of the latest version and commits one version) or drops
/// (one version) an index of the table at `location`.
pub type LanceIndexExec = MaintenanceExec<IndexChange>;

impl Maintenance for IndexChange {
    const NODE: &'static str = "LanceIndexExec";

    fn schema() -> SchemaRef {
        index_schema()
    }

    fn fmt_params(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Create(d) => {
                write!(
                    f,
                    ", create={}, column={}, type={}",
                    d.name,
                    d.column,
                    d.method.name()
                )?;
                for (key, value) in &d.options {
                    write!(f, ", {key}={value}")?;
                }
                if d.replace {
                    write!(f, ", replace=true")?;
                }
                if d.if_not_exists {
                    write!(f, ", if_not_exists=true")?;
                }
                Ok(())
            }
            Self::Drop { name, if_exists } => {
                write!(f, ", drop={name}")?;
                if *if_exists {
                    write!(f, ", if_exists=true")?;
                }
                Ok(())
            }
        }
    }

    async fn run(
        self,
        dataset: Arc<Dataset>,
        location: TableLocation,
        memory: Arc<dyn MemoryPool>,
    ) -> DFResult<RecordBatch> {
        change(&dataset, &location, &self, &memory).await
    }
}

async fn change(
    dataset: &Dataset,
    location: &TableLocation,
    change: &IndexChange,
    memory: &Arc<dyn MemoryPool>,
) -> DFResult<RecordBatch> {
    let name = change.name();
    let verb = match change {
        IndexChange::Create(_) => "creating",
        IndexChange::Drop { .. } => "dropping",
    };
    let err = |e: lance::Error| {
        DataFusionError::Execution(format!(
            "{verb} index '{name}' of '{}': {}",
            location.display_uri,
            plain(&e)
        ))
    };
    let exists = !dataset
        .load_indices_by_name(name)
        .await
        .map_err(err)?
        .is_empty();
    let mut dataset = dataset.clone();
    let action = match change {
        IndexChange::Create(d) if exists && d.if_not_exists => "unchanged",
        IndexChange::Create(d) if exists && !d.replace => {
            return Err(Error::already_exists(format!(
                "creating index '{name}' of '{}': an index of that name exists; use IF NOT \
                 EXISTS, WITH (replace = true) or DROP INDEX {name} ON <table> first",
                location.display_uri
            ))
            .into());
        }
        IndexChange::Create(d) => {
            // `None` when Lance has not counted a fragment's rows (old tables).
            let rows: Option<usize> = dataset.fragments().iter().map(|f| f.physical_rows).sum();
            let params = d
                .method
                .params(&d.options, rows.unwrap_or(usize::MAX))
                .map_err(|e| {
                    DataFusionError::Execution(format!(
                        "creating index '{name}' of '{}': {e}",
                        location.display_uri
                    ))
                })?;
            let building = format!("building index '{name}' of {}", location.display_uri);
            // Lance builds outside DataFusion's pool: its estimate is
            // reserved (under a finite limit) until the build ends.
            let _reserved = match memory.memory_limit() {
                MemoryLimit::Infinite => None,
                _ => {
                    let rows = rows.unwrap_or(0) as u64;
                    let (column, method) = (d.column.as_str(), d.method);
                    reserve_index_build(memory, &dataset, column, method, rows, &building).await?
                }
            };
            let _phase = crate::progress::Phase::enter(building);
            // Lance checks the name again at commit: an index another writer
            // created meanwhile is an error, not replaced, unless asked.
            dataset
                .create_index(
                    &[d.column.as_str()],
                    d.method.lance_type(),
                    Some(d.name.clone()),
                    params.as_ref(),
                    d.replace,
                )
                .await
                .map_err(err)?;
            if exists { "replaced" } else { "created" }
        }
        IndexChange::Drop { if_exists, .. } if !exists => {
            if *if_exists {
                "unchanged"
            } else {
                return Err(Error::not_found(format!(
                    "dropping index '{name}' of '{}': the table has no index of that name \
                     (lance_indices('<table>') lists them)",
                    location.display_uri
                ))
                .into());
            }
        }
        IndexChange::Drop { .. } => {
            dataset.drop_index(name).await.map_err(err)?;
            "dropped"
        }
    };
    Ok(RecordBatch::try_new(
        index_schema(),
        vec![
            Arc::new(StringArray::from(vec![name.to_string()])),
            Arc::new(StringArray::from(vec![action])),
            Arc::new(UInt64Array::from(vec![dataset.version().version])),
        ],
    )?)
}
