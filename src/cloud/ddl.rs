//! Index, column and tag changes of a `db://` table ([`CloudDdl`], plain
//! data): `CREATE INDEX` / `DROP INDEX`, `ALTER TABLE` and `lance_tag`, each
//! one request the service carries out on the latest version (one new
//! version; a tag makes none), sent as an append is: again only when the
//! failure proves nothing was applied.
//!
//! `IF [NOT] EXISTS` is decided here from the service's answer before the
//! request (an index list or the schema): a change another client makes in
//! between is the service's to refuse.

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use lance_namespace::apis::table_api;
use lance_namespace::models;

use super::client::CloudClient;
use super::dialect::lancedb_index_request;
use super::retry::RetryClass;
use crate::error::{Error, Result};

/// The index and column changes a `db://` table takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CloudDdl {
    /// `CREATE INDEX [IF NOT EXISTS] name ON t [USING type] (column) [WITH (...)]`.
    CreateIndex {
        name: String,
        column: String,
        /// The type as the service spells it (`BTREE`, `IVF_PQ`, ...).
        index_type: String,
        /// `WITH` options, checked against the request's fields.
        params: Vec<(String, String)>,
        if_not_exists: bool,
    },
    /// `DROP INDEX [IF EXISTS] name ON t`.
    DropIndex { name: String, if_exists: bool },
    /// `ADD COLUMN [IF NOT EXISTS] name ... AS (expression)`: the values
    /// of the existing rows, as Lance SQL.
    AddColumn {
        name: String,
        expression: String,
        if_not_exists: bool,
    },
    /// `DROP COLUMN [IF EXISTS] name`.
    DropColumn { name: String, if_exists: bool },
    /// `RENAME COLUMN`, `ALTER COLUMN ... TYPE`, `ALTER COLUMN ... DROP NOT
    /// NULL`: one alteration of one column.
    AlterColumn {
        column: String,
        rename: Option<String>,
        /// The new type in Lance's JSON form (`int64`, `double`, ...).
        data_type: Option<String>,
        /// `Some(true)`: the column may hold NULL from now on.
        nullable: Option<bool>,
    },
    /// `lance_tag(t, 'create' | 'update' | 'delete', tag [, version])`.
    Tag {
        action: TagAction,
        tag: String,
        /// The version it points to (the latest when `None`; none for a
        /// delete).
        version: Option<u64>,
    },
}

/// What a tag change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TagAction {
    Create,
    Update,
    Delete,
}

/// What a [`CloudDdl`] is about, which decides the row it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subject {
    Index,
    Column,
    Tag,
}

/// What a change did: the action (`created`, `dropped`, ..., `unchanged`)
/// and the version the service reports: for a tag the version it points
/// to, for a column change the version it made (`None` when the answer
/// gives none: an index change, an old service, nothing changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    pub action: &'static str,
    pub version: Option<u64>,
}

impl Applied {
    fn did(action: &'static str) -> Self {
        Self {
            action,
            version: None,
        }
    }

    fn made(action: &'static str, version: i64) -> Self {
        Self {
            action,
            version: u64::try_from(version).ok().filter(|v| *v > 0),
        }
    }
}

impl CloudDdl {
    /// What it is about.
    pub(crate) fn subject_kind(&self) -> Subject {
        match self {
            Self::CreateIndex { .. } | Self::DropIndex { .. } => Subject::Index,
            Self::Tag { .. } => Subject::Tag,
            _ => Subject::Column,
        }
    }

    /// The index or column it is about.
    pub(crate) fn subject(&self) -> &str {
        match self {
            Self::CreateIndex { name, .. }
            | Self::DropIndex { name, .. }
            | Self::AddColumn { name, .. }
            | Self::DropColumn { name, .. } => name,
            Self::AlterColumn { column, .. } => column,
            Self::Tag { tag, .. } => tag,
        }
    }

