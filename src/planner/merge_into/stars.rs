//! `WHEN MATCHED THEN UPDATE SET *` and `WHEN NOT MATCHED THEN INSERT *` —
//! "every column, by name", as lance-spark, Delta and Databricks users write
//! them — which sqlparser 0.62 rejects in every dialect.
//!
//! On tokens, never on text: each `*` of those two forms is replaced by
//! tokens the parser accepts around an identifier no SQL text can produce
//! (its position is line 0; positions in a statement start at line 1):
//! `UPDATE SET <all> = <all>` and `INSERT VALUES (<all>)`. The clause
//! planner reads them back as "every source column" ([`update_all`],
//! [`insert_all`]).

use datafusion::sql::sqlparser::ast::{
    Assignment, AssignmentTarget, Expr, Ident, ObjectNamePart, Values,
};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan, Word};

/// The name of the marker (never seen: errors about these clauses name the
/// `*` forms).
const ALL: &str = "*";

fn marker() -> TokenWithSpan {
    let nowhere = Location::new(0, 0);
    TokenWithSpan {
        token: Token::Word(Word {
            value: ALL.to_string(),
            quote_style: Some('"'),
            keyword: Keyword::NoKeyword,
        }),
        span: Span::new(nowhere, nowhere),
    }
}

fn at(token: Token, span: Span) -> TokenWithSpan {
    TokenWithSpan { token, span }
}

fn is_marker(ident: &Ident) -> bool {
    ident.value == ALL && ident.span.start.line == 0
}

/// Whether `tokens` hold the keyword `MERGE` (unquoted): the only
/// statements [`mark_stars`] changes.
pub(crate) fn names_merge(tokens: &[TokenWithSpan]) -> bool {
    tokens.iter().any(|t| {
        matches!(&t.token, Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::MERGE)
    })
}

/// `tokens` with `UPDATE SET *` and `INSERT *` of a `MERGE` statement
/// replaced by their markers (unchanged when there is no `MERGE`).
pub(crate) fn mark_stars(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    if !names_merge(&tokens) {
        return tokens;
    }
    let keyword = |t: &TokenWithSpan| match &t.token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    };
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    // The last two significant tokens kept.
    let mut recent: [Option<Keyword>; 2] = [None, None];
    for token in tokens {
        if matches!(token.token, Token::Whitespace(_)) {
            out.push(token);
            continue;
        }
        if token.token == Token::Mul {
            let span = token.span;
            match recent {
                [Some(Keyword::UPDATE), Some(Keyword::SET)] => {
                    out.extend([marker(), at(Token::Eq, span), marker()]);
                    recent = [None, None];
                    continue;
                }
                [_, Some(Keyword::INSERT)] => {
                    out.push(at(
                        Token::Word(Word {
                            value: "VALUES".to_string(),
                            quote_style: None,
                            keyword: Keyword::VALUES,
                        }),
                        span,
                    ));
                    out.extend([at(Token::LParen, span), marker(), at(Token::RParen, span)]);
                    recent = [None, None];
                    continue;
                }
                _ => {}
            }
        }
        recent = [recent[1], keyword(&token)];
        out.push(token);
    }
    out
}

/// True for the assignments of `UPDATE SET *`.
pub(super) fn update_all(assignments: &[Assignment]) -> bool {
    match assignments {
        [
            Assignment {
                target: AssignmentTarget::ColumnName(name),
                value: Expr::Identifier(value),
            },
        ] => {
            is_marker(value)
                && matches!(name.0.as_slice(), [ObjectNamePart::Identifier(i)] if is_marker(i))
        }
        _ => false,
    }
}

/// True for the columns and values of `INSERT *`.
pub(super) fn insert_all(columns: &[impl Sized], values: &Values) -> bool {
    match (columns, values.rows.as_slice()) {
        ([], [row]) => matches!(row.content.as_slice(), [Expr::Identifier(i)] if is_marker(i)),
        _ => false,
    }
}
