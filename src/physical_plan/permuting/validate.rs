//! Opening a permutation plan as the artifact it is: at one pinned version,
//! checked whole before any base row is read ([`PlanSummary::load`]), and
//! named by an identity that covers what it reads.
//!
//! What is checked, and what it costs (one read of the plan's two columns,
//! 16 bytes a row, and nothing of the base but its manifest):
//! * `row_id` is UInt64 and `split_id` UInt64 (or Int64, as LanceDB writes
//!   calculated splits) with no nulls;
//! * `base_version` is present and a number; `base_branch`, when present,
//!   is `main`; `split_names`, when present, is a JSON array of distinct
//!   strings, and names every split;
//! * split ids are exactly 0..n-1, each holding a row;
//! * the base version still exists (and, for plans this crate built, is
//!   the table the plan was built from: its commit time is recorded);
//! * every row id can be in the base at that version: a row address names
//!   a fragment of that version and an offset below its physical rows; a
//!   stable row id is below the next id the version would allocate. (A row
//!   deleted at that version passes; reading it fails, naming the row id.)
//!
//! A validated plan is kept per process by its location, version and
//! manifest e_tag: a version of a plan never changes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Int64Type, Schema, SchemaRef, UInt64Type};
use futures::TryStreamExt;
use lance::Dataset;

use super::format::{
    BASE_BRANCH_KEY, BASE_TIMESTAMP_KEY, BASE_URI_KEY, BASE_VERSION_KEY, Fnv, OPTIONS_KEY,
    ROW_ID_COLUMN, SPLIT_ID_COLUMN, SPLIT_NAMES_KEY, mix,
};
use crate::config::VersionSpec;
use crate::error::{Error, Result};
use crate::location::{Snapshot, TableLocation, normalize_uri};
use crate::session::LanceSessionCache;

/// A plan, validated: where it and its base live, at which versions, its
/// splits and its identity. Plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSummary {
    /// The plan table.
    pub plan: TableLocation,
    /// The plan's version read.
    pub plan_snapshot: Snapshot,
    /// The base table.
    pub base: TableLocation,
    /// The base version the plan's row ids belong to.
    pub base_snapshot: Snapshot,
    /// The splits' names (empty: unnamed).
    pub split_names: Vec<String>,
    /// The rows of each split.
    pub split_rows: Vec<u64>,
    /// Where each split starts in the plan, when the plan is sorted by
    /// split (plans LanceDB writes for unshuffled hash splits are not).
    pub split_starts: Option<Vec<u64>>,
    /// The build options recorded by this crate (`None`: another builder).
    pub options: Option<String>,
    /// The hash of the plan's rows, in order.
    pub content_hash: u64,
    /// The base's columns at its version.
    pub base_schema: SchemaRef,
}

impl PlanSummary {
    /// How many splits.
    pub fn split_count(&self) -> usize {
        self.split_rows.len()
    }

    /// One string naming this plan's content: plan location and version,
    /// base location, version and commit time, split count, build options
    /// and a hash of the rows. Two reads with the same identity read the
    /// same rows in the same order.
    pub fn identity(&self) -> String {
        let mut digest = Fnv::default();
        for part in [
            self.plan.uri.as_str(),
            &self.plan_snapshot.version.to_string(),
            &self.base.uri,
            &self.base_snapshot.version.to_string(),
            &self.split_count().to_string(),
            self.options.as_deref().unwrap_or(""),
            &format!("{:016x}", self.content_hash),
        ] {
            digest.write(part.as_bytes());
            digest.write(&[0]);
        }
        format!(
            "permutation:v1:{}@{}:{}@{}:{}:{:016x}",
            self.plan.display_uri,
            self.plan_snapshot.version,
            self.base.display_uri,
            self.base_snapshot.version,
            self.split_count(),
            digest.finish()
        )
    }

