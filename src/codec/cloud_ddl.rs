//! Index and column changes of `db://` tables ([`CloudDdl`]) on the wire:
//! the node [`CloudDdlExec`] and the statement [`CloudDdlStatement`] of
//! logical plans (the API key under the codec's storage rule).

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;

use super::cloud::{CloudProviderMessage, CloudTableMessage};
use super::{StoragePolicy, malformed, required};
use crate::cloud::CloudDdl;
use crate::cloud::ddl::TagAction;
use crate::physical_plan::cloud_ddl::{CloudDdlExec, CloudDdlParts};
use crate::table::cloud_ddl::CloudDdlStatement;
use crate::table::statement::StatementTable;

/// A [`CloudDdl`]: `kind` names the variant, the other fields are those it
/// has.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudDdlMessage {
    /// `create_index`, `drop_index`, `add_column`, `drop_column`,
    /// `alter_column`, `create_tag`, `update_tag` or `delete_tag`.
    #[prost(string, tag = "1")]
    pub kind: String,
    /// The index or column.
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub column: String,
    #[prost(string, tag = "4")]
    pub index_type: String,
    /// `WITH` options as key, value, key, value, ...
    #[prost(string, repeated, tag = "5")]
    pub params: Vec<String>,
    /// `IF EXISTS` / `IF NOT EXISTS`.
    #[prost(bool, tag = "6")]
    pub if_exists: bool,
    #[prost(string, tag = "7")]
    pub expression: String,
    #[prost(string, optional, tag = "8")]
    pub rename: Option<String>,
    #[prost(string, optional, tag = "9")]
    pub data_type: Option<String>,
    #[prost(bool, optional, tag = "10")]
    pub nullable: Option<bool>,
    /// The version a tag points to.
    #[prost(uint64, optional, tag = "11")]
    pub version: Option<u64>,
}

/// A [`CloudDdlExec`].
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudDdlNode {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub table: Option<CloudTableMessage>,
    #[prost(message, optional, tag = "3")]
    pub ddl: Option<CloudDdlMessage>,
}

/// A [`CloudDdlStatement`].
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CloudDdlTable {
    #[prost(string, tag = "1")]
    pub reference: String,
    #[prost(message, optional, tag = "2")]
    pub target: Option<CloudProviderMessage>,
    #[prost(message, optional, tag = "3")]
    pub ddl: Option<CloudDdlMessage>,
}

fn encode_ddl(ddl: &CloudDdl) -> CloudDdlMessage {
    let mut m = CloudDdlMessage::default();
    match ddl {
        CloudDdl::CreateIndex {
            name,
            column,
            index_type,
            params,
            if_not_exists,
        } => {
            m.kind = "create_index".into();
            m.name = name.clone();
            m.column = column.clone();
            m.index_type = index_type.clone();
            m.params = params
                .iter()
                .flat_map(|(k, v)| [k.clone(), v.clone()])
                .collect();
            m.if_exists = *if_not_exists;
        }
        CloudDdl::DropIndex { name, if_exists } => {
            m.kind = "drop_index".into();
            m.name = name.clone();
            m.if_exists = *if_exists;
        }
        CloudDdl::AddColumn {
            name,
            expression,
            if_not_exists,
        } => {
            m.kind = "add_column".into();
            m.name = name.clone();
            m.expression = expression.clone();
            m.if_exists = *if_not_exists;
        }
        CloudDdl::DropColumn { name, if_exists } => {
            m.kind = "drop_column".into();
            m.name = name.clone();
            m.if_exists = *if_exists;
        }
        CloudDdl::AlterColumn {
            column,
            rename,
            data_type,
            nullable,
        } => {
            m.kind = "alter_column".into();
            m.column = column.clone();
            m.rename = rename.clone();
            m.data_type = data_type.clone();
            m.nullable = *nullable;
        }
        CloudDdl::Tag {
            action,
            tag,
            version,
        } => {
            m.kind = match action {
                TagAction::Create => "create_tag",
                TagAction::Update => "update_tag",
                TagAction::Delete => "delete_tag",
            }
            .into();
            m.name = tag.clone();
            m.version = *version;
        }
    }
    m
}

