//! [`LanceLogicalCodec`]: every table provider the crate creates to bytes
//! and back, nested plans included.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{Constraint, Constraints, TableReference};
use datafusion::datasource::TableProvider;
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{AggregateUDF, Extension, LogicalPlan, ScalarUDF, WindowUDF};
use datafusion_proto::logical_plan::{
    AsLogicalPlan, DefaultLogicalExtensionCodec, LogicalExtensionCodec,
};
use datafusion_proto::protobuf::LogicalPlanNode;
use prost::Message;

use super::alter::{decode_alter, encode_alter};
use super::envelope::{self, provider::Table};
use super::maintenance::{
    decode_index, decode_optimize, decode_tag, decode_vacuum, encode_index, encode_optimize,
    encode_tag, encode_vacuum,
};
use super::proto;
use super::search::{decode_query, decode_text, encode_query, encode_text};
use super::{
    StoragePolicy, check_format, decode_merge_options, decode_schema, decode_snapshot,
    encode_merge_options, encode_message, encode_schema, encode_snapshot, malformed, required,
    storage_policy_builders,
};
use crate::format::LanceFormatFactory;
use crate::location::TableLocation;
use crate::physical_plan::{IndexChange, OptimizeOptions, SchemaChange, TagChange, VacuumOptions};
use crate::session::LanceSessionCache;
use crate::table::cloud::CloudTableProvider;
use crate::table::dml::{DmlOp, LanceDml};
use crate::table::lookup::Target;
use crate::table::maintain::Maintain;
use crate::table::merge::LanceMerge;
use crate::table::permutation::{BuildPermutation, ReadPermutation};
use crate::table::statement::{StatementTable, statement_of};
use crate::table::{LanceTableProvider, ProviderParts};
use crate::udtf::cache_stats::CacheStats;
use crate::udtf::metadata::{Metadata, MetadataKind};
use crate::udtf::search::fts::FullTextSearch;
use crate::udtf::search::hybrid::{HYBRID_SEARCH_FUNCTION_NAME, HybridSearch};
use crate::udtf::search::vector::{QueryVector, VectorSearch};

/// Starts the bytes of `STORED AS LANCE` (telling them from the formats
/// DataFusion's default codec encodes).
const LANCE_FORMAT_MAGIC: &[u8] = b"datafusion-lance:format:";

/// Encodes and decodes the table providers this crate creates (see the
/// crate docs' "Plans as data"); anything else (extension nodes, other providers,
/// file formats, functions) goes to the fallback codec: DataFusion's default
/// one unless [`with_fallback`](Self::with_fallback) names another (an
/// engine's own, such as Ballista's).
#[derive(Debug, Clone)]
pub struct LanceLogicalCodec {
    pub(super) storage: StoragePolicy,
    fallback: Arc<dyn LogicalExtensionCodec>,
}

impl Default for LanceLogicalCodec {
    fn default() -> Self {
        Self {
            storage: StoragePolicy::default(),
            fallback: Arc::new(DefaultLogicalExtensionCodec {}),
        }
    }
}

impl LanceLogicalCodec {
    /// A codec that leaves storage options out of encoded plans.
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands what is not Lance's (extension nodes, other table providers,
    /// file formats, functions) to `fallback`.
    pub fn with_fallback(mut self, fallback: Arc<dyn LogicalExtensionCodec>) -> Self {
        self.fallback = fallback;
        self
    }

    storage_policy_builders!();

    fn encode_vector_search(&self, search: &VectorSearch) -> DFResult<proto::VectorSearchTable> {
        let (vector, subquery) = match &search.vector {
            QueryVector::Literal(v) => (v.clone(), None),
            QueryVector::Subquery(plan) => (vec![], Some(self.encode_plan(plan)?)),
        };
        let mut query = search.query.clone();
        query.vector = vector;
        let (table, cloud) = self.encode_target_table(&search.table)?;
        Ok(proto::VectorSearchTable {
            name: search.name.clone(),
            table,
            query: Some(encode_query(&query, self)?),
            subquery,
            cloud,
        })
    }

    /// A search's table: a Lance table or a `db://` one.
    fn encode_target_table(
        &self,
        target: &Target,
    ) -> DFResult<(
        Option<proto::Table>,
        Option<Box<super::cloud::CloudProviderMessage>>,
    )> {
        Ok(match target {
            Target::Lance(table) => (Some(self.encode_table(table)?), None),
            Target::Cloud(table) => (
                None,
                Some(Box::new(self.storage.encode_cloud_provider(table)?)),
            ),
        })
    }

