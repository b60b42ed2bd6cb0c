//! The front door: SQL text in, one plan out, the plan run. Every way in —
//! [`crate::LanceSessionContextExt::lance_sql`], [`plan_sql`],
//! [`plan_lance_sql`], `lance-sql`, the sqllogictest runner — comes through
//! here, and nothing is tokenized, parsed or planned twice.
//!
//! A statement is this crate's to plan when DataFusion 54 cannot plan it on
//! Lance tables:
//!
//! * `MERGE INTO` on a Lance table (see [`super::merge_into`]);
//! * `CREATE INDEX` / `DROP INDEX` on a Lance table (see [`super::index`]);
//! * `ALTER TABLE` on a Lance table (see [`super::alter`]);
//! * `CREATE TABLE`, `DROP TABLE`, `CREATE SCHEMA`, `DROP SCHEMA` in a Lance
//!   catalog (see [`crate::catalog`]);
//! * any statement reading a Lance table as of a version, a tag or a time
//!   (see [`super::time_travel`]), or naming a table a table function looks
//!   up while planned (looked up here first).
//!
//! Everything else is DataFusion's, planned from the statement parsed here;
//! text that does not parse is left to DataFusion's parser, which reports
//! its own errors. [`execute_lance_plan`] runs a plan of either kind.

use std::sync::Arc;

