//! Test fixtures, generated at test time (no binary datasets are committed).
//!
//! Every column of the `numbers` family is a pure function of `id`, so a test
//! can check returned rows without the source data.
//!
//! Shared by the integration tests and the sqllogictest runner.

#![allow(dead_code)]

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray,
    FixedSizeListArray, Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array,
    LargeBinaryArray, LargeStringArray, ListArray, RecordBatch, RecordBatchIterator, StringArray,
    StructArray, TimestampMicrosecondArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema, SchemaRef};
use lance::Dataset;
use lance::dataset::{WriteMode, WriteParams};
use lance_file::version::LanceFileVersion;

/// Schema of the `numbers` fixture.
pub(crate) fn numbers_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("d", DataType::Date32, true),
    ]))
}

/// `v` as a function of `id`: NULL, NaN, -0.0, 0.0, ±inf and ordinary values.
pub(crate) fn v_of(id: i64) -> Option<f64> {
    match id.rem_euclid(10) {
        0 => None,
        1 => Some(f64::NAN),
        2 => Some(-0.0),
        3 => Some(0.0),
        4 => Some(f64::INFINITY),
        5 => Some(f64::NEG_INFINITY),
        _ => Some(id as f64 * 1.5 - 100.0),
    }
}

/// `s` as a function of `id`: NULL, empty, quotes, LIKE metacharacters, backslashes.
pub(crate) fn s_of(id: i64) -> Option<String> {
    match id.rem_euclid(7) {
        0 => None,
        1 => Some(String::new()),
        2 => Some(format!("it's {id}")),
        3 => Some(format!("50%_off\\{id}")),
        4 => Some(format!("Ab{id}")),
        _ => Some(format!("row-{id}")),
    }
}

/// `b` as a function of `id`.
pub(crate) fn b_of(id: i64) -> Option<bool> {
    if id.rem_euclid(3) == 0 {
        None
    } else {
        Some(id % 2 == 0)
    }
}

/// `d` (days since epoch) as a function of `id`.
pub(crate) fn d_of(id: i64) -> Option<i32> {
    (id.rem_euclid(11) != 0).then_some(18_000 + id as i32)
}

/// Rows `start..start + n` of the `numbers` fixture.
pub(crate) fn numbers_batch(start: i64, n: usize) -> RecordBatch {
    let ids: Vec<i64> = (start..start + n as i64).collect();
    RecordBatch::try_new(
        numbers_schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Float64Array::from(
                ids.iter().map(|&i| v_of(i)).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                ids.iter().map(|&i| s_of(i)).collect::<Vec<_>>(),
            )),
            Arc::new(BooleanArray::from(
                ids.iter().map(|&i| b_of(i)).collect::<Vec<_>>(),
            )),
            Arc::new(Date32Array::from(
                ids.iter().map(|&i| d_of(i)).collect::<Vec<_>>(),
            )),
        ],
    )
    .expect("valid numbers batch")
}

/// Write parameters for fixtures.
pub(crate) fn params(mode: WriteMode, max_rows_per_file: usize) -> WriteParams {
    WriteParams {
        mode,
        max_rows_per_file,
        max_rows_per_group: max_rows_per_file.min(1024),
        data_storage_version: Some(LanceFileVersion::V2_1),
        ..Default::default()
    }
}

/// Writes `batches` to `uri`.
pub(crate) async fn write(uri: &str, batches: Vec<RecordBatch>, params: WriteParams) -> Dataset {
    let schema = batches[0].schema();
    let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
    Dataset::write(reader, uri, Some(params))
        .await
        .expect("fixture write")
}

/// `numbers`: ids 0..1000 in 10 fragments, then rows with `id % 17 = 5` deleted.
pub(crate) async fn numbers(uri: &str) -> Dataset {
    let mut ds = write(
        uri,
        vec![numbers_batch(0, 1000)],
        params(WriteMode::Create, 100),
    )
    .await;
    ds.delete("id % 17 = 5").await.expect("fixture delete");
    ds
}

/// `indexed`: the `numbers` rows (nothing deleted) in 10 fragments, with
/// scalar indices: BTREE on `s`, BITMAP on `b`, ZONEMAP on `id`, BTREE on
/// `v` (a float column) and an FM index on `s2` (a copy of `s`).
pub(crate) async fn indexed(uri: &str) -> Dataset {
    use lance::index::DatasetIndexExt;
    use lance_index::IndexType;
    use lance_index::scalar::{BuiltinIndexType, ScalarIndexParams};
    let numbers = numbers_batch(0, 1000);
    let mut fields: Vec<Field> = numbers_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("s2", DataType::Utf8, true));
    let mut columns = numbers.columns().to_vec();
    columns.push(Arc::clone(numbers.column(2)));
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("indexed");
    let mut ds = write(uri, vec![batch], params(WriteMode::Create, 100)).await;
    for (column, index, builtin) in [
        ("s", IndexType::BTree, BuiltinIndexType::BTree),
        ("b", IndexType::Bitmap, BuiltinIndexType::Bitmap),
        ("id", IndexType::ZoneMap, BuiltinIndexType::ZoneMap),
        ("v", IndexType::BTree, BuiltinIndexType::BTree),
        ("s2", IndexType::Fm, BuiltinIndexType::Fm),
    ] {
        ds.create_index(
            &[column],
            index,
            None,
            &ScalarIndexParams::for_builtin(builtin),
            true,
        )
        .await
        .unwrap_or_else(|e| panic!("{index} index on {column}: {e}"));
    }
    ds
}

