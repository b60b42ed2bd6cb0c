//! `PREPARE` / `EXECUTE` of statements this crate plans.
//!
//! DataFusion plans a prepared statement once, with its parameters left as
//! placeholders, and fills them in at `EXECUTE`. That cannot work for a
//! statement whose meaning depends on its parameters while it is planned:
//! a table function's arguments (`lance_vector_search(…, $1, $2)`: the
//! query vector and `k` choose the plan), a version clause, a `MERGE INTO`.
//! Such a statement is prepared here as its text: DataFusion stores a
//! one-row plan `SELECT '<text>' AS lance_prepared_sql, $1, …, $n` under the
//! statement's name (so parameter types, counts, `DEALLOCATE` and the
//! session's scope are DataFusion's own), and `EXECUTE` — after DataFusion
//! has checked and cast the values — plans the text again with each
//! placeholder replaced by its value as a SQL literal. Each `EXECUTE` is
//! therefore planned like the plain statement (it costs what the plain
//! statement costs), and errors about the statement itself (an unknown
//! table, a bad option) appear at `EXECUTE`.

use datafusion::common::ScalarValue;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};
use datafusion::sql::unparser::Unparser;

use crate::error::fail;

/// The column of the stored plan that holds the statement's text.
const TEXT_COLUMN: &str = "lance_prepared_sql";

/// `PREPARE name [(types)] AS statement` split into the tokens of
/// `PREPARE name [(types)]` and those of the statement; `None` for any
/// other statement.
pub(crate) fn split_prepare(
    tokens: &[TokenWithSpan],
) -> Option<(&[TokenWithSpan], &[TokenWithSpan])> {
    let mut words = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)));
    match words.next() {
        Some((_, t)) if keyword(t) == Some(Keyword::PREPARE) => {}
        _ => return None,
    }
    let mut depth = 0usize;
    for (i, t) in words {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ if depth == 0 && keyword(t) == Some(Keyword::AS) => {
                return Some((&tokens[..i], &tokens[i + 1..]));
            }
            _ => {}
        }
    }
    None
}

fn keyword(token: &TokenWithSpan) -> Option<Keyword> {
    match &token.token {
        Token::Word(word) => Some(word.keyword),
        _ => None,
    }
}

/// Byte offsets in SQL text of the locations its tokens start at.
struct Offsets<'a> {
    sql: &'a str,
    /// The byte offset of each line's start.
    lines: Vec<usize>,
}

impl<'a> Offsets<'a> {
    fn new(sql: &'a str) -> Self {
        let lines = std::iter::once(0)
            .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { sql, lines }
    }

    /// The byte offset of `at` (its line and column count from 1, the
    /// column in characters, as the tokenizer counts them).
    fn offset(&self, at: Location) -> usize {
        let Some(&line) = self.lines.get((at.line as usize).saturating_sub(1)) else {
            return self.sql.len();
        };
        self.sql[line..]
            .char_indices()
            .nth((at.column as usize).saturating_sub(1))
            .map_or(self.sql.len(), |(i, _)| line + i)
    }

    /// Where `token` starts.
    fn start(&self, token: &TokenWithSpan) -> usize {
        self.offset(token.span.start)
    }

    /// Where `token` ends (its span ends after its last character).
    fn end(&self, token: &TokenWithSpan) -> usize {
        self.offset(token.span.end)
    }

    /// The text of `tokens` (a run of the tokens of this text, whitespace
    /// and comments included), as typed.
    fn text(&self, tokens: &[TokenWithSpan]) -> &'a str {
        match (tokens.first(), tokens.last()) {
            (Some(first), Some(last)) => &self.sql[self.start(first)..self.end(last)],
            _ => "",
        }
    }
}

/// A `PREPARE` of a statement this crate plans.
pub(crate) struct Prepare {
    /// `PREPARE name [(types)]`, as typed.
    head: String,
    /// The statement, as typed.
    statement: String,
    /// Its placeholders, each once, in order.
    placeholders: Vec<String>,
}