use datafusion::dataframe::DataFrame;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{ExplainOption, LogicalPlan, LogicalPlanBuilder};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::{DFParserBuilder, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{ObjectType, Statement};
use datafusion::sql::sqlparser::dialect::{Dialect, dialect_from_str};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use super::alter::{altered_table, plan_alter_table, run_alter};
use super::index::plan_index_statement;
use super::merge_into::{mark_stars, names_merge, plan_merge_into};
use super::prepared;
use super::time_travel::{self, AS_OF_FUNCTION_NAME, PinnedRelations};
use crate::catalog::{plan_catalog_ddl, refresh_catalogs_of};
use crate::error::fail;
use crate::table::lookup::prefetch;
use crate::udtf::{
    FTS_FUNCTION_NAME, HYBRID_SEARCH_FUNCTION_NAME, PERMUTATION_FUNCTION_NAME, ROWS_FUNCTION_NAME,
    VECTOR_SEARCH_FUNCTION_NAME,
};

/// The plan of the one statement of `sql`: this crate's when it is a
/// statement DataFusion cannot plan on Lance tables (`MERGE INTO`, index
/// DDL, `ALTER TABLE`, time travel, DDL in a Lance catalog), DataFusion's otherwise. The text is parsed once. Run the
/// plan with [`execute_lance_plan`] (as `lance_sql` does).
///
/// Planning reads (the versions a statement names, the value of a
/// `TIMESTAMP AS OF` expression, catalog listings) but never writes.
pub async fn plan_sql(state: &SessionState, sql: &str) -> DFResult<LogicalPlan> {
    Ok(match plan_statement(state, sql).await? {
        Planned::Ours(plan) | Planned::DataFusions(plan) => *plan,
    })
}

/// Plans `sql` when it is a statement DataFusion cannot plan on Lance tables
/// — `MERGE INTO`, `CREATE INDEX`, `DROP INDEX`, `ALTER TABLE`, catalog DDL,
/// time travel — or an `EXPLAIN` of one; `None` for any other SQL, which
/// [`SessionContext::sql`](datafusion::prelude::SessionContext::sql) plans
/// as usual (other SQL is not parsed here: see [`plan_sql`] for one plan of
/// any statement).
pub async fn plan_lance_sql(state: &SessionState, sql: &str) -> DFResult<Option<LogicalPlan>> {
    Ok(match intercept(state, sql, false).await? {
        Intercepted::Ours(plan) => Some(*plan),
        Intercepted::Planned(_) | Intercepted::DataFusions(_) | Intercepted::Unparsed => None,
    })
}

/// Who planned a statement.
pub(crate) enum Planned {
    /// This crate.
    Ours(Box<LogicalPlan>),
    /// DataFusion.
    DataFusions(Box<LogicalPlan>),
}

/// [`plan_sql`], saying who planned the statement.
pub(crate) async fn plan_statement(state: &SessionState, sql: &str) -> DFResult<Planned> {
    Ok(match intercept(state, sql, true).await? {
        Intercepted::Ours(plan) => Planned::Ours(plan),
        Intercepted::Planned(plan) => Planned::DataFusions(plan),
        Intercepted::DataFusions(statement) => {
            Planned::DataFusions(Box::new(state.statement_to_plan(*statement).await?))
        }
        // DataFusion's parser, for its own errors (or a statement this
        // crate's extensions parsed, which DataFusion's may not).
        Intercepted::Unparsed => {
            Planned::DataFusions(Box::new(state.create_logical_plan(sql).await?))
        }
    })
}

/// What [`intercept`] made of a statement.
enum Intercepted {
    /// A statement this crate plans, planned.
    Ours(Box<LogicalPlan>),
    /// DataFusion's statement, already planned by DataFusion here (a
    /// `CREATE TABLE` outside a Lance catalog).
    Planned(Box<LogicalPlan>),
    /// Any other statement, parsed exactly as DataFusion parses it (the same
    /// tokens, dialect and recursion limit): DataFusion plans it from here
    /// without parsing the text again.
    DataFusions(Box<DFStatement>),
    /// Text DataFusion should parse itself (it reports its own errors).
    Unparsed,
}

/// Parses (and, when it is this crate's, plans) the statement of `sql`;
/// with `parse_theirs`, also parses a statement that cannot be this
/// crate's (otherwise such text is `Unparsed`).
async fn intercept(state: &SessionState, sql: &str, parse_theirs: bool) -> DFResult<Intercepted> {
    let (refresh, statement, ours, travels, searches) = match read(state, sql, parse_theirs)? {
        Read::Unparsed => return Ok(Intercepted::Unparsed),
        Read::Prepare(prepare) => {
            return Ok(Intercepted::Ours(Box::new(prepare.plan(state).await?)));
        }
        Read::Statement {
            refresh,
            statement,
            ours,
            travels,
            searches,
        } => (refresh, statement, ours, travels, searches),
    };
    if refresh {
        refresh_catalogs_of(state).await?;
    }
    let Some((statement, plain)) = statement else {
        return Ok(Intercepted::Unparsed);
    };
    if !ours {
        return Ok(Intercepted::DataFusions(Box::new(statement)));
    }
    let pinned = match travels {
        true => PinnedRelations::resolve(state, &statement).await?,
        false => None,
    };
    // Tables named by table functions, which are planned synchronously: a
    // catalog may need I/O to find them.
    let prefetched = match searches.is_empty() {
        false => Some(prefetch(state, &searches).await?).filter(|p| !p.is_empty()),
        true => None,
    };
    if pinned.is_some() || prefetched.is_some() {
        let mut state = state.clone();
        if let Some(pinned) = pinned {
            state.register_relation_planner(Arc::new(pinned))?;
        }
        if let Some(prefetched) = prefetched {
            state.config_mut().set_extension(Arc::new(prefetched));
        }
        // Planned on this state (its pins, its looked-up tables): this
        // crate's plan either way.
        let plan = match plan_ours(&state, &statement).await? {
            Ours::Planned(plan) | Ours::DataFusions(plan) => plan,
            Ours::No => state.statement_to_plan(statement).await?,
        };
        return Ok(Intercepted::Ours(Box::new(plan)));
    }
    Ok(match plan_ours(state, &statement).await? {
        Ours::Planned(plan) => Intercepted::Ours(Box::new(plan)),
        Ours::DataFusions(plan) => Intercepted::Planned(Box::new(plan)),
        // Parsed as DataFusion parses it: DataFusion plans it from here.
        Ours::No if plain => Intercepted::DataFusions(Box::new(statement)),
        // Parsed with this crate's extensions (a time-travel clause the
        // dialect does not know): DataFusion parses the text again, for its
        // own errors.
        Ours::No => Intercepted::Unparsed,
    })
}

/// What [`read`] found in SQL text.
enum Read {
    /// Text that does not tokenize.
    Unparsed,
    /// A `PREPARE` of a statement this crate plans.
    Prepare(prepared::Prepare),
    /// Any other statement (parsed when it may be this crate's, or when
    /// asked to).
    Statement {
        /// It may list tables: the Lance catalogs are listed again first.
        refresh: bool,
        statement: Option<(DFStatement, bool)>,
        /// It may be this crate's.
        ours: bool,
        /// It may read a table as of a version (see [`may_travel`]).
        travels: bool,
        /// The tables named by the calls of table functions that look
        /// their table up.
        searches: Vec<String>,
    },
}

/// Tokenizes `sql` and parses it when it may be this crate's (or when
/// `parse_theirs`).
fn read(state: &SessionState, sql: &str, parse_theirs: bool) -> DFResult<Read> {
    let name = state.config_options().sql_parser.dialect;
    let Some(dialect) = dialect_from_str(name) else {
        return fail!(invalid_input, "unknown SQL dialect '{name}'");
    };
    let Ok(tokens) = Tokenizer::new(dialect.as_ref(), sql).tokenize_with_location() else {
        return Ok(Read::Unparsed);
    };
    // A statement this crate plans, prepared: stored as its text.
    if let Some((head, inner)) = prepared::split_prepare(&tokens)
        && (may_be_ours(inner) || names_tables(inner) || dialect.supports_table_versioning())
    {
        return Ok(Read::Prepare(prepared::Prepare::new(sql, head, inner)));
    }
    let refresh = lists_tables(&tokens);
    let limit = state.config_options().sql_parser.recursion_limit;
    // Dialects that parse time-travel clauses themselves (`AT(...)`,
    // `FOR SYSTEM_TIME AS OF`): a clause on a statement's target must be
    // seen here, as DataFusion drops it from a `DELETE`.
    let searches = named_tables(&tokens);
    let travels = may_travel(&tokens) || dialect.supports_table_versioning();
    let ours = travels || names_ddl(&tokens) || names_tables(&tokens);
    let statement = if ours {
        parse(tokens, dialect.as_ref(), limit)
    } else if parse_theirs {
        parse_one(tokens, dialect.as_ref(), limit).map(|s| (s, true))
    } else {
        None
    };
    Ok(Read::Statement {
        refresh,
        statement,
        ours,
        travels,
        searches,
    })
}

/// What [`plan_ours`] made of a statement.
enum Ours {
    /// This crate's plan of it.
    Planned(LogicalPlan),
    /// DataFusion's plan of it (planned to see whether it is ours).
    DataFusions(LogicalPlan),
    /// Not this crate's.
    No,
}

/// Plans `statement` when it is `MERGE INTO`, `CREATE INDEX`, `DROP INDEX`
/// or `ALTER TABLE` on a Lance table, catalog DDL in a Lance catalog, or an
/// `EXPLAIN` of one.
async fn plan_ours(state: &SessionState, statement: &DFStatement) -> DFResult<Ours> {
    let (inner, explain) = match statement {
        DFStatement::Explain(explain) => (explain.statement.as_ref(), Some(explain)),
        other => (other, None),
    };
    let DFStatement::Statement(inner) = inner else {
        return Ok(Ours::No);
    };
    let plan = match inner.as_ref() {
        Statement::Merge(merge) => plan_merge_into(state, merge).await?,
        ddl @ (Statement::CreateTable(_)
        | Statement::CreateSchema { .. }
        | Statement::Drop {
            object_type: ObjectType::Table | ObjectType::Schema,
            ..
        }) => {
            let planned = state
                .statement_to_plan(DFStatement::Statement(Box::new(ddl.clone())))
                .await?;
            match plan_catalog_ddl(state, &planned).await? {
                Some(plan) => plan,
                // DataFusion's plan: it need not be planned again (unless
                // under EXPLAIN, which DataFusion plans whole).
                None if explain.is_none() => return Ok(Ours::DataFusions(planned)),
                None => return Ok(Ours::No),
            }
        }
        alter @ Statement::AlterTable(_) => match plan_alter_table(state, alter).await? {
            Some(plan) => plan,
            None => return Ok(Ours::No),
        },
        other => match plan_index_statement(state, other).await? {
            Some(plan) => plan,
            None => return Ok(Ours::No),
        },
    };
    let Some(explain) = explain else {
        return Ok(Ours::Planned(plan));
    };
    let mut option = ExplainOption::default()
        .with_verbose(explain.verbose)
        .with_analyze(explain.analyze);
    if let Some(format) = &explain.format {
        option = option.with_format(format.parse()?);
    }
    Ok(Ours::Planned(
        LogicalPlanBuilder::from(plan)
            .explain_option_format(option)?
            .build()?,
    ))
}

/// True when `tokens` hold `MERGE`, `INDEX`, `ALTER`, `CREATE`, `DROP`, `AS OF` or `lance_as_of`: the
/// only statements worth parsing here.
fn may_be_ours(tokens: &[TokenWithSpan]) -> bool {
    may_travel(tokens) || names_ddl(tokens)
}

/// True when `tokens` hold `MERGE`, `INDEX`, `ALTER`, `CREATE` or `DROP`.
fn names_ddl(tokens: &[TokenWithSpan]) -> bool {
    tokens.iter().any(|token| {
        matches!(&token.token, Token::Word(word) if matches!(
            word.keyword,
            Keyword::MERGE | Keyword::INDEX | Keyword::ALTER | Keyword::CREATE | Keyword::DROP
        ))
    })
}

/// True when `tokens` hold `AS OF` or `lance_as_of`: a statement without
/// either reads no table as of a version (unless its dialect parses clauses
/// of its own, `AT(...)`), and its syntax tree is not searched for one.
fn may_travel(tokens: &[TokenWithSpan]) -> bool {
    let mut previous = Keyword::NoKeyword;
    for token in tokens {
        let Token::Word(word) = &token.token else {
            if !matches!(token.token, Token::Whitespace(_)) {
                previous = Keyword::NoKeyword;
            }
            continue;
        };
        if (previous == Keyword::AS && word.keyword == Keyword::OF)
            || word.value.eq_ignore_ascii_case(AS_OF_FUNCTION_NAME)
        {
            return true;
        }
        previous = word.keyword;
    }
    false
}

/// The table functions that look their table up while they are planned.
const LOOKING_UP: [&str; 5] = [
    VECTOR_SEARCH_FUNCTION_NAME,
    FTS_FUNCTION_NAME,
    HYBRID_SEARCH_FUNCTION_NAME,
    ROWS_FUNCTION_NAME,
    PERMUTATION_FUNCTION_NAME,
];

/// True when `tokens` call a table function that looks its table up while
/// planned: its table is looked up first ([`prefetch`]).
fn names_tables(tokens: &[TokenWithSpan]) -> bool {
    tokens.iter().any(|t| match &t.token {
        Token::Word(word) => LOOKING_UP.contains(&word.value.as_str()),
        _ => false,
    })
}

/// The first arguments, when string literals, of the calls of those
/// functions in `tokens` (subqueries, `EXPLAIN` and every statement kind
/// included): read from the tokens, not the syntax tree, whose walk costs a
/// search statement more than the lookup (its vector is a long array).
/// A name that is no table (a call of something else with that name) is
/// only looked up for nothing.
fn named_tables(tokens: &[TokenWithSpan]) -> Vec<String> {
    let mut significant = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)));
    let mut names = Vec::new();
    while let Some(token) = significant.next() {
        if let Token::Word(word) = token
            && LOOKING_UP.contains(&word.value.as_str())
            && let Some(Token::LParen) = significant.clone().next()
        {
            let mut rest = significant.clone().skip(1);
            if let Some(Token::SingleQuotedString(table)) = rest.next() {
                names.push(table.clone());
            }
        }
    }
    names
}

