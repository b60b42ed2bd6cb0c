//! [`plan_lance_sql`]: the one place SQL text becomes a statement this crate
//! plans itself instead of DataFusion.
//!
//! Three kinds of statement need it, because DataFusion 54 cannot plan them
//! from the syntax tree it is given:
//!
//! * `MERGE INTO` on a Lance table (see [`super::merge_into`]);
//! * `CREATE INDEX` / `DROP INDEX` on a Lance table (see [`super::index`]);
//! * `ALTER TABLE` on a Lance table (see [`super::alter`]);
//! * any statement reading a Lance table as of a version, a tag or a time
//!   (see [`super::time_travel`]).
//!
//! Everything else is left to DataFusion untouched (`None`): its own parser
//! reports its own errors.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::plan_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{ExplainOption, LogicalPlan, LogicalPlanBuilder};
use datafusion::sql::parser::{CopyToSource, DFParserBuilder, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, ObjectType, Statement, TableFactor, Value, Visit, Visitor,
};
use datafusion::sql::sqlparser::dialect::{Dialect, dialect_from_str};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use super::alter::plan_alter_table;
use super::index::plan_index_statement;
use super::merge_into::{mark_stars, plan_merge_into};
use super::time_travel::{self, AS_OF_FUNCTION_NAME, PinnedRelations};
use crate::catalog::{plan_catalog_ddl, refresh_catalogs_of};
use crate::table::lookup::prefetch;
use crate::udtf::{
    FTS_FUNCTION_NAME, HYBRID_SEARCH_FUNCTION_NAME, ROWS_FUNCTION_NAME, VECTOR_SEARCH_FUNCTION_NAME,
};

/// Plans `sql` when it is a statement DataFusion cannot plan on Lance tables
/// — `MERGE INTO`, `CREATE INDEX`, `DROP INDEX`, `ALTER TABLE`, or a query with `VERSION AS OF` / `TIMESTAMP AS OF` /
/// `lance_as_of(...)` — or an `EXPLAIN` of one; `None` for any other SQL,
/// which [`SessionContext::sql`](datafusion::prelude::SessionContext::sql)
/// plans as usual. [`crate::LanceSessionContextExt::lance_sql`] and
/// `lance-sql` run every statement through it.
///
/// Planning reads (the versions a statement names, the value of a
/// `TIMESTAMP AS OF` expression) but never writes.
pub async fn plan_lance_sql(state: &SessionState, sql: &str) -> DFResult<Option<LogicalPlan>> {
    Ok(match intercept(state, sql, false).await? {
        Intercepted::Ours(plan) => Some(*plan),
        Intercepted::DataFusions(_) | Intercepted::Unparsed => None,
    })
}

/// What [`intercept`] made of a statement.
pub(crate) enum Intercepted {
    /// A statement this crate plans, planned.
    Ours(Box<LogicalPlan>),
    /// Any other statement, parsed exactly as DataFusion parses it (the same
    /// tokens, dialect and recursion limit): DataFusion plans it from here
    /// without parsing the text again.
    DataFusions(Box<DFStatement>),
    /// Text DataFusion should parse itself (it reports its own errors).
    Unparsed,
}

/// [`plan_lance_sql`]; with `parse_theirs`, also handing back the parsed
/// statement when it is DataFusion's to plan (otherwise such text is not
/// parsed here: `Unparsed`).
pub(crate) async fn intercept(
    state: &SessionState,
    sql: &str,
    parse_theirs: bool,
) -> DFResult<Intercepted> {
    let (refresh, statement, ours, searches) = {
        let name = state.config_options().sql_parser.dialect;
        let Some(dialect) = dialect_from_str(name) else {
            return plan_err!("unknown SQL dialect '{name}'");
        };
        let Ok(tokens) = Tokenizer::new(dialect.as_ref(), sql).tokenize_with_location() else {
            return Ok(Intercepted::Unparsed);
        };
        let refresh = lists_tables(&tokens);
        let limit = state.config_options().sql_parser.recursion_limit;
        // Dialects that parse time-travel clauses themselves (`AT(...)`,
        // `FOR SYSTEM_TIME AS OF`): a clause on a statement's target must be
        // seen here, as DataFusion drops it from a `DELETE`.
        let searches = names_tables(&tokens);
        let ours = may_be_ours(&tokens) || searches || dialect.supports_table_versioning();
        let statement = if ours {
            parse(tokens, dialect.as_ref(), limit)
        } else if parse_theirs {
            parse_one(tokens, dialect.as_ref(), limit)
        } else {
            None
        };
        (refresh, statement, ours, searches)
    };
    if refresh {
        refresh_catalogs_of(state).await?;
    }
    let Some(statement) = statement else {
        return Ok(Intercepted::Unparsed);
    };
    if !ours {
        return Ok(Intercepted::DataFusions(Box::new(statement)));
    }
    let pinned = PinnedRelations::resolve(state, &statement).await?;
    // Tables named by table functions, which are planned synchronously: a
    // catalog may need I/O to find them.
    let prefetched = match searches {
        true => Some(prefetch(state, &named_tables(&statement)).await?).filter(|p| !p.is_empty()),
        false => None,
    };
    let planned = if pinned.is_some() || prefetched.is_some() {
        let mut state = state.clone();
        if let Some(pinned) = pinned {
            state.register_relation_planner(Arc::new(pinned))?;
        }
        if let Some(prefetched) = prefetched {
            state.config_mut().set_extension(Arc::new(prefetched));
        }
        match plan_ours(&state, &statement).await? {
            Some(plan) => Some(plan),
            None => Some(state.statement_to_plan(statement).await?),
        }
    } else {
        plan_ours(state, &statement).await?
    };
    // A statement that may be ours but is not was parsed with this crate's
    // extensions: DataFusion parses the text again, for its own errors.
    Ok(planned.map_or(Intercepted::Unparsed, |plan| {
        Intercepted::Ours(Box::new(plan))
    }))
}