    fn decode_target_table(
        &self,
        table: Option<proto::Table>,
        cloud: Option<Box<super::cloud::CloudProviderMessage>>,
        ctx: &TaskContext,
    ) -> DFResult<Target> {
        Ok(match cloud {
            Some(cloud) => Target::Cloud(self.storage.decode_cloud_provider(*cloud)?),
            None => Target::Lance(self.decode_table(table, ctx)?),
        })
    }

    fn decode_vector_search(
        &self,
        search: proto::VectorSearchTable,
        ctx: &TaskContext,
    ) -> DFResult<VectorSearch> {
        let mut query = decode_query(required(search.query, "vector query")?, ctx, self)?;
        let vector = match search.subquery {
            Some(plan) => QueryVector::Subquery(Arc::new(self.decode_plan(Some(plan), ctx)?)),
            None => QueryVector::Literal(std::mem::take(&mut query.vector)),
        };
        Ok(VectorSearch::new(
            search.name,
            self.decode_target_table(search.table, search.cloud, ctx)?,
            vector,
            query,
        ))
    }

    fn encode_table(&self, table: &LanceTableProvider) -> DFResult<proto::Table> {
        let ProviderParts {
            name,
            location,
            options,
            pinned,
            resolved,
            schema,
            constraints,
            row_addr,
            row_id,
        } = table.parts();
        let primary_key = constraints
            .iter()
            .flat_map(|c| c.iter())
            .find_map(|c| match c {
                Constraint::PrimaryKey(k) => Some(k.iter().map(|&i| i as u64).collect()),
                _ => None,
            })
            .unwrap_or_default();
        Ok(proto::Table {
            name,
            location: Some(self.storage.encode_location(&location)),
            options: Some(self.storage.encode_table_options(&options)),
            pinned: pinned.as_ref().map(encode_snapshot),
            resolved: resolved.as_ref().map(encode_snapshot),
            schema: Some(encode_schema(&schema)?),
            primary_key,
            row_addr,
            row_id,
        })
    }

    fn decode_table(
        &self,
        table: Option<proto::Table>,
        ctx: &TaskContext,
    ) -> DFResult<Arc<LanceTableProvider>> {
        let table = required(table, "table")?;
        if table.row_id && !table.row_addr {
            return Err(malformed("a table with row ids but no row addresses"));
        }
        let location = self.storage.decode_location(table.location)?;
        let options = self
            .storage
            .decode_table_options(table.options, location.storage_options.clone())?;
        let constraints = (!table.primary_key.is_empty()).then(|| {
            Constraints::new_unverified(vec![Constraint::PrimaryKey(
                table.primary_key.iter().map(|&i| i as usize).collect(),
            )])
        });
        let params = LanceSessionCache::for_task(ctx).params_for(&location);
        Ok(Arc::new(LanceTableProvider::from_parts(
            ProviderParts {
                name: table.name,
                location,
                options,
                pinned: table.pinned.map(decode_snapshot),
                resolved: table.resolved.map(decode_snapshot),
                schema: decode_schema(table.schema)?,
                constraints,
                row_addr: table.row_addr,
                row_id: table.row_id,
            },
            params,
        )))
    }

    fn encode_target(&self, name: &str, location: Option<&TableLocation>) -> proto::NamedTarget {
        proto::NamedTarget {
            name: self.storage.encode_name(name),
            location: location.map(|l| self.storage.encode_location(l)),
        }
    }

    fn decode_target(
        &self,
        target: Option<proto::NamedTarget>,
    ) -> DFResult<(String, Option<TableLocation>)> {
        let target = required(target, "table function target")?;
        let location = match target.location {
            Some(location) => Some(self.storage.decode_location(Some(location))?),
            None => None,
        };
        Ok((target.name, location))
    }

    fn decode_metadata(
        &self,
        kind: MetadataKind,
        target: proto::NamedTarget,
    ) -> DFResult<Arc<dyn TableProvider>> {
        let (target, location) = self.decode_target(Some(target))?;
        Ok(StatementTable::provider(Metadata {
            kind,
            target,
            location,
        }))
    }

