//! The retry matrix of `db://` tables: every statement kind against every
//! fault the fake scripts (429, 503, no answer, a reset connection, each
//! before the service acts and, where it can, after it has acted), with the
//! verdict (the answer or error, the requests sent, the rows and versions
//! left) that the statement's retry class promises:
//!
//! * reads retry on every fault and answer as without it;
//! * appends (INSERT, INSERT OVERWRITE, CTAS, DELETE, UPDATE) retry only on
//!   429; after any other fault they report that the service may have
//!   applied the request, and the table holds it once or not at all, never
//!   twice;
//! * upserts (`lance_merge`) retry on every fault and leave the table a
//!   fault-free run leaves (with one more version when the lost answer hid
//!   an applied request).
//!
//! One assumption about time: a request the fake answers at once is
//! answered within `request_timeout_ms` (2 s here); a stalled one never is.

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use lance::dataset::WriteMode;

use crate::fake_cloud::{API_KEY, FakeCloud, Fault};
use crate::fixtures;
use crate::support::{context, ok, private_cache, sql, try_rows};

/// How a statement's failed requests are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Read,
    Append,
    Upsert,
}

/// One statement kind of the matrix.
struct Case {
    /// The request the faults hit.
    request: &'static str,
    class: Class,
    /// The statement; `{c}` is the `db://` table, `{l}` the same table
    /// opened locally, `{n}` a new table of the `db://` catalog `cat`.
    statement: &'static str,
}

/// Options of every `db://` table and catalog here: short timeouts and
/// backoffs, so stalls and retries cost little.
const REQUESTS: [(&str, &str); 3] = [
    ("request_timeout_ms", "2000"),
    ("retry_backoff_ms", "10"),
    ("max_retries", "3"),
];

/// What one run of a statement left.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// The statement's rows, or its error.
    answer: Result<Vec<String>, String>,
    /// Requests of the case's kind sent.
    sent: usize,
    /// The table's rows afterwards (for CTAS: the new table's, or none).
    rows: Option<Vec<String>>,
    /// Versions the statement added.
    new_versions: i64,
}

async fn run_case(case: Case) {
    let fake = FakeCloud::start().await;
    let ctx = context(2, &private_cache());
    let options: BTreeMap<String, String> = REQUESTS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain([
            ("api_key".to_string(), API_KEY.to_string()),
            ("host_override".to_string(), fake.url()),
        ])
        .collect();
    datafusion_lance::register_lance_catalog(&ctx, "cat", "db://mydb", options)
        .await
        .unwrap();
    let searched = case.statement.contains("lance_vector_search");
    let runs = std::iter::once(Fault::Pass).chain(Fault::ALL);
    let mut clean: Option<Outcome> = None;
    for (i, fault) in runs.enumerate() {
        // Reads share one table; each write gets a fresh one.
        let name = if case.class == Class::Read {
            "t0".to_string()
        } else {
            format!("t{i}")
        };
        if i == 0 || case.class != Class::Read {
            let path = fake.table_path(&name);
            if searched {
                fixtures::docs(&path).await;
            } else {
                fixtures::write(
                    &path,
                    vec![fixtures::numbers_batch(0, 50)],
                    fixtures::params(WriteMode::Create, 1000),
                )
                .await;
            }
        }
        let statement = case
            .statement
            .replace("{c}", &format!("cat.public.{name}"))
            .replace("{l}", &format!("local_{name}"))
            .replace("{n}", &format!("cat.public.new_{i}"));
        let local = format!("local_{name}");
        if i == 0 || case.class != Class::Read {
            ok(
                &ctx,
                &format!(
                    "CREATE EXTERNAL TABLE {local} STORED AS LANCE LOCATION '{}'",
                    fake.table_path(&name)
                ),
            )
            .await;
        }
        let before = version(&ctx, &local).await;
        fake.clear_log();
        fake.fail_next(case.request, &[fault]);
        let answer = try_sql(&ctx, &statement).await;
        fake.settle().await;
        let sent = fake.log().iter().filter(|k| **k == case.request).count();
        let rows = if case.statement.contains("{n}") {
            let path = fake.table_path(&format!("new_{i}"));
            if std::path::Path::new(&path).exists() {
                let created = format!("created_{i}");
                ok(
                    &ctx,
                    &format!("CREATE EXTERNAL TABLE {created} STORED AS LANCE LOCATION '{path}'"),
                )
                .await;
                Some(
                    try_rows(&ctx, &format!("SELECT * FROM {created}"))
                        .await
                        .unwrap(),
                )
            } else {
                None
            }
        } else {
            Some(
                try_rows(&ctx, &format!("SELECT * FROM {local}"))
                    .await
                    .unwrap(),
            )
        };
        let outcome = Outcome {
            answer,
            sent,
            rows,
            new_versions: version(&ctx, &local).await - before,
        };
        let Some(clean) = &clean else {
            assert!(outcome.answer.is_ok(), "{statement}: {outcome:?}");
            clean = Some(outcome);
            continue;
        };
        check(&case, fault, clean, &outcome, &statement);
    }
}