/// `docs`: 60 rows `(id BIGINT NOT NULL, body VARCHAR, emb FLOAT[2])` —
/// three words of six per body, `emb` = (sin id, cos id) — with an
/// INVERTED index on `body` that keeps positions (phrases work).
pub(crate) async fn docs(uri: &str) -> Dataset {
    use lance::index::DatasetIndexExt;
    use lance_index::IndexType;
    use lance_index::scalar::InvertedIndexParams;
    let words = ["red", "fox", "blue", "whale", "green", "tree"];
    let ids: Vec<i64> = (0..60).collect();
    let bodies: Vec<String> = (0..60usize)
        .map(|i| {
            format!(
                "{} {} {}",
                words[i % 6],
                words[(i / 6) % 6],
                words[(i * 7 / 3) % 6]
            )
        })
        .collect();
    let values: Vec<f32> = (0..60)
        .flat_map(|i| [(i as f32).sin(), (i as f32).cos()])
        .collect();
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let emb = FixedSizeListArray::try_new(
        Arc::clone(&item),
        2,
        Arc::new(Float32Array::from(values)),
        None,
    )
    .expect("docs vectors");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("body", DataType::Utf8, true),
        Field::new("emb", DataType::FixedSizeList(item, 2), true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(bodies)),
            Arc::new(emb),
        ],
    )
    .expect("docs batch");
    let mut ds = write(uri, vec![batch], params(WriteMode::Create, 1000)).await;
    ds.create_index(
        &["body"],
        IndexType::Inverted,
        Some("body_fts".to_string()),
        &InvertedIndexParams::default().with_position(true),
        true,
    )
    .await
    .expect("INVERTED index on body");
    ds
}

/// Ids present in the `numbers` fixture.
pub(crate) fn numbers_ids() -> Vec<i64> {
    (0..1000).filter(|i| i % 17 != 5).collect()
}

/// `multi`: 37 fragments of uneven sizes (1 to 300 rows), some with deleted
/// rows, one whose rows are all deleted (Lance drops it), ids unique.
pub(crate) async fn multi(uri: &str) -> Dataset {
    let sizes = [1usize, 300, 20, 7, 150];
    let mut start = 0i64;
    let mut ds: Option<Dataset> = None;
    for i in 0..38 {
        let n = sizes[i % sizes.len()];
        let mode = if i == 0 {
            WriteMode::Create
        } else {
            WriteMode::Append
        };
        ds = Some(write(uri, vec![numbers_batch(start, n)], params(mode, 1000)).await);
        start += n as i64;
    }
    let mut ds = ds.expect("written");
    // Fragment 2 (ids 301..321) disappears; others lose every 13th row.
    ds.delete("(id >= 301 AND id < 321) OR id % 13 = 0")
        .await
        .expect("fixture delete");
    ds
}

/// `versions`: v1 ids 0..10, v2 adds 10..20, v3 adds 20..30, v4 deletes id < 5;
/// tag `second` points at v2.
pub(crate) async fn versions(uri: &str) -> Dataset {
    write(
        uri,
        vec![numbers_batch(0, 10)],
        params(WriteMode::Create, 100),
    )
    .await;
    let ds = write(
        uri,
        vec![numbers_batch(10, 10)],
        params(WriteMode::Append, 100),
    )
    .await;
    ds.tags().create("second", 2u64).await.expect("tag");
    let mut ds = write(
        uri,
        vec![numbers_batch(20, 10)],
        params(WriteMode::Append, 100),
    )
    .await;
    ds.delete("id < 5").await.expect("delete");
    ds
}

/// `empty`: the `numbers` schema and no rows.
pub(crate) async fn empty(uri: &str) -> Dataset {
    let mut ds = write(
        uri,
        vec![numbers_batch(0, 3)],
        params(WriteMode::Create, 100),
    )
    .await;
    ds.delete("true").await.expect("delete all");
    ds
}

/// `types`: one column per Arrow type Lance stores, three rows (the last all NULL
/// where the column is nullable).
pub(crate) async fn types(uri: &str) -> Dataset {
    write(uri, vec![types_batch()], params(WriteMode::Create, 100)).await
}

