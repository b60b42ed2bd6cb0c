//! The interactive loop: datafusion-cli's, reading statements this crate
//! plans (`MERGE ... INSERT *`, `VERSION AS OF`, which DataFusion's parser
//! alone rejects) and running them through the same [`Runner`] as `-c` and
//! `-f`.
//!
//! * A statement ends at a `;` outside quotes and comments; input before it
//!   may span lines. Several statements on one line run in order.
//! * Ctrl-C while a statement runs cancels it and returns to the prompt;
//!   at the prompt it clears the line; Ctrl-D (or `\q`) leaves.
//! * `\?`, `\q`, `\d`, `\d <table>`, `\i <file>`, `\quiet`, `\pset`, `\h`:
//!   as in datafusion-cli (`\d` and `\i` run through this crate).
//! * History is kept in `~/.lance-sql_history` between runs.

use std::borrow::Cow;
use std::path::PathBuf;

use datafusion::common::config::Dialect;
use datafusion::sql::sqlparser::dialect::dialect_from_str;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use datafusion_cli::command::{Command, OutputFormat};
use datafusion_cli::highlighter::{NoSyntaxHighlighter, SyntaxHighlighter};
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::PrintOptions;
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::{CmdKind, Highlighter};
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};

use crate::statements::Runner;

/// The REPL's history file: `~/.lance-sql_history` (`.lance-sql_history`
/// in the working directory when there is no home directory).
fn history_file() -> PathBuf {
    let name = ".lance-sql_history";
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(name))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Runs the REPL until `\q` or Ctrl-D.
pub(crate) async fn repl(runner: &mut Runner) -> rustyline::Result<()> {
    let mut editor: Editor<LineHelper, _> = Editor::new()?;
    editor.set_helper(Some(LineHelper::new(
        &dialect(runner),
        runner.print_options.color,
    )));
    let history = history_file();
    editor.load_history(&history).ok();
    loop {
        match editor.readline("> ") {
            Ok(line) if line.trim_start().starts_with('\\') => {
                editor.add_history_entry(line.trim())?;
                if !command(runner, line.trim()).await {
                    break;
                }
            }
            Ok(line) => {
                if !line.trim().is_empty() {
                    editor.add_history_entry(line.trim_end())?;
                }
                // Saved at once: a killed terminal keeps what was typed.
                editor.save_history(&history).ok();
                runner.run_text(&line, false).await;
                if let Some(helper) = editor.helper_mut() {
                    helper.dialect = dialect(runner);
                }
            }
            Err(ReadlineError::Interrupted) => {
                println!("^C");
                continue;
            }
            Err(ReadlineError::Eof) => {
                println!("\\q");
                break;
            }
            Err(e) => {
                eprintln!("Unknown error happened {e:?}");
                break;
            }
        }
    }
    editor.save_history(&history)
}

fn dialect(runner: &Runner) -> Dialect {
    runner.ctx.state().config_options().sql_parser.dialect
}

/// Runs a `\` command; `false` when it quits.
async fn command(runner: &mut Runner, line: &str) -> bool {
    let words = line[1..].split_whitespace().collect::<Vec<_>>().join(" ");
    let Ok(command) = words.parse::<Command>() else {
        eprintln!("'{line}' is not a valid command, you can use '\\?' to see all commands");
        return true;
    };
    let result = match command {
        Command::Quit => return false,
        Command::ListTables => {
            runner.run_statement("SHOW TABLES".into()).await;
            Ok(())
        }
        Command::DescribeTableStmt(name) => {
            runner
                .run_statement(format!("SHOW COLUMNS FROM {name}"))
                .await;
            Ok(())
        }
        Command::Include(Some(file)) => match std::fs::read_to_string(&file) {
            Ok(text) => {
                runner.run_text(&text, true).await;
                Ok(())
            }
            Err(e) => Err(format!("Error opening {file:?} {e}")),
        },
        Command::OutputFormat(None) => {
            println!("Output format is {:?}.", runner.print_options.format);
            Ok(())
        }
        Command::OutputFormat(Some(format)) => match format.parse::<OutputFormat>() {
            Ok(format) => format
                .execute(&mut runner.print_options)
                .await
                .map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "'{line}' is not a valid command, you can use '\\?' to see all commands"
            )),
        },
        // The command list, as a table whatever the output format.
        Command::Help => {
            let mut table = PrintOptions {
                format: PrintFormat::Table,
                ..runner.print_options.clone()
            };
            Command::Help
                .execute(&runner.ctx, &mut table)
                .await
                .map_err(|e| e.to_string())
        }
        other => other
            .execute(&runner.ctx, &mut runner.print_options)
            .await
            .map_err(|e| e.to_string()),
    };
    if let Err(e) = result {
        eprintln!("{e}");
    }
    true
}

