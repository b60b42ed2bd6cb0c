//! `CREATE INDEX` / `DROP INDEX` through SQL build and drop the indices Lance
//! builds with its own API: every type, on the column named, one version each,
//! and `lance_indices` lists what Lance lists.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    FixedSizeListArray, Float32Array, Int64Array, ListArray, RecordBatch, RecordBatchIterator,
    StringArray,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use lance::dataset::{WriteMode, WriteParams};
use lance::index::DatasetIndexExt;

use crate::support::{context, dataset_path, ok, private_cache, sorted_rows, sql};

/// 1,000 rows: `id`, `cat` (3 values), `s` (words), `tags` (lists) and `emb`
/// (8-dim vectors), in 2 fragments.
async fn table(uri: &str) {
    let n = 1000usize;
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let tag = Arc::new(Field::new("item", DataType::Utf8, true));
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("cat", DataType::Utf8, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("tags", DataType::List(Arc::clone(&tag)), true),
        Field::new("emb", DataType::FixedSizeList(Arc::clone(&item), 8), true),
    ]));
    let values: Vec<f32> = (0..n * 8)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| ["red", "green", "blue"][i % 3]),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("word{} other{}", i % 17, i % 5)),
            )),
            Arc::new(ListArray::new(
                tag,
                OffsetBuffer::from_lengths((0..n).map(|i| i % 3)),
                Arc::new(StringArray::from_iter_values(
                    (0..n)
                        .flat_map(|i| (0..i % 3).map(move |j| format!("t{}", (i + j) % 4)))
                        .collect::<Vec<_>>(),
                )),
                None,
            )),
            Arc::new(
                FixedSizeListArray::try_new(item, 8, Arc::new(Float32Array::from(values)), None)
                    .unwrap(),
            ),
        ],
    )
    .unwrap();
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: 500,
        ..Default::default()
    };
    lance::Dataset::write(
        RecordBatchIterator::new(vec![Ok(batch)], schema),
        uri,
        Some(params),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_index_type_is_the_index_lance_builds() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    table(&uri).await;
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    // (statement, name, column, type as Lance describes it)
    let vector = "WITH (num_partitions = 2, metric = 'cosine')";
    let pq = "WITH (num_partitions = 2, num_sub_vectors = 2, metric = 'l2')";
    let cases = [
        (
            "CREATE INDEX i_btree ON t USING BTREE (id)".to_string(),
            "i_btree",
            "id",
            "BTree",
        ),
        (
            "CREATE INDEX i_bitmap ON t (cat) USING BITMAP".into(),
            "i_bitmap",
            "cat",
            "Bitmap",
        ),
        (
            "CREATE INDEX i_labels ON t USING LABEL_LIST (tags)".into(),
            "i_labels",
            "tags",
            "LabelList",
        ),
        (
            "CREATE INDEX i_zone ON t USING ZONEMAP (id)".into(),
            "i_zone",
            "id",
            "ZoneMap",
        ),
        (
            "CREATE INDEX i_bloom ON t USING BLOOM (cat)".into(),
            "i_bloom",
            "cat",
            "BloomFilter",
        ),
        (
            "CREATE INDEX i_ngram ON t USING NGRAM (s)".into(),
            "i_ngram",
            "s",
            "NGram",
        ),
        (
            "CREATE INDEX i_fts ON t USING INVERTED (s) WITH (with_position = true)".into(),
            "i_fts",
            "s",
            "Inverted",
        ),
        (
            format!("CREATE INDEX i_flat ON t USING IVF_FLAT (emb) {vector}"),
            "i_flat",
            "emb",
            "IVF_FLAT",
        ),
    ];
    let mut version = 1;
    for (statement, name, _, _) in &cases {
        let batches = sql(&ctx, statement)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
        version += 1;
        assert_eq!(
            sorted_rows(&batches),
            [format!("{name}|created|{version}")],
            "{statement}"
        );
    }
    // The other vector types, each built beside IVF_FLAT on the same column
    // and dropped again: Lance must describe the type SQL asked for.
    let sq = "WITH (num_partitions = 2, metric = 'dot')";
    let hnsw = "WITH (num_partitions = 2, num_sub_vectors = 2, m = 8, ef_construction = 50)";
    for (method, name, with) in [
        ("IVF_PQ", "i_pq", pq),
        ("IVF_SQ", "i_sq", sq),
        ("IVF_HNSW_SQ", "i_hsq", sq),
        ("IVF_HNSW_PQ", "i_hpq", hnsw),
    ] {
        let statement = format!("CREATE INDEX {name} ON t USING {method} (emb) {with}");
        ok(&ctx, &statement).await;
        version += 1;
        let ds = lance::Dataset::open(&uri).await.unwrap();
        assert_eq!(ds.version().version, version, "{statement}");
        let described = ds.describe_indices(None).await.unwrap();
        let built = described.iter().find(|d| d.name() == name).unwrap();
        assert_eq!(built.index_type(), method, "{statement}");
        ok(&ctx, &format!("DROP INDEX {name} ON t")).await;
        version += 1;
    }

    // What Lance lists, lance_indices lists: name, column, type.
    let ds = lance::Dataset::open(&uri).await.unwrap();
    assert_eq!(ds.version().version, version);
    let mut lance = BTreeMap::new();
    for d in ds.describe_indices(None).await.unwrap() {
        let column = ds
            .schema()
            .field_by_id(d.field_ids()[0] as i32)
            .unwrap()
            .name
            .clone();
        lance.insert(d.name().to_string(), (column, d.index_type().to_string()));
    }
    let want: BTreeMap<_, _> = cases
        .iter()
        .map(|(_, name, column, kind)| (name.to_string(), (column.to_string(), kind.to_string())))
        .collect();
    assert_eq!(lance, want);
    let listed = sorted_rows(
        &sql(
            &ctx,
            "SELECT name, columns, type, indexed_fragments, unindexed_rows FROM lance_indices('t')",
        )
        .await
        .unwrap(),
    );
    let sql_type = |kind: &str| match kind {
        "LabelList" => "LABEL_LIST".to_string(),
        "BloomFilter" => "BLOOMFILTER".to_string(),
        other => other.to_ascii_uppercase(),
    };
    let expected: Vec<String> = want
        .iter()
        .map(|(name, (column, kind))| format!("{name}|{column}|{}|2|0", sql_type(kind)))
        .collect();
    assert_eq!(listed, expected);

    // DROP INDEX drops exactly that one.
    ok(&ctx, "DROP INDEX i_ngram ON t").await;
    let ds = lance::Dataset::open(&uri).await.unwrap();
    assert_eq!(ds.version().version, version + 1);
    let names: Vec<String> = ds
        .load_indices()
        .await
        .unwrap()
        .iter()
        .map(|i| i.name.clone())
        .collect();
    assert!(!names.contains(&"i_ngram".to_string()), "{names:?}");
    assert_eq!(
        names
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        cases.len() - 1
    );
}