/// Plans `statement` when it is `MERGE INTO`, `CREATE INDEX`, `DROP INDEX`
/// or `ALTER TABLE` on a Lance table, or an `EXPLAIN` of one; `None`
/// otherwise.
async fn plan_ours(state: &SessionState, statement: &DFStatement) -> DFResult<Option<LogicalPlan>> {
    let (inner, explain) = match statement {
        DFStatement::Explain(explain) => (explain.statement.as_ref(), Some(explain)),
        other => (other, None),
    };
    let DFStatement::Statement(inner) = inner else {
        return Ok(None);
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
                None => return Ok(None),
            }
        }
        alter @ Statement::AlterTable(_) => match plan_alter_table(state, alter).await? {
            Some(plan) => plan,
            None => return Ok(None),
        },
        other => match plan_index_statement(state, other).await? {
            Some(plan) => plan,
            None => return Ok(None),
        },
    };
    let Some(explain) = explain else {
        return Ok(Some(plan));
    };
    let mut option = ExplainOption::default()
        .with_verbose(explain.verbose)
        .with_analyze(explain.analyze);
    if let Some(format) = &explain.format {
        option = option.with_format(format.parse()?);
    }
    Ok(Some(
        LogicalPlanBuilder::from(plan)
            .explain_option_format(option)?
            .build()?,
    ))
}

/// True when `tokens` hold `MERGE`, `INDEX`, `ALTER`, `CREATE`, `DROP`, `AS OF` or `lance_as_of`: the
/// only statements worth parsing here.
fn may_be_ours(tokens: &[TokenWithSpan]) -> bool {
    let mut previous = Keyword::NoKeyword;
    for token in tokens {
        let Token::Word(word) = &token.token else {
            if !matches!(token.token, Token::Whitespace(_)) {
                previous = Keyword::NoKeyword;
            }
            continue;
        };
        if matches!(
            word.keyword,
            Keyword::MERGE | Keyword::INDEX | Keyword::ALTER | Keyword::CREATE | Keyword::DROP
        ) || (previous == Keyword::AS && word.keyword == Keyword::OF)
            || word.value.eq_ignore_ascii_case(AS_OF_FUNCTION_NAME)
        {
            return true;
        }
        previous = word.keyword;
    }
    false
}

/// The table functions that look their table up while they are planned.
const LOOKING_UP: [&str; 4] = [
    VECTOR_SEARCH_FUNCTION_NAME,
    FTS_FUNCTION_NAME,
    HYBRID_SEARCH_FUNCTION_NAME,
    ROWS_FUNCTION_NAME,
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
/// functions in `statement` (subqueries and `EXPLAIN` included).
fn named_tables(statement: &DFStatement) -> Vec<String> {
    #[derive(Default)]
    struct Names(Vec<String>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table {
                name,
                args: Some(args),
                ..
            } = factor
                && LOOKING_UP.contains(&name.to_string().as_str())
                && let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(ast::Expr::Value(value)))) =
                    args.args.first()
                && let Value::SingleQuotedString(table) = &value.value
            {
                self.0.push(table.clone());
            }
            ControlFlow::Continue(())
        }
    }
    let mut names = Names::default();
    let _ = match statement {
        DFStatement::Statement(s) => s.visit(&mut names),
        DFStatement::Explain(explain) => return named_tables(&explain.statement),
        DFStatement::CopyTo(copy) => match &copy.source {
            CopyToSource::Query(query) => query.visit(&mut names),
            CopyToSource::Relation(_) => ControlFlow::Continue(()),
        },
        _ => ControlFlow::Continue(()),
    };
    names.0
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
/// and time-travel clauses the dialect does not parse included; `None` when they do not parse (DataFusion then reports
/// the error).
fn parse(tokens: Vec<TokenWithSpan>, dialect: &dyn Dialect, limit: usize) -> Option<DFStatement> {
    let tokens = mark_stars(tokens);
    if let Some(statement) = parse_one(tokens.clone(), dialect, limit) {
        return Some(statement);
    }
    let (kept, clauses) = time_travel::cut(&tokens, dialect)?;
    if clauses.is_empty() {
        return None;
    }
    let mut statement = parse_one(kept, dialect, limit)?;
    time_travel::attach(&mut statement, clauses).then_some(statement)
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