    /// The number of the split `selector` names (a name, or a number).
    pub fn split(&self, selector: &SplitSelector) -> Result<usize> {
        let found = match selector {
            SplitSelector::Number(n) => {
                usize::try_from(*n).ok().filter(|n| *n < self.split_count())
            }
            SplitSelector::Name(name) => self.split_names.iter().position(|n| n == name),
        };
        found.ok_or_else(|| {
            let names = if self.split_names.is_empty() {
                "its splits have no names".to_string()
            } else {
                format!("its splits are {}", self.split_names.join(", "))
            };
            Error::not_found(format!(
                "permutation plan '{}' has no split {selector}: it has {} splits (0..{}), {names}",
                self.plan.display_uri,
                self.split_count(),
                self.split_count() - 1
            ))
        })
    }

    /// Opens and checks the plan at `plan` (its latest version, or
    /// `version`), its base at `base` when given (required when the plan
    /// records none, and it must agree when it does).
    pub(crate) async fn load(
        cache: &LanceSessionCache,
        plan: &TableLocation,
        version: Option<u64>,
        base: Option<&TableLocation>,
    ) -> Result<Arc<Self>> {
        let shown = plan.display_uri.clone();
        let fail = |problem: String| {
            Error::invalid_input(format!("permutation plan '{shown}': {problem}"))
        };
        let params = cache.params_for(plan);
        let spec = version.map_or(VersionSpec::Latest, VersionSpec::Version);
        let dataset = cache
            .open(&plan.uri, &params, &spec)
            .await
            .map_err(|e| match e {
                Error::DatasetNotFound { .. } => {
                    Error::not_found(format!("permutation plan '{shown}': no Lance table there"))
                }
                other => other.prefixed(&format!("permutation plan '{shown}'")),
            })?;
        let snapshot = Snapshot::of(&dataset);
        let key = (
            plan.uri.clone(),
            snapshot.clone(),
            base.map(|b| b.uri.clone()),
        );
        if snapshot.e_tag.is_some()
            && let Some(held) = held().lock().unwrap_or_else(|e| e.into_inner()).get(&key)
        {
            return Ok(Arc::clone(held));
        }
        let metadata = &dataset.schema().metadata;
        let base = base_location(metadata, base).map_err(fail)?;
        let base_version: u64 = match metadata.get(BASE_VERSION_KEY) {
            None => {
                return Err(fail(format!(
                    "its schema metadata has no '{BASE_VERSION_KEY}'; a plan records the base version its row ids belong to"
                )));
            }
            Some(v) => v.trim().parse().map_err(|_| {
                fail(format!(
                    "'{BASE_VERSION_KEY}' is '{v}', not a version number"
                ))
            })?,
        };
        if let Some(branch) = metadata.get(BASE_BRANCH_KEY)
            && branch != "main"
        {
            return Err(Error::not_supported(format!(
                "permutation plan '{shown}': its base is on branch '{branch}', and this crate \
                 reads the main branch only"
            )));
        }
        let split_names = split_names(metadata).map_err(fail)?;
        let base_dataset = cache
            .open(
                &base.uri,
                &cache.params_for(&base),
                &VersionSpec::Version(base_version),
            )
            .await
            .map_err(|e| match e {
                Error::VersionNotFound { .. } => Error::not_found(format!(
                    "permutation plan '{shown}': version {base_version} of its base '{}' no \
                     longer exists (removed by a cleanup, or the base was replaced); the plan \
                     cannot be read",
                    base.display_uri
                )),
                other => other.prefixed(&format!("permutation plan '{shown}': its base")),
            })?;
        if let Some(recorded) = metadata.get(BASE_TIMESTAMP_KEY)
            && *recorded != base_dataset.manifest().timestamp_nanos.to_string()
        {
            return Err(fail(format!(
                "version {base_version} of its base '{}' is not the one it was built from \
                 (committed at {} ns, the plan recorded {recorded}): the base was replaced",
                base.display_uri,
                base_dataset.manifest().timestamp_nanos
            )));
        }
        let rows = read_rows(&dataset, &base_dataset)
            .await
            .map_err(|e| match e {
                Problem::Plan(problem) => fail(problem),
                Problem::Error(e) => (*e).prefixed(&format!("permutation plan '{shown}'")),
            })?;
        let n = if split_names.is_empty() {
            rows.split_rows.len()
        } else {
            split_names.len()
        };
        if let Some(extra) = rows.split_rows.len().checked_sub(n).filter(|e| *e > 0) {
            return Err(fail(format!(
                "it has split ids up to {}, but '{SPLIT_NAMES_KEY}' names {n} splits ({extra} \
                 more ids than names)",
                rows.split_rows.len() - 1
            )));
        }
        let mut split_rows = rows.split_rows;
        split_rows.resize(n, 0);
        if let Some(empty) = split_rows.iter().position(|r| *r == 0) {
            return Err(fail(format!(
                "split ids are not exactly 0..{}: split {empty} has no rows",
                n.max(1) - 1
            )));
        }
        let split_starts = rows.sorted.then(|| {
            split_rows
                .iter()
                .scan(0u64, |start, rows| {
                    let this = *start;
                    *start += rows;
                    Some(this)
                })
                .collect()
        });
        let summary = Arc::new(Self {
            plan: plan.clone(),
            plan_snapshot: snapshot,
            base,
            base_snapshot: Snapshot::of(&base_dataset),
            split_names,
            split_rows,
            split_starts,
            options: metadata.get(OPTIONS_KEY).cloned(),
            content_hash: rows.content_hash,
            base_schema: Arc::new(Schema::from(base_dataset.schema())),
        });
        if summary.plan_snapshot.e_tag.is_some() {
            let mut held = held().lock().unwrap_or_else(|e| e.into_inner());
            if held.len() >= 64 {
                held.clear();
            }
            held.insert(key, Arc::clone(&summary));
        }
        Ok(summary)
    }
}