fn decode_ddl(message: Option<CloudDdlMessage>) -> DFResult<CloudDdl> {
    let m = required(message, "LanceDB table change")?;
    let named = |what: &str| {
        if m.name.is_empty() {
            Err(malformed(format!("LanceDB {what} without a name")))
        } else {
            Ok(m.name.clone())
        }
    };
    Ok(match m.kind.as_str() {
        "create_index" => {
            if m.column.is_empty() || m.index_type.is_empty() || m.params.len() % 2 != 0 {
                return Err(malformed("LanceDB create_index"));
            }
            CloudDdl::CreateIndex {
                name: named("index")?,
                column: m.column,
                index_type: m.index_type,
                params: m
                    .params
                    .chunks(2)
                    .map(|kv| (kv[0].clone(), kv[1].clone()))
                    .collect(),
                if_not_exists: m.if_exists,
            }
        }
        "drop_index" => CloudDdl::DropIndex {
            name: named("index")?,
            if_exists: m.if_exists,
        },
        "add_column" if !m.expression.is_empty() => CloudDdl::AddColumn {
            name: named("column")?,
            expression: m.expression,
            if_not_exists: m.if_exists,
        },
        "drop_column" => CloudDdl::DropColumn {
            name: named("column")?,
            if_exists: m.if_exists,
        },
        "alter_column" if !m.column.is_empty() => CloudDdl::AlterColumn {
            column: m.column,
            rename: m.rename,
            data_type: m.data_type,
            nullable: m.nullable,
        },
        kind @ ("create_tag" | "update_tag" | "delete_tag") => CloudDdl::Tag {
            action: match kind {
                "create_tag" => TagAction::Create,
                "update_tag" => TagAction::Update,
                _ => TagAction::Delete,
            },
            tag: named("tag")?,
            version: m.version,
        },
        other => return Err(malformed(format!("LanceDB table change '{other}'"))),
    })
}

impl StoragePolicy {
    pub(super) fn encode_cloud_ddl(&self, node: &CloudDdlExec) -> CloudDdlNode {
        let p = node.parts();
        CloudDdlNode {
            name: p.name.clone(),
            table: Some(self.encode_cloud_table(&p.table)),
            ddl: Some(encode_ddl(&p.ddl)),
        }
    }

    pub(super) fn decode_cloud_ddl(&self, node: CloudDdlNode) -> DFResult<CloudDdlExec> {
        Ok(CloudDdlExec::new(CloudDdlParts {
            name: node.name,
            table: self.decode_cloud_table(node.table)?,
            ddl: decode_ddl(node.ddl)?,
        }))
    }

    pub(super) fn encode_cloud_ddl_statement(
        &self,
        statement: &CloudDdlStatement,
    ) -> DFResult<CloudDdlTable> {
        Ok(CloudDdlTable {
            reference: statement.reference().to_string(),
            target: Some(self.encode_cloud_provider(statement.target())?),
            ddl: Some(encode_ddl(statement.ddl())),
        })
    }

    pub(super) fn decode_cloud_ddl_statement(
        &self,
        table: CloudDdlTable,
    ) -> DFResult<Arc<dyn TableProvider>> {
        let target = self.decode_cloud_provider(required(table.target, "LanceDB table")?)?;
        Ok(StatementTable::provider(CloudDdlStatement::new(
            table.reference,
            target,
            decode_ddl(table.ddl)?,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_change_round_trips() {
        let all = [
            CloudDdl::CreateIndex {
                name: "v_idx".into(),
                column: "v".into(),
                index_type: "IVF_PQ".into(),
                params: vec![("metric".into(), "cosine".into()), ("m".into(), "8".into())],
                if_not_exists: true,
            },
            CloudDdl::DropIndex {
                name: "v_idx".into(),
                if_exists: true,
            },
            CloudDdl::AddColumn {
                name: "c".into(),
                expression: "CAST(1 AS INT)".into(),
                if_not_exists: true,
            },
            CloudDdl::DropColumn {
                name: "c".into(),
                if_exists: false,
            },
            CloudDdl::AlterColumn {
                column: "a".into(),
                rename: Some("b".into()),
                data_type: Some("int64".into()),
                nullable: Some(true),
            },
            CloudDdl::AlterColumn {
                column: "a".into(),
                rename: None,
                data_type: None,
                nullable: Some(true),
            },
            CloudDdl::Tag {
                action: TagAction::Update,
                tag: "t".into(),
                version: Some(7),
            },
            CloudDdl::Tag {
                action: TagAction::Delete,
                tag: "t".into(),
                version: None,
            },
        ];
        for ddl in all {
            assert_eq!(decode_ddl(Some(encode_ddl(&ddl))).unwrap(), ddl);
        }
        let mut odd = encode_ddl(&CloudDdl::DropIndex {
            name: "i".into(),
            if_exists: false,
        });
        odd.kind = "truncate_index".into();
        assert!(decode_ddl(Some(odd)).is_err());
    }
}
