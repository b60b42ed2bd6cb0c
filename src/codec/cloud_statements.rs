//! `DELETE` / `UPDATE` ([`CloudDml`]) and merges ([`CloudMerge`]) into
//! `db://` tables in logical plans: the target as its provider message (the
//! API key under the codec's storage rule), the statement's input or source
//! as a nested plan.

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::execution::TaskContext;
use datafusion_proto::protobuf::LogicalPlanNode;

use super::cloud::CloudProviderMessage;
use super::envelope::provider::Table;
use super::logical::LanceLogicalCodec;
use super::proto;
use super::{decode_merge_options, encode_merge_options, malformed, required};
use crate::table::cloud_ddl::CloudDdlStatement;
use crate::table::cloud_dml::CloudDml;
use crate::table::cloud_merge::CloudMerge;
use crate::table::dml::DmlOp;
use crate::table::merge::MergeOutput;
use crate::table::statement::{StatementTable, statement_of};

/// A [`CloudDml`].
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudDmlTable {
    #[prost(string, tag = "1")]
    pub op: String,
    #[prost(message, optional, tag = "2")]
    pub target: Option<CloudProviderMessage>,
    #[prost(message, optional, tag = "3")]
    pub input: Option<LogicalPlanNode>,
    /// The input is optimized already (the statement was pinned).
    #[prost(bool, tag = "4")]
    pub optimized: bool,
}

/// A [`CloudMerge`].
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudMergeTable {
    #[prost(message, optional, tag = "1")]
    pub target: Option<CloudProviderMessage>,
    #[prost(message, optional, tag = "2")]
    pub source: Option<LogicalPlanNode>,
    #[prost(string, repeated, tag = "3")]
    pub keys: Vec<String>,
    #[prost(message, optional, tag = "4")]
    pub options: Option<proto::MergeOptions>,
    /// The statement answers a count (`INSERT OR REPLACE`), not statistics.
    #[prost(bool, tag = "5")]
    pub count: bool,
}

impl LanceLogicalCodec {
    /// `provider` as a message, when it is a statement on a `db://` table.
    pub(super) fn encode_cloud_statement(
        &self,
        provider: &dyn TableProvider,
    ) -> DFResult<Option<Table>> {
        if let Some(dml) = statement_of::<CloudDml>(provider) {
            return Ok(Some(Table::CloudDml(CloudDmlTable {
                op: match dml.op() {
                    DmlOp::Delete => "delete".into(),
                    DmlOp::Update => "update".into(),
                },
                target: Some(self.storage.encode_cloud_provider(dml.target())?),
                input: Some(self.encode_plan(dml.input())?),
                optimized: dml.optimized(),
            })));
        }
        if let Some(merge) = statement_of::<CloudMerge>(provider) {
            return Ok(Some(Table::CloudMerge(CloudMergeTable {
                target: Some(self.storage.encode_cloud_provider(merge.target())?),
                source: Some(self.encode_plan(merge.source())?),
                keys: merge.keys().to_vec(),
                options: Some(encode_merge_options(merge.options(), self)?),
                count: merge.output() == MergeOutput::Count,
            })));
        }
        if let Some(ddl) = statement_of::<CloudDdlStatement>(provider) {
            return Ok(Some(Table::CloudDdl(
                self.storage.encode_cloud_ddl_statement(ddl)?,
            )));
        }
        Ok(None)
    }

    pub(super) fn decode_cloud_dml(
        &self,
        dml: CloudDmlTable,
        ctx: &TaskContext,
    ) -> DFResult<Arc<dyn TableProvider>> {
        let op = match dml.op.as_str() {
            "delete" => DmlOp::Delete,
            "update" => DmlOp::Update,
            other => return Err(malformed(format!("statement '{other}'"))),
        };
        let target = self
            .storage
            .decode_cloud_provider(required(dml.target, "LanceDB table")?)?;
        let input = self.decode_plan(dml.input, ctx)?;
        Ok(StatementTable::provider(CloudDml::from_parts(
            op,
            target,
            input,
            dml.optimized,
        )))
    }

    pub(super) fn decode_cloud_merge(
        &self,
        merge: CloudMergeTable,
        ctx: &TaskContext,
    ) -> DFResult<Arc<dyn TableProvider>> {
        let target = self
            .storage
            .decode_cloud_provider(required(merge.target, "LanceDB table")?)?;
        Ok(StatementTable::provider(CloudMerge::new(
            target,
            self.decode_plan(merge.source, ctx)?,
            merge.keys,
            decode_merge_options(merge.options, ctx, self)?,
            if merge.count {
                MergeOutput::Count
            } else {
                MergeOutput::Stats
            },
        )))
    }
}
