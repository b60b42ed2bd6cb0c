//! What `CREATE INDEX` holds in memory, estimated before Lance starts, so a
//! memory limit (`--memory-limit`, `SET datafusion.runtime.memory_limit`)
//! counts it: Lance builds an index outside DataFusion's memory pool, so
//! [`LanceIndexExec`](super::index::LanceIndexExec) reserves this estimate
//! from the statement's pool and holds it until the build ends. Over the
//! limit, the statement fails with "Resources exhausted" naming the index,
//! and the table is unchanged.
//!
//! The estimates are calibrated on the peaks of Lance 14.0.2's builders
//! (anonymous memory, measured over `lance-sql`; README "Guarantees"), with
//! `D` the indexed column's size in memory:
//!
//! - **vector indexes** (`IVF_*`): Lance's scan reads the column ahead of
//!   its shuffle (up to `LANCE_DEFAULT_IO_BUFFER_SIZE`, 2 GiB) and the
//!   shuffle holds up to about three buffers of `LANCE_SHUFFLE_BATCH_BYTES`
//!   (128 MiB): `64 MiB + D + 3 × min(D, shuffle buffer)`;
//! - **other indexes**: Lance sorts or groups (value, row id) pairs in its
//!   own spilling pool of `LANCE_MEM_POOL_SIZE` (150 MiB):
//!   `32 MiB + 2 × min(D + 8 × rows, that pool)`.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use lance::Dataset;

use crate::error::plain;
use crate::physical_plan::index_options::IndexMethod;

const MIB: u64 = 1024 * 1024;

/// Reserves from `memory` what building a `method` index of `column` of
/// `dataset` (`rows` rows) is estimated to hold; `what` names the build in
/// the consumer (and so in a "Resources exhausted" error). `None` when the
/// column is not one Lance can index (Lance's own error then follows).
pub(crate) async fn reserve_index_build(
    memory: &Arc<dyn MemoryPool>,
    dataset: &Dataset,
    column: &str,
    method: IndexMethod,
    rows: u64,
    what: &str,
) -> DFResult<Option<MemoryReservation>> {
    let Some(bytes) = column_bytes(dataset, column, rows).await? else {
        return Ok(None);
    };
    let estimate = build_estimate(method, bytes, rows);
    let reservation = MemoryConsumer::new(format!(
        "LanceIndexExec {what} (estimated at {} MiB for {} MiB of column data)",
        estimate.div_ceil(MIB),
        bytes.div_ceil(MIB)
    ))
    .register(memory);
    reservation.try_grow(usize::try_from(estimate).unwrap_or(usize::MAX))?;
    Ok(Some(reservation))
}

/// The estimate for a `method` build over `bytes` of column data in `rows`.
pub(crate) fn build_estimate(method: IndexMethod, bytes: u64, rows: u64) -> u64 {
    if method.is_vector() {
        let shuffle = lance_setting("LANCE_SHUFFLE_BATCH_BYTES", 128 * MIB);
        64 * MIB + bytes + 3 * bytes.min(shuffle)
    } else {
        let pool = lance_setting("LANCE_MEM_POOL_SIZE", 150 * MIB);
        32 * MIB + 2 * bytes.saturating_add(8 * rows).min(pool)
    }
}

/// A byte count Lance reads from the environment, or its default.
fn lance_setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// The size of `column` in memory: exact for fixed-width types (values,
/// vectors); otherwise its first rows' size in memory scaled to `rows` (on
/// disk, Lance compresses strings several times over). `None` when the
/// table has no such column.
async fn column_bytes(dataset: &Dataset, column: &str, rows: u64) -> DFResult<Option<u64>> {
    let Some(field) = dataset.schema().field(column) else {
        return Ok(None);
    };
    if let Some(width) = fixed_width(&field.data_type()) {
        return Ok(Some(rows.saturating_mul(width)));
    }
    let err = |e: lance::Error| {
        DataFusionError::Execution(format!(
            "sizing column '{column}' for its index: {}",
            plain(&e)
        ))
    };
    let mut scan = dataset.scan();
    scan.project(&[column]).map_err(err)?;
    scan.limit(Some(SAMPLE_ROWS), None).map_err(err)?;
    let sample = scan.try_into_batch().await.map_err(err)?;
    if sample.num_rows() == 0 {
        return Ok(Some(0));
    }
    let bytes = sample.column(0).to_data().get_slice_memory_size()? as u64;
    Ok(Some(bytes.saturating_mul(rows) / sample.num_rows() as u64))
}

/// Rows read to size a variable-width column.
const SAMPLE_ROWS: i64 = 4096;

/// Bytes per row of a fixed-width type (a vector's dimension × its
/// element's width), or `None`.
fn fixed_width(data_type: &DataType) -> Option<u64> {
    match data_type {
        DataType::FixedSizeList(item, n) => Some(fixed_width(item.data_type())? * (*n as u64)),
        DataType::Boolean => Some(1),
        t => t.primitive_width().map(|w| w as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_cover_the_measured_peaks() {
        // (method, column MiB, rows, peak anonymous MiB measured with Lance
        // 14.0.2 over lance-sql, README "Guarantees").
        let measured = [
            (IndexMethod::IvfFlat, 12.8, 50_000, 106.0),
            (IndexMethod::IvfFlat, 51.2, 200_000, 227.0),
            (IndexMethod::IvfFlat, 102.4, 400_000, 386.0),
            (IndexMethod::IvfFlat, 307.2, 1_200_000, 563.0),
            (IndexMethod::IvfPq, 307.2, 1_200_000, 441.0),
            (IndexMethod::IvfSq, 307.2, 1_200_000, 583.0),
            (IndexMethod::IvfHnswSq, 307.2, 1_200_000, 651.0),
            (IndexMethod::BTree, 80.0, 10_000_000, 229.0),
            (IndexMethod::BTree, 40.0, 10_000_000, 216.0),
            (IndexMethod::Bitmap, 50.0, 10_000_000, 214.0),
            (IndexMethod::BTree, 9.2, 1_200_000, 47.0),
            (IndexMethod::BTree, 141.0, 2_000_000, 201.0),
            (IndexMethod::Inverted, 141.0, 2_000_000, 132.0),
        ];
        for (method, mib, rows, peak) in measured {
            let estimate = build_estimate(method, (mib * MIB as f64) as u64, rows) / MIB;
            assert!(
                estimate as f64 >= peak,
                "{method:?} over {mib} MiB: estimate {estimate} MiB < measured {peak} MiB"
            );
            assert!(
                (estimate as f64) < 2.6 * peak,
                "{method:?} over {mib} MiB: estimate {estimate} MiB > 2.6 × the measured {peak} MiB"
            );
        }
    }

    #[test]
    fn vector_widths() {
        let f32x64 = DataType::new_fixed_size_list(DataType::Float32, 64, true);
        assert_eq!(fixed_width(&f32x64), Some(256));
        let u8x16 = DataType::new_fixed_size_list(DataType::UInt8, 16, true);
        assert_eq!(fixed_width(&u8x16), Some(16));
        assert_eq!(fixed_width(&DataType::Utf8), None);
    }
}
