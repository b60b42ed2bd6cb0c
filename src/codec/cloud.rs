//! The wire form of `db://` tables and their scans.

use std::sync::Arc;

use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;

use datafusion::execution::TaskContext;

use super::proto::{self, Location};
use super::search::{decode_search, encode_search};
use super::{StoragePolicy, decode_schema, encode_schema, malformed, required};
use crate::cloud::options::valid_prefix;
use crate::cloud::{CloudTable, MergeRequest, RequestPolicy};
use crate::physical_plan::cloud_change::{CloudChange, CloudChangeExec, CloudChangeParts};
use crate::physical_plan::cloud_merge::{CloudMergeExec, CloudMergeParts};
use crate::physical_plan::cloud_scan::{CloudScanExec, CloudScanParts, RowRange};
use crate::physical_plan::cloud_search::{CloudSearchExec, CloudSearchParts};
use crate::physical_plan::cloud_write::{CloudWriteExec, CloudWriteParts};
use crate::physical_plan::merge_options::MergeOutput;
use crate::table::cloud::{CloudProviderParts, CloudTableProvider};

/// A `db://` table: the API key is a storage option of its location, so it
/// travels only when the encoder carries storage options.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudTableMessage {
    #[prost(message, optional, tag = "1")]
    pub location: Option<Location>,
    #[prost(string, tag = "2")]
    pub endpoint: String,
    #[prost(uint64, tag = "3")]
    pub timeout_ms: u64,
    #[prost(uint32, tag = "4")]
    pub max_retries: u32,
    #[prost(uint32, tag = "5")]
    pub read_rows: u32,
    #[prost(uint64, tag = "6")]
    pub write_rows: u64,
    #[prost(uint64, tag = "7")]
    pub write_bytes: u64,
    #[prost(uint64, tag = "8")]
    pub backoff_ms: u64,
    #[prost(string, optional, tag = "9")]
    pub prefix: Option<String>,
}

/// A [`CloudWriteExec`] (its input travels as DataFusion's).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudWriteNode {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub table: Option<CloudTableMessage>,
    #[prost(message, optional, tag = "3")]
    pub schema: Option<datafusion_proto::protobuf::Schema>,
    #[prost(bool, tag = "4")]
    pub overwrite: bool,
    #[prost(bool, tag = "5")]
    pub create: bool,
}

/// A [`CloudChangeExec`]: a `delete` (no `updates`) or an `update`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudChangeNode {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub table: Option<CloudTableMessage>,
    #[prost(string, optional, tag = "3")]
    pub predicate: Option<String>,
    #[prost(bool, tag = "4")]
    pub update: bool,
    /// `column`, `expression`, `column`, `expression`, ...
    #[prost(string, repeated, tag = "5")]
    pub updates: Vec<String>,
}

/// A [`CloudMergeExec`] (its input travels as DataFusion's).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudMergeNode {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub table: Option<CloudTableMessage>,
    #[prost(message, optional, tag = "3")]
    pub schema: Option<datafusion_proto::protobuf::Schema>,
    #[prost(string, repeated, tag = "4")]
    pub keys: Vec<String>,
    #[prost(bool, tag = "5")]
    pub update_all: bool,
    #[prost(string, optional, tag = "6")]
    pub update_filter: Option<String>,
    #[prost(bool, tag = "7")]
    pub insert_all: bool,
    #[prost(bool, tag = "8")]
    pub delete_by_source: bool,
    #[prost(string, optional, tag = "9")]
    pub delete_filter: Option<String>,
    /// `stats` or `count`.
    #[prost(string, tag = "10")]
    pub output: String,
}

/// A [`CloudSearchExec`]: one of `vector`, `text` and `hybrid`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudSearchNode {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub table: Option<CloudTableMessage>,
    #[prost(uint64, tag = "3")]
    pub version: u64,
    #[prost(string, repeated, tag = "4")]
    pub columns: Vec<String>,
    #[prost(message, optional, tag = "5")]
    pub schema: Option<datafusion_proto::protobuf::Schema>,
    #[prost(message, optional, tag = "6")]
    pub vector: Option<proto::VectorQuery>,
    #[prost(message, optional, tag = "7")]
    pub text: Option<proto::TextQuery>,
    #[prost(message, optional, boxed, tag = "8")]
    pub hybrid: Option<Box<proto::HybridQuery>>,
    #[prost(string, optional, tag = "9")]
    pub filter: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RowRangeMessage {
    #[prost(uint64, tag = "1")]
    pub offset: u64,
    #[prost(uint64, tag = "2")]
    pub rows: u64,
}