/// The verdict the case's retry class promises under `fault`, against the
/// fault-free run `clean`.
fn check(case: &Case, fault: Fault, clean: &Outcome, outcome: &Outcome, statement: &str) {
    let context = format!("{statement} under {fault:?}: {outcome:?}");
    let retried = match case.class {
        Class::Read | Class::Upsert => true,
        Class::Append => fault == Fault::Throttled,
    };
    if retried {
        assert_eq!(outcome.sent, clean.sent + 1, "{context}");
        assert_eq!(outcome.rows, clean.rows, "{context}");
        let extra = i64::from(case.class == Class::Upsert && fault.applies());
        assert_eq!(
            outcome.new_versions,
            clean.new_versions + extra,
            "{context}"
        );
        assert_eq!(outcome.answer, clean.answer, "{context}");
        return;
    }
    // An append that may have been applied: sent once, reported, and the
    // table holds it exactly once or not at all.
    assert_eq!(outcome.sent, clean.sent, "{context}");
    let error = outcome.answer.as_ref().unwrap_err();
    assert!(
        error.contains("failed after 1 attempt")
            && error.contains("the service may have applied it")
            && error.contains(match fault {
                Fault::Unavailable | Fault::AppliedThenUnavailable => "HTTP 503",
                Fault::Stall | Fault::AppliedThenStall => {
                    "no answer within the request timeout (request_timeout_ms)"
                }
                _ => "connection closed before message completed",
            }),
        "{context}"
    );
    if fault.applies() {
        assert_eq!(outcome.rows, clean.rows, "{context}");
        assert_eq!(outcome.new_versions, clean.new_versions, "{context}");
    } else {
        assert_eq!(outcome.new_versions, 0, "{context}");
        if case.statement.contains("{n}") {
            assert_eq!(outcome.rows, None, "{context}");
        } else {
            assert_ne!(outcome.rows, clean.rows, "{context}");
        }
    }
}

async fn try_sql(ctx: &SessionContext, statement: &str) -> Result<Vec<String>, String> {
    sql(ctx, statement)
        .await
        .map(|batches| crate::support::sorted_rows(&batches))
        .map_err(|e| e.to_string())
}

async fn version(ctx: &SessionContext, local: &str) -> i64 {
    try_rows(
        ctx,
        &format!("SELECT max(version) FROM lance_versions('{local}')"),
    )
    .await
    .unwrap()
    .join("")
    .parse()
    .unwrap()
}

macro_rules! matrix {
    ($($name:ident: $request:literal, $class:ident, $statement:literal;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                run_case(Case {
                    request: $request,
                    class: Class::$class,
                    statement: $statement,
                })
                .await;
            }
        )*
    };
}

matrix! {
    a_select_retries_every_fault:
        "query_table", Read, "SELECT id, s FROM {c} WHERE id > 20";
    a_count_retries_every_fault:
        "count_table_rows", Read, "SELECT count(*) FROM {c}";
    a_search_retries_every_fault:
        "query_table", Read,
        "SELECT id, _distance FROM lance_vector_search('{c}', 'emb', [0.5, 0.5], 5)";
    an_insert_is_sent_once_unless_throttled:
        "insert_into_table", Append,
        "INSERT INTO {c} VALUES (1000, 1.0, 'x', true, DATE '2020-01-01')";
    an_overwrite_is_sent_once_unless_throttled:
        "insert_into_table", Append,
        "INSERT OVERWRITE {c} SELECT id + 1000, v, s, b, d FROM {l} WHERE id < 10";
    a_table_created_as_a_query_is_sent_once_unless_throttled:
        "create_table", Append, "CREATE TABLE {n} AS SELECT * FROM {l} WHERE id < 30";
    a_delete_is_sent_once_unless_throttled:
        "delete_from_table", Append, "DELETE FROM {c} WHERE id < 10";
    an_update_is_sent_once_unless_throttled:
        "update_table", Append, "UPDATE {c} SET s = 'updated' WHERE id < 10";
    an_upsert_retries_every_fault:
        "merge_insert_into_table", Upsert,
        "SELECT count(*) FROM lance_merge('{c}', \
         (SELECT id + 25 AS id, v, 'merged' AS s, b, d FROM {l}), 'id')";
}
