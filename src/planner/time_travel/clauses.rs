//! `VERSION AS OF` / `TIMESTAMP AS OF` in dialects whose parser rejects
//! them (DataFusion's default, the generic dialect, among them), and
//! `VERSION AS OF '<tag>'`, which no dialect of sqlparser 0.62 accepts.
//!
//! Works on tokens and on the syntax tree, never on SQL text: each clause
//! that follows a table name is cut out of the token stream (its expression
//! parsed by sqlparser itself), the rest is parsed as usual, and the clause
//! is put back on the table whose name ends where the clause began.

use std::ops::ControlFlow;

use datafusion::sql::parser::{CopyToSource, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    ObjectName, TableFactor, TableVersion, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan};

/// A clause cut out of the token stream.
pub(crate) struct Clause {
    /// Where the token before the clause (the table name) ends.
    after: Location,
    version: TableVersion,
}

/// `tokens` without the time-travel clauses that follow a word, and those
/// clauses; `None` when a clause's expression does not parse.
pub(crate) fn cut(
    tokens: &[TokenWithSpan],
    dialect: &dyn Dialect,
) -> Option<(Vec<TokenWithSpan>, Vec<Clause>)> {
    let mut kept: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    let mut clauses = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let previous = kept
            .iter()
            .rev()
            .find(|t| !matches!(t.token, Token::Whitespace(_)));
        if let (
            Some(TokenWithSpan {
                token: Token::Word(_),
                span,
            }),
            Some((timestamp, expr_start)),
        ) = (previous, clause_start(tokens, i))
        {
            let mut parser =
                Parser::new(dialect).with_tokens_with_locations(tokens[expr_start..].to_vec());
            let expr = parser.parse_expr().ok()?;
            let version = if timestamp {
                TableVersion::TimestampAsOf(expr)
            } else {
                TableVersion::VersionAsOf(expr)
            };
            clauses.push(Clause {
                after: span.end,
                version,
            });
            i = expr_start + parser.index();
            continue;
        }
        kept.push(tokens[i].clone());
        i += 1;
    }
    Some((kept, clauses))
}

/// True when `tokens` hold a `VERSION AS OF` or `TIMESTAMP AS OF` clause
/// (after anything) that [`cut`] would cut.
pub(crate) fn may_hold_clause(tokens: &[TokenWithSpan]) -> bool {
    (0..tokens.len()).any(|i| clause_start(tokens, i).is_some())
}

/// If `VERSION AS OF` or `TIMESTAMP AS OF` starts at `i`: whether it is the
/// timestamp form, and where its expression starts.
fn clause_start(tokens: &[TokenWithSpan], i: usize) -> Option<(bool, usize)> {
    let timestamp = match keyword(&tokens[i].token)? {
        Keyword::VERSION => false,
        Keyword::TIMESTAMP => true,
        _ => return None,
    };
    let mut next = i + 1;
    for expected in [Keyword::AS, Keyword::OF] {
        while matches!(tokens.get(next)?.token, Token::Whitespace(_)) {
            next += 1;
        }
        if keyword(&tokens[next].token)? != expected {
            return None;
        }
        next += 1;
    }
    Some((timestamp, next))
}

fn keyword(token: &Token) -> Option<Keyword> {
    match token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    }
}

/// Puts each clause back on the table whose name ends where it began; false
/// when a clause follows something other than a table name.
pub(crate) fn attach(statement: &mut DFStatement, clauses: Vec<Clause>) -> bool {
    let mut attach = Attach {
        clauses: clauses.into_iter().map(Some).collect(),
    };
    attach.statement(statement);
    attach.clauses.iter().all(Option::is_none)
}

struct Attach {
    clauses: Vec<Option<Clause>>,
}

impl Attach {
    fn statement(&mut self, statement: &mut DFStatement) {
        match statement {
            DFStatement::Statement(s) => {
                let _ = s.visit(self);
            }
            DFStatement::Explain(explain) => self.statement(&mut explain.statement),
            DFStatement::CopyTo(copy) => {
                if let CopyToSource::Query(query) = &mut copy.source {
                    let _ = query.visit(self);
                }
            }
            DFStatement::CreateExternalTable(_) | DFStatement::Reset(_) => {}
        }
    }
}

impl VisitorMut for Attach {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            name,
            version: version @ None,
            args: None,
            ..
        } = factor
            && let Some(end) = name_end(name)
            && let Some(slot) = self
                .clauses
                .iter_mut()
                .find(|c| c.as_ref().is_some_and(|c| c.after == end))
        {
            *version = slot.take().map(|c| c.version);
        }
        ControlFlow::Continue(())
    }
}

fn name_end(name: &ObjectName) -> Option<Location> {
    Some(name.0.last()?.as_ident()?.span.end)
}