/// `lance_fts` returns the rows and scores of Lance's own
/// `Scanner::full_text_search`, and its plan round-trips through the codec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_text_search_answers_like_lance() {
    use datafusion::physical_plan::collect;
    use datafusion_lance::LancePhysicalCodec;
    use datafusion_lance::LanceSessionContextExt;
    use datafusion_proto::bytes::{
        physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
    };
    use lance_index::scalar::FullTextSearchQuery;

    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    table(&uri).await;
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    ok(&ctx, "CREATE INDEX s_fts ON t USING INVERTED (s)").await;
    let ds = lance::Dataset::open(&uri).await.unwrap();
    for words in ["word3", "other2 word5", "word1 word16 other4"] {
        let statement = format!("SELECT id, _score FROM lance_fts('t', '{words}')");
        let df = ctx.lance_sql(&statement).await.unwrap();
        let ours = sorted_rows(&df.clone().collect().await.unwrap());
        let mut scanner = ds.scan();
        scanner.project(&["id"]).unwrap();
        scanner
            .full_text_search(FullTextSearchQuery::new(words.to_string()))
            .unwrap();
        let theirs = sorted_rows(&[scanner.try_into_batch().await.unwrap()]);
        assert!(!ours.is_empty(), "{statement}");
        assert_eq!(ours, theirs, "{statement}");

        let plan = df.create_physical_plan().await.unwrap();
        let codec = LancePhysicalCodec::new();
        let bytes = physical_plan_to_bytes_with_extension_codec(plan, &codec).unwrap();
        let decoded =
            physical_plan_from_bytes_with_extension_codec(&bytes, &ctx.task_ctx(), &codec).unwrap();
        let shipped = sorted_rows(&collect(decoded, ctx.task_ctx()).await.unwrap());
        assert_eq!(shipped, ours, "{statement} after a round trip");
    }
}
