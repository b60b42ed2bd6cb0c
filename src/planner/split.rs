//! Splitting input into statements: the one splitter of `lance-sql`'s `-c`,
//! `-f` and REPL, and of the Postgres server's simple queries.
//!
//! A statement ends at a `;` that the session's SQL dialect reads as a
//! token: not inside a quoted string or identifier, not inside a comment.
//! Text that does not tokenize (an unterminated quote) is one statement,
//! whose error the planner reports when it runs.

use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::tokenizer::{Location, Token, Tokenizer};

/// The statements of `sql`, without their `;`, in order; statements holding
/// only whitespace and comments are left out.
pub fn split_statements(sql: &str, dialect: &dyn Dialect) -> Vec<String> {
    let Ok(tokens) = Tokenizer::new(dialect, sql).tokenize_with_location() else {
        return non_empty(sql).into_iter().collect();
    };
    let lines = LineStarts::of(sql);
    let mut statements = Vec::new();
    let (mut start, mut has_code) = (0, false);
    for token in &tokens {
        match &token.token {
            Token::SemiColon => {
                let end = lines.offset(sql, token.span.start);
                if has_code {
                    statements.push(sql[start..end].trim().to_string());
                }
                start = end + 1;
                has_code = false;
            }
            Token::Whitespace(_) | Token::EOF => {}
            _ => has_code = true,
        }
    }
    if has_code {
        statements.extend(non_empty(&sql[start..]));
    }
    statements
}

fn non_empty(sql: &str) -> Option<String> {
    let trimmed = sql.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// Byte offsets of the lines of a text, to turn the tokenizer's line and
/// column (counted in characters, from 1) into byte offsets.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn of(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self(starts)
    }

    fn offset(&self, text: &str, location: Location) -> usize {
        let line = (location.line as usize).saturating_sub(1);
        let start = self.0.get(line).copied().unwrap_or(text.len());
        let column = (location.column as usize).saturating_sub(1);
        text[start..]
            .char_indices()
            .nth(column)
            .map_or(text.len(), |(i, _)| start + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::{GenericDialect, PostgreSqlDialect};

    fn split(sql: &str) -> Vec<String> {
        split_statements(sql, &GenericDialect {})
    }

    #[test]
    fn splits_at_semicolons_outside_quotes_and_comments() {
        assert_eq!(split("SELECT 1; SELECT 2"), ["SELECT 1", "SELECT 2"]);
        assert_eq!(split("SELECT 1; SELECT 2;"), ["SELECT 1", "SELECT 2"]);
        assert_eq!(
            split("SELECT ';' AS a; SELECT \"x;y\" FROM t"),
            ["SELECT ';' AS a", "SELECT \"x;y\" FROM t"]
        );
        assert_eq!(
            split("SELECT 1 -- a; comment\n; /* b; */ SELECT 'é;ü', 2;"),
            ["SELECT 1 -- a; comment", "/* b; */ SELECT 'é;ü', 2"]
        );
        assert_eq!(split("SELECT 'it''s; fine'"), ["SELECT 'it''s; fine'"]);
    }

    #[test]
    fn drops_empty_statements_and_keeps_multi_line_ones() {
        assert_eq!(split(" ; ;\n-- only a comment\n;"), Vec::<String>::new());
        assert_eq!(
            split("SELECT\n  1;\n\nSELECT 'a\nb';"),
            ["SELECT\n  1", "SELECT 'a\nb'"]
        );
        // Characters of several bytes before the semicolon on the same line.
        assert_eq!(
            split("SELECT 'ééé'; SELECT 2"),
            ["SELECT 'ééé'", "SELECT 2"]
        );
    }

    #[test]
    fn an_unterminated_quote_is_one_statement() {
        assert_eq!(split("SELECT 'abc; SELECT 2"), ["SELECT 'abc; SELECT 2"]);
    }

    #[test]
    fn follows_the_dialect() {
        let sql = "SELECT $$a;b$$; SELECT 2";
        assert_eq!(
            split_statements(sql, &PostgreSqlDialect {}),
            ["SELECT $$a;b$$", "SELECT 2"]
        );
    }
}