    /// The request it sends.
    pub(crate) fn request(&self) -> &'static str {
        match self {
            Self::CreateIndex { .. } => "create_index",
            Self::DropIndex { .. } => "drop_index",
            Self::AddColumn { .. } => "add_columns",
            Self::DropColumn { .. } => "drop_columns",
            Self::AlterColumn { .. } => "alter_columns",
            Self::Tag {
                action: TagAction::Create,
                ..
            } => "create_tag",
            Self::Tag {
                action: TagAction::Update,
                ..
            } => "update_tag",
            Self::Tag {
                action: TagAction::Delete,
                ..
            } => "delete_tag",
        }
    }

    /// The request's index options, or an error naming the one the
    /// service's `create_index` has no field for.
    pub(crate) fn index_request(
        column: &str,
        index_type: &str,
        name: &str,
        params: &[(String, String)],
    ) -> Result<models::CreateTableIndexRequest> {
        // The type as LanceDB's clients spell it (Lance's namespace server
        // reads both spellings).
        let index_type = match index_type.to_ascii_uppercase().as_str() {
            "INVERTED" => "FTS".to_string(),
            "BLOOMFILTER" => "BLOOM_FILTER".to_string(),
            other => other.to_string(),
        };
        let mut request = models::CreateTableIndexRequest::new(column.to_string(), index_type);
        request.name = Some(name.to_string());
        for (key, value) in params {
            let int = |v: &str| {
                v.trim().parse::<i32>().map_err(|_| {
                    Error::invalid_option(key, v, "an integer the service's request holds")
                })
            };
            let flag = |v: &str| crate::config::parse_bool(key, v);
            match key.as_str() {
                "metric" | "distance_type" => {
                    request.distance_type = Some(value.trim().to_ascii_lowercase())
                }
                "num_partitions" => request.num_partitions = Some(int(value)?),
                "num_sub_vectors" => request.num_sub_vectors = Some(int(value)?),
                "num_bits" => request.num_bits = Some(int(value)?),
                "sample_rate" => request.sample_rate = Some(int(value)?),
                "max_iterations" => request.max_iterations = Some(int(value)?),
                "m" => request.m = Some(int(value)?),
                "ef_construction" => request.ef_construction = Some(int(value)?),
                "with_position" => request.with_position = Some(flag(value)?),
                "base_tokenizer" => request.base_tokenizer = Some(value.clone()),
                "language" => request.language = Some(value.clone()),
                "max_token_length" => request.max_token_length = Some(int(value)?),
                "lower_case" => request.lower_case = Some(flag(value)?),
                "stem" => request.stem = Some(flag(value)?),
                "remove_stop_words" => request.remove_stop_words = Some(flag(value)?),
                "ascii_folding" => request.ascii_folding = Some(flag(value)?),
                other => {
                    return Err(Error::not_supported(format!(
                        "index option '{other}': the service's create_index request has no \
                         such field"
                    )));
                }
            }
        }
        Ok(request)
    }
}

/// The name of `data_type` in Lance's JSON form, as `alter_columns` takes
/// it; `None` for a type that name alone does not give back whole
/// (decimals, timestamps with a unit or zone, lists, structs, ...), which
/// is refused before any request.
pub(crate) fn json_type(data_type: &DataType) -> Option<String> {
    let schema = Schema::new(vec![Field::new("c", data_type.clone(), true)]);
    let json = lance_namespace::schema::arrow_schema_to_json(&schema).ok()?;
    let name = json.fields.into_iter().next()?.r#type.r#type;
    let bare = models::JsonArrowDataType::new(name.clone());
    let back = lance_namespace::schema::convert_json_arrow_type(&bare).ok()?;
    (back == *data_type).then_some(name)
}

impl CloudClient {
    /// Carries `ddl` out: what was done (`created`, `dropped`, `added`,
    /// `altered`, `updated`, or `unchanged` under `IF [NOT] EXISTS`).
    pub(crate) async fn apply(&self, ddl: &CloudDdl) -> Result<Applied> {
        let request = ddl.request();
        if let CloudDdl::Tag {
            action,
            tag,
            version,
        } = ddl
        {
            return self.tag(request, *action, tag, *version).await;
        }
        self.change(request, ddl).await
    }