/// True when `tokens` may list tables (`SHOW`, `information_schema`): the
/// Lance catalogs are listed again first.
fn lists_tables(tokens: &[TokenWithSpan]) -> bool {
    tokens.iter().any(|t| match &t.token {
        Token::Word(word) => {
            word.keyword == Keyword::SHOW || word.value.eq_ignore_ascii_case("information_schema")
        }
        _ => false,
    })
}

/// The one statement `tokens` hold, `MERGE`'s `UPDATE SET *` / `INSERT *`
/// and time-travel clauses the dialect does not parse included, and whether
/// it was parsed exactly as DataFusion parses it (no extension used); `None`
/// when they do not parse (DataFusion then reports the error).
fn parse(
    tokens: Vec<TokenWithSpan>,
    dialect: &dyn Dialect,
    limit: usize,
) -> Option<(DFStatement, bool)> {
    // `MERGE … UPDATE SET *` / `INSERT *` are marked (see `mark_stars`);
    // other statements' tokens stay as they are, uncopied.
    let (marked, plain) = if names_merge(&tokens) {
        let marked = mark_stars(tokens.clone());
        let plain = marked == tokens;
        (marked, plain)
    } else {
        (tokens, true)
    };
    // The tokens are kept for a second try only when they may hold a
    // time-travel clause (a copy of a long statement's tokens costs).
    if !time_travel::may_hold_clause(&marked) {
        return parse_one(marked, dialect, limit).map(|s| (s, plain));
    }
    if let Some(statement) = parse_one(marked.clone(), dialect, limit) {
        return Some((statement, plain));
    }
    let (kept, clauses) = time_travel::cut(&marked, dialect)?;
    if clauses.is_empty() {
        return None;
    }
    let mut statement = parse_one(kept, dialect, limit)?;
    time_travel::attach(&mut statement, clauses).then_some((statement, false))
}

