//! The wire form of Lance plan nodes and providers: protobuf messages (the
//! encoding `datafusion-proto` uses), holding DataFusion's own messages for
//! expressions, schemas and nested plans.

use std::collections::HashMap;

use datafusion_proto::protobuf::{
    ArrowType, LogicalExprNode, LogicalPlanNode, PhysicalSortExprNodeCollection, Schema,
};

/// The version of this encoding; a decoder refuses others.
pub(crate) const FORMAT: u32 = 1;

/// Where a table lives. `Debug` shows neither credentials in the URI nor
/// storage option values (every message holding one prints it this way).
#[derive(Clone, PartialEq, prost::Message)]
#[prost(skip_debug)]
pub(crate) struct Location {
    /// Redacted (no user info or query string) unless the encoder was told to
    /// carry credentials.
    #[prost(string, tag = "1")]
    pub uri: String,
    /// Empty unless the encoder was told to carry storage options.
    #[prost(map = "string, string", tag = "2")]
    pub storage_options: HashMap<String, String>,
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Location")
            .field("uri", &crate::location::redact_uri(&self.uri))
            .field(
                "storage_options",
                &self.storage_options.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Snapshot {
    #[prost(uint64, tag = "1")]
    pub version: u64,
    #[prost(string, optional, tag = "2")]
    pub e_tag: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScanOptions {
    #[prost(uint64, tag = "1")]
    pub batch_size: u64,
    #[prost(uint64, optional, tag = "2")]
    pub batch_size_bytes: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    pub fragment_readahead: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    pub batch_readahead: Option<u64>,
    #[prost(uint64, optional, tag = "5")]
    pub io_buffer_size: Option<u64>,
    #[prost(bool, tag = "6")]
    pub use_scalar_index: bool,
    #[prost(bool, tag = "7")]
    pub row_addr: bool,
    #[prost(bool, tag = "8")]
    pub row_id: bool,
    #[prost(string, repeated, tag = "9")]
    pub scalar_indexes: Vec<String>,
    #[prost(uint64, tag = "10")]
    pub pruned_fragments: u64,
}

/// The fragments one partition reads.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct FragmentGroup {
    #[prost(uint64, repeated, tag = "1")]
    pub fragment_ids: Vec<u64>,
    #[prost(uint64, tag = "2")]
    pub rows: u64,
    #[prost(bool, tag = "3")]
    pub exact: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScanNode {
    #[prost(message, optional, tag = "1")]
    pub location: Option<Location>,
    #[prost(message, optional, tag = "2")]
    pub snapshot: Option<Snapshot>,
    #[prost(message, repeated, tag = "3")]
    pub groups: Vec<FragmentGroup>,
    #[prost(string, repeated, tag = "4")]
    pub columns: Vec<String>,
    #[prost(message, optional, tag = "5")]
    pub schema: Option<Schema>,
    #[prost(message, optional, tag = "6")]
    pub filter: Option<LogicalExprNode>,
    #[prost(uint64, optional, tag = "7")]
    pub limit: Option<u64>,
    #[prost(message, optional, tag = "8")]
    pub options: Option<ScanOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WriteOptions {
    #[prost(uint64, tag = "1")]
    pub max_rows_per_file: u64,
    #[prost(uint64, tag = "2")]
    pub max_rows_per_group: u64,
    #[prost(string, tag = "3")]
    pub storage_version: String,
    #[prost(bool, tag = "4")]
    pub stable_row_ids: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WriteTarget {
    #[prost(string, tag = "1")]
    pub table: String,
    #[prost(message, optional, tag = "2")]
    pub location: Option<Location>,
    #[prost(message, optional, tag = "3")]
    pub read: Option<Snapshot>,
    #[prost(message, optional, tag = "4")]
    pub schema: Option<Schema>,
    #[prost(message, optional, tag = "5")]
    pub options: Option<WriteOptions>,
    #[prost(uint32, tag = "6")]
    pub commit_max_retries: u32,
    #[prost(uint64, tag = "7")]
    pub commit_retry_timeout_ms: u64,
    /// The statement id writers mark themselves in flight under (empty: none).
    #[prost(string, tag = "8")]
    pub journal: String,
    /// One writer writes the input in its order.
    #[prost(bool, tag = "9")]
    pub ordered: bool,
}

/// A write target and how its fragments are committed (commit nodes, sinks).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CommitNode {
    #[prost(message, optional, tag = "1")]
    pub target: Option<WriteTarget>,
    #[prost(string, tag = "2")]
    pub kind: String,
    /// The input ordering a `DataSinkExec` requires, if any.
    #[prost(message, optional, tag = "3")]
    pub sort_order: Option<PhysicalSortExprNodeCollection>,
}

/// A merge condition: SQL text not planned yet, or a planned expression.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Condition {
    #[prost(string, optional, tag = "1")]
    pub sql: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub expr: Option<LogicalExprNode>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct MergeOptions {
    #[prost(string, tag = "1")]
    pub when_matched: String,
    #[prost(message, optional, tag = "2")]
    pub when_matched_condition: Option<Condition>,
    #[prost(string, tag = "3")]
    pub when_not_matched: String,
    #[prost(string, tag = "4")]
    pub when_not_matched_by_source: String,
    #[prost(message, optional, tag = "5")]
    pub when_not_matched_by_source_condition: Option<Condition>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct MergeNode {
    #[prost(message, optional, tag = "1")]
    pub target: Option<WriteTarget>,
    #[prost(string, repeated, tag = "2")]
    pub keys: Vec<String>,
    #[prost(message, optional, tag = "3")]
    pub options: Option<MergeOptions>,
    #[prost(string, tag = "4")]
    pub output: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Vacuum {
    #[prost(int64, tag = "1")]
    pub older_than_seconds: i64,
    #[prost(int64, tag = "2")]
    pub orphans_older_than_seconds: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct VacuumNode {
    #[prost(message, optional, tag = "1")]
    pub location: Option<Location>,
    #[prost(message, optional, tag = "2")]
    pub vacuum: Option<Vacuum>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TagChange {
    #[prost(string, tag = "1")]
    pub action: String,
    #[prost(string, tag = "2")]
    pub tag: String,
    #[prost(uint64, optional, tag = "3")]
    pub version: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TagNode {
    #[prost(message, optional, tag = "1")]
    pub location: Option<Location>,
    #[prost(message, optional, tag = "2")]
    pub change: Option<TagChange>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Optimize {
    #[prost(uint64, tag = "1")]
    pub target_rows_per_fragment: u64,
    #[prost(bool, tag = "2")]
    pub materialize_deletions: bool,
    #[prost(double, tag = "3")]
    pub materialize_deletions_threshold: f64,
    #[prost(bool, tag = "4")]
    pub indices: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct OptimizeNode {
    #[prost(message, optional, tag = "1")]
    pub location: Option<Location>,
    #[prost(message, optional, tag = "2")]
    pub optimize: Option<Optimize>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct OptimizeTable {
    #[prost(message, optional, tag = "1")]
    pub target: Option<NamedTarget>,
    #[prost(message, optional, tag = "2")]
    pub optimize: Option<Optimize>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct IndexChange {
    /// `create` or `drop`.
    #[prost(string, tag = "1")]
    pub action: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub column: String,
    #[prost(string, tag = "4")]
    pub method: String,
    #[prost(message, repeated, tag = "5")]
    pub options: Vec<KeyValue>,
    #[prost(bool, tag = "6")]
    pub replace: bool,
    #[prost(bool, tag = "7")]
    pub if_not_exists: bool,
    #[prost(bool, tag = "8")]
    pub if_exists: bool,
}

/// `ALTER TABLE`: one schema change.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SchemaChange {
    /// `add`, `drop`, `rename`, `set_type`, `drop_not_null` or `set_default`.
    #[prost(string, tag = "1")]
    pub action: String,
    #[prost(string, tag = "2")]
    pub column: String,
    /// `rename`: the new name.
    #[prost(string, tag = "3")]
    pub to: String,
    #[prost(message, optional, tag = "4")]
    pub data_type: Option<ArrowType>,
    #[prost(bool, tag = "5")]
    pub nullable: bool,
    /// `add`: `null`, `default` or `computed`.
    #[prost(string, tag = "6")]
    pub values: String,
    /// The default (a literal) or the computed expression.
    #[prost(message, optional, tag = "7")]
    pub value: Option<LogicalExprNode>,
    /// `IF [NOT] EXISTS`.
    #[prost(bool, tag = "8")]
    pub if_exists: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AlterNode {
    #[prost(message, optional, tag = "1")]
    pub location: Option<Location>,
    #[prost(message, optional, tag = "2")]
    pub change: Option<SchemaChange>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AlterTable {
    #[prost(message, optional, tag = "1")]
    pub target: Option<NamedTarget>,
    #[prost(message, optional, tag = "2")]
    pub change: Option<SchemaChange>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct IndexNode {
    #[prost(message, optional, tag = "1")]
    pub location: Option<Location>,
    #[prost(message, optional, tag = "2")]
    pub change: Option<IndexChange>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct IndexTable {
    #[prost(message, optional, tag = "1")]
    pub target: Option<NamedTarget>,
    #[prost(message, optional, tag = "2")]
    pub change: Option<IndexChange>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct VectorQuery {
    #[prost(string, tag = "1")]
    pub column: String,
    #[prost(float, repeated, tag = "2")]
    pub vector: Vec<f32>,
    #[prost(uint64, tag = "3")]
    pub k: u64,
    #[prost(string, optional, tag = "4")]
    pub metric: Option<String>,
    #[prost(uint64, optional, tag = "5")]
    pub nprobes: Option<u64>,
    #[prost(uint32, optional, tag = "6")]
    pub refine_factor: Option<u32>,
    #[prost(uint64, optional, tag = "7")]
    pub ef: Option<u64>,
    #[prost(bool, tag = "8")]
    pub prefilter: bool,
    #[prost(bool, tag = "9")]
    pub use_index: bool,
    #[prost(message, optional, tag = "10")]
    pub filter: Option<LogicalExprNode>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TextQuery {
    #[prost(string, tag = "1")]
    pub query: String,
    #[prost(string, repeated, tag = "2")]
    pub columns: Vec<String>,
    #[prost(uint64, optional, tag = "3")]
    pub limit: Option<u64>,
    #[prost(bool, tag = "4")]
    pub all_words: bool,
    #[prost(uint32, optional, tag = "5")]
    pub fuzziness: Option<u32>,
    #[prost(bool, tag = "6")]
    pub phrase: bool,
    #[prost(message, optional, tag = "7")]
    pub filter: Option<LogicalExprNode>,
}

/// A search node: `query` (vector) or `text` (full text).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SearchNode {
    #[prost(message, optional, tag = "1")]
    pub location: Option<Location>,
    #[prost(message, optional, tag = "2")]
    pub snapshot: Option<Snapshot>,
    #[prost(string, repeated, tag = "3")]
    pub columns: Vec<String>,
    #[prost(message, optional, tag = "4")]
    pub query: Option<VectorQuery>,
    #[prost(message, optional, tag = "5")]
    pub schema: Option<Schema>,
    #[prost(message, optional, tag = "6")]
    pub text: Option<TextQuery>,
    #[prost(message, optional, boxed, tag = "7")]
    pub hybrid: Option<Box<HybridQuery>>,
}

/// Both halves of a hybrid search and the fusion constant.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HybridQuery {
    #[prost(message, optional, tag = "1")]
    pub vector: Option<VectorQuery>,
    #[prost(message, optional, tag = "2")]
    pub text: Option<TextQuery>,
    #[prost(uint32, tag = "3")]
    pub rrf_k: u32,
}

/// `lance_hybrid_search(...)`: its two halves on one table.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HybridSearchTable {
    #[prost(message, optional, tag = "1")]
    pub vector: Option<VectorSearchTable>,
    #[prost(message, optional, tag = "2")]
    pub text: Option<TextQuery>,
    #[prost(uint32, tag = "3")]
    pub rrf_k: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct FullTextSearchTable {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub table: Option<Table>,
    #[prost(message, optional, tag = "3")]
    pub text: Option<TextQuery>,
    /// A `db://` table (instead of `table`).
    #[prost(message, optional, boxed, tag = "4")]
    pub cloud: Option<Box<crate::codec::cloud::CloudProviderMessage>>,
}

/// `lance_vector_search(...)`: the table, the query (its vector empty when a
/// subquery gives it) and the subquery.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct VectorSearchTable {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub table: Option<Table>,
    #[prost(message, optional, tag = "3")]
    pub query: Option<VectorQuery>,
    #[prost(message, optional, tag = "4")]
    pub subquery: Option<LogicalPlanNode>,
    /// A `db://` table (instead of `table`).
    #[prost(message, optional, boxed, tag = "5")]
    pub cloud: Option<Box<crate::codec::cloud::CloudProviderMessage>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TableOptions {
    #[prost(uint64, optional, tag = "1")]
    pub version: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub tag: Option<String>,
    #[prost(uint64, optional, tag = "3")]
    pub max_rows_per_file: Option<u64>,
    #[prost(uint64, optional, tag = "4")]
    pub max_rows_per_group: Option<u64>,
    #[prost(string, optional, tag = "5")]
    pub data_storage_version: Option<String>,
    #[prost(bool, optional, tag = "6")]
    pub enable_stable_row_ids: Option<bool>,
}

/// `STORED AS LANCE` with the `OPTIONS` of its `COPY`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Format {
    #[prost(uint32, tag = "1")]
    pub format: u32,
    #[prost(message, optional, tag = "2")]
    pub options: Option<TableOptions>,
    /// Its storage options (in `Location` form, to share its policy; the
    /// URI is empty).
    #[prost(message, optional, tag = "3")]
    pub storage: Option<Location>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Table {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub location: Option<Location>,
    #[prost(message, optional, tag = "3")]
    pub options: Option<TableOptions>,
    #[prost(message, optional, tag = "4")]
    pub pinned: Option<Snapshot>,
    #[prost(message, optional, tag = "5")]
    pub resolved: Option<Snapshot>,
    #[prost(message, optional, tag = "6")]
    pub schema: Option<Schema>,
    #[prost(uint64, repeated, tag = "7")]
    pub primary_key: Vec<u64>,
    #[prost(bool, tag = "8")]
    pub row_addr: bool,
    #[prost(bool, tag = "9")]
    pub row_id: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DmlTable {
    #[prost(string, tag = "1")]
    pub op: String,
    #[prost(message, optional, tag = "2")]
    pub target: Option<Table>,
    #[prost(message, optional, tag = "3")]
    pub input: Option<LogicalPlanNode>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct MergeTable {
    #[prost(string, tag = "1")]
    pub target_name: String,
    #[prost(message, optional, tag = "2")]
    pub target: Option<Table>,
    #[prost(message, optional, tag = "3")]
    pub source: Option<LogicalPlanNode>,
    #[prost(string, repeated, tag = "4")]
    pub keys: Vec<String>,
    #[prost(message, optional, tag = "5")]
    pub options: Option<MergeOptions>,
}

/// A table function's target: as named, and where it was resolved to.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct NamedTarget {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub location: Option<Location>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TagTable {
    #[prost(message, optional, tag = "1")]
    pub target: Option<NamedTarget>,
    #[prost(message, optional, tag = "2")]
    pub change: Option<TagChange>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct VacuumTable {
    #[prost(message, optional, tag = "1")]
    pub target: Option<NamedTarget>,
    #[prost(message, optional, tag = "2")]
    pub vacuum: Option<Vacuum>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Empty {}