    pub(super) fn encode_plan(&self, plan: &LogicalPlan) -> DFResult<LogicalPlanNode> {
        LogicalPlanNode::try_from_logical_plan(plan, self)
    }

    pub(super) fn decode_plan(
        &self,
        plan: Option<LogicalPlanNode>,
        ctx: &TaskContext,
    ) -> DFResult<LogicalPlan> {
        required(plan, "nested plan")?.try_into_logical_plan(ctx, self)
    }

    fn encode_provider(&self, provider: &dyn TableProvider) -> DFResult<Option<Table>> {
        if let Some(table) = provider.downcast_ref::<LanceTableProvider>() {
            return Ok(Some(Table::Lance(self.encode_table(table)?)));
        }
        if let Some(table) = provider.downcast_ref::<CloudTableProvider>() {
            return Ok(Some(Table::Cloud(
                self.storage.encode_cloud_provider(table)?,
            )));
        }
        if let Some(statement) = self.encode_cloud_statement(provider)? {
            return Ok(Some(statement));
        }
        if let Some(dml) = statement_of::<LanceDml>(provider) {
            return Ok(Some(Table::Dml(proto::DmlTable {
                op: match dml.op() {
                    DmlOp::Delete => "delete".into(),
                    DmlOp::Update => "update".into(),
                },
                target: Some(self.encode_table(dml.target())?),
                input: Some(self.encode_plan(dml.input())?),
            })));
        }
        if let Some(merge) = statement_of::<LanceMerge>(provider) {
            return Ok(Some(Table::Merge(proto::MergeTable {
                target_name: merge.target_name().to_string(),
                target: merge
                    .target_table()
                    .map(|t| self.encode_table(t))
                    .transpose()?,
                source: Some(self.encode_plan(merge.source())?),
                keys: merge.keys().to_vec(),
                options: Some(encode_merge_options(merge.options(), self)?),
            })));
        }
        if let Some(metadata) = statement_of::<Metadata>(provider) {
            let target = self.encode_target(&metadata.target, metadata.location.as_ref());
            return Ok(Some(match metadata.kind {
                MetadataKind::Versions => Table::Versions(target),
                MetadataKind::Fragments => Table::Fragments(target),
                MetadataKind::Tags => Table::Tags(target),
                MetadataKind::Indices => Table::Indices(target),
            }));
        }
        if let Some(vacuum) = statement_of::<Maintain<VacuumOptions>>(provider) {
            return Ok(Some(Table::Vacuum(proto::VacuumTable {
                target: Some(self.encode_target(&vacuum.target, vacuum.location.as_ref())),
                vacuum: Some(encode_vacuum(vacuum.work)),
            })));
        }
        if let Some(optimize) = statement_of::<Maintain<OptimizeOptions>>(provider) {
            return Ok(Some(Table::Optimize(proto::OptimizeTable {
                target: Some(self.encode_target(&optimize.target, optimize.location.as_ref())),
                optimize: Some(encode_optimize(optimize.work)),
            })));
        }
        if let Some(search) = statement_of::<VectorSearch>(provider) {
            return Ok(Some(Table::VectorSearch(
                self.encode_vector_search(search)?,
            )));
        }
        if let Some(search) = statement_of::<HybridSearch>(provider) {
            return Ok(Some(Table::HybridSearch(proto::HybridSearchTable {
                vector: Some(self.encode_vector_search(&search.vector)?),
                text: Some(encode_text(&search.text.query, self)?),
                rrf_k: search.rrf_k,
            })));
        }
        if let Some(search) = statement_of::<FullTextSearch>(provider) {
            let (table, cloud) = self.encode_target_table(&search.table)?;
            return Ok(Some(Table::FullTextSearch(proto::FullTextSearchTable {
                name: search.name.clone(),
                table,
                text: Some(encode_text(&search.query, self)?),
                cloud,
            })));
        }
        if let Some(alter) = statement_of::<Maintain<SchemaChange>>(provider) {
            return Ok(Some(Table::Alter(proto::AlterTable {
                target: Some(self.encode_target(&alter.target, alter.location.as_ref())),
                change: Some(encode_alter(&alter.work, self)?),
            })));
        }
        if let Some(index) = statement_of::<Maintain<IndexChange>>(provider) {
            return Ok(Some(Table::Index(proto::IndexTable {
                target: Some(self.encode_target(&index.target, index.location.as_ref())),
                change: Some(encode_index(&index.work)),
            })));
        }
        if let Some(tag) = statement_of::<Maintain<TagChange>>(provider) {
            return Ok(Some(Table::Tag(proto::TagTable {
                target: Some(self.encode_target(&tag.target, tag.location.as_ref())),
                change: Some(encode_tag(&tag.work)),
            })));
        }
        if statement_of::<CacheStats>(provider).is_some() {
            return Ok(Some(Table::CacheStats(proto::Empty {})));
        }
        if let Some(read) = statement_of::<ReadPermutation>(provider) {
            return Ok(Some(Table::ReadPermutation(
                self.storage.encode_read_permutation(read)?,
            )));
        }
        if let Some(build) = statement_of::<BuildPermutation>(provider) {
            return Ok(Some(Table::BuildPermutation(
                self.storage.encode_build_permutation(build),
            )));
        }
        Ok(None)
    }
}