/// A [`CloudScanExec`].
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudScanNode {
    #[prost(message, optional, tag = "1")]
    pub table: Option<CloudTableMessage>,
    #[prost(uint64, tag = "2")]
    pub version: u64,
    #[prost(message, repeated, tag = "3")]
    pub ranges: Vec<RowRangeMessage>,
    #[prost(string, repeated, tag = "4")]
    pub columns: Vec<String>,
    #[prost(message, optional, tag = "5")]
    pub schema: Option<datafusion_proto::protobuf::Schema>,
    #[prost(string, optional, tag = "6")]
    pub filter: Option<String>,
}

/// A [`CloudTableProvider`].
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudProviderMessage {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub table: Option<CloudTableMessage>,
    #[prost(message, optional, tag = "3")]
    pub schema: Option<datafusion_proto::protobuf::Schema>,
    #[prost(uint64, optional, tag = "4")]
    pub version: Option<u64>,
    #[prost(uint64, optional, tag = "5")]
    pub read_at: Option<u64>,
    #[prost(bool, tag = "6")]
    pub creating: bool,
}

impl StoragePolicy {
    pub(super) fn encode_cloud_table(&self, table: &CloudTable) -> CloudTableMessage {
        CloudTableMessage {
            location: Some(self.encode_location(&table.location)),
            endpoint: table.endpoint.clone(),
            timeout_ms: table.requests.timeout_ms,
            max_retries: table.requests.max_retries,
            backoff_ms: table.requests.backoff_ms,
            read_rows: table.requests.read_rows,
            write_rows: table.requests.write_rows,
            write_bytes: table.requests.write_bytes,
            prefix: table.prefix.clone(),
        }
    }

    pub(super) fn decode_cloud_table(
        &self,
        table: Option<CloudTableMessage>,
    ) -> DFResult<CloudTable> {
        let table = required(table, "LanceDB table")?;
        if table.timeout_ms == 0
            || table.read_rows == 0
            || table.read_rows > i32::MAX as u32
            || table.write_rows == 0
            || table.write_bytes == 0
        {
            return Err(malformed("LanceDB request policy"));
        }
        if let Some(prefix) = &table.prefix
            && !valid_prefix(prefix)
        {
            return Err(malformed("LanceDB database prefix"));
        }
        Ok(CloudTable::new(
            self.decode_location(table.location)?,
            table.endpoint,
            RequestPolicy {
                timeout_ms: table.timeout_ms,
                max_retries: table.max_retries,
                // Plans of versions before the setting carry none: its default.
                backoff_ms: match table.backoff_ms {
                    0 => RequestPolicy::default().backoff_ms,
                    ms => ms,
                },
                read_rows: table.read_rows,
                write_rows: table.write_rows,
                write_bytes: table.write_bytes,
            },
            table.prefix,
        ))
    }

    pub(super) fn encode_cloud_scan(&self, scan: &CloudScanExec) -> DFResult<CloudScanNode> {
        let p = scan.parts();
        Ok(CloudScanNode {
            table: Some(self.encode_cloud_table(&p.table)),
            version: p.version,
            ranges: p
                .ranges
                .iter()
                .map(|r| RowRangeMessage {
                    offset: r.offset,
                    rows: r.rows,
                })
                .collect(),
            columns: p.columns.clone(),
            schema: Some(encode_schema(&p.schema)?),
            filter: p.filter.clone(),
        })
    }

    pub(super) fn decode_cloud_scan(&self, scan: CloudScanNode) -> DFResult<CloudScanExec> {
        Ok(CloudScanExec::new(CloudScanParts {
            table: self.decode_cloud_table(scan.table)?,
            version: scan.version,
            ranges: scan
                .ranges
                .into_iter()
                .map(|r| RowRange {
                    offset: r.offset,
                    rows: r.rows,
                })
                .collect(),
            columns: scan.columns,
            schema: decode_schema(scan.schema)?,
            filter: scan.filter,
        }))
    }

    pub(super) fn encode_cloud_search(
        &self,
        search: &CloudSearchExec,
    ) -> DFResult<CloudSearchNode> {
        let p = search.parts();
        let (vector, text, hybrid) = encode_search(&p.query)?;
        Ok(CloudSearchNode {
            name: p.name.clone(),
            table: Some(self.encode_cloud_table(&p.table)),
            version: p.version,
            columns: p.columns.clone(),
            schema: Some(encode_schema(&p.schema)?),
            vector,
            text,
            hybrid,
            filter: p.filter.clone(),
        })
    }

    pub(super) fn decode_cloud_search(
        &self,
        search: CloudSearchNode,
        ctx: &TaskContext,
    ) -> DFResult<CloudSearchExec> {
        Ok(CloudSearchExec::new(CloudSearchParts {
            name: search.name,
            table: self.decode_cloud_table(search.table)?,
            version: search.version,
            columns: search.columns,
            query: decode_search((search.vector, search.text, search.hybrid), ctx)?,
            filter: search.filter,
            schema: decode_schema(search.schema)?,
        }))
    }

