//! The permutation plan format: a Lance table of `row_id: UInt64` and
//! `split_id: UInt64 NOT NULL`, sorted by split, with LanceDB's schema
//! metadata (`split_names`, `base_version`, `base_branch`) and this crate's
//! own keys (base location, build options, hash) beside them; how a plan is
//! built ([`BuildOptions`]); and the fixed hash and generator it is built
//! with, which do not change between versions of this crate or its
//! dependencies.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The plan's row column: a stable row id of the base, or its row address
/// when the base has no stable row ids.
pub(crate) const ROW_ID_COLUMN: &str = "row_id";
/// The plan's split column: 0..n-1.
pub(crate) const SPLIT_ID_COLUMN: &str = "split_id";
/// LanceDB's key: the splits' names, a JSON array.
pub(crate) const SPLIT_NAMES_KEY: &str = "split_names";
/// LanceDB's key: the base version the plan's row ids belong to.
pub(crate) const BASE_VERSION_KEY: &str = "base_version";
/// LanceDB's key: the base's branch, when not main.
pub(crate) const BASE_BRANCH_KEY: &str = "base_branch";
/// Ours: the base's location (credentials removed).
pub(crate) const BASE_URI_KEY: &str = "datafusion_lance.permutation.base_uri";
/// Ours: the commit time (ns) of the base version — Lance 14 tables carry
/// no uuid, and a table deleted and created again at the same location has
/// the same version numbers but not the same commit times.
pub(crate) const BASE_TIMESTAMP_KEY: &str = "datafusion_lance.permutation.base_timestamp_nanos";
/// Ours: the build options, in their canonical form ([`BuildOptions`]'s
/// `Display`).
pub(crate) const OPTIONS_KEY: &str = "datafusion_lance.permutation.options";
/// Ours: the hash of a hash split ([`HASH_NAME`]).
pub(crate) const HASH_KEY: &str = "datafusion_lance.permutation.hash";
/// The hash split's hash, as recorded: FNV-1a (64 bit) over each row's
/// values in [`hash_rows`]'s byte form, finished with SplitMix64's mixer.
pub(crate) const HASH_NAME: &str = "fnv1a64-splitmix64/1";

/// How rows are assigned to splits.
#[derive(Debug, Clone, PartialEq)]
pub enum SplitStrategy {
    /// One split holding every (filtered) row.
    Single,
    /// Shuffled with `seed` in clumps of `clump` rows, then cut into
    /// `sizes`.
    Random {
        /// How the splits are sized.
        sizes: SplitSizes,
        /// The generator's seed.
        seed: u64,
        /// Rows that move together.
        clump: u64,
    },
    /// By the fixed hash `fnv1a64-splitmix64/1` of `columns`, into buckets
    /// weighed `weights`; `discard` weighs the bucket of rows in no split.
    Hash {
        /// The hashed columns.
        columns: Vec<String>,
        /// One weight per split.
        weights: Vec<u64>,
        /// The weight of rows left out.
        discard: u64,
    },
    /// The first rows (in the base's order) to the first split, and so on.
    Sequential {
        /// How the splits are sized.
        sizes: SplitSizes,
    },
    /// By a Lance SQL expression giving 0..n-1.
    Calculated {
        /// The expression.
        expr: String,
    },
}

/// The sizes of random and sequential splits.
#[derive(Debug, Clone, PartialEq)]
pub enum SplitSizes {
    /// Shares of the rows (summing to at most 1; when they sum to 1 the last
    /// split takes the rows rounding leaves).
    Ratios(Vec<f64>),
    /// Row counts (summing to at most the rows).
    Counts(Vec<u64>),
    /// `n` splits as equal as can be (the first ones one row larger): no
    /// row is left out.
    Fixed(u64),
}