/// The line editor's helper: input is complete at a `;` token (or for a
/// `\` command); highlighting and the hint as in datafusion-cli; file names
/// complete inside quotes.
pub(crate) struct LineHelper {
    dialect: Dialect,
    highlighter: Box<dyn Highlighter>,
    files: FilenameCompleter,
}

impl LineHelper {
    fn new(dialect: &Dialect, color: bool) -> Self {
        let highlighter: Box<dyn Highlighter> = if color {
            Box::new(SyntaxHighlighter::new(dialect))
        } else {
            Box::new(NoSyntaxHighlighter {})
        };
        Self {
            dialect: *dialect,
            highlighter,
            files: FilenameCompleter::new(),
        }
    }
}

/// Whether `input` ends a statement: its last token (comments and spaces
/// aside) is a `;` of `dialect`. Text that does not tokenize yet (an open
/// quote) is incomplete.
pub(crate) fn is_complete(input: &str, dialect: &Dialect) -> bool {
    let Some(dialect) = dialect_from_str(*dialect) else {
        return input.trim_end().ends_with(';');
    };
    let Ok(tokens) = Tokenizer::new(dialect.as_ref(), input).tokenize() else {
        return false;
    };
    tokens
        .iter()
        .rev()
        .find(|t| !matches!(t, Token::Whitespace(_) | Token::EOF))
        .is_some_and(|t| *t == Token::SemiColon)
}

impl Validator for LineHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        let input = ctx.input();
        Ok(
            if input.trim_start().starts_with('\\') || is_complete(input, &self.dialect) {
                ValidationResult::Valid(None)
            } else {
                ValidationResult::Incomplete
            },
        )
    }
}

impl Highlighter for LineHelper {
    fn highlight<'l>(&self, line: &'l str, pos: usize) -> Cow<'l, str> {
        self.highlighter.highlight(line, pos)
    }

    fn highlight_char(&self, line: &str, pos: usize, kind: CmdKind) -> bool {
        self.highlighter.highlight_char(line, pos, kind)
    }

    fn highlight_hint<'h>(&self, hint: &'h str) -> Cow<'h, str> {
        Cow::Owned(format!("\x1b[90m{hint}\x1b[0m"))
    }
}

impl Hinter for LineHelper {
    type Hint = String;

    fn hint(&self, line: &str, _pos: usize, _ctx: &Context<'_>) -> Option<String> {
        line.is_empty()
            .then(|| " \\? for help, \\q to quit".to_string())
    }
}

impl Completer for LineHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        // Inside an open quote: a file name.
        if line[..pos].matches('\'').count() % 2 == 1 {
            self.files.complete(line, pos, ctx)
        } else {
            Ok((0, Vec::new()))
        }
    }
}

impl Helper for LineHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_complete_at_a_semicolon_token() {
        let generic = Dialect::Generic;
        assert!(is_complete("SELECT 1;", &generic));
        assert!(is_complete("SELECT 1; -- done\n", &generic));
        assert!(is_complete("SELECT * FROM t VERSION AS OF 1;", &generic));
        assert!(!is_complete("SELECT 1", &generic));
        assert!(!is_complete("SELECT ';", &generic));
        assert!(!is_complete("SELECT 1 -- ;", &generic));
        assert!(!is_complete("SELECT 1; SELECT", &generic));
    }
}
