//! [`LanceTagExec`]: creates, moves or deletes a tag of a table when executed
//! (planning, and so `EXPLAIN`, changes nothing).

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::memory_pool::MemoryPool;
use lance::Dataset;

use crate::error::plain;
use crate::location::TableLocation;
use crate::physical_plan::maintenance::{Maintenance, MaintenanceExec};

/// What happens to a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagAction {
    /// A new tag (an error if it exists).
    Create,
    /// An existing tag moved to another version (an error if it does not exist).
    Update,
    /// An existing tag removed (an error if it does not exist).
    Delete,
}

impl TagAction {
    /// The action's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
        }
    }

    /// The action named `name` (`create`, `update` or `delete`).
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Create, Self::Update, Self::Delete]
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(name.trim()))
    }
}

/// A change to one tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagChange {
    /// What happens.
    pub action: TagAction,
    /// The tag's name.
    pub tag: String,
    /// The version it points to (create / update; the latest when `None`).
    pub version: Option<u64>,
}

/// The schema of a tag change's one-row report: the tag and the version it
/// points to (NULL once deleted).
pub(crate) fn tag_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("tag", DataType::Utf8, false),
        Field::new("version", DataType::UInt64, true),
    ]))
}

/// `lance_tag(...)`: when executed, applies a [`TagChange`] to the table at
/// `location` (tags live beside the versions; no version is created).
pub type LanceTagExec = MaintenanceExec<TagChange>;

impl Maintenance for TagChange {
    const NODE: &'static str = "LanceTagExec";

    fn schema() -> SchemaRef {
        tag_schema()
    }

    fn fmt_params(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, ", action={}, tag={}", self.action.name(), self.tag)?;
        match self.version {
            Some(v) => write!(f, ", version={v}"),
            None => Ok(()),
        }
    }

    async fn run(
        self,
        dataset: Arc<Dataset>,
        location: TableLocation,
        _memory: Arc<dyn MemoryPool>,
    ) -> DFResult<RecordBatch> {
        apply(&dataset, &location, &self).await
    }
}

async fn apply(
    dataset: &Dataset,
    location: &TableLocation,
    change: &TagChange,
) -> DFResult<RecordBatch> {
    let verb = match change.action {
        TagAction::Create => "creating",
        TagAction::Update => "moving",
        TagAction::Delete => "deleting",
    };
    let err = |e: lance::Error| {
        DataFusionError::Execution(format!(
            "{verb} tag '{}' of '{}': {}",
            change.tag,
            location.display_uri,
            plain(&e)
        ))
    };
    let version = change.version.unwrap_or_else(|| dataset.version().version);
    let tags = dataset.tags();
    let pointed = match change.action {
        TagAction::Create => {
            tags.create(&change.tag, version).await.map_err(err)?;
            Some(version)
        }
        TagAction::Update => {
            tags.update(&change.tag, version).await.map_err(err)?;
            Some(version)
        }
        TagAction::Delete => {
            tags.delete(&change.tag).await.map_err(err)?;
            None
        }
    };
    Ok(RecordBatch::try_new(
        tag_schema(),
        vec![
            Arc::new(StringArray::from(vec![change.tag.clone()])),
            Arc::new(UInt64Array::from(vec![pointed])),
        ],
    )?)
}