impl SplitSizes {
    /// How many splits.
    pub fn len(&self) -> usize {
        match self {
            Self::Ratios(r) => r.len(),
            Self::Counts(c) => c.len(),
            Self::Fixed(n) => *n as usize,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The row count of each split, out of `rows`.
    pub(crate) fn counts(&self, rows: u64) -> Result<Vec<u64>, String> {
        match self {
            Self::Ratios(ratios) => {
                let sum: f64 = ratios.iter().sum();
                let mut counts: Vec<u64> = ratios
                    .iter()
                    .map(|r| (r * rows as f64).floor() as u64)
                    .collect();
                if (sum - 1.0).abs() < 1e-9
                    && let Some((last, before)) = counts.split_last_mut()
                {
                    let before: u64 = before.iter().sum();
                    *last = rows - before.min(rows);
                }
                Ok(counts)
            }
            Self::Counts(counts) => {
                let sum: u64 = counts.iter().sum();
                if sum > rows {
                    return Err(format!(
                        "the counts ask for {sum} rows, but the base has {rows} (after the \
                         filter)"
                    ));
                }
                Ok(counts.clone())
            }
            Self::Fixed(n) => Ok((0..*n)
                .map(|i| rows / n + u64::from(i < rows % n))
                .collect()),
        }
    }
}

impl fmt::Display for SplitSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ratios(r) => write!(f, "ratios={}", join(r)),
            Self::Counts(c) => write!(f, "counts={}", join(c)),
            Self::Fixed(n) => write!(f, "fixed={n}"),
        }
    }
}

pub(crate) fn join<T: ToString>(values: &[T]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Everything a plan is built from besides its base: plain data, recorded
/// in the plan (`datafusion_lance.permutation.options`) in its `Display` form.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildOptions {
    /// How rows are assigned to splits.
    pub strategy: SplitStrategy,
    /// The splits' names (empty: unnamed).
    pub names: Vec<String>,
    /// Shuffle each split's rows (in clumps of `shuffle_clump`) with
    /// `shuffle_seed`; else a split keeps the base's order.
    pub shuffle: Option<(u64, u64)>,
    /// A Lance SQL filter on the base: rows it rejects are in no split.
    pub filter: Option<String>,
}

impl BuildOptions {
    /// How many splits the plan has, when the options alone say
    /// (calculated splits without names find out from the rows).
    pub fn split_count(&self) -> Option<usize> {
        if !self.names.is_empty() {
            return Some(self.names.len());
        }
        match &self.strategy {
            SplitStrategy::Single => Some(1),
            SplitStrategy::Random { sizes, .. } | SplitStrategy::Sequential { sizes } => {
                Some(sizes.len())
            }
            SplitStrategy::Hash { weights, .. } => Some(weights.len()),
            SplitStrategy::Calculated { .. } => None,
        }
    }
}

impl fmt::Display for BuildOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.strategy {
            SplitStrategy::Single => f.write_str("split=single")?,
            SplitStrategy::Random { sizes, seed, clump } => {
                write!(f, "split=random;{sizes};seed={seed};clump={clump}")?
            }
            SplitStrategy::Hash {
                columns,
                weights,
                discard,
            } => write!(
                f,
                "split=hash;columns={};weights={};discard={discard};hash={HASH_NAME}",
                columns.join(","),
                join(weights)
            )?,
            SplitStrategy::Sequential { sizes } => write!(f, "split=sequential;{sizes}")?,
            SplitStrategy::Calculated { expr } => write!(f, "split=calculated;expr={expr}")?,
        }
        if !self.names.is_empty() {
            write!(f, ";names={}", self.names.join(","))?;
        }
        if let Some((seed, clump)) = self.shuffle {
            write!(f, ";shuffle=true;shuffle_seed={seed};shuffle_clump={clump}")?;
        }
        if let Some(filter) = &self.filter {
            write!(f, ";filter={filter}")?;
        }
        Ok(())
    }
}

