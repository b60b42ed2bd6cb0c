//! Pushdown fuzzing: seeded random predicates (every supported operator,
//! NULLs, NaN, quotes, backslashes, `%`/`_` in LIKE patterns, long IN lists)
//! evaluated by Lance and by DataFusion over a `MemTable` copy. On a mismatch
//! the test prints the seed and a shrunk predicate.
//!
//! 200 predicates in `make test`, 2,000 with `DATAFUSION_LANCE_NIGHTLY=1`.

use std::fmt;
use std::sync::Arc;

use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::differential::{atom, oracle_rows};
use crate::fixtures::{numbers, numbers_schema};
use crate::support::nightly;
use crate::support::{Agreement, context, dataset_path, private_cache, try_rows};

#[derive(Clone, Debug)]
enum Pred {
    Atom(String),
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
    Not(Box<Pred>),
    IsNotTrue(Box<Pred>),
}

impl fmt::Display for Pred {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pred::Atom(a) => write!(f, "({a})"),
            Pred::And(a, b) => write!(f, "({a} AND {b})"),
            Pred::Or(a, b) => write!(f, "({a} OR {b})"),
            Pred::Not(a) => write!(f, "NOT {a}"),
            Pred::IsNotTrue(a) => write!(f, "({a} IS NOT TRUE)"),
        }
    }
}

fn extra_atom(rng: &mut StdRng) -> String {
    match rng.random_range(0..4) {
        0 => {
            // a long IN list
            let n = rng.random_range(50..400);
            let items: Vec<String> = (0..n)
                .map(|_| rng.random_range(-5..1100).to_string())
                .collect();
            format!("id IN ({})", items.join(", "))
        }
        1 => format!(
            "s LIKE {}",
            [
                "'%\\\\%'",
                "'50\\%\\_off%'",
                "'%\\_%'",
                "'row-_%'",
                "'%''s%'",
                "'_b%'"
            ][rng.random_range(0..6)]
        ),
        2 => format!(
            "s {} {}",
            ["=", "<", ">=", "<>"][rng.random_range(0..4)],
            ["'50%_off\\3'", "'it''s 2'", "'Ab'", "'\\\\'", "'row-99'"][rng.random_range(0..5)]
        ),
        _ => format!(
            "v {} {}",
            ["<", ">", "=", "<>", "IS DISTINCT FROM"][rng.random_range(0..5)],
            ["'NaN'::double", "1e308", "-1e-308", "'inf'::double", "2.5"][rng.random_range(0..5)]
        ),
    }
}

fn generate(rng: &mut StdRng, depth: u32) -> Pred {
    if depth == 0 || rng.random_bool(0.3) {
        return Pred::Atom(if rng.random_bool(0.7) {
            atom(rng)
        } else {
            extra_atom(rng)
        });
    }
    // OR twice as often as AND.
    match rng.random_range(0..4) {
        0 => Pred::And(
            Box::new(generate(rng, depth - 1)),
            Box::new(generate(rng, depth - 1)),
        ),
        1 | 2 => Pred::Or(
            Box::new(generate(rng, depth - 1)),
            Box::new(generate(rng, depth - 1)),
        ),
        _ => Pred::Not(Box::new(generate(rng, depth - 1))),
    }
}

/// Smaller predicates to try when `p` fails.
fn shrink(p: &Pred) -> Vec<Pred> {
    match p {
        Pred::Atom(_) => vec![],
        Pred::Not(a) | Pred::IsNotTrue(a) => vec![(**a).clone()],
        Pred::And(a, b) | Pred::Or(a, b) => {
            let mut out = vec![(**a).clone(), (**b).clone()];
            let rebuild = |x: Pred, y: Pred| match p {
                Pred::And(..) => Pred::And(Box::new(x), Box::new(y)),
                _ => Pred::Or(Box::new(x), Box::new(y)),
            };
            out.extend(shrink(a).into_iter().map(|s| rebuild(s, (**b).clone())));
            out.extend(shrink(b).into_iter().map(|s| rebuild((**a).clone(), s)));
            out
        }
    }
}

type Results = (Result<Vec<String>, String>, Result<Vec<String>, String>);

async fn results(ctx: &SessionContext, p: &Pred) -> Results {
    (
        try_rows(ctx, &format!("SELECT id FROM t WHERE {p}")).await,
        try_rows(ctx, &format!("SELECT id FROM m WHERE {p}")).await,
    )
}

/// Both sides returned the same rows (a predicate both reject is not a
/// comparison: the caller counts it).
fn agree(results: &Results) -> bool {
    match results {
        (Ok(a), Ok(b)) => a == b,
        (Err(_), Err(_)) => true,
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pushdown_fuzz() {
    let seed: u64 = std::env::var("DATAFUSION_LANCE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xf022_2026);
    let count = if nightly() { 2000 } else { 200 };
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "numbers.lance");
    numbers(&uri).await;
    let ctx = context(3, &private_cache());
    ctx.sql("SET lance.pushdown_filters = true").await.unwrap();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
    ))
    .await
    .unwrap();
    let mem = MemTable::try_new(numbers_schema(), vec![vec![oracle_rows()]]).unwrap();
    ctx.register_table("m", Arc::new(mem)).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut agreement = Agreement::default();
    for i in 0..count {
        let mut p = generate(&mut rng, 4);
        // A predicate selecting nothing is asked as its complement (see
        // `differential::selective`).
        let oracle = try_rows(&ctx, &format!("SELECT id FROM m WHERE {p}")).await;
        if !oracle.is_ok_and(|rows| !rows.is_empty()) {
            p = Pred::IsNotTrue(Box::new(p));
        }
        let outcome = results(&ctx, &p).await;
        if agree(&outcome) {
            agreement.record(outcome.0, outcome.1, format!("predicate {i}: {p}"));
            continue;
        }
        let mut smallest = p.clone();
        'shrinking: loop {
            for candidate in shrink(&smallest) {
                if !agree(&results(&ctx, &candidate).await) {
                    smallest = candidate;
                    continue 'shrinking;
                }
            }
            break;
        }
        panic!(
            "Lance and DataFusion disagree (DATAFUSION_LANCE_FUZZ_SEED={seed}, predicate {i}):\n  \
             shrunk:   {smallest}\n  original: {p}"
        );
    }
    eprintln!("pushdown fuzz (seed {seed:#x}): {agreement:?}");
    agreement.assert_meaningful("pushdown fuzz");
}
