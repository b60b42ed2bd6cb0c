//! Permutation plans on the wire: the nodes [`PermutationSplitExec`],
//! [`PermutationBuildExec`] and [`PermutationScanExec`], and the
//! statements building and reading a plan in logical plans. Locations go
//! under the codec's storage rule; a read carries its validated summary,
//! so a decoded read checks nothing again until it runs (where every row
//! read is checked to be in its split).

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;

use super::{
    StoragePolicy, decode_schema, decode_snapshot, encode_schema, encode_snapshot, malformed,
    proto, required,
};
use crate::physical_plan::{
    BuildOptions, PermutationBuildExec, PermutationRead, PermutationScanExec, PermutationSplitExec,
    PlanSummary, SplitSizes, SplitStrategy,
};
use crate::session::catalog_tables::CatalogTable;
use crate::table::permutation::{BuildPermutation, Pinned, ReadPermutation};
use crate::table::statement::StatementTable;

/// [`BuildOptions`]: `strategy` names the variant; `sizes` is `ratios`,
/// `counts` or `fixed` (its count in `counts`); a hash split's weights are
/// in `counts`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct BuildOptionsMessage {
    #[prost(string, tag = "1")]
    pub strategy: String,
    #[prost(string, tag = "2")]
    pub sizes: String,
    #[prost(double, repeated, tag = "3")]
    pub ratios: Vec<f64>,
    #[prost(uint64, repeated, tag = "4")]
    pub counts: Vec<u64>,
    #[prost(uint64, tag = "5")]
    pub seed: u64,
    #[prost(uint64, tag = "6")]
    pub clump: u64,
    #[prost(string, repeated, tag = "7")]
    pub columns: Vec<String>,
    #[prost(uint64, tag = "8")]
    pub discard: u64,
    #[prost(string, tag = "9")]
    pub expr: String,
    #[prost(string, repeated, tag = "10")]
    pub names: Vec<String>,
    #[prost(bool, tag = "11")]
    pub shuffle: bool,
    #[prost(uint64, tag = "12")]
    pub shuffle_seed: u64,
    #[prost(uint64, tag = "13")]
    pub shuffle_clump: u64,
    #[prost(string, optional, tag = "14")]
    pub filter: Option<String>,
}

/// A [`PermutationSplitExec`].
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PermutationSplitNode {
    #[prost(string, tag = "1")]
    pub plan: String,
    #[prost(message, optional, tag = "2")]
    pub base: Option<proto::Location>,
    #[prost(message, optional, tag = "3")]
    pub base_snapshot: Option<proto::Snapshot>,
    #[prost(message, optional, tag = "4")]
    pub options: Option<BuildOptionsMessage>,
    #[prost(message, optional, tag = "5")]
    pub schema: Option<datafusion_proto::protobuf::Schema>,
}

/// A [`PermutationBuildExec`].
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PermutationBuildNode {
    #[prost(message, optional, tag = "1")]
    pub plan: Option<proto::Location>,
    #[prost(message, optional, tag = "2")]
    pub base: Option<proto::Location>,
    #[prost(message, optional, tag = "3")]
    pub catalog_table: Option<CatalogTableMessage>,
}

/// A table of a Lance catalog a plan creates.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CatalogTableMessage {
    #[prost(string, tag = "1")]
    pub catalog: String,
    #[prost(string, tag = "2")]
    pub schema: String,
    #[prost(string, tag = "3")]
    pub table: String,
    #[prost(string, tag = "4")]
    pub relative: String,
}

/// A [`PermutationScanExec`] (ranges as parallel start / end lists).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PermutationScanNode {
    #[prost(message, optional, tag = "1")]
    pub plan: Option<proto::Location>,
    #[prost(message, optional, tag = "2")]
    pub plan_snapshot: Option<proto::Snapshot>,
    #[prost(message, optional, tag = "3")]
    pub base: Option<proto::Location>,
    #[prost(message, optional, tag = "4")]
    pub base_snapshot: Option<proto::Snapshot>,
    #[prost(uint64, tag = "5")]
    pub split: u64,
    #[prost(uint64, optional, tag = "6")]
    pub split_start: Option<u64>,
    #[prost(uint64, repeated, tag = "7")]
    pub range_starts: Vec<u64>,
    #[prost(uint64, repeated, tag = "8")]
    pub range_ends: Vec<u64>,
    #[prost(string, repeated, tag = "9")]
    pub columns: Vec<String>,
    #[prost(string, tag = "10")]
    pub identity: String,
    #[prost(message, optional, tag = "11")]
    pub schema: Option<datafusion_proto::protobuf::Schema>,
}