type Key = (String, Snapshot, Option<String>);

/// Plans validated in this process.
fn held() -> &'static Mutex<HashMap<Key, Arc<PlanSummary>>> {
    static HELD: OnceLock<Mutex<HashMap<Key, Arc<PlanSummary>>>> = OnceLock::new();
    HELD.get_or_init(Default::default)
}

/// Which split a read asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitSelector {
    /// By name (`split_names`).
    Name(String),
    /// By number.
    Number(u64),
}

impl std::fmt::Display for SplitSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Name(name) => write!(f, "'{name}'"),
            Self::Number(n) => write!(f, "{n}"),
        }
    }
}

fn base_location(
    metadata: &HashMap<String, String>,
    given: Option<&TableLocation>,
) -> std::result::Result<TableLocation, String> {
    let recorded = metadata.get(BASE_URI_KEY);
    match (recorded, given) {
        (None, None) => Err(
            "it records no base location (plans LanceDB builds do not); name \
                             the base with 'base=<table or location>'"
                .to_string(),
        ),
        (Some(recorded), None) => {
            let uri = normalize_uri(recorded).map_err(|e| e.to_string())?;
            Ok(TableLocation::new(uri, BTreeMap::new()))
        }
        (Some(recorded), Some(given)) => {
            let uri = normalize_uri(recorded).map_err(|e| e.to_string())?;
            if uri != given.uri {
                return Err(format!(
                    "it was built over '{recorded}', not over the base given, '{}'",
                    given.display_uri
                ));
            }
            Ok(given.clone())
        }
        (None, Some(given)) => Ok(given.clone()),
    }
}

fn split_names(metadata: &HashMap<String, String>) -> std::result::Result<Vec<String>, String> {
    let Some(raw) = metadata.get(SPLIT_NAMES_KEY) else {
        return Ok(vec![]);
    };
    let names: Vec<String> = serde_json::from_str(raw)
        .map_err(|e| format!("'{SPLIT_NAMES_KEY}' is not a JSON array of strings ({e}): {raw}"))?;
    let mut seen = HashSet::new();
    if let Some(twice) = names.iter().find(|n| !seen.insert(n.as_str())) {
        return Err(format!("'{SPLIT_NAMES_KEY}' names split '{twice}' twice"));
    }
    Ok(names)
}

/// What the plan's rows say.
struct Rows {
    split_rows: Vec<u64>,
    sorted: bool,
    content_hash: u64,
}

enum Problem {
    Plan(String),
    Error(Box<Error>),
}