    pub(super) fn encode_cloud_write(&self, write: &CloudWriteExec) -> DFResult<CloudWriteNode> {
        let p = write.parts();
        Ok(CloudWriteNode {
            name: p.name.clone(),
            table: Some(self.encode_cloud_table(&p.table)),
            schema: Some(encode_schema(&p.schema)?),
            overwrite: p.overwrite,
            create: p.create,
        })
    }

    pub(super) fn decode_cloud_write(
        &self,
        write: CloudWriteNode,
        input: Arc<dyn ExecutionPlan>,
    ) -> DFResult<CloudWriteExec> {
        Ok(CloudWriteExec::new(
            input,
            CloudWriteParts {
                name: write.name,
                table: self.decode_cloud_table(write.table)?,
                schema: decode_schema(write.schema)?,
                overwrite: write.overwrite,
                create: write.create,
            },
        ))
    }

    pub(super) fn encode_cloud_merge(&self, merge: &CloudMergeExec) -> DFResult<CloudMergeNode> {
        let p = merge.parts();
        let m = &p.merge;
        Ok(CloudMergeNode {
            name: p.name.clone(),
            table: Some(self.encode_cloud_table(&p.table)),
            schema: Some(encode_schema(&p.schema)?),
            keys: m.keys.clone(),
            update_all: m.update_all,
            update_filter: m.update_filter.clone(),
            insert_all: m.insert_all,
            delete_by_source: m.delete_by_source,
            delete_filter: m.delete_filter.clone(),
            output: match p.output {
                MergeOutput::Stats => "stats",
                MergeOutput::Count => "count",
            }
            .to_string(),
        })
    }

    pub(super) fn decode_cloud_merge(
        &self,
        merge: CloudMergeNode,
        input: Arc<dyn ExecutionPlan>,
    ) -> DFResult<CloudMergeExec> {
        let output = match merge.output.as_str() {
            "stats" => MergeOutput::Stats,
            "count" => MergeOutput::Count,
            other => return Err(malformed(format!("merge output '{other}'"))),
        };
        if merge.keys.is_empty() {
            return Err(malformed("LanceDB merge without keys"));
        }
        Ok(CloudMergeExec::new(
            input,
            CloudMergeParts {
                name: merge.name,
                table: self.decode_cloud_table(merge.table)?,
                schema: decode_schema(merge.schema)?,
                merge: MergeRequest {
                    keys: merge.keys,
                    update_all: merge.update_all,
                    update_filter: merge.update_filter,
                    insert_all: merge.insert_all,
                    delete_by_source: merge.delete_by_source,
                    delete_filter: merge.delete_filter,
                },
                output,
            },
        ))
    }

    pub(super) fn encode_cloud_change(&self, change: &CloudChangeExec) -> CloudChangeNode {
        let p = change.parts();
        let (predicate, updates) = match &p.change {
            CloudChange::Delete { predicate } => (predicate, None),
            CloudChange::Update { predicate, updates } => (predicate, Some(updates)),
        };
        CloudChangeNode {
            name: p.name.clone(),
            table: Some(self.encode_cloud_table(&p.table)),
            predicate: predicate.clone(),
            update: updates.is_some(),
            updates: updates
                .into_iter()
                .flatten()
                .flat_map(|(c, e)| [c.clone(), e.clone()])
                .collect(),
        }
    }

    pub(super) fn decode_cloud_change(&self, change: CloudChangeNode) -> DFResult<CloudChangeExec> {
        let predicate = change.predicate;
        let change_kind = if change.update {
            if change.updates.is_empty() || !change.updates.len().is_multiple_of(2) {
                return Err(malformed("LanceDB update"));
            }
            let updates = change
                .updates
                .chunks(2)
                .map(|pair| (pair[0].clone(), pair[1].clone()))
                .collect();
            CloudChange::Update { predicate, updates }
        } else {
            CloudChange::Delete { predicate }
        };
        Ok(CloudChangeExec::new(CloudChangeParts {
            name: change.name,
            table: self.decode_cloud_table(change.table)?,
            change: change_kind,
        }))
    }

    pub(super) fn encode_cloud_provider(
        &self,
        provider: &CloudTableProvider,
    ) -> DFResult<CloudProviderMessage> {
        let p = provider.parts();
        Ok(CloudProviderMessage {
            name: p.name,
            table: Some(self.encode_cloud_table(&p.table)),
            schema: Some(encode_schema(&p.schema)?),
            version: p.version,
            read_at: p.read_at,
            creating: p.creating,
        })
    }

    pub(super) fn decode_cloud_provider(
        &self,
        provider: CloudProviderMessage,
    ) -> DFResult<Arc<CloudTableProvider>> {
        Ok(Arc::new(CloudTableProvider::from_parts(
            CloudProviderParts {
                name: provider.name,
                table: self.decode_cloud_table(provider.table)?,
                schema: decode_schema(provider.schema)?,
                version: provider.version,
                read_at: provider.read_at,
                creating: provider.creating,
            },
        )))
    }
}