/// A validated plan ([`PlanSummary`]).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PlanSummaryMessage {
    #[prost(message, optional, tag = "1")]
    pub plan: Option<proto::Location>,
    #[prost(message, optional, tag = "2")]
    pub plan_snapshot: Option<proto::Snapshot>,
    #[prost(message, optional, tag = "3")]
    pub base: Option<proto::Location>,
    #[prost(message, optional, tag = "4")]
    pub base_snapshot: Option<proto::Snapshot>,
    #[prost(string, repeated, tag = "5")]
    pub split_names: Vec<String>,
    #[prost(uint64, repeated, tag = "6")]
    pub split_rows: Vec<u64>,
    /// Empty: the plan is not sorted by split.
    #[prost(uint64, repeated, tag = "7")]
    pub split_starts: Vec<u64>,
    #[prost(string, optional, tag = "8")]
    pub options: Option<String>,
    #[prost(uint64, tag = "9")]
    pub content_hash: u64,
    #[prost(message, optional, tag = "10")]
    pub base_schema: Option<datafusion_proto::protobuf::Schema>,
}

/// `lance_permutation(...)` in a logical plan.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ReadPermutationTable {
    #[prost(message, optional, tag = "1")]
    pub summary: Option<PlanSummaryMessage>,
    #[prost(uint64, tag = "2")]
    pub split: u64,
    #[prost(uint64, tag = "3")]
    pub start: u64,
    #[prost(uint64, tag = "4")]
    pub end: u64,
    #[prost(uint64, tag = "5")]
    pub partitions: u64,
}

/// `lance_build_permutation(...)` in a logical plan.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct BuildPermutationTable {
    #[prost(string, tag = "1")]
    pub base: String,
    #[prost(string, tag = "2")]
    pub plan: String,
    #[prost(message, optional, tag = "3")]
    pub options: Option<BuildOptionsMessage>,
    /// The base as pinned, when it is.
    #[prost(message, optional, tag = "4")]
    pub base_location: Option<proto::Location>,
    #[prost(message, optional, tag = "5")]
    pub base_snapshot: Option<proto::Snapshot>,
    #[prost(string, tag = "6")]
    pub base_timestamp_nanos: String,
}

pub(super) fn encode_options(o: &BuildOptions) -> BuildOptionsMessage {
    let mut m = BuildOptionsMessage {
        names: o.names.clone(),
        filter: o.filter.clone(),
        ..Default::default()
    };
    if let Some((seed, clump)) = o.shuffle {
        m.shuffle = true;
        m.shuffle_seed = seed;
        m.shuffle_clump = clump;
    }
    let sizes = |m: &mut BuildOptionsMessage, sizes: &SplitSizes| match sizes {
        SplitSizes::Ratios(r) => {
            m.sizes = "ratios".into();
            m.ratios = r.clone();
        }
        SplitSizes::Counts(c) => {
            m.sizes = "counts".into();
            m.counts = c.clone();
        }
        SplitSizes::Fixed(n) => {
            m.sizes = "fixed".into();
            m.counts = vec![*n];
        }
    };
    match &o.strategy {
        SplitStrategy::Single => m.strategy = "single".into(),
        SplitStrategy::Random {
            sizes: s,
            seed,
            clump,
        } => {
            m.strategy = "random".into();
            sizes(&mut m, s);
            m.seed = *seed;
            m.clump = *clump;
        }
        SplitStrategy::Sequential { sizes: s } => {
            m.strategy = "sequential".into();
            sizes(&mut m, s);
        }
        SplitStrategy::Hash {
            columns,
            weights,
            discard,
        } => {
            m.strategy = "hash".into();
            m.columns = columns.clone();
            m.counts = weights.clone();
            m.discard = *discard;
        }
        SplitStrategy::Calculated { expr } => {
            m.strategy = "calculated".into();
            m.expr = expr.clone();
        }
    }
    m
}

pub(super) fn decode_options(m: Option<BuildOptionsMessage>) -> DFResult<BuildOptions> {
    let m = required(m, "permutation build options")?;
    let sizes = || -> DFResult<SplitSizes> {
        Ok(match m.sizes.as_str() {
            "ratios" => SplitSizes::Ratios(m.ratios.clone()),
            "counts" => SplitSizes::Counts(m.counts.clone()),
            "fixed" => SplitSizes::Fixed(
                *m.counts
                    .first()
                    .ok_or_else(|| malformed("fixed splits without a count"))?,
            ),
            other => return Err(malformed(format!("split sizes '{other}'"))),
        })
    };
    let strategy = match m.strategy.as_str() {
        "single" => SplitStrategy::Single,
        "random" => SplitStrategy::Random {
            sizes: sizes()?,
            seed: m.seed,
            clump: m.clump,
        },
        "sequential" => SplitStrategy::Sequential { sizes: sizes()? },
        "hash" => SplitStrategy::Hash {
            columns: m.columns.clone(),
            weights: m.counts.clone(),
            discard: m.discard,
        },
        "calculated" => SplitStrategy::Calculated {
            expr: m.expr.clone(),
        },
        other => return Err(malformed(format!("split strategy '{other}'"))),
    };
    Ok(BuildOptions {
        strategy,
        names: m.names,
        shuffle: m.shuffle.then_some((m.shuffle_seed, m.shuffle_clump)),
        filter: m.filter,
    })
}