impl Prepare {
    /// The `PREPARE` of `head` and `inner` (from [`split_prepare`]), tokens
    /// of `sql`.
    pub(crate) fn new(sql: &str, head: &[TokenWithSpan], inner: &[TokenWithSpan]) -> Self {
        let offsets = Offsets::new(sql);
        let mut placeholders: Vec<String> = Vec::new();
        for t in inner {
            if let Token::Placeholder(p) = &t.token
                && !placeholders.contains(p)
            {
                placeholders.push(p.clone());
            }
        }
        placeholders.sort_by_key(|p| (p.trim_start_matches('$').parse::<u64>().ok(), p.clone()));
        Self {
            head: offsets.text(head).to_string(),
            statement: offsets.text(inner).trim().to_string(),
            placeholders,
        }
    }

    /// DataFusion's plan of the `PREPARE` that stores the statement as its
    /// text (see the module docs).
    pub(crate) async fn plan(&self, state: &SessionState) -> DFResult<LogicalPlan> {
        // Quoted by hand: sqlparser's rendering leaves a doubled quote
        // as it is, which would unescape it once.
        let mut stored = format!(
            "{} AS SELECT '{}' AS {TEXT_COLUMN}",
            self.head,
            self.statement.replace('\'', "''")
        );
        for p in &self.placeholders {
            stored.push_str(", ");
            stored.push_str(p);
        }
        state.create_logical_plan(&stored).await
    }
}

/// When `plan` — what DataFusion made of an `EXECUTE` — is a statement
/// prepared by [`plan_prepare`], its text with each placeholder replaced by
/// its value.
pub(crate) fn executed_text(plan: &LogicalPlan, dialect: &dyn Dialect) -> DFResult<Option<String>> {
    let LogicalPlan::Projection(projection) = plan else {
        return Ok(None);
    };
    let schema = projection.schema.as_ref();
    let mut statement = None;
    let mut values: Vec<(String, ScalarValue)> = Vec::new();
    for (i, expr) in projection.expr.iter().enumerate() {
        let name = schema.field(i).name();
        let value = match expr.clone().unalias() {
            Expr::Literal(value, _) => value,
            _ => return Ok(None),
        };
        match (i, value) {
            (0, ScalarValue::Utf8(Some(text))) if name == TEXT_COLUMN => statement = Some(text),
            (0, _) => return Ok(None),
            (_, value) => values.push((name.clone(), value)),
        }
    }
    let Some(statement) = statement else {
        return Ok(None);
    };
    Ok(Some(substitute(&statement, &values, dialect)?))
}

/// `sql` with each `?` placeholder (as JDBC, ODBC and ADBC clients write
/// them) numbered `$1`, `$2`, … in order, and the placeholders values bind
/// to, in order: `$1` up to the largest number used, then named ones. (The Flight SQL server's prepared
/// statements.)
#[cfg_attr(not(feature = "server"), allow(dead_code))]
pub(crate) fn number_question_marks(
    sql: &str,
    dialect: &dyn Dialect,
) -> DFResult<(String, Vec<String>)> {
    let tokens = Tokenizer::new(dialect, sql)
        .tokenize_with_location()
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    let offsets = Offsets::new(sql);
    let (mut out, mut copied, mut numbered) = (String::with_capacity(sql.len()), 0, 0);
    let mut placeholders: Vec<String> = Vec::new();
    for token in &tokens {
        let Token::Placeholder(p) = &token.token else {
            continue;
        };
        let name = if p == "?" {
            numbered += 1;
            out.push_str(&sql[copied..offsets.start(token)]);
            out.push_str(&format!("${numbered}"));
            copied = offsets.end(token);
            format!("${numbered}")
        } else {
            p.clone()
        };
        if !placeholders.contains(&name) {
            placeholders.push(name);
        }
    }
    out.push_str(&sql[copied..]);
    // Values bind by position: `$k` takes the k-th, so the list holds every
    // number up to the largest (`SELECT $2` binds two values and uses the
    // second), then any named placeholders.
    let positional = |p: &String| p.strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
    let largest = placeholders
        .iter()
        .filter_map(positional)
        .max()
        .unwrap_or(0);
    let mut named: Vec<String> = placeholders
        .into_iter()
        .filter(|p| positional(p).is_none())
        .collect();
    named.sort();
    let all = (1..=largest)
        .map(|k| format!("${k}"))
        .chain(named)
        .collect();
    Ok((out, all))
}