    async fn change(&self, request: &str, ddl: &CloudDdl) -> Result<Applied> {
        match ddl {
            CloudDdl::CreateIndex {
                name,
                column,
                index_type,
                params,
                if_not_exists,
            } => {
                if self.has_index(name).await? {
                    if *if_not_exists {
                        return Ok(Applied::did("unchanged"));
                    }
                    return Err(Error::already_exists(format!(
                        "creating index '{name}' of '{}': an index of that name exists; use \
                         IF NOT EXISTS, or DROP INDEX {name} ON <table> first",
                        self.table()
                    )));
                }
                let body = CloudDdl::index_request(column, index_type, name, params)?;
                let body = lancedb_index_request(&body).map_err(|e| Error::Cloud {
                    message: format!("LanceDB table '{}': encoding {request}: {e}", self.table()),
                    status: None,
                })?;
                self.post_as(RetryClass::Append, request, "create_index", body)
                    .await?;
                Ok(Applied::did("created"))
            }
            CloudDdl::DropIndex { name, if_exists } => {
                if !self.has_index(name).await? {
                    if *if_exists {
                        return Ok(Applied::did("unchanged"));
                    }
                    return Err(Error::not_found(format!(
                        "dropping index '{name}' of '{}': the table has no index of that name",
                        self.table()
                    )));
                }
                self.send(request, RetryClass::Append, || {
                    table_api::drop_table_index(self.config(), self.id(), name, None, None)
                })
                .await?;
                Ok(Applied::did("dropped"))
            }
            CloudDdl::AddColumn {
                name,
                expression,
                if_not_exists,
            } => {
                if self.has_column(name).await? {
                    if *if_not_exists {
                        return Ok(Applied::did("unchanged"));
                    }
                    return Err(Error::already_exists(format!(
                        "ALTER TABLE '{}': column '{name}' exists",
                        self.table()
                    )));
                }
                let mut entry = models::AddColumnsEntry::new(name.clone());
                entry.expression = Some(Some(expression.clone()));
                let body = models::AlterTableAddColumnsRequest::new(vec![entry]);
                let answer = self
                    .send(request, RetryClass::Append, || {
                        table_api::alter_table_add_columns(
                            self.config(),
                            self.id(),
                            body.clone(),
                            None,
                        )
                    })
                    .await?;
                Ok(Applied::made("added", answer.version))
            }
            CloudDdl::DropColumn { name, if_exists } => {
                if !self.has_column(name).await? {
                    if *if_exists {
                        return Ok(Applied::did("unchanged"));
                    }
                    return Err(Error::not_found(format!(
                        "ALTER TABLE '{}': no column '{name}'",
                        self.table()
                    )));
                }
                let body = models::AlterTableDropColumnsRequest::new(vec![name.clone()]);
                let answer = self
                    .send(request, RetryClass::Append, || {
                        table_api::alter_table_drop_columns(
                            self.config(),
                            self.id(),
                            body.clone(),
                            None,
                        )
                    })
                    .await?;
                Ok(Applied::made("dropped", answer.version))
            }
            CloudDdl::AlterColumn {
                column,
                rename,
                data_type,
                nullable,
            } => {
                // LanceDB's spelling: the type as an object (`{"type":
                // "int64"}`), the answer `{"version": n}` (empty from old
                // services).
                let mut entry = serde_json::json!({ "path": column });
                if let Some(to) = rename {
                    entry["rename"] = to.clone().into();
                }
                if let Some(name) = data_type {
                    entry["data_type"] = serde_json::json!({ "type": name });
                }
                if let Some(nullable) = nullable {
                    entry["nullable"] = (*nullable).into();
                }
                let body = serde_json::to_vec(&serde_json::json!({ "alterations": [entry] }))
                    .unwrap_or_default();
                let answer = self
                    .post_as(RetryClass::Append, request, "alter_columns", body)
                    .await?;
                let version = serde_json::from_slice::<serde_json::Value>(&answer)
                    .ok()
                    .and_then(|v| v.get("version").and_then(serde_json::Value::as_i64))
                    .unwrap_or(0);
                let action = match (rename, data_type) {
                    (Some(_), None) => "renamed",
                    (None, Some(_)) => "retyped",
                    _ => "altered",
                };
                Ok(Applied::made(action, version))
            }
            CloudDdl::Tag { .. } => Err(Error::invalid_input("a tag change is no schema change")),
        }
    }

