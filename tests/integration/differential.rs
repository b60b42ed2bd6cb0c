//! Differential test: hundreds of generated queries against the Lance table
//! (filters pushed into Lance) and against the same rows in a `MemTable`
//! (DataFusion evaluates everything), for several partition counts. Results
//! must be equal as multisets.

use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, RecordBatch};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::datasource::MemTable;
use lance::index::DatasetIndexExt;
use lance_index::IndexType;
use lance_index::scalar::{BuiltinIndexType, ScalarIndexParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::fixtures::{numbers, numbers_batch, numbers_schema};
use crate::support::{Agreement, context, dataset_path, private_cache, try_rows};

const SEED: u64 = 0x1a2c_e5d1;
const QUERIES_PER_PARTITIONING: usize = 160;

fn pick<'a, T>(rng: &mut StdRng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

fn int_lit(rng: &mut StdRng) -> String {
    pick(rng, &["-1", "0", "5", "17", "500", "999", "1000", "1200"])
        .to_string()
        .replace("500", &rng.random_range(0..1000).to_string())
}

fn float_lit(rng: &mut StdRng) -> String {
    pick(
        rng,
        &[
            "'NaN'::double",
            "'inf'::double",
            "'-inf'::double",
            "-0.0",
            "0.0",
            "1.5",
            "-91.0",
            "350.5",
            "1000.0",
        ],
    )
    .to_string()
}

/// A string literal: mostly a value of the fixture (its id chosen so the
/// row exists), sometimes a near miss.
fn str_lit(rng: &mut StdRng) -> String {
    // An id whose `s` has the shape of residue `r` (mod 7) and that was not
    // deleted (id % 17 = 5).
    let mut id_of = |r: i64| loop {
        let id = rng.random_range(0..142) * 7 + r;
        if id % 17 != 5 && id < 1000 {
            return id;
        }
    };
    let values = [
        "''".to_string(),
        format!("'row-{}'", id_of(5)),
        format!("'it''s {}'", id_of(2)),
        format!("'50%_off\\{}'", id_of(3)),
        format!("'Ab{}'", id_of(4)),
        "'row-'".to_string(),
        "'zzz'".to_string(),
    ];
    pick(rng, &values).clone()
}

fn like_pattern(rng: &mut StdRng) -> String {
    pick(
        rng,
        &[
            "'row-%'",
            "'row-9_'",
            "'%''%'",
            "'50\\%%'",
            "'%\\\\1%'",
            "'_'",
            "''",
            "'%'",
            "'Ab_%'",
            "'%5'",
            "'it''s _'",
        ],
    )
    .to_string()
}

fn cmp(rng: &mut StdRng) -> String {
    pick(
        rng,
        &[
            "=",
            "<>",
            "<",
            "<=",
            ">",
            ">=",
            "IS DISTINCT FROM",
            "IS NOT DISTINCT FROM",
        ],
    )
    .to_string()
}

pub(crate) fn atom(rng: &mut StdRng) -> String {
    match rng.random_range(0..16) {
        0 => format!("id {} {}", cmp(rng), int_lit(rng)),
        1 => format!("v {} {}", cmp(rng), float_lit(rng)),
        2 => format!("s {} {}", cmp(rng), str_lit(rng)),
        3 => format!(
            "s {} {}",
            pick(rng, &["LIKE", "NOT LIKE", "ILIKE", "NOT ILIKE"]),
            like_pattern(rng)
        ),
        4 => format!(
            "{} IS {}NULL",
            pick(rng, &["id", "v", "s", "b", "d"]),
            pick(rng, &["", "NOT "])
        ),
        5 => {
            let mut items: Vec<String> =
                (0..rng.random_range(1..6)).map(|_| int_lit(rng)).collect();
            if rng.random_bool(0.2) {
                items.push("NULL".into());
            }
            format!("id {}IN ({})", pick(rng, &["", "NOT "]), items.join(", "))
        }
        6 => {
            let items: Vec<String> = (0..rng.random_range(1..4)).map(|_| str_lit(rng)).collect();
            format!("s {}IN ({})", pick(rng, &["", "NOT "]), items.join(", "))
        }
        7 => {
            let items: Vec<String> = (0..rng.random_range(1..4))
                .map(|_| float_lit(rng))
                .collect();
            format!("v {}IN ({})", pick(rng, &["", "NOT "]), items.join(", "))
        }
        8 => format!(
            "id {}BETWEEN {} AND {}",
            pick(rng, &["", "NOT "]),
            int_lit(rng),
            int_lit(rng)
        ),
        9 => format!(
            "v {}BETWEEN {} AND {}",
            pick(rng, &["", "NOT "]),
            float_lit(rng),
            float_lit(rng)
        ),
        10 => pick(
            rng,
            &[
                "b",
                "NOT b",
                "b IS TRUE",
                "b IS NOT TRUE",
                "b IS FALSE",
                "b IS NOT FALSE",
                "b = true",
                "b <> false",
            ],
        )
        .to_string(),
        11 => format!(
            "d {} DATE '2019-{:02}-{:02}'",
            cmp(rng),
            rng.random_range(1..13),
            rng.random_range(1..29)
        ),
        12 => format!("CAST(id AS INT) {} {}", cmp(rng), int_lit(rng)),
        13 => format!("s {} {}", cmp(rng), pick(rng, &["NULL", "''"])),
        // Not pushable: stays in DataFusion next to pushed siblings.
        14 => format!("abs(v) > {}", float_lit(rng)),
        _ => format!(
            "id % {} = {}",
            rng.random_range(2..9),
            rng.random_range(0..3)
        ),
    }
}

/// A random predicate (`OR` drawn twice as often as `AND`).
fn predicate(rng: &mut StdRng, depth: u32) -> String {
    if depth == 0 || rng.random_bool(0.35) {
        return format!("({})", atom(rng));
    }
    match rng.random_range(0..4) {
        0 => format!(
            "({} AND {})",
            predicate(rng, depth - 1),
            predicate(rng, depth - 1)
        ),
        1 | 2 => format!(
            "({} OR {})",
            predicate(rng, depth - 1),
            predicate(rng, depth - 1)
        ),
        _ => format!("NOT ({})", predicate(rng, depth - 1)),
    }
}

pub(crate) fn query(rng: &mut StdRng, table: &str) -> String {
    let columns = ["id", "v", "s", "b", "d"];
    let mut projection: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|_| rng.random_bool(0.5))
        .collect();
    if projection.is_empty() {
        projection.push(*pick(rng, &columns));
    }
    let filter = if rng.random_bool(0.9) {
        format!(" WHERE {}", predicate(rng, 3))
    } else {
        String::new()
    };
    match rng.random_range(0..6) {
        // A limit without ORDER BY: only the count is deterministic.
        0 => format!(
            "SELECT count(*) FROM (SELECT {} FROM {table}{filter} LIMIT {})",
            projection.join(", "),
            rng.random_range(1..40)
        ),
        1 => format!("SELECT count(*), count(v), count(s) FROM {table}{filter}"),
        _ => format!("SELECT {} FROM {table}{filter}", projection.join(", ")),
    }
}

