//! Encoding of `ALTER TABLE` schema changes, shared by the logical and
//! physical codecs.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::Result as DFResult;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Expr;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::logical_plan::from_proto::parse_expr;
use datafusion_proto::logical_plan::to_proto::serialize_expr;
use datafusion_proto::protobuf::ArrowType;

use super::{malformed, proto, required};
use crate::physical_plan::{NewValues, SchemaChange};

pub(super) fn encode_alter(
    change: &SchemaChange,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<proto::SchemaChange> {
    let literal = |v: &ScalarValue| serialize_expr(&Expr::Literal(v.clone(), None), codec);
    let arrow =
        |t: &DataType| ArrowType::try_from(t).map_err(|e| malformed(format!("type {t}: {e}")));
    let mut out = proto::SchemaChange {
        column: change.column().to_string(),
        ..Default::default()
    };
    match change {
        SchemaChange::AddColumn {
            data_type,
            nullable,
            values,
            if_not_exists,
            ..
        } => {
            out.action = "add".into();
            out.data_type = Some(arrow(data_type)?);
            out.nullable = *nullable;
            out.if_exists = *if_not_exists;
            (out.values, out.value) = match values {
                NewValues::Null => ("null".into(), None),
                NewValues::Default(v) => ("default".into(), Some(literal(v)?)),
                NewValues::Computed(e) => ("computed".into(), Some(serialize_expr(e, codec)?)),
            };
        }
        SchemaChange::DropColumn { if_exists, .. } => {
            out.action = "drop".into();
            out.if_exists = *if_exists;
        }
        SchemaChange::RenameColumn { to, .. } => {
            out.action = "rename".into();
            out.to = to.clone();
        }
        SchemaChange::SetType { data_type, .. } => {
            out.action = "set_type".into();
            out.data_type = Some(arrow(data_type)?);
        }
        SchemaChange::DropNotNull { .. } => out.action = "drop_not_null".into(),
        SchemaChange::SetDefault { default, .. } => {
            out.action = "set_default".into();
            out.value = default.as_ref().map(literal).transpose()?;
        }
    }
    Ok(out)
}

pub(super) fn decode_alter(
    change: Option<proto::SchemaChange>,
    ctx: &TaskContext,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<SchemaChange> {
    let change = required(change, "schema change")?;
    let data_type = || -> DFResult<DataType> {
        let t = required(change.data_type.as_ref(), "data type")?;
        DataType::try_from(t).map_err(|e| malformed(format!("data type: {e}")))
    };
    let expr = || -> DFResult<Expr> {
        Ok(parse_expr(
            required(change.value.as_ref(), "value")?,
            ctx,
            codec,
        )?)
    };
    let literal = || -> DFResult<ScalarValue> {
        match expr()? {
            Expr::Literal(v, _) => Ok(v),
            other => Err(malformed(format!("a default of {other}"))),
        }
    };
    let column = change.column.clone();
    Ok(match change.action.as_str() {
        "add" => SchemaChange::AddColumn {
            data_type: data_type()?,
            nullable: change.nullable,
            values: match change.values.as_str() {
                "null" => NewValues::Null,
                "default" => NewValues::Default(literal()?),
                "computed" => NewValues::Computed(expr()?),
                other => return Err(malformed(format!("new values '{other}'"))),
            },
            if_not_exists: change.if_exists,
            column,
        },
        "drop" => SchemaChange::DropColumn {
            column,
            if_exists: change.if_exists,
        },
        "rename" => SchemaChange::RenameColumn {
            from: column,
            to: change.to.clone(),
        },
        "set_type" => SchemaChange::SetType {
            data_type: data_type()?,
            column,
        },
        "drop_not_null" => SchemaChange::DropNotNull { column },
        "set_default" => SchemaChange::SetDefault {
            default: change.value.is_some().then(literal).transpose()?,
            column,
        },
        other => return Err(malformed(format!("schema change '{other}'"))),
    })
}
