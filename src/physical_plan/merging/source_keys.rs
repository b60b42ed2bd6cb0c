//! [`SourceKeys`]: proving that a merge source holds each key once, at
//! 8 bytes a row.
//!
//! Lance's merge-insert rejects two source rows that match the same target
//! row, but inserts both of two source rows with the same new key: the
//! crate checks the whole source itself before anything is written. The
//! check keeps one 64-bit hash of each row's key (not the key: a set of
//! owned keys cost ~70 bytes and one allocation a row), finds the repeated
//! hashes once the source has been read, and only when two hashes are equal
//! reads those rows' keys again to tell a repeated key from a hash
//! collision. Finding them costs one pass that spreads the hashes into
//! buckets by their top bits, then a search of each bucket in a table small
//! enough to stay in the CPU's cache, on every core (the check runs before
//! Lance starts, so its time adds to the statement's).

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::hash_utils::{RandomState, create_hashes};
use datafusion::error::Result as DFResult;

use crate::error::Error;

/// The key hash. Its seed differs from the one DataFusion's hash
/// repartitioning uses, so the keys of one partition (which share their
/// repartitioning hash modulo the partition count) still spread evenly.
const KEY_HASH: RandomState = RandomState::with_seed(0x6c61_6e63_655f_6b65);

/// The keys of one key-partitioned share of a merge source (every value of
/// the key lives in one share, so a per-share check is exact).
#[derive(Debug)]
pub(crate) struct SourceKeys {
    /// The key columns' indices in the source.
    keys: Vec<usize>,
    /// The table merged into, for errors.
    table: String,
    /// Per key column: the table's column is NOT NULL.
    not_null: Vec<bool>,
    /// The source is computed from the table itself.
    reads_target: bool,
    /// One hash per row with no NULL key column, in source order, as
    /// computed per batch (kept as they are: no copy into a growing vector).
    hashes: Vec<Vec<u64>>,
    /// Bytes held by `hashes`.
    bytes: usize,
    /// Applied to every hash; tests narrow it to force collisions.
    mask: u64,
}

impl SourceKeys {
    /// Checks the key columns `keys` of batches of `source` merged into the
    /// table `table` (its name and schema).
    pub(crate) fn new(
        source: &Schema,
        keys: Vec<usize>,
        table: (&str, &Schema),
        reads_target: bool,
    ) -> Self {
        let not_null = keys
            .iter()
            .map(|&k| {
                table
                    .1
                    .field_with_name(source.field(k).name())
                    .is_ok_and(|f| !f.is_nullable())
            })
            .collect();
        Self {
            keys,
            table: table.0.to_string(),
            not_null,
            reads_target,
            hashes: Vec::new(),
            bytes: 0,
            mask: u64::MAX,
        }
    }

    /// Bytes held by the hashes recorded so far.
    pub(crate) fn size(&self) -> usize {
        self.bytes
    }

    /// Records the keys of `batch`, the next batch of the share. Fails on a
    /// NULL in a key column the table declares NOT NULL (NULL keys never
    /// match, so such a row could only be inserted, which the table
    /// refuses); rows with other NULL keys are inserted and not recorded.
    pub(crate) fn add(&mut self, batch: &RecordBatch) -> DFResult<()> {
        let columns = self.columns(batch);
        for ((&k, column), &not_null) in self.keys.iter().zip(&columns).zip(&self.not_null) {
            if not_null && column.null_count() > 0 {
                return Err(Error::invalid_input(format!(
                    "merge into '{}': key column '{}' is NULL in the source; NULL keys never \
                     match and the column is NOT NULL",
                    self.table,
                    batch.schema_ref().field(k).name()
                ))
                .into());
            }
        }
        let mut hashes = vec![0; batch.num_rows()];
        create_hashes(&columns, &KEY_HASH, &mut hashes)?;
        let hashes = if columns.iter().all(|c| c.null_count() == 0) {
            hashes.iter_mut().for_each(|h| *h &= self.mask);
            hashes
        } else {
            let valid = |i: usize| columns.iter().all(|c| c.is_valid(i));
            hashes
                .iter()
                .enumerate()
                .filter(|&(i, _)| valid(i))
                .map(|(_, h)| h & self.mask)
                .collect()
        };
        self.bytes += hashes.capacity() * size_of::<u64>();
        self.hashes.push(hashes);
        Ok(())
    }