/// `sql`, or — when its predicate selects nothing in DataFusion's answer
/// over the `MemTable` — the same query asking for the complement
/// (`(p) IS NOT TRUE`: the rows where `p` is false or NULL). Predicates full
/// of NULL comparisons select nothing one way and most rows the other;
/// comparing empty results proves little.
pub(crate) async fn selective(ctx: &datafusion::prelude::SessionContext, sql: String) -> String {
    let Some((head, predicate)) = sql.split_once(" WHERE ") else {
        return sql;
    };
    let (predicate, tail) = match predicate.rsplit_once(" LIMIT ") {
        Some((p, limit)) => (p.to_string(), format!(" LIMIT {limit}")),
        None => (predicate.to_string(), String::new()),
    };
    let oracle = format!("{head} WHERE {predicate}{tail}").replace(" FROM t", " FROM m");
    match try_rows(ctx, &oracle).await {
        Ok(rows) if crate::support::selects_rows(&rows) => sql,
        _ => format!("{head} WHERE ({predicate}) IS NOT TRUE{tail}"),
    }
}

/// The fixture's rows, built independently of Lance.
pub(crate) fn oracle_rows() -> RecordBatch {
    let batch = numbers_batch(0, 1000);
    let keep: BooleanArray = (0..1000i64).map(|i| Some(i % 17 != 5)).collect();
    filter_record_batch(&batch, &keep).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lance_pushdown_matches_datafusion() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "numbers.lance");
    numbers(&uri).await;
    // Lance evaluates every accepted filter: that is what the Exact claims promise.
    let agreement = compare(&uri, SEED, "true", &[1, 2, 3, 8], QUERIES_PER_PARTITIONING).await;
    agreement.assert_meaningful("pushdown = true");
}

/// The same with scalar indices on every filtered column: Lance answers the
/// pushed filters from its BTREE / BITMAP indices (the `auto` default hands
/// them to Lance because an index covers them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn indexed_pushdown_matches_datafusion() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "numbers.lance");
    numbers(&uri).await;
    let mut dataset = lance::Dataset::open(&uri).await.unwrap();
    for (column, index, builtin) in [
        ("id", IndexType::BTree, BuiltinIndexType::BTree),
        ("v", IndexType::BTree, BuiltinIndexType::BTree),
        ("s", IndexType::BTree, BuiltinIndexType::BTree),
        ("d", IndexType::BTree, BuiltinIndexType::BTree),
        ("b", IndexType::Bitmap, BuiltinIndexType::Bitmap),
    ] {
        dataset
            .create_index(
                &[column],
                index,
                None,
                &ScalarIndexParams::for_builtin(builtin),
                true,
            )
            .await
            .unwrap();
    }
    assert_eq!(dataset.load_indices().await.unwrap().len(), 5);
    let agreement = compare(
        &uri,
        SEED ^ 0x5eed,
        "auto",
        &[1, 3],
        QUERIES_PER_PARTITIONING,
    )
    .await;
    agreement.assert_meaningful("indexed, pushdown = auto");
}

/// Runs `queries` generated queries per partition count against the Lance
/// table at `uri` and the same rows in a `MemTable`.
async fn compare(
    uri: &str,
    seed: u64,
    pushdown: &str,
    partitionings: &[usize],
    queries: usize,
) -> Agreement {
    let cache = private_cache();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut agreement = Agreement::default();
    for &partitions in partitionings {
        let ctx = context(partitions, &cache);
        ctx.sql(&format!("SET lance.pushdown_filters = {pushdown}"))
            .await
            .unwrap();
        ctx.sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
        ))
        .await
        .unwrap();
        let mem = MemTable::try_new(numbers_schema(), vec![vec![oracle_rows()]]).unwrap();
        ctx.register_table("m", Arc::new(mem)).unwrap();
        for i in 0..queries {
            let lance_sql = selective(&ctx, query(&mut rng, "t")).await;
            let mem_sql = lance_sql.replace(" FROM t", " FROM m");
            agreement.record(
                try_rows(&ctx, &lance_sql).await,
                try_rows(&ctx, &mem_sql).await,
                format!("seed {seed:#x}, target_partitions {partitions}, query {i}: {lance_sql}"),
            );
        }
    }
    eprintln!("differential (seed {seed:#x}, pushdown {pushdown}): {agreement:?}");
    agreement
}