impl From<Error> for Problem {
    fn from(e: Error) -> Self {
        Self::Error(Box::new(e))
    }
}

/// Splits ids above this are not a plan's (they would make the counts
/// huge): a plan has at most this many splits.
pub(crate) const MAX_SPLITS: u64 = 1 << 16;

async fn read_rows(plan: &Dataset, base: &Dataset) -> std::result::Result<Rows, Problem> {
    let schema = plan.schema();
    let column = |name: &str| {
        schema
            .field(name)
            .map(|f| (f.data_type(), f.nullable))
            .ok_or_else(|| Problem::Plan(format!("it has no '{name}' column")))
    };
    let (row_type, _) = column(ROW_ID_COLUMN)?;
    if row_type != DataType::UInt64 {
        return Err(Problem::Plan(format!(
            "'{ROW_ID_COLUMN}' is {row_type}, not UInt64"
        )));
    }
    let (split_type, _) = column(SPLIT_ID_COLUMN)?;
    if !matches!(split_type, DataType::UInt64 | DataType::Int64) {
        return Err(Problem::Plan(format!(
            "'{SPLIT_ID_COLUMN}' is {split_type}, not UInt64"
        )));
    }
    let stable = base.manifest().uses_stable_row_ids();
    let next_row_id = base.manifest().next_row_id;
    let fragments: HashMap<u64, u64> = base
        .manifest()
        .fragments
        .iter()
        .map(|f| (f.id, f.physical_rows.unwrap_or(0) as u64))
        .collect();
    let lance_err = |e| Error::lance("reading", plan.uri(), e);
    let mut scanner = plan.scan();
    scanner
        .project(&[ROW_ID_COLUMN, SPLIT_ID_COLUMN])
        .map_err(lance_err)?
        .scan_in_order(true);
    let mut stream = scanner.try_into_stream().await.map_err(lance_err)?;
    let mut split_rows: Vec<u64> = Vec::new();
    let mut sorted = true;
    let mut last = 0u64;
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut position = 0u64;
    while let Some(batch) = stream.try_next().await.map_err(lance_err)? {
        let ids = batch.column(0).as_primitive::<UInt64Type>();
        let splits = batch.column(1);
        if ids.null_count() > 0 {
            return Err(Problem::Plan(format!("'{ROW_ID_COLUMN}' has nulls")));
        }
        if splits.null_count() > 0 {
            return Err(Problem::Plan(format!("'{SPLIT_ID_COLUMN}' has nulls")));
        }
        for i in 0..batch.num_rows() {
            let row = ids.value(i);
            let split = match splits.data_type() {
                DataType::Int64 => {
                    let s = splits.as_primitive::<Int64Type>().value(i);
                    u64::try_from(s)
                        .map_err(|_| Problem::Plan(format!("row {position} has split id {s}")))?
                }
                _ => splits.as_primitive::<UInt64Type>().value(i),
            };
            if split >= MAX_SPLITS {
                return Err(Problem::Plan(format!(
                    "row {position} has split id {split}; split ids are 0..n-1 (at most \
                     {MAX_SPLITS} splits)"
                )));
            }
            let ok = if stable {
                row < next_row_id
            } else {
                fragments
                    .get(&(row >> 32))
                    .is_some_and(|rows| (row & 0xFFFF_FFFF) < *rows)
            };
            if !ok {
                let kind = if stable {
                    "stable row id"
                } else {
                    "row address"
                };
                return Err(Problem::Plan(format!(
                    "row {position} names {kind} {row}, which is not in version {} of its base",
                    base.version_id()
                )));
            }
            sorted &= split >= last;
            last = split;
            if split as usize >= split_rows.len() {
                split_rows.resize(split as usize + 1, 0);
            }
            split_rows[split as usize] += 1;
            hash = (hash ^ row).wrapping_mul(0x0000_0100_0000_01B3);
            hash = (hash ^ split).wrapping_mul(0x0000_0100_0000_01B3);
            position += 1;
        }
    }
    Ok(Rows {
        split_rows,
        sorted,
        content_hash: mix(hash),
    })
}
