//! `lance_tag('<table or location>', 'create' | 'update' | 'delete', '<tag>' [, <version>])`:
//! creates a tag (at `version`, the latest by default), moves one, or
//! deletes one. The change happens when the statement runs (`EXPLAIN`
//! changes nothing); the result is one row: `tag, version` (NULL once
//! deleted). `lance_tags('<table>')` lists them; `VERSION AS OF '<tag>'`
//! reads one.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::Expr;

use super::string;
use crate::error::fail;
use crate::physical_plan::{TagAction, TagChange};
use crate::table::maintain::Maintain;

/// SQL name of the tag-management function.
pub const TAG_FUNCTION_NAME: &str = "lance_tag";

/// `lance_tag(...)`.
#[derive(Debug, Default)]
pub struct TagFunction {}

fn usage() -> String {
    format!(
        "usage: {TAG_FUNCTION_NAME}('<table or location>', 'create' | 'update' | 'delete', \
         '<tag>' [, <version>])"
    )
}

impl TableFunctionImpl for TagFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        if !(3..=4).contains(&exprs.len()) {
            return fail!(
                invalid_input,
                "{TAG_FUNCTION_NAME} takes 3 or 4 arguments; {}",
                usage()
            );
        }
        let (Some(target), Some(action), Some(tag)) =
            (string(&exprs[0]), string(&exprs[1]), string(&exprs[2]))
        else {
            return fail!(
                invalid_input,
                "{TAG_FUNCTION_NAME}: the table, the action and the tag are strings; {}",
                usage()
            );
        };
        let Some(action) = TagAction::parse(action) else {
            return fail!(
                invalid_input,
                "{TAG_FUNCTION_NAME}: unknown action '{action}'; {}",
                usage()
            );
        };
        let version = match exprs.get(3) {
            None => None,
            Some(Expr::Literal(v, _)) if v.data_type().is_integer() => {
                match v.cast_to(&DataType::Int64) {
                    Ok(ScalarValue::Int64(Some(n))) if n > 0 => Some(n as u64),
                    _ => {
                        return fail!(
                            invalid_input,
                            "{TAG_FUNCTION_NAME}: versions are numbered from 1; got {v}"
                        );
                    }
                }
            }
            Some(other) => {
                return fail!(
                    invalid_input,
                    "{TAG_FUNCTION_NAME}: the version must be an integer; got {other}; {}",
                    usage()
                );
            }
        };
        if action == TagAction::Delete && version.is_some() {
            return fail!(
                invalid_input,
                "{TAG_FUNCTION_NAME}: 'delete' takes no version; {}",
                usage()
            );
        }
        if tag.trim().is_empty() {
            return fail!(invalid_input, "{TAG_FUNCTION_NAME}: the tag name is empty");
        }
        if action != TagAction::Delete
            && let Err(e) = crate::name::check_new(crate::name::NameKind::Tag, tag)
        {
            return Err(e.prefixed(TAG_FUNCTION_NAME).into());
        }
        Ok(Maintain::provider(
            target,
            TagChange {
                action,
                tag: tag.to_string(),
                version,
            },
        ))
    }
}