    async fn tag(
        &self,
        request: &str,
        action: TagAction,
        tag: &str,
        version: Option<u64>,
    ) -> Result<Applied> {
        let version = match (action, version) {
            (TagAction::Delete, _) => 0,
            (_, Some(v)) => v,
            (_, None) => self.describe(None).await?.0,
        };
        let as_i64 = i64::try_from(version)
            .map_err(|_| Error::invalid_input(format!("version {version} is out of range")))?;
        match action {
            TagAction::Create => {
                let body = models::CreateTableTagRequest::new(tag.to_string(), as_i64);
                self.send(request, RetryClass::Append, || {
                    table_api::create_table_tag(self.config(), self.id(), body.clone(), None)
                })
                .await?;
            }
            TagAction::Update => {
                let body = models::UpdateTableTagRequest::new(tag.to_string(), as_i64);
                self.send(request, RetryClass::Append, || {
                    table_api::update_table_tag(self.config(), self.id(), body.clone(), None)
                })
                .await?;
            }
            TagAction::Delete => {
                let body = models::DeleteTableTagRequest::new(tag.to_string());
                self.send(request, RetryClass::Append, || {
                    table_api::delete_table_tag(self.config(), self.id(), body.clone(), None)
                })
                .await?;
                return Ok(Applied::did("deleted"));
            }
        }
        Ok(Applied {
            action: match action {
                TagAction::Create => "created",
                _ => "updated",
            },
            version: Some(version),
        })
    }

    async fn has_index(&self, name: &str) -> Result<bool> {
        let (version, _) = self.describe(None).await?;
        match self.indices(version).await? {
            Some(listed) => Ok(listed.iter().any(|i| i.name == name)),
            None => Err(Error::Cloud {
                message: format!(
                    "LanceDB table '{}': the service's index list could not be read, so \
                     whether index '{name}' exists is unknown",
                    self.table()
                ),
                status: None,
            }),
        }
    }

    async fn has_column(&self, name: &str) -> Result<bool> {
        let (_, schema) = self.describe(None).await?;
        Ok(schema.field_with_name(name).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::TimeUnit;

    #[test]
    fn index_options_fill_the_request_or_are_named() {
        let params = vec![
            ("metric".to_string(), "COSINE".to_string()),
            ("num_partitions".to_string(), "4".to_string()),
            ("with_position".to_string(), "true".to_string()),
        ];
        let r = CloudDdl::index_request("v", "ivf_pq", "v_idx", &params).unwrap();
        assert_eq!(
            (r.index_type.as_str(), r.distance_type.as_deref()),
            ("IVF_PQ", Some("cosine"))
        );
        let body: serde_json::Value =
            serde_json::from_slice(&lancedb_index_request(&r).unwrap()).unwrap();
        assert_eq!(
            (
                &body["column"],
                &body["metric_type"],
                &body["distance_type"]
            ),
            (&"v".into(), &"cosine".into(), &"cosine".into())
        );
        let fts = CloudDdl::index_request("t", "INVERTED", "t_idx", &[]).unwrap();
        assert_eq!(fts.index_type, "FTS");
        assert_eq!((r.num_partitions, r.with_position), (Some(4), Some(true)));
        let bad = vec![("shards".to_string(), "2".to_string())];
        let e = CloudDdl::index_request("v", "BTREE", "i", &bad).unwrap_err();
        assert!(e.to_string().contains("'shards'"), "{e}");
    }

    #[test]
    fn types_have_their_json_names() {
        assert_eq!(json_type(&DataType::Int64).as_deref(), Some("int64"));
        assert_eq!(json_type(&DataType::Float64).as_deref(), Some("float64"));
        let list = DataType::List(std::sync::Arc::new(Field::new(
            "item",
            DataType::Int32,
            true,
        )));
        assert_eq!(json_type(&list), None);
        assert_eq!(json_type(&DataType::Decimal128(10, 2)), None);
        let zoned = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
        assert_eq!(json_type(&zoned), None);
    }
}