    /// After the share's last batch: fails naming the first key (in source
    /// order) that occurs twice. `batches` are the batches given to
    /// [`Self::add`], in the same order.
    pub(crate) fn check(mut self, batches: &[RecordBatch]) -> DFResult<()> {
        let suspects = repeated_hashes(std::mem::take(&mut self.hashes));
        if suspects.is_empty() {
            return Ok(());
        }
        // Equal hashes: read the keys of those rows again, in source order.
        let schema = batches[0].schema();
        let fields = self
            .keys
            .iter()
            .map(|&k| SortField::new(schema.field(k).data_type().clone()))
            .collect();
        let converter = RowConverter::new(fields)?;
        let mut seen = HashSet::new();
        for batch in batches {
            let columns = self.columns(batch);
            let mut hashes = vec![0; batch.num_rows()];
            create_hashes(&columns, &KEY_HASH, &mut hashes)?;
            let rows: Vec<usize> = (0..batch.num_rows())
                .filter(|&i| suspects.contains(&(hashes[i] & self.mask)))
                .filter(|&i| columns.iter().all(|c| c.is_valid(i)))
                .collect();
            if rows.is_empty() {
                continue;
            }
            let converted = converter.convert_columns(&columns)?;
            for i in rows {
                if !seen.insert(converted.row(i).owned()) {
                    return Err(self.repeated(batch, &columns, i));
                }
            }
        }
        Ok(())
    }

    fn columns(&self, batch: &RecordBatch) -> Vec<ArrayRef> {
        self.keys
            .iter()
            .map(|&k| Arc::clone(batch.column(k)))
            .collect()
    }

    /// The error for the key of row `i` of `batch`, seen before.
    fn repeated(
        &self,
        batch: &RecordBatch,
        columns: &[ArrayRef],
        i: usize,
    ) -> datafusion::error::DataFusionError {
        let options = FormatOptions::default().with_null("NULL");
        let key = self
            .keys
            .iter()
            .zip(columns)
            .map(|(&k, c)| {
                let value = ArrayFormatter::try_new(c.as_ref(), &options)
                    .map(|f| f.value(i).to_string())
                    .unwrap_or_default();
                format!("{} = {value}", batch.schema_ref().field(k).name())
            })
            .collect::<Vec<_>>()
            .join(", ");
        // A source that reads the table repeats a key the table holds more
        // than once (`UPDATE SET` of chosen columns with `INSERT *` joins
        // each source row with its target row).
        let why = if self.reads_target {
            "; the source reads the table, so a key the table holds more than once repeats in it \
             too"
        } else {
            ""
        };
        Error::invalid_input(format!(
            "ambiguous merge into '{}': key ({key}) occurs more than once in the source{why}",
            self.table
        ))
        .into()
    }
}

/// From this many hashes on, the buckets are searched on every core (the
/// check runs before Lance starts, so the cores are free).
const PARALLEL_FROM: usize = 1 << 18;

