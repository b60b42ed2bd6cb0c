//! What this crate refuses reaches the caller as its `Error`, in the variant
//! that says why (`Error::find` on the `DataFusionError` of the statement),
//! and the table is left as it was.

use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use datafusion_lance::Error;

use crate::support::{context, dataset_path, ints, ok, private_cache, sql};

/// The error of `statement`, planned or run.
async fn error_of(ctx: &SessionContext, statement: &str) -> DataFusionError {
    match sql(ctx, statement).await {
        Err(e) => e,
        Ok(_) => panic!("{statement}: succeeded"),
    }
}

/// The variant's name of the crate's error inside `e`, and its text.
fn kind(e: &DataFusionError) -> (&'static str, String) {
    let name = match Error::find(e) {
        Some(Error::NotFound { .. }) => "NotFound",
        Some(Error::AlreadyExists { .. }) => "AlreadyExists",
        Some(Error::ReadOnly { .. }) => "ReadOnly",
        Some(Error::SchemaMismatch { .. }) => "SchemaMismatch",
        Some(Error::NotSupported { .. }) => "NotSupported",
        Some(Error::InvalidInput { .. }) => "InvalidInput",
        Some(_) => "another variant",
        None => "not the crate's Error",
    };
    (name, e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, emb FLOAT[2]) STORED AS LANCE \
             LOCATION '{uri}'"
        ),
    )
    .await;
    ok(&ctx, "INSERT INTO t VALUES (1, [1, 0]), (2, [0, 1])").await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t_v2 STORED AS LANCE LOCATION '{uri}' \
             OPTIONS ('lance.version' '2')"
        ),
    )
    .await;
    let cases = [
        (
            "ALTER TABLE t ADD COLUMN id BIGINT",
            "AlreadyExists",
            "column 'id' exists",
        ),
        (
            "ALTER TABLE t DROP COLUMN nope",
            "NotFound",
            "no column 'nope'",
        ),
        ("CREATE INDEX i ON t (nope)", "NotFound", "no column 'nope'"),
        (
            "SELECT * FROM lance_vector_search('t', 'nope', [1.0, 0.0], 1)",
            "NotFound",
            "'t' has no column 'nope'",
        ),
        (
            "ALTER TABLE t_v2 ADD COLUMN c INT",
            "ReadOnly",
            "pinned to version 2 and is read-only",
        ),
        (
            "INSERT INTO t VALUES (3, [1, 2, 3])",
            "SchemaMismatch",
            "is a vector of dimension 2, but the value in row 1 has 3 elements",
        ),
        (
            "SELECT * FROM lance_vector_search('t', 'id', [1.0, 0.0], 1)",
            "SchemaMismatch",
            "column 'id' of 't' is Int64, not a vector",
        ),
        (
            "ALTER TABLE t ALTER COLUMN emb SET NOT NULL",
            "NotSupported",
            "Lance cannot make a column NOT NULL",
        ),
        (
            "SELECT * FROM lance_vector_search('t', 'emb', [1.0, 0.0], 0)",
            "InvalidInput",
            "k must be a positive integer; got 0",
        ),
        (
            "SELECT * FROM lance_tag('t', 'rename', 'x')",
            "InvalidInput",
            "unknown action 'rename'",
        ),
    ];
    for (statement, variant, text) in cases {
        let e = error_of(&ctx, statement).await;
        let (name, message) = kind(&e);
        assert_eq!(name, variant, "{statement}: {message}");
        assert!(message.contains(text), "{statement}: {message}");
    }
    // Nothing was written: the two rows, version 2.
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, [2]);
    assert_eq!(
        ints(&ctx, "SELECT max(version) FROM lance_versions('t')").await,
        [2]
    );
}