impl StoragePolicy {
    pub(super) fn encode_permutation_split(
        &self,
        node: &PermutationSplitExec,
    ) -> DFResult<PermutationSplitNode> {
        let (base, snapshot) = node.base();
        Ok(PermutationSplitNode {
            plan: self.encode_name(node.plan()),
            base: Some(self.encode_location(base)),
            base_snapshot: Some(encode_snapshot(snapshot)),
            options: Some(encode_options(node.options())),
            schema: Some(encode_schema(&node.schema())?),
        })
    }

    pub(super) fn decode_permutation_split(
        &self,
        node: PermutationSplitNode,
    ) -> DFResult<PermutationSplitExec> {
        Ok(PermutationSplitExec::new(
            node.plan,
            self.decode_location(node.base)?,
            decode_snapshot(required(node.base_snapshot, "base snapshot")?),
            decode_options(node.options)?,
            decode_schema(node.schema)?,
        ))
    }

    pub(super) fn encode_permutation_build(
        &self,
        node: &PermutationBuildExec,
    ) -> PermutationBuildNode {
        PermutationBuildNode {
            plan: Some(self.encode_location(node.plan())),
            base: Some(self.encode_location(node.base())),
            catalog_table: node.catalog_table().map(|t| CatalogTableMessage {
                catalog: t.catalog.clone(),
                schema: t.schema.clone(),
                table: t.table.clone(),
                relative: t.relative.clone(),
            }),
        }
    }

    pub(super) fn decode_permutation_build(
        &self,
        node: PermutationBuildNode,
        input: Arc<dyn ExecutionPlan>,
    ) -> DFResult<PermutationBuildExec> {
        let table = node.catalog_table.map(|t| CatalogTable {
            catalog: t.catalog,
            schema: t.schema,
            table: t.table,
            relative: t.relative,
        });
        Ok(PermutationBuildExec::new(
            input,
            self.decode_location(node.plan)?,
            self.decode_location(node.base)?,
        )
        .in_catalog(table))
    }

    pub(super) fn encode_permutation_scan(
        &self,
        node: &PermutationScanExec,
    ) -> DFResult<PermutationScanNode> {
        let r = node.read();
        Ok(PermutationScanNode {
            plan: Some(self.encode_location(&r.plan)),
            plan_snapshot: Some(encode_snapshot(&r.plan_snapshot)),
            base: Some(self.encode_location(&r.base)),
            base_snapshot: Some(encode_snapshot(&r.base_snapshot)),
            split: r.split,
            split_start: r.split_start,
            range_starts: r.ranges.iter().map(|r| r.start).collect(),
            range_ends: r.ranges.iter().map(|r| r.end).collect(),
            columns: r.columns.clone(),
            identity: r.identity.clone(),
            schema: Some(encode_schema(&node.schema())?),
        })
    }

    pub(super) fn decode_permutation_scan(
        &self,
        node: PermutationScanNode,
    ) -> DFResult<PermutationScanExec> {
        if node.range_starts.len() != node.range_ends.len() {
            return Err(malformed("permutation ranges"));
        }
        let read = PermutationRead {
            plan: self.decode_location(node.plan)?,
            plan_snapshot: decode_snapshot(required(node.plan_snapshot, "plan snapshot")?),
            base: self.decode_location(node.base)?,
            base_snapshot: decode_snapshot(required(node.base_snapshot, "base snapshot")?),
            split: node.split,
            split_start: node.split_start,
            ranges: node
                .range_starts
                .into_iter()
                .zip(node.range_ends)
                .map(|(start, end)| start..end)
                .collect(),
            columns: node.columns,
            identity: node.identity,
        };
        Ok(PermutationScanExec::new(read, decode_schema(node.schema)?))
    }