/// The hashes that occur more than once in `chunks`. One pass spreads them
/// into buckets by their top bits (about 2,048 hashes a bucket, at most
/// 1,024 buckets), freeing each chunk once it is spread; then each bucket's
/// repeats are found in a table small enough to stay in the CPU's cache,
/// the buckets shared out between the cores.
fn repeated_hashes(chunks: Vec<Vec<u64>>) -> HashSet<u64> {
    let (spread, starts) = spread_by_top_bits(chunks);
    let n = spread.len();
    let buckets = starts.len() - 1;
    let threads = if n < PARALLEL_FROM {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |t| t.get().min(8))
    };
    if threads == 1 {
        return repeats_in_buckets(&spread, &starts).into_iter().collect();
    }
    // Bucket boundaries splitting the hashes into `threads` near-equal runs.
    let mut cuts: Vec<usize> = (0..threads)
        .map(|t| {
            starts
                .partition_point(|&s| s < n * t / threads)
                .min(buckets)
        })
        .collect();
    cuts.push(buckets);
    std::thread::scope(|scope| {
        let workers: Vec<_> = cuts
            .windows(2)
            .map(|cut| {
                let bounds = &starts[cut[0]..=cut[1]];
                let part = &spread[bounds[0]..bounds[bounds.len() - 1]];
                scope.spawn(move || repeats_in_buckets(part, bounds))
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// The hashes of `chunks` grouped by their top bits, and where each group
/// starts (one more entry than there are groups: the end).
fn spread_by_top_bits(chunks: Vec<Vec<u64>>) -> (Vec<u64>, Vec<usize>) {
    let n: usize = chunks.iter().map(Vec::len).sum();
    let bits = (n / 2048).next_power_of_two().min(1 << 10).trailing_zeros();
    let bucket = |h: u64| h.checked_shr(64 - bits).unwrap_or(0) as usize;
    let mut starts = vec![0usize; (1 << bits) + 1];
    for &h in chunks.iter().flatten() {
        starts[bucket(h) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut next = starts.clone();
    let mut spread = vec![0u64; n];
    for chunk in chunks {
        for h in chunk {
            let b = bucket(h);
            spread[next[b]] = h;
            next[b] += 1;
        }
    }
    (spread, starts)
}

/// The repeats within each bucket of `part` (its buckets start at
/// `bounds`, given as offsets of the whole spread, and end at the last
/// bound): an open-addressing table sized for the largest bucket, reused
/// for every bucket (a slot belongs to the bucket whose stamp it carries).
fn repeats_in_buckets(part: &[u64], bounds: &[usize]) -> Vec<u64> {
    const MIX: u64 = 0x9e37_79b9_7f4a_7c15;
    let base = bounds[0];
    let largest = bounds.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    let slots = (2 * largest).next_power_of_two().max(2);
    let shift = 64 - slots.trailing_zeros();
    let mut values = vec![0u64; slots];
    let mut stamps = vec![0u32; slots];
    let mut repeated = Vec::new();
    for (stamp, bucket) in (1u32..).zip(bounds.windows(2)) {
        for &h in &part[bucket[0] - base..bucket[1] - base] {
            // All of the hash picks the slot: tests narrow hashes to a few bits.
            let mut i = (h.wrapping_mul(MIX) >> shift) as usize;
            loop {
                if stamps[i] != stamp {
                    (stamps[i], values[i]) = (stamp, h);
                    break;
                }
                if values[i] == h {
                    repeated.push(h);
                    break;
                }
                i = (i + 1) & (slots - 1);
            }
        }
    }
    repeated
}

#[cfg(test)]
mod tests {

    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field};

    use super::*;

    fn schema(nullable: bool) -> Arc<Schema> {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, nullable),
            Field::new("name", DataType::Utf8, nullable),
        ]))
    }

    fn batch(ids: &[Option<i64>], names: &[&str]) -> RecordBatch {
        RecordBatch::try_new(
            schema(true),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(names.to_vec())),
            ],
        )
        .unwrap()
    }

    /// Runs the check over `batches` with hashes narrowed by `mask`.
    fn check(batches: &[RecordBatch], keys: Vec<usize>, mask: u64) -> Result<(), String> {
        let mut set = SourceKeys::new(&schema(true), keys, ("t", &schema(true)), false);
        set.mask = mask;
        for b in batches {
            set.add(b).map_err(|e| e.to_string())?;
        }
        set.check(batches).map_err(|e| e.to_string())
    }

    #[test]
    fn distinct_keys_pass_even_when_every_hash_collides() {
        let batches = [
            batch(&[Some(1), Some(2)], &["a", "b"]),
            batch(&[Some(3), None, None], &["c", "d", "d"]),
        ];
        for mask in [u64::MAX, 0b11, 0] {
            check(&batches, vec![0], mask).unwrap();
            check(&batches, vec![0, 1], mask).unwrap();
        }
    }

    #[test]
    fn the_first_repeated_key_in_source_order_is_named() {
        let batches = [
            batch(&[Some(1), Some(2)], &["a", "b"]),
            batch(&[Some(3), Some(2), Some(1)], &["b", "b", "a"]),
        ];
        for mask in [u64::MAX, 0b11, 0] {
            let e = check(&batches, vec![0], mask).unwrap_err();
            assert!(
                e.contains("ambiguous merge into 't': key (id = 2) occurs more than once"),
                "{e}"
            );
            let e = check(&batches, vec![1, 0], mask).unwrap_err();
            assert!(e.contains("key (name = b, id = 2)"), "{e}");
            // Names alone repeat first at row 2 of the second batch ("b").
            let e = check(&batches, vec![1], mask).unwrap_err();
            assert!(e.contains("key (name = b)"), "{e}");
        }
    }

    #[test]
    fn many_keys_spread_over_buckets_find_the_one_repeat() {
        // 300,000 keys in batches of 8,192: 256 buckets, searched on every
        // core; key 123,457 also appears last. Masks keep the top bits only (every hash of a bucket
        // equal: the keys tell), or the low bits only (one bucket).
        let ids: Vec<Option<i64>> = (0..300_000).chain([123_457]).map(Some).collect();
        let batches: Vec<RecordBatch> = ids
            .chunks(8192)
            .map(|c| batch(c, &vec!["x"; c.len()]))
            .collect();
        let distinct = &batches[..batches.len() - 1];
        for mask in [u64::MAX, 0xff00_0000_0000_0000, 0xffff] {
            let e = check(&batches, vec![0], mask).unwrap_err();
            assert!(e.contains("key (id = 123457) occurs more than once"), "{e}");
            // Without the last row (the repeat).
            let mut last = batches[batches.len() - 1].clone();
            last = last.slice(0, last.num_rows() - 1);
            let mut without = distinct.to_vec();
            without.push(last);
            check(&without, vec![0], mask).unwrap();
        }
        assert_eq!(
            repeated_hashes(vec![vec![7, 1 << 63, 3], vec![1 << 63, 7], vec![]]),
            HashSet::from([7, 1 << 63])
        );
        assert!(repeated_hashes(Vec::new()).is_empty());
    }

    #[test]
    fn repeats_are_found_in_every_bucket_and_on_every_core() {
        // 600,000 distinct hashes (an odd multiplier is one-to-one) in chunks
        // of 10,000, then three repeats: the lowest (first bucket), the
        // highest (last bucket) and the lowest with the top bit set (where
        // two cores' shares meet), each in a later chunk.
        let distinct: Vec<u64> = (0..600_000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let lowest = *distinct.iter().min().unwrap();
        let highest = *distinct.iter().max().unwrap();
        let middle = *distinct.iter().filter(|&&h| h >> 63 == 1).min().unwrap();
        let mut chunks: Vec<Vec<u64>> = distinct.chunks(10_000).map(<[u64]>::to_vec).collect();
        assert!(repeated_hashes(chunks.clone()).is_empty());
        chunks.push(vec![highest, middle]);
        chunks.push(vec![lowest]);
        assert_eq!(
            repeated_hashes(chunks),
            HashSet::from([lowest, highest, middle])
        );
    }

    #[test]
    fn a_null_in_a_not_null_key_column_is_named() {
        let table = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
        let mut set = SourceKeys::new(&schema(true), vec![0], ("t", &table), true);
        let e = set.add(&batch(&[Some(1), None], &["a", "b"])).unwrap_err();
        assert!(
            e.to_string()
                .contains("merge into 't': key column 'id' is NULL in the source"),
            "{e}"
        );
    }

    #[test]
    fn a_source_reading_the_table_says_why_a_key_repeats() {
        let batches = [batch(&[Some(4), Some(4)], &["a", "a"])];
        let mut set = SourceKeys::new(&schema(true), vec![0], ("t", &schema(true)), true);
        set.add(&batches[0]).unwrap();
        let e = set.check(&batches).unwrap_err().to_string();
        assert!(
            e.contains("key (id = 4) occurs more than once in the source; the source reads"),
            "{e}"
        );
    }
}
