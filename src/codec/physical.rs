//! [`LancePhysicalCodec`]: every Lance physical node to bytes and back.

use std::sync::Arc;

use datafusion::datasource::sink::DataSinkExec;
use datafusion::error::Result as DFResult;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{LexRequirement, PhysicalSortExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::logical_plan::DefaultLogicalExtensionCodec;
use datafusion_proto::logical_plan::from_proto::parse_expr;
use datafusion_proto::logical_plan::to_proto::serialize_expr;
use datafusion_proto::physical_plan::from_proto::parse_physical_sort_exprs;
use datafusion_proto::physical_plan::to_proto::serialize_physical_sort_exprs;
use datafusion_proto::physical_plan::{
    DefaultPhysicalProtoConverter, PhysicalExtensionCodec, PhysicalPlanDecodeContext,
};
use datafusion_proto::protobuf::PhysicalSortExprNodeCollection;
use prost::Message;

use super::alter::{decode_alter, encode_alter};
use super::envelope::{self, physical_node::Node};
use super::maintenance::{
    decode_index, decode_optimize, decode_tag, decode_vacuum, encode_index, encode_optimize,
    encode_tag, encode_vacuum,
};
use super::proto;
use super::search::{decode_search, encode_search};
use super::{
    StoragePolicy, check_format, decode_kind, decode_merge_options, decode_output, decode_schema,
    decode_snapshot, encode_kind, encode_merge_options, encode_message, encode_output,
    encode_schema, encode_snapshot, malformed, required, storage_policy_builders,
};
use crate::physical_plan::LanceSearchExec;
use crate::physical_plan::scan::{GroupRows, ScanOptions, ScanParts};
use crate::physical_plan::{
    CloudChangeExec, CloudDdlExec, CloudMergeExec, CloudScanExec, CloudSearchExec, CloudWriteExec,
    LanceAlterExec, LanceCommitExec, LanceDeleteExec, LanceIndexExec, LanceMergeExec,
    LanceOptimizeExec, LanceScanExec, LanceSink, LanceTagExec, LanceUpdateExec, LanceVacuumExec,
    LanceWriteExec, PermutationBuildExec, PermutationScanExec, PermutationSplitExec,
};

/// Encodes and decodes the Lance physical nodes (see the crate docs'
/// "Plans as data"). Compose it with other codecs (e.g. datafusion-proto's
/// `ComposedPhysicalExtensionCodec`) when plans hold other extension nodes.
#[derive(Debug, Clone, Default)]
pub struct LancePhysicalCodec {
    storage: StoragePolicy,
}

impl LancePhysicalCodec {
    /// A codec that leaves storage options out of encoded plans.
    pub fn new() -> Self {
        Self::default()
    }

    storage_policy_builders!();

    fn encode_node(&self, node: &dyn ExecutionPlan) -> DFResult<Option<Node>> {
        let s = &self.storage;
        if let Some(scan) = node.downcast_ref::<LanceScanExec>() {
            return Ok(Some(Node::Scan(self.encode_scan(scan)?)));
        }
        if let Some(scan) = node.downcast_ref::<CloudScanExec>() {
            return Ok(Some(Node::CloudScan(s.encode_cloud_scan(scan)?)));
        }
        if let Some(write) = node.downcast_ref::<CloudWriteExec>() {
            return Ok(Some(Node::CloudWrite(s.encode_cloud_write(write)?)));
        }
        if let Some(merge) = node.downcast_ref::<CloudMergeExec>() {
            return Ok(Some(Node::CloudMerge(s.encode_cloud_merge(merge)?)));
        }
        if let Some(change) = node.downcast_ref::<CloudChangeExec>() {
            return Ok(Some(Node::CloudChange(s.encode_cloud_change(change))));
        }
        if let Some(ddl) = node.downcast_ref::<CloudDdlExec>() {
            return Ok(Some(Node::CloudDdl(s.encode_cloud_ddl(ddl))));
        }
        if let Some(search) = node.downcast_ref::<CloudSearchExec>() {
            return Ok(Some(Node::CloudSearch(s.encode_cloud_search(search)?)));
        }
        if let Some(write) = node.downcast_ref::<LanceWriteExec>() {
            return Ok(Some(Node::Write(s.encode_target(write.target())?)));
        }
        if let Some(commit) = node.downcast_ref::<LanceCommitExec>() {
            return Ok(Some(Node::Commit(proto::CommitNode {
                target: Some(s.encode_target(commit.target())?),
                kind: encode_kind(commit.kind()),
                sort_order: None,
            })));
        }
        if let Some(delete) = node.downcast_ref::<LanceDeleteExec>() {
            return Ok(Some(Node::Delete(s.encode_target(delete.target())?)));
        }
        if let Some(update) = node.downcast_ref::<LanceUpdateExec>() {
            return Ok(Some(Node::Update(s.encode_target(update.target())?)));
        }
        if let Some(merge) = node.downcast_ref::<LanceMergeExec>() {
            return Ok(Some(Node::Merge(proto::MergeNode {
                target: Some(s.encode_target(merge.target())?),
                keys: merge.keys().to_vec(),
                options: Some(encode_merge_options(
                    merge.options(),
                    &DefaultLogicalExtensionCodec {},
                )?),
                output: encode_output(merge.output()),
            })));
        }
        if let Some(vacuum) = node.downcast_ref::<LanceVacuumExec>() {
            return Ok(Some(Node::Vacuum(proto::VacuumNode {
                location: Some(s.encode_location(vacuum.location())),
                vacuum: Some(encode_vacuum(*vacuum.work())),
            })));
        }
        if let Some(optimize) = node.downcast_ref::<LanceOptimizeExec>() {
            return Ok(Some(Node::Optimize(proto::OptimizeNode {
                location: Some(s.encode_location(optimize.location())),
                optimize: Some(encode_optimize(*optimize.work())),
            })));
        }
        if let Some(search) = node.downcast_ref::<LanceSearchExec>() {
            let (query, text, hybrid) = encode_search(search.query())?;
            return Ok(Some(Node::Search(proto::SearchNode {
                location: Some(s.encode_location(search.location())),
                snapshot: Some(encode_snapshot(search.snapshot())),
                columns: search.columns().to_vec(),
                query,
                schema: Some(encode_schema(&search.schema())?),
                text,
                hybrid,
            })));
        }
        if let Some(alter) = node.downcast_ref::<LanceAlterExec>() {
            return Ok(Some(Node::Alter(proto::AlterNode {
                location: Some(s.encode_location(alter.location())),
                change: Some(encode_alter(
                    alter.work(),
                    &DefaultLogicalExtensionCodec {},
                )?),
            })));
        }
        if let Some(index) = node.downcast_ref::<LanceIndexExec>() {
            return Ok(Some(Node::Index(proto::IndexNode {
                location: Some(s.encode_location(index.location())),
                change: Some(encode_index(index.work())),
            })));
        }
        if let Some(tag) = node.downcast_ref::<LanceTagExec>() {
            return Ok(Some(Node::Tag(proto::TagNode {
                location: Some(s.encode_location(tag.location())),
                change: Some(encode_tag(tag.work())),
            })));
        }
        if let Some(split) = node.downcast_ref::<PermutationSplitExec>() {
            return Ok(Some(Node::PermutationSplit(
                s.encode_permutation_split(split)?,
            )));
        }
        if let Some(build) = node.downcast_ref::<PermutationBuildExec>() {
            return Ok(Some(Node::PermutationBuild(
                s.encode_permutation_build(build),
            )));
        }
        if let Some(scan) = node.downcast_ref::<PermutationScanExec>() {
            return Ok(Some(Node::PermutationScan(
                s.encode_permutation_scan(scan)?,
            )));
        }
        if let Some(exec) = node.downcast_ref::<DataSinkExec>()
            && let Some(sink) = exec.sink().downcast_ref::<LanceSink>()
        {
            let sort_order = exec
                .sort_order()
                .as_ref()
                .map(|requirement| {
                    let exprs = requirement
                        .iter()
                        .map(|r| PhysicalSortExpr::from(r.clone()));
                    serialize_physical_sort_exprs(exprs, self, &DefaultPhysicalProtoConverter {})
                        .map(|nodes| PhysicalSortExprNodeCollection {
                            physical_sort_expr_nodes: nodes,
                        })
                })
                .transpose()?;
            return Ok(Some(Node::Sink(proto::CommitNode {
                target: Some(s.encode_target(sink.target())?),
                kind: encode_kind(sink.kind()),
                sort_order,
            })));
        }
        Ok(None)
    }

    fn encode_scan(&self, scan: &LanceScanExec) -> DFResult<proto::ScanNode> {
        let parts = scan.parts();
        let o = &parts.options;
        Ok(proto::ScanNode {
            location: Some(self.storage.encode_location(&parts.location)),
            snapshot: Some(encode_snapshot(&parts.snapshot)),
            groups: parts
                .groups
                .into_iter()
                .zip(parts.group_rows)
                .map(|(ids, rows)| proto::FragmentGroup {
                    fragment_ids: ids,
                    rows: rows.rows as u64,
                    exact: rows.exact,
                })
                .collect(),
            columns: parts.columns,
            schema: Some(encode_schema(&parts.schema)?),
            filter: parts
                .filter
                .as_ref()
                .map(|f| serialize_expr(f, &DefaultLogicalExtensionCodec {}))
                .transpose()?,
            limit: parts.limit.map(|l| l as u64),
            options: Some(proto::ScanOptions {
                batch_size: o.batch_size as u64,
                batch_size_bytes: o.batch_size_bytes,
                fragment_readahead: o.fragment_readahead.map(|n| n as u64),
                batch_readahead: o.batch_readahead.map(|n| n as u64),
                io_buffer_size: o.io_buffer_size,
                use_scalar_index: o.use_scalar_index,
                row_addr: o.row_addr,
                row_id: o.row_id,
                scalar_indexes: o.scalar_indexes.clone(),
                pruned_fragments: o.pruned_fragments as u64,
            }),
        })
    }

    fn decode_scan(&self, scan: proto::ScanNode, ctx: &TaskContext) -> DFResult<LanceScanExec> {
        let options = required(scan.options, "scan options")?;
        let (groups, group_rows) = scan
            .groups
            .into_iter()
            .map(|g| {
                let rows = GroupRows {
                    rows: g.rows as usize,
                    exact: g.exact,
                };
                (g.fragment_ids, rows)
            })
            .unzip();
        Ok(LanceScanExec::from_parts(ScanParts {
            location: self.storage.decode_location(scan.location)?,
            snapshot: decode_snapshot(required(scan.snapshot, "snapshot")?),
            groups,
            group_rows,
            columns: scan.columns,
            schema: decode_schema(scan.schema)?,
            filter: scan
                .filter
                .map(|f| parse_expr(&f, ctx, &DefaultLogicalExtensionCodec {}))
                .transpose()?,
            limit: scan.limit.map(|l| l as usize),
            options: ScanOptions {
                batch_size: options.batch_size as usize,
                batch_size_bytes: options.batch_size_bytes,
                fragment_readahead: options.fragment_readahead.map(|n| n as usize),
                batch_readahead: options.batch_readahead.map(|n| n as usize),
                io_buffer_size: options.io_buffer_size,
                use_scalar_index: options.use_scalar_index,
                row_addr: options.row_addr,
                row_id: options.row_id,
                scalar_indexes: options.scalar_indexes,
                pruned_fragments: options.pruned_fragments as usize,
            },
        }))
    }
}

/// The one input of a node that has one.
fn single_input(inputs: &[Arc<dyn ExecutionPlan>], node: &str) -> DFResult<Arc<dyn ExecutionPlan>> {
    match inputs {
        [input] => Ok(Arc::clone(input)),
        _ => Err(malformed(format!(
            "{node} has one input, {} decoded",
            inputs.len()
        ))),
    }
}

impl PhysicalExtensionCodec for LancePhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let message = envelope::PhysicalNode::decode(buf).map_err(malformed)?;
        check_format(message.format)?;
        let s = &self.storage;
        let input = |node| single_input(inputs, node);
        Ok(match required(message.node, "node")? {
            Node::Scan(scan) => Arc::new(self.decode_scan(scan, ctx)?),
            Node::CloudScan(scan) => Arc::new(s.decode_cloud_scan(scan)?),
            Node::CloudChange(change) => Arc::new(s.decode_cloud_change(change)?),
            Node::CloudDdl(ddl) => Arc::new(s.decode_cloud_ddl(ddl)?),
            Node::CloudSearch(search) => Arc::new(s.decode_cloud_search(search, ctx)?),
            Node::CloudMerge(merge) => {
                Arc::new(s.decode_cloud_merge(merge, input("CloudMergeExec")?)?)
            }
            Node::CloudWrite(write) => {
                Arc::new(s.decode_cloud_write(write, input("CloudWriteExec")?)?)
            }
            Node::Write(target) => Arc::new(LanceWriteExec::new(
                input("LanceWriteExec")?,
                s.decode_target(Some(target))?,
            )),
            Node::Commit(commit) => Arc::new(LanceCommitExec::new(
                input("LanceCommitExec")?,
                s.decode_target(commit.target)?,
                decode_kind(&commit.kind)?,
            )),
            Node::Delete(target) => Arc::new(LanceDeleteExec::new(
                input("LanceDeleteExec")?,
                s.decode_target(Some(target))?,
            )),
            Node::Update(target) => Arc::new(LanceUpdateExec::new(
                input("LanceUpdateExec")?,
                s.decode_target(Some(target))?,
            )?),
            Node::Merge(merge) => Arc::new(LanceMergeExec::new(
                input("LanceMergeExec")?,
                s.decode_target(merge.target)?,
                merge.keys,
                decode_merge_options(merge.options, ctx, &DefaultLogicalExtensionCodec {})?,
                decode_output(&merge.output)?,
            )),
            Node::Vacuum(vacuum) => Arc::new(LanceVacuumExec::new(
                s.decode_location(vacuum.location)?,
                decode_vacuum(vacuum.vacuum)?,
            )),
            Node::Optimize(optimize) => Arc::new(LanceOptimizeExec::new(
                s.decode_location(optimize.location)?,
                decode_optimize(optimize.optimize)?,
            )),
            Node::Search(search) => {
                let query = decode_search((search.query, search.text, search.hybrid), ctx)?;
                Arc::new(LanceSearchExec::new(
                    s.decode_location(search.location)?,
                    decode_snapshot(required(search.snapshot, "snapshot")?),
                    search.columns,
                    query,
                    decode_schema(search.schema)?,
                ))
            }
            Node::Alter(alter) => Arc::new(LanceAlterExec::new(
                s.decode_location(alter.location)?,
                decode_alter(alter.change, ctx, &DefaultLogicalExtensionCodec {})?,
            )),
            Node::Index(index) => Arc::new(LanceIndexExec::new(
                s.decode_location(index.location)?,
                decode_index(index.change)?,
            )),
            Node::Tag(tag) => Arc::new(LanceTagExec::new(
                s.decode_location(tag.location)?,
                decode_tag(tag.change)?,
            )),
            Node::PermutationSplit(split) => Arc::new(s.decode_permutation_split(split)?),
            Node::PermutationBuild(build) => {
                Arc::new(s.decode_permutation_build(build, input("PermutationBuildExec")?)?)
            }
            Node::PermutationScan(scan) => Arc::new(s.decode_permutation_scan(scan)?),
            Node::Sink(sink) => {
                let input = input("DataSinkExec")?;
                let sort_order = match &sink.sort_order {
                    Some(collection) => LexRequirement::new(
                        parse_physical_sort_exprs(
                            &collection.physical_sort_expr_nodes,
                            &PhysicalPlanDecodeContext::new(ctx, self),
                            &input.schema(),
                            &DefaultPhysicalProtoConverter {},
                        )?
                        .into_iter()
                        .map(Into::into),
                    ),
                    None => None,
                };
                Arc::new(DataSinkExec::new(
                    input,
                    Arc::new(LanceSink::new(
                        s.decode_target(sink.target)?,
                        decode_kind(&sink.kind)?,
                    )),
                    sort_order,
                ))
            }
        })
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>) -> DFResult<()> {
        match self.encode_node(node.as_ref())? {
            Some(node) => encode_message(
                &envelope::PhysicalNode {
                    format: proto::FORMAT,
                    node: Some(node),
                },
                buf,
            ),
            None => Err(datafusion::error::DataFusionError::NotImplemented(format!(
                "LancePhysicalCodec cannot encode {}",
                node.name()
            ))),
        }
    }
}
