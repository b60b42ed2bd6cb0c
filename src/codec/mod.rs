//! Codecs for `datafusion-proto`: Lance plans as bytes, to ship to another
//! process (a Ballista or datafusion-distributed worker), cache or inspect.
//!
//! * [`LancePhysicalCodec`] encodes every Lance physical node: scans
//!   (location, version and manifest e_tag, fragment ids per partition,
//!   projection, filter, limit, scanner options), writers, commits,
//!   `DELETE`, `UPDATE`, merges, `lance_vacuum` and [`crate::physical_plan::LanceSink`]
//!   inside `DataSinkExec`. Never a dataset handle or a manifest: a decoded
//!   node opens what it reads through the Lance session of the process that
//!   runs it, so its size grows with the fragment id lists only.
//! * [`LanceLogicalCodec`] encodes every table provider the crate creates:
//!   Lance tables (location, version pin, table options and schema — never
//!   the manifest), the planned forms of `DELETE`, `UPDATE`, `lance_merge`,
//!   `INSERT OR REPLACE` and `MERGE INTO` (nested plans included), the
//!   table functions, and `COPY ... STORED AS LANCE` with its options.
//!
//! Encode a logical plan after [`crate::resolve_lance_tables`]: it fixes the
//! versions the plan reads, looks up the tables that statements name, and
//! moves a `COPY`'s options into the plan (`datafusion-proto` drops them
//! otherwise, so an unresolved `COPY ... STORED AS LANCE` is refused).
//!
//! # Credentials
//!
//! A table's storage options (keys, tokens, endpoints) and any user info or
//! query string in its URI are **not** encoded by default: a worker reaches
//! the store with its own credentials — its environment (`AWS_*`, ...), or
//! the options given to its codec with `with_default_storage_options`. An
//! encoder built with `with_storage_options_in_plan(true)` carries them in
//! the bytes instead (anyone who can read the plan can then read them).
//! Either way they never appear in `EXPLAIN` or `Debug`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> datafusion::error::Result<()> {
//! use datafusion_lance::LancePhysicalCodec;
//! use datafusion_proto::bytes::{
//!     physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
//! };
//! # let dir = tempfile::tempdir().unwrap();
//! # let uri = dir.path().join("t.lance");
//! # let uri = uri.to_str().unwrap();
//! let ctx = datafusion_lance::lance_session_context(Default::default());
//! ctx.sql(&format!("COPY (SELECT 1 AS id) TO '{uri}' STORED AS LANCE")).await?.collect().await?;
//! ctx.sql(&format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'")).await?;
//! let plan = ctx.sql("SELECT id FROM t").await?.create_physical_plan().await?;
//!
//! let codec = LancePhysicalCodec::new();
//! let bytes = physical_plan_to_bytes_with_extension_codec(plan, &codec)?;
//! // ... on a worker, with its own context and Lance session:
//! let worker = datafusion_lance::lance_session_context(Default::default());
//! let plan = physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec)?;
//! let rows = datafusion::physical_plan::collect(plan, worker.task_ctx()).await?;
//! assert_eq!(rows[0].num_rows(), 1);
//! # Ok(())
//! # }
//! ```

mod alter;
mod cloud;
mod cloud_ddl;
mod cloud_statements;
mod envelope;
mod logical;
mod maintenance;
mod permutation;
mod physical;
mod proto;
mod search;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::TaskContext;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::logical_plan::from_proto::parse_expr;
use datafusion_proto::logical_plan::to_proto::serialize_expr;
use prost::Message;

pub use logical::LanceLogicalCodec;
pub use physical::LancePhysicalCodec;

use crate::config::{CommitBudget, LanceTableOptions, VersionSpec, parse_storage_version};
use crate::location::{Snapshot, TableLocation, redact_uri};
use crate::physical_plan::merge_options::{
    MergeCondition, MergeOptions, MergeOutput, WhenMatched, WhenNotMatched, WhenNotMatchedBySource,
};
use crate::physical_plan::{CommitKind, WriteOptions, WriteTarget};