/// The one statement `tokens` hold, parsed as DataFusion's
/// `SessionState::sql_to_statement` parses SQL text; `None` when they do not
/// parse or hold more or fewer than one.
fn parse_one(
    tokens: Vec<TokenWithSpan>,
    dialect: &dyn Dialect,
    limit: usize,
) -> Option<DFStatement> {
    let mut statements = DFParserBuilder::new(tokens)
        .with_dialect(dialect)
        .with_recursion_limit(limit)
        .build()
        .ok()?
        .parse_statements()
        .ok()?;
    (statements.len() == 1)
        .then(|| statements.pop_front())
        .flatten()
}

/// Whether [`execute_lance_plan`] would only make `plan` a frame on a copy
/// of the context's state: neither DDL, a statement (`SET`, `EXECUTE`), a
/// `COPY`, DML, nor an `ALTER TABLE`.
pub(crate) fn is_query(plan: &LogicalPlan) -> bool {
    !matches!(
        plan,
        LogicalPlan::Ddl(_)
            | LogicalPlan::Statement(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::Dml(_)
    ) && altered_table(plan).is_none()
}

/// Executes `plan` (from [`plan_sql`] or [`plan_lance_sql`]) in `ctx`, as
/// [`SessionContext::execute_logical_plan`] does, except that what changes a
/// Lance catalog runs here (its namespace is changed, then listed again) and
/// an `ALTER TABLE` runs now — as DataFusion runs DDL — with the table
/// registered again with its new schema, so that the next statement sees
/// it. [`crate::LanceSessionContextExt::lance_sql`] and `lance-sql` run
/// every plan through it.
pub async fn execute_lance_plan(ctx: &SessionContext, plan: LogicalPlan) -> DFResult<DataFrame> {
    if let Some(frame) = crate::catalog::run_catalog_plan(ctx, &plan).await? {
        return Ok(frame);
    }
    let executes = matches!(
        &plan,
        LogicalPlan::Statement(datafusion::logical_expr::Statement::Execute(_))
    );
    let frame = match altered_table(&plan) {
        Some(target) => return run_alter(ctx, plan, &target).await,
        None => ctx.execute_logical_plan(plan).await?,
    };
    if executes {
        let state = ctx.state();
        let text = {
            let name = state.config_options().sql_parser.dialect;
            let Some(dialect) = dialect_from_str(name) else {
                return fail!(invalid_input, "unknown SQL dialect '{name}'");
            };
            prepared::executed_text(frame.logical_plan(), dialect.as_ref())?
        };
        if let Some(text) = text {
            let plan = plan_sql(&state, &text).await?;
            return Box::pin(execute_lance_plan(ctx, plan)).await;
        }
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    use super::*;

    fn names(sql: &str) -> Vec<String> {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        named_tables(&tokens)
    }

    /// The tables a statement's searches name, in every kind of statement
    /// a query can stand in, with the spacing and comments users type.
    #[test]
    fn the_tables_searches_name_are_read_from_the_tokens() {
        assert_eq!(
            names("SELECT * FROM lance_vector_search('v', 'emb', [1.0, 2.0], 3)"),
            ["v"]
        );
        assert_eq!(
            names(
                "EXPLAIN SELECT (SELECT count(*) FROM lance_fts ( /* docs */ 'lake.public.docs', \
                 'red')) AS a, (SELECT count(*) FROM lance_rows(\n'b')) AS b"
            ),
            ["lake.public.docs", "b"]
        );
        assert_eq!(
            names(
                "INSERT INTO t WITH s AS (SELECT * FROM lance_hybrid_search('x', 'emb', [1], \
                 'q', 2)) SELECT * FROM s"
            ),
            ["x"]
        );
        assert_eq!(
            names("COPY (SELECT * FROM lance_permutation('p')) TO 'out.parquet'"),
            ["p"]
        );
        // Not a table: an argument that is no string literal, a string that
        // is not the first argument, the name as a column.
        assert!(names("SELECT * FROM lance_rows($1)").is_empty());
        assert!(names("SELECT * FROM lance_rows(name, 'v')").is_empty());
        assert!(names("SELECT lance_rows FROM t WHERE x = 'v'").is_empty());
    }
}
