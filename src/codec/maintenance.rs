//! Encodings of what maintenance statements do (vacuum, optimize, tag,
//! index changes), shared by the logical and physical codecs.

use chrono::TimeDelta;
use datafusion::error::Result as DFResult;

use super::proto;
use super::{malformed, required};
use crate::physical_plan::{
    IndexChange, IndexDefinition, IndexMethod, OptimizeOptions, TagAction, TagChange, VacuumOptions,
};

pub(super) fn encode_vacuum(options: VacuumOptions) -> proto::Vacuum {
    proto::Vacuum {
        older_than_seconds: options.older_than.num_seconds(),
        orphans_older_than_seconds: options.orphans_older_than.num_seconds(),
    }
}

pub(super) fn decode_vacuum(options: Option<proto::Vacuum>) -> DFResult<VacuumOptions> {
    let options = required(options, "vacuum options")?;
    let seconds =
        |s: i64| TimeDelta::try_seconds(s).ok_or_else(|| malformed(format!("duration of {s} s")));
    Ok(VacuumOptions {
        older_than: seconds(options.older_than_seconds)?,
        orphans_older_than: seconds(options.orphans_older_than_seconds)?,
    })
}

pub(super) fn encode_optimize(options: OptimizeOptions) -> proto::Optimize {
    proto::Optimize {
        target_rows_per_fragment: options.target_rows_per_fragment as u64,
        materialize_deletions: options.materialize_deletions,
        materialize_deletions_threshold: options.materialize_deletions_threshold,
        indices: options.indices,
    }
}

pub(super) fn decode_optimize(options: Option<proto::Optimize>) -> DFResult<OptimizeOptions> {
    let options = required(options, "optimize options")?;
    Ok(OptimizeOptions {
        target_rows_per_fragment: usize::try_from(options.target_rows_per_fragment).map_err(
            |_| {
                malformed(format!(
                    "{} rows per fragment",
                    options.target_rows_per_fragment
                ))
            },
        )?,
        materialize_deletions: options.materialize_deletions,
        materialize_deletions_threshold: options.materialize_deletions_threshold,
        indices: options.indices,
    })
}

pub(super) fn encode_tag(change: &TagChange) -> proto::TagChange {
    proto::TagChange {
        action: change.action.name().to_string(),
        tag: change.tag.clone(),
        version: change.version,
    }
}

pub(super) fn decode_tag(change: Option<proto::TagChange>) -> DFResult<TagChange> {
    let change = required(change, "tag change")?;
    Ok(TagChange {
        action: TagAction::parse(&change.action)
            .ok_or_else(|| malformed(format!("tag action '{}'", change.action)))?,
        tag: change.tag,
        version: change.version,
    })
}

pub(super) fn encode_index(change: &IndexChange) -> proto::IndexChange {
    match change {
        IndexChange::Create(d) => proto::IndexChange {
            action: "create".to_string(),
            name: d.name.clone(),
            column: d.column.clone(),
            method: d.method.name().to_string(),
            options: d
                .options
                .iter()
                .map(|(key, value)| proto::KeyValue {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect(),
            replace: d.replace,
            if_not_exists: d.if_not_exists,
            if_exists: false,
        },
        IndexChange::Drop { name, if_exists } => proto::IndexChange {
            action: "drop".to_string(),
            name: name.clone(),
            if_exists: *if_exists,
            ..Default::default()
        },
    }
}

pub(super) fn decode_index(change: Option<proto::IndexChange>) -> DFResult<IndexChange> {
    let change = required(change, "index change")?;
    match change.action.as_str() {
        "create" => Ok(IndexChange::Create(IndexDefinition {
            name: change.name,
            column: change.column,
            method: IndexMethod::parse(&change.method)
                .map_err(|_| malformed(format!("index type '{}'", change.method)))?,
            options: change
                .options
                .into_iter()
                .map(|kv| (kv.key, kv.value))
                .collect(),
            replace: change.replace,
            if_not_exists: change.if_not_exists,
        })),
        "drop" => Ok(IndexChange::Drop {
            name: change.name,
            if_exists: change.if_exists,
        }),
        other => Err(malformed(format!("index action '{other}'"))),
    }
}