/// What encoded plans do with tables' storage options (see the module docs).
#[derive(Clone, Default)]
struct StoragePolicy {
    /// Encode them in plans.
    carry: bool,
    /// Used for decoded tables whose plan carries none.
    defaults: BTreeMap<String, String>,
}

impl fmt::Debug for StoragePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoragePolicy")
            .field("carry", &self.carry)
            .field("defaults", &self.defaults.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl StoragePolicy {
    fn encode_location(&self, location: &TableLocation) -> proto::Location {
        self.encode_storage(&location.uri, &location.storage_options)
    }

    /// A location (`uri` may be empty) with the credentials the policy lets
    /// travel: the URI's user info and query string count as credentials.
    fn encode_storage(
        &self,
        uri: &str,
        storage_options: &BTreeMap<String, String>,
    ) -> proto::Location {
        if self.carry {
            proto::Location {
                uri: uri.to_string(),
                storage_options: storage_options.clone().into_iter().collect(),
            }
        } else {
            proto::Location {
                uri: redact_uri(uri),
                storage_options: Default::default(),
            }
        }
    }

    /// The storage options a decoded location uses: its own, else this
    /// process's defaults.
    fn decode_storage(&self, options: HashMap<String, String>) -> BTreeMap<String, String> {
        if options.is_empty() {
            self.defaults.clone()
        } else {
            options.into_iter().collect()
        }
    }

    /// A table function's argument (a table name or a location) as it may
    /// travel.
    fn encode_name(&self, name: &str) -> String {
        if self.carry {
            name.to_string()
        } else {
            redact_uri(name)
        }
    }

    fn encode_table_options(&self, options: &LanceTableOptions) -> proto::TableOptions {
        let (version, tag) = match &options.version {
            VersionSpec::Latest => (None, None),
            VersionSpec::Version(v) => (Some(*v), None),
            VersionSpec::Tag(t) => (None, Some(t.clone())),
        };
        proto::TableOptions {
            version,
            tag,
            max_rows_per_file: options.max_rows_per_file.map(|n| n as u64),
            max_rows_per_group: options.max_rows_per_group.map(|n| n as u64),
            data_storage_version: options.data_storage_version.map(|v| v.to_string()),
            enable_stable_row_ids: options.enable_stable_row_ids,
        }
    }

    /// Table options with `storage_options` as the storage options.
    fn decode_table_options(
        &self,
        options: Option<proto::TableOptions>,
        storage_options: BTreeMap<String, String>,
    ) -> DFResult<LanceTableOptions> {
        let o = required(options, "table options")?;
        let version = match (o.version, o.tag) {
            (None, None) => VersionSpec::Latest,
            (Some(v), None) => VersionSpec::Version(v),
            (None, Some(t)) => VersionSpec::Tag(t),
            _ => return Err(malformed("a table pinned to a version and a tag")),
        };
        Ok(LanceTableOptions {
            version,
            storage_options,
            max_rows_per_file: o.max_rows_per_file.map(|n| n as usize),
            max_rows_per_group: o.max_rows_per_group.map(|n| n as usize),
            data_storage_version: o
                .data_storage_version
                .map(|v| parse_storage_version("lance.data_storage_version", &v))
                .transpose()?,
            enable_stable_row_ids: o.enable_stable_row_ids,
        })
    }

    fn decode_location(&self, location: Option<proto::Location>) -> DFResult<TableLocation> {
        let location = required(location, "location")?;
        let options = self.decode_storage(location.storage_options);
        Ok(TableLocation::new(location.uri, options))
    }

    fn encode_target(&self, target: &WriteTarget) -> DFResult<proto::WriteTarget> {
        let o = &target.options;
        Ok(proto::WriteTarget {
            table: target.table.clone(),
            location: Some(self.encode_location(&target.location)),
            read: target.read.as_ref().map(encode_snapshot),
            schema: Some(encode_schema(&target.schema)?),
            options: Some(proto::WriteOptions {
                max_rows_per_file: o.max_rows_per_file as u64,
                max_rows_per_group: o.max_rows_per_group as u64,
                storage_version: o.storage_version.to_string(),
                stable_row_ids: o.stable_row_ids,
            }),
            commit_max_retries: target.commit_budget.max_retries,
            commit_retry_timeout_ms: target.commit_budget.retry_timeout.as_millis() as u64,
            journal: target.journal.clone().unwrap_or_default(),
            ordered: target.ordered,
        })
    }

    fn decode_target(&self, target: Option<proto::WriteTarget>) -> DFResult<Arc<WriteTarget>> {
        let target = required(target, "write target")?;
        let options = required(target.options, "write options")?;
        Ok(Arc::new(WriteTarget {
            table: target.table,
            location: self.decode_location(target.location)?,
            read: target.read.map(decode_snapshot),
            schema: decode_schema(target.schema)?,
            options: WriteOptions {
                max_rows_per_file: options.max_rows_per_file as usize,
                max_rows_per_group: options.max_rows_per_group as usize,
                storage_version: parse_storage_version(
                    "storage_version",
                    &options.storage_version,
                )?,
                stable_row_ids: options.stable_row_ids,
            },
            commit_budget: CommitBudget {
                max_retries: target.commit_max_retries,
                retry_timeout: std::time::Duration::from_millis(target.commit_retry_timeout_ms),
            },
            journal: (!target.journal.is_empty()).then_some(target.journal),
            ordered: target.ordered,
        }))
    }
}

/// A message field the encoder always sets, missing: the bytes are not a
/// plan this crate encoded.
fn required<T>(value: Option<T>, what: &str) -> DFResult<T> {
    value.ok_or_else(|| malformed(format!("no {what}")))
}

fn malformed(detail: impl fmt::Display) -> DataFusionError {
    DataFusionError::Internal(format!("malformed Lance plan bytes: {detail}"))
}

fn encode_message(message: &impl Message, buf: &mut Vec<u8>) -> DFResult<()> {
    message
        .encode(buf)
        .map_err(|e| DataFusionError::Internal(format!("encoding a Lance plan: {e}")))
}

fn check_format(format: u32) -> DFResult<()> {
    if format == proto::FORMAT {
        Ok(())
    } else {
        Err(DataFusionError::NotImplemented(format!(
            "the plan was encoded with Lance plan format {format}; this build reads format {}",
            proto::FORMAT
        )))
    }
}

fn encode_snapshot(snapshot: &Snapshot) -> proto::Snapshot {
    proto::Snapshot {
        version: snapshot.version,
        e_tag: snapshot.e_tag.clone(),
    }
}

fn decode_snapshot(snapshot: proto::Snapshot) -> Snapshot {
    Snapshot {
        version: snapshot.version,
        e_tag: snapshot.e_tag,
    }
}

fn encode_schema(schema: &Schema) -> DFResult<datafusion_proto::protobuf::Schema> {
    schema
        .try_into()
        .map_err(|e| DataFusionError::Internal(format!("encoding a schema: {e}")))
}

fn decode_schema(schema: Option<datafusion_proto::protobuf::Schema>) -> DFResult<SchemaRef> {
    let schema = required(schema, "schema")?;
    let schema: Schema = (&schema)
        .try_into()
        .map_err(|e| malformed(format!("schema: {e}")))?;
    Ok(Arc::new(schema))
}

fn encode_kind(kind: CommitKind) -> String {
    kind.to_string()
}

fn decode_kind(kind: &str) -> DFResult<CommitKind> {
    Ok(match kind {
        "append" => CommitKind::Append,
        "overwrite" => CommitKind::Overwrite,
        "truncate" => CommitKind::Truncate,
        "create" => CommitKind::Create,
        other => return Err(malformed(format!("commit kind '{other}'"))),
    })
}

fn encode_output(output: MergeOutput) -> String {
    match output {
        MergeOutput::Stats => "stats".into(),
        MergeOutput::Count => "count".into(),
    }
}

fn decode_output(output: &str) -> DFResult<MergeOutput> {
    match output {
        "stats" => Ok(MergeOutput::Stats),
        "count" => Ok(MergeOutput::Count),
        other => Err(malformed(format!("merge output '{other}'"))),
    }
}

fn encode_condition(
    condition: &MergeCondition,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<proto::Condition> {
    Ok(match condition {
        MergeCondition::Sql(sql) => proto::Condition {
            sql: Some(sql.clone()),
            expr: None,
        },
        MergeCondition::Expr(expr) => proto::Condition {
            sql: None,
            expr: Some(serialize_expr(expr, codec)?),
        },
    })
}

fn decode_condition(
    condition: Option<proto::Condition>,
    ctx: &TaskContext,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<MergeCondition> {
    match required(condition, "merge condition")? {
        proto::Condition {
            sql: Some(sql),
            expr: None,
        } => Ok(MergeCondition::Sql(sql)),
        proto::Condition {
            sql: None,
            expr: Some(expr),
        } => Ok(MergeCondition::Expr(parse_expr(&expr, ctx, codec)?)),
        _ => Err(malformed("merge condition")),
    }
}

fn encode_merge_options(
    options: &MergeOptions,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<proto::MergeOptions> {
    let (when_matched, when_matched_condition) = match &options.when_matched {
        WhenMatched::UpdateAll => ("update_all", None),
        WhenMatched::UpdateIf(c) => ("update_if", Some(encode_condition(c, codec)?)),
        WhenMatched::DoNothing => ("do_nothing", None),
        WhenMatched::Delete => ("delete", None),
        WhenMatched::Fail => ("fail", None),
    };
    let when_not_matched = match options.when_not_matched {
        WhenNotMatched::InsertAll => "insert",
        WhenNotMatched::DoNothing => "do_nothing",
    };
    let (by_source, by_source_condition) = match &options.when_not_matched_by_source {
        WhenNotMatchedBySource::Keep => ("keep", None),
        WhenNotMatchedBySource::Delete => ("delete", None),
        WhenNotMatchedBySource::DeleteIf(c) => ("delete_if", Some(encode_condition(c, codec)?)),
    };
    Ok(proto::MergeOptions {
        when_matched: when_matched.into(),
        when_matched_condition,
        when_not_matched: when_not_matched.into(),
        when_not_matched_by_source: by_source.into(),
        when_not_matched_by_source_condition: by_source_condition,
    })
}

fn decode_merge_options(
    options: Option<proto::MergeOptions>,
    ctx: &TaskContext,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<MergeOptions> {
    let options = required(options, "merge options")?;
    let when_matched = match options.when_matched.as_str() {
        "update_all" => WhenMatched::UpdateAll,
        "update_if" => WhenMatched::UpdateIf(decode_condition(
            options.when_matched_condition,
            ctx,
            codec,
        )?),
        "do_nothing" => WhenMatched::DoNothing,
        "delete" => WhenMatched::Delete,
        "fail" => WhenMatched::Fail,
        other => return Err(malformed(format!("when_matched '{other}'"))),
    };
    let when_not_matched = match options.when_not_matched.as_str() {
        "insert" => WhenNotMatched::InsertAll,
        "do_nothing" => WhenNotMatched::DoNothing,
        other => return Err(malformed(format!("when_not_matched '{other}'"))),
    };
    let when_not_matched_by_source = match options.when_not_matched_by_source.as_str() {
        "keep" => WhenNotMatchedBySource::Keep,
        "delete" => WhenNotMatchedBySource::Delete,
        "delete_if" => WhenNotMatchedBySource::DeleteIf(decode_condition(
            options.when_not_matched_by_source_condition,
            ctx,
            codec,
        )?),
        other => return Err(malformed(format!("when_not_matched_by_source '{other}'"))),
    };
    Ok(MergeOptions {
        when_matched,
        when_not_matched,
        when_not_matched_by_source,
    })
}

/// The storage-option settings shared by both codecs' builders.
macro_rules! storage_policy_builders {
    () => {
        /// Carries each table's storage options — credentials included — in
        /// the encoded plan (off by default: workers use their own).
        pub fn with_storage_options_in_plan(mut self, carry: bool) -> Self {
            self.storage.carry = carry;
            self
        }

        /// Storage options for decoded tables whose plan carries none: the
        /// credentials and endpoint this process (a worker) reaches the
        /// store with, when its environment does not provide them.
        pub fn with_default_storage_options(
            mut self,
            options: impl IntoIterator<Item = (String, String)>,
        ) -> Self {
            self.storage.defaults = options.into_iter().collect();
            self
        }
    };
}
use storage_policy_builders;