/// `statement` with each placeholder replaced by its value as a SQL literal
/// (rendered from the value, never pasted from text: a string value is one
/// quoted literal whatever it holds).
pub(crate) fn substitute(
    statement: &str,
    values: &[(String, ScalarValue)],
    dialect: &dyn Dialect,
) -> DFResult<String> {
    let tokens = Tokenizer::new(dialect, statement)
        .tokenize_with_location()
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
    let offsets = Offsets::new(statement);
    let unparser = Unparser::default();
    let mut out = String::with_capacity(statement.len());
    let mut copied = 0;
    for token in &tokens {
        let Token::Placeholder(p) = &token.token else {
            continue;
        };
        let Some((_, value)) = values.iter().find(|(name, _)| name == p) else {
            return fail!(invalid_input, "EXECUTE: no value given for {p}");
        };
        out.push_str(&statement[copied..offsets.start(token)]);
        out.push('(');
        match value {
            // Quoted by hand (see `Prepare::plan`).
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => {
                // In a dialect where `\` escapes in string literals, a
                // value's own backslashes are escaped too: `\'` must not end
                // the literal.
                let s = if dialect.supports_string_literal_backslash_escape() {
                    s.replace('\\', "\\\\")
                } else {
                    s.clone()
                };
                out.push('\'');
                out.push_str(&s.replace('\'', "''"));
                out.push('\'');
            }
            value => {
                let literal = unparser.expr_to_sql(&Expr::Literal(value.clone(), None))?;
                out.push_str(&literal.to_string());
            }
        }
        out.push(')');
        copied = offsets.end(token);
    }
    out.push_str(&statement[copied..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    fn tokens(sql: &str) -> Vec<TokenWithSpan> {
        Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap()
    }

    #[test]
    fn a_prepare_splits_at_its_as_and_nothing_else_does() {
        let sql = "PREPARE q(INT, VARCHAR) AS\n  SELECT CAST(1 AS INT) AS x, 'é''s' FROM t -- end";
        let t = tokens(sql);
        let (head, inner) = split_prepare(&t).unwrap();
        let prepare = Prepare::new(sql, head, inner);
        assert_eq!(prepare.head, "PREPARE q(INT, VARCHAR) ");
        assert_eq!(
            prepare.statement,
            "SELECT CAST(1 AS INT) AS x, 'é''s' FROM t -- end"
        );
        assert!(split_prepare(&tokens("SELECT 1 AS a")).is_none());
        assert!(split_prepare(&tokens("EXECUTE q(1)")).is_none());
    }

    #[test]
    fn values_become_literals_and_strings_stay_one_literal() {
        let values = vec![
            ("$1".to_string(), ScalarValue::Int64(Some(3))),
            (
                "$2".to_string(),
                ScalarValue::Utf8(Some("it's''); DROP TABLE t; --".into())),
            ),
        ];
        let sql = substitute(
            "SELECT * FROM f('t', $1) WHERE s = $2 AND k = $1",
            &values,
            &GenericDialect {},
        )
        .unwrap();
        assert_eq!(
            sql,
            "SELECT * FROM f('t', (3)) WHERE s = ('it''s''''); DROP TABLE t; --') AND k = (3)"
        );
        let mysql = datafusion::sql::sqlparser::dialect::MySqlDialect {};
        let escaped = substitute(
            "SELECT ?",
            &[(
                "?".to_string(),
                ScalarValue::Utf8(Some("\\' OR 1=1 --".into())),
            )],
            &mysql,
        )
        .unwrap();
        assert_eq!(escaped, "SELECT ('\\\\'' OR 1=1 --')");
        let tokens = Tokenizer::new(&mysql, &escaped).tokenize().unwrap();
        let strings = tokens
            .iter()
            .filter(|t| matches!(t, Token::SingleQuotedString(_)))
            .count();
        assert_eq!(strings, 1, "{tokens:?}");
        let (numbered, names) = number_question_marks(
            "SELECT '?' AS q, ? FROM t WHERE a = ? -- ?",
            &GenericDialect {},
        )
        .unwrap();
        assert_eq!(numbered, "SELECT '?' AS q, $1 FROM t WHERE a = $2 -- ?");
        assert_eq!(names, ["$1", "$2"]);
        let (_, gaps) = number_question_marks("SELECT $3, $1, $3", &GenericDialect {}).unwrap();
        assert_eq!(gaps, ["$1", "$2", "$3"]);
        let missing = substitute("SELECT $3", &values, &GenericDialect {})
            .unwrap_err()
            .to_string();
        assert!(missing.contains("no value given for $3"), "{missing}");
    }
}
