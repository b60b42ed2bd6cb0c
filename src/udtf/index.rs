//! `lance_create_index('<table or location>', '<index>', '<column>', '<type>'
//! [, '<option>=<value>' ...])` and `lance_drop_index('<table or location>',
//! '<index>')`: the table-function forms of `CREATE INDEX` and `DROP INDEX`
//! for embedders that do not plan statements through
//! [`crate::plan_lance_sql`]. Types and options: see
//! [`crate::physical_plan::IndexMethod`]. The change happens when the
//! statement runs (`EXPLAIN` changes nothing); the result is one row:
//! `index, action, version`.

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;

use super::string_args;
use crate::error::{Error, fail};
use crate::location::redact_uri;
use crate::physical_plan::{IndexChange, IndexDefinition, IndexMethod};
use crate::table::maintain::Maintain;

/// SQL name of the index-building function.
pub const CREATE_INDEX_FUNCTION_NAME: &str = "lance_create_index";
/// SQL name of the index-dropping function.
pub const DROP_INDEX_FUNCTION_NAME: &str = "lance_drop_index";

/// `lance_create_index(...)` or `lance_drop_index(...)`.
#[derive(Debug)]
pub struct IndexFunction {
    create: bool,
}

impl IndexFunction {
    /// `lance_create_index`.
    pub fn creating() -> Self {
        Self { create: true }
    }

    /// `lance_drop_index`.
    pub fn dropping() -> Self {
        Self { create: false }
    }

    fn name(&self) -> &'static str {
        if self.create {
            CREATE_INDEX_FUNCTION_NAME
        } else {
            DROP_INDEX_FUNCTION_NAME
        }
    }

    fn usage(&self) -> String {
        if self.create {
            format!(
                "usage: {CREATE_INDEX_FUNCTION_NAME}('<table or location>', '<index>', \
                 '<column>', '<type>' [, '<option>=<value>' ...])"
            )
        } else {
            format!("usage: {DROP_INDEX_FUNCTION_NAME}('<table or location>', '<index>')")
        }
    }
}

impl TableFunctionImpl for IndexFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let Some(mut strings) = string_args(args.exprs()) else {
            return fail!(
                invalid_input,
                "{} takes strings; {}",
                self.name(),
                self.usage()
            );
        };
        let change = match (self.create, strings.as_slice()) {
            (true, [_, name, column, method, options @ ..]) => {
                let mut pairs = Vec::new();
                for option in options {
                    let Some((key, value)) = option.split_once('=') else {
                        return Err(Error::UnknownOption {
                            key: option.clone(),
                            hint: format!(
                                " for {CREATE_INDEX_FUNCTION_NAME}: options are \
                                 '<option>=<value>'"
                            ),
                        }
                        .into());
                    };
                    pairs.push((key.to_string(), value.to_string()));
                }
                let in_call = |e: Error| {
                    e.prefixed(&format!(
                        "{CREATE_INDEX_FUNCTION_NAME} on '{}'",
                        redact_uri(&strings[0])
                    ))
                };
                let method = IndexMethod::parse(method).map_err(in_call)?;
                IndexChange::Create(
                    IndexDefinition::new(name, column, method, pairs, false).map_err(in_call)?,
                )
            }
            (false, [_, name]) => IndexChange::Drop {
                name: name.clone(),
                if_exists: false,
            },
            _ => {
                return fail!(
                    invalid_input,
                    "{}: wrong number of arguments; {}",
                    self.name(),
                    self.usage()
                );
            }
        };
        Ok(Maintain::provider(strings.swap_remove(0), change))
    }
}