    fn encode_summary(&self, s: &PlanSummary) -> DFResult<PlanSummaryMessage> {
        Ok(PlanSummaryMessage {
            plan: Some(self.encode_location(&s.plan)),
            plan_snapshot: Some(encode_snapshot(&s.plan_snapshot)),
            base: Some(self.encode_location(&s.base)),
            base_snapshot: Some(encode_snapshot(&s.base_snapshot)),
            split_names: s.split_names.clone(),
            split_rows: s.split_rows.clone(),
            split_starts: s.split_starts.clone().unwrap_or_default(),
            options: s.options.clone(),
            content_hash: s.content_hash,
            base_schema: Some(encode_schema(&s.base_schema)?),
        })
    }

    fn decode_summary(&self, m: Option<PlanSummaryMessage>) -> DFResult<PlanSummary> {
        let m = required(m, "permutation plan summary")?;
        Ok(PlanSummary {
            plan: self.decode_location(m.plan)?,
            plan_snapshot: decode_snapshot(required(m.plan_snapshot, "plan snapshot")?),
            base: self.decode_location(m.base)?,
            base_snapshot: decode_snapshot(required(m.base_snapshot, "base snapshot")?),
            split_names: m.split_names,
            split_starts: (!m.split_starts.is_empty()).then_some(m.split_starts),
            split_rows: m.split_rows,
            options: m.options,
            content_hash: m.content_hash,
            base_schema: decode_schema(m.base_schema)?,
        })
    }

    pub(super) fn encode_read_permutation(
        &self,
        read: &ReadPermutation,
    ) -> DFResult<ReadPermutationTable> {
        Ok(ReadPermutationTable {
            summary: Some(self.encode_summary(&read.summary)?),
            split: read.split as u64,
            start: read.range.start,
            end: read.range.end,
            partitions: read.partitions as u64,
        })
    }

    pub(super) fn decode_read_permutation(
        &self,
        table: ReadPermutationTable,
    ) -> DFResult<Arc<dyn TableProvider>> {
        let summary = Arc::new(self.decode_summary(table.summary)?);
        if table.split as usize >= summary.split_count() || table.start > table.end {
            return Err(malformed("permutation read outside its plan"));
        }
        Ok(ReadPermutation::provider(
            summary,
            table.split as usize,
            table.start..table.end,
            table.partitions.max(1) as usize,
        ))
    }

    pub(super) fn encode_build_permutation(
        &self,
        build: &BuildPermutation,
    ) -> BuildPermutationTable {
        let pinned = build.pinned.as_ref();
        BuildPermutationTable {
            base: self.encode_name(&build.base),
            plan: self.encode_name(&build.plan),
            options: Some(encode_options(&build.options)),
            base_location: pinned.map(|p| self.encode_location(&p.location)),
            base_snapshot: pinned.map(|p| encode_snapshot(&p.snapshot)),
            base_timestamp_nanos: pinned
                .map(|p| p.timestamp_nanos.to_string())
                .unwrap_or_default(),
        }
    }

    pub(super) fn decode_build_permutation(
        &self,
        table: BuildPermutationTable,
    ) -> DFResult<Arc<dyn TableProvider>> {
        let pinned = match (table.base_location, table.base_snapshot) {
            (Some(location), Some(snapshot)) => Some(Pinned {
                location: self.decode_location(Some(location))?,
                snapshot: decode_snapshot(snapshot),
                timestamp_nanos: table
                    .base_timestamp_nanos
                    .parse()
                    .map_err(|_| malformed("base commit time"))?,
            }),
            (None, None) => None,
            _ => return Err(malformed("a pinned base without its version")),
        };
        Ok(StatementTable::provider(BuildPermutation {
            base: table.base,
            plan: table.plan,
            options: decode_options(table.options)?,
            pinned,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_build_option_round_trips() {
        let cases = [
            SplitStrategy::Single,
            SplitStrategy::Random {
                sizes: SplitSizes::Ratios(vec![0.8, 0.2]),
                seed: 9,
                clump: 4,
            },
            SplitStrategy::Random {
                sizes: SplitSizes::Fixed(3),
                seed: 1,
                clump: 1,
            },
            SplitStrategy::Sequential {
                sizes: SplitSizes::Counts(vec![10, 5]),
            },
            SplitStrategy::Hash {
                columns: vec!["a".into(), "b".into()],
                weights: vec![80, 20],
                discard: 5,
            },
            SplitStrategy::Calculated {
                expr: "id % 3".into(),
            },
        ];
        for strategy in cases {
            let options = BuildOptions {
                strategy,
                names: vec!["x".into()],
                shuffle: Some((3, 2)),
                filter: Some("id > 1".into()),
            };
            let back = decode_options(Some(encode_options(&options))).unwrap();
            assert_eq!(back, options);
        }
    }
}