impl LogicalExtensionCodec for LanceLogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[LogicalPlan],
        ctx: &TaskContext,
    ) -> DFResult<Extension> {
        // Lance plans have no extension nodes.
        self.fallback.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> DFResult<()> {
        self.fallback.try_encode(node, buf).map_err(|_| {
            DataFusionError::NotImplemented(format!(
                "LanceLogicalCodec cannot encode the extension node {}",
                node.node.name()
            ))
        })
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> DFResult<Arc<dyn TableProvider>> {
        let message = match envelope::Provider::decode(buf) {
            Ok(message) if message.table.is_some() => message,
            // Not a Lance provider.
            _ => {
                return self
                    .fallback
                    .try_decode_table_provider(buf, table_ref, schema, ctx);
            }
        };
        check_format(message.format)?;
        Ok(match required(message.table, "table")? {
            Table::Lance(table) => self.decode_table(Some(table), ctx)?,
            Table::Cloud(table) => self.storage.decode_cloud_provider(table)?,
            Table::CloudDml(dml) => self.decode_cloud_dml(dml, ctx)?,
            Table::CloudMerge(merge) => self.decode_cloud_merge(merge, ctx)?,
            Table::CloudDdl(ddl) => self.storage.decode_cloud_ddl_statement(ddl)?,
            Table::ReadPermutation(read) => self.storage.decode_read_permutation(read)?,
            Table::BuildPermutation(build) => self.storage.decode_build_permutation(build)?,
            Table::Dml(dml) => {
                let op = match dml.op.as_str() {
                    "delete" => DmlOp::Delete,
                    "update" => DmlOp::Update,
                    other => return Err(malformed(format!("statement '{other}'"))),
                };
                StatementTable::provider(LanceDml::new(
                    op,
                    self.decode_table(dml.target, ctx)?,
                    self.decode_plan(dml.input, ctx)?,
                ))
            }
            Table::Merge(merge) => {
                let mut table = LanceMerge::new(
                    merge.target_name,
                    self.decode_plan(merge.source, ctx)?,
                    merge.keys,
                    decode_merge_options(merge.options, ctx, self)?,
                );
                if merge.target.is_some() {
                    table = table.with_target(self.decode_table(merge.target, ctx)?);
                }
                StatementTable::provider(table)
            }
            Table::Versions(target) => self.decode_metadata(MetadataKind::Versions, target)?,
            Table::Fragments(target) => self.decode_metadata(MetadataKind::Fragments, target)?,
            Table::Tags(target) => self.decode_metadata(MetadataKind::Tags, target)?,
            Table::Indices(target) => self.decode_metadata(MetadataKind::Indices, target)?,
            Table::VectorSearch(search) => {
                StatementTable::provider(self.decode_vector_search(search, ctx)?)
            }
            Table::HybridSearch(search) => {
                let mut vector =
                    self.decode_vector_search(required(search.vector, "vector search")?, ctx)?;
                vector.function = HYBRID_SEARCH_FUNCTION_NAME;
                let mut text = FullTextSearch::new(
                    vector.name.clone(),
                    vector.table.clone(),
                    decode_text(required(search.text, "text query")?, ctx, self)?,
                );
                text.function = HYBRID_SEARCH_FUNCTION_NAME;
                StatementTable::provider(HybridSearch::new(vector, text, search.rrf_k))
            }
            Table::FullTextSearch(search) => StatementTable::provider(FullTextSearch::new(
                search.name,
                self.decode_target_table(search.table, search.cloud, ctx)?,
                decode_text(required(search.text, "text query")?, ctx, self)?,
            )),
            Table::Alter(alter) => {
                let (target, location) = self.decode_target(alter.target)?;
                StatementTable::provider(Maintain {
                    target,
                    location,
                    work: decode_alter(alter.change, ctx, self)?,
                })
            }
            Table::Index(index) => {
                let (target, location) = self.decode_target(index.target)?;
                StatementTable::provider(Maintain {
                    target,
                    location,
                    work: decode_index(index.change)?,
                })
            }
            Table::Vacuum(vacuum) => {
                let (target, location) = self.decode_target(vacuum.target)?;
                StatementTable::provider(Maintain {
                    target,
                    location,
                    work: decode_vacuum(vacuum.vacuum)?,
                })
            }
            Table::Optimize(optimize) => {
                let (target, location) = self.decode_target(optimize.target)?;
                StatementTable::provider(Maintain {
                    target,
                    location,
                    work: decode_optimize(optimize.optimize)?,
                })
            }
            Table::Tag(tag) => {
                let (target, location) = self.decode_target(tag.target)?;
                StatementTable::provider(Maintain {
                    target,
                    location,
                    work: decode_tag(tag.change)?,
                })
            }
            Table::CacheStats(_) => StatementTable::provider(CacheStats::default()),
        })
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> DFResult<()> {
        match self.encode_provider(node.as_ref())? {
            Some(table) => encode_message(
                &envelope::Provider {
                    format: proto::FORMAT,
                    table: Some(table),
                },
                buf,
            ),
            None => self
                .fallback
                .try_encode_table_provider(table_ref, node, buf)
                .map_err(|_| {
                    DataFusionError::NotImplemented(format!(
                        "cannot encode table '{table_ref}' for another process: it is not a \
                         Lance table and has no codec (DataFusion's table functions such as \
                         generate_series have none)"
                    ))
                }),
        }
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> DFResult<Arc<dyn FileFormatFactory>> {
        let Some(message) = buf.strip_prefix(LANCE_FORMAT_MAGIC) else {
            return self.fallback.try_decode_file_format(buf, ctx);
        };
        let format = proto::Format::decode(message).map_err(malformed)?;
        check_format(format.format)?;
        let storage = self.storage.decode_storage(
            format
                .storage
                .map(|l| l.storage_options)
                .unwrap_or_default(),
        );
        let options = self.storage.decode_table_options(format.options, storage)?;
        Ok(Arc::new(LanceFormatFactory::with_options(options)))
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn FileFormatFactory>,
    ) -> DFResult<()> {
        let Some(factory) = node.downcast_ref::<LanceFormatFactory>() else {
            return self.fallback.try_encode_file_format(buf, node);
        };
        let Some(options) = factory.copy_options() else {
            return Err(DataFusionError::NotImplemented(
                "LanceLogicalCodec: a COPY ... STORED AS LANCE plan must be resolved with \
                 datafusion_lance::resolve_lance_tables before it is encoded (datafusion-proto \
                 does not encode a COPY's OPTIONS; resolving moves them into the plan)"
                    .into(),
            ));
        };
        buf.extend_from_slice(LANCE_FORMAT_MAGIC);
        encode_message(
            &proto::Format {
                format: proto::FORMAT,
                options: Some(self.storage.encode_table_options(options)),
                storage: Some(self.storage.encode_storage("", &options.storage_options)),
            },
            buf,
        )
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> DFResult<Arc<ScalarUDF>> {
        self.fallback.try_decode_udf(name, buf)
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> DFResult<()> {
        self.fallback.try_encode_udf(node, buf)
    }

    fn try_decode_udaf(&self, name: &str, buf: &[u8]) -> DFResult<Arc<AggregateUDF>> {
        self.fallback.try_decode_udaf(name, buf)
    }

    fn try_encode_udaf(&self, node: &AggregateUDF, buf: &mut Vec<u8>) -> DFResult<()> {
        self.fallback.try_encode_udaf(node, buf)
    }

    fn try_decode_udwf(&self, name: &str, buf: &[u8]) -> DFResult<Arc<WindowUDF>> {
        self.fallback.try_decode_udwf(name, buf)
    }

    fn try_encode_udwf(&self, node: &WindowUDF, buf: &mut Vec<u8>) -> DFResult<()> {
        self.fallback.try_encode_udwf(node, buf)
    }
}