/// The schema of a plan this crate writes: its two columns and `metadata`.
pub(crate) fn plan_schema(metadata: HashMap<String, String>) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        vec![
            Field::new(ROW_ID_COLUMN, DataType::UInt64, false),
            Field::new(SPLIT_ID_COLUMN, DataType::UInt64, false),
        ],
        metadata,
    ))
}

/// SplitMix64: the generator of random splits and shuffles (fixed here, so
/// a seed gives the same plan in every version; it is not LanceDB's).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// A number in `0..bound` (`bound > 0`), without modulo bias.
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        let zone = u64::MAX - (u64::MAX % bound);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % bound;
            }
        }
    }

    /// Fisher–Yates over `items`.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// SplitMix64's finaliser.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a, 64 bit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01B3);
        }
    }

    pub(crate) fn finish(self) -> u64 {
        mix(self.0)
    }
}

/// The [`HASH_NAME`] hash of each row of `columns`: per column, a tag byte
/// (0 null, 1 value) then the value — integers as 8 little-endian bytes of
/// their value (signed as i64, unsigned as u64, so widths hash alike),
/// floats as the bits of their f64, booleans as one byte, strings and
/// binaries as their length (8 bytes) and bytes, dates and timestamps as
/// their integer. Other types are refused, naming the column.
pub(crate) fn hash_rows(columns: &[(&str, &ArrayRef)], rows: usize) -> Result<Vec<u64>, String> {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::{Float64Type, Int64Type, UInt64Type};

    let mut hashers = vec![Fnv::default(); rows];
    for (name, array) in columns {
        let t = array.data_type();
        let mut put = |i: usize, bytes: &[u8]| hashers[i].write(bytes);
        let cast_to =
            |to: &DataType| cast(array, to).map_err(|e| format!("column '{name}' ({t}): {e}"));
        if t.is_signed_integer()
            || matches!(
                t,
                DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)
            )
        {
            let values = if matches!(t, DataType::Date32) {
                cast(&cast_to(&DataType::Int32)?, &DataType::Int64)
                    .map_err(|e| format!("column '{name}' ({t}): {e}"))?
            } else {
                cast_to(&DataType::Int64)?
            };
            let values = values.as_primitive::<Int64Type>();
            for i in 0..rows {
                if values.is_null(i) {
                    put(i, &[0]);
                } else {
                    put(i, &[1]);
                    put(i, &values.value(i).to_le_bytes());
                }
            }
        } else if t.is_unsigned_integer() {
            let values = cast_to(&DataType::UInt64)?;
            let values = values.as_primitive::<UInt64Type>();
            for i in 0..rows {
                if values.is_null(i) {
                    put(i, &[0]);
                } else {
                    put(i, &[1]);
                    put(i, &values.value(i).to_le_bytes());
                }
            }
        } else if t.is_floating() {
            let values = cast_to(&DataType::Float64)?;
            let values = values.as_primitive::<Float64Type>();
            for i in 0..rows {
                if values.is_null(i) {
                    put(i, &[0]);
                } else {
                    put(i, &[1]);
                    put(i, &values.value(i).to_bits().to_le_bytes());
                }
            }
        } else if matches!(t, DataType::Boolean) {
            let values = array.as_boolean();
            for i in 0..rows {
                if values.is_null(i) {
                    put(i, &[0]);
                } else {
                    put(i, &[1, u8::from(values.value(i))]);
                }
            }
        } else if matches!(
            t,
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
        ) {
            let values = cast_to(&DataType::LargeBinary)?;
            let values = values.as_binary::<i64>();
            for i in 0..rows {
                if values.is_null(i) {
                    put(i, &[0]);
                } else {
                    let v = values.value(i);
                    put(i, &[1]);
                    put(i, &(v.len() as u64).to_le_bytes());
                    put(i, v);
                }
            }
        } else {
            return Err(format!(
                "column '{name}' has type {t}, which a hash split cannot hash (integers, \
                 floats, booleans, strings, binaries, dates and timestamps can be)"
            ));
        }
    }
    Ok(hashers.into_iter().map(Fnv::finish).collect())
}