/// The `types` batch.
pub(crate) fn types_batch() -> RecordBatch {
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
        Some(vec![Some(1), Some(2), None]),
        Some(vec![]),
        None,
    ]);
    let vector = FixedSizeListArray::try_new(
        Arc::new(Field::new("item", DataType::Float32, true)),
        4,
        Arc::new(Float32Array::from(vec![
            0.5, 1.0, -1.5, 2.0, 0.0, -0.0, 3.25, 1e-3, 0.0, 0.0, 0.0, 0.0,
        ])),
        Some(vec![true, true, false].into()),
    )
    .expect("vector");
    let struct_fields = Fields::from(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Utf8, true),
    ]);
    let structs = StructArray::try_new(
        struct_fields,
        vec![
            Arc::new(Int32Array::from(vec![Some(1), None, None])) as ArrayRef,
            Arc::new(StringArray::from(vec![Some("x"), Some("y"), None])),
        ],
        Some(vec![true, true, false].into()),
    )
    .expect("struct");
    let dict: DictionaryArray<Int32Type> =
        vec![Some("red"), Some("blue"), None].into_iter().collect();
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "i8",
            Arc::new(Int8Array::from(vec![Some(i8::MIN), Some(i8::MAX), None])),
        ),
        (
            "i16",
            Arc::new(Int16Array::from(vec![Some(i16::MIN), Some(i16::MAX), None])),
        ),
        (
            "i32",
            Arc::new(Int32Array::from(vec![Some(i32::MIN), Some(i32::MAX), None])),
        ),
        (
            "i64",
            Arc::new(Int64Array::from(vec![Some(i64::MIN), Some(i64::MAX), None])),
        ),
        (
            "u8",
            Arc::new(UInt8Array::from(vec![Some(0), Some(u8::MAX), None])),
        ),
        (
            "u16",
            Arc::new(UInt16Array::from(vec![Some(0), Some(u16::MAX), None])),
        ),
        (
            "u32",
            Arc::new(UInt32Array::from(vec![Some(0), Some(u32::MAX), None])),
        ),
        (
            "u64",
            Arc::new(UInt64Array::from(vec![Some(0), Some(u64::MAX), None])),
        ),
        (
            "f32",
            Arc::new(Float32Array::from(vec![Some(-1.5), Some(f32::NAN), None])),
        ),
        (
            "f64",
            Arc::new(Float64Array::from(vec![
                Some(-0.0),
                Some(f64::INFINITY),
                None,
            ])),
        ),
        (
            "dec",
            Arc::new(
                Decimal128Array::from(vec![
                    Some(12_345_678_901_234_567_890_123_456_789_012_345_678i128),
                    Some(-1),
                    None,
                ])
                .with_precision_and_scale(38, 10)
                .expect("decimal"),
            ),
        ),
        (
            "utf8",
            Arc::new(StringArray::from(vec![Some("héllo"), Some(""), None])),
        ),
        (
            "large_utf8",
            Arc::new(LargeStringArray::from(vec![
                Some("big"),
                Some("it's"),
                None,
            ])),
        ),
        (
            "bin",
            Arc::new(BinaryArray::from(vec![
                Some(&b"\x00\x01"[..]),
                Some(&b""[..]),
                None,
            ])),
        ),
        (
            "large_bin",
            Arc::new(LargeBinaryArray::from(vec![
                Some(&b"\xff"[..]),
                Some(&b"ab"[..]),
                None,
            ])),
        ),
        (
            "bool",
            Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])),
        ),
        (
            "date",
            Arc::new(Date32Array::from(vec![Some(0), Some(19_000), None])),
        ),
        (
            "ts",
            Arc::new(TimestampMicrosecondArray::from(vec![
                Some(0),
                Some(1_700_000_000_123_456),
                None,
            ])),
        ),
        (
            "ts_utc",
            Arc::new(
                TimestampMicrosecondArray::from(vec![
                    Some(-1_000_000),
                    Some(1_700_000_000_000_000),
                    None,
                ])
                .with_timezone("UTC"),
            ),
        ),
        ("list", Arc::new(list)),
        ("vec", Arc::new(vector)),
        ("st", Arc::new(structs)),
        ("dict", Arc::new(dict)),
    ];
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, array)| Field::new(*name, array.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .expect("types batch")
}

/// Creates every fixture under `dir`: `numbers.lance`, `multi.lance`,
/// `versions.lance`, `empty.lance`, `types.lance`, `indexed.lance`.
pub(crate) async fn create_all(dir: &std::path::Path) {
    let path = |name: &str| dir.join(name).to_string_lossy().to_string();
    numbers(&path("numbers.lance")).await;
    multi(&path("multi.lance")).await;
    versions(&path("versions.lance")).await;
    empty(&path("empty.lance")).await;
    types(&path("types.lance")).await;
    indexed(&path("indexed.lance")).await;
}
