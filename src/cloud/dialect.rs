//! Where LanceDB's service spells a request or an answer otherwise than
//! Lance's namespace model (which the generated client speaks): queries and
//! index builds go as LanceDB's own clients send them, and index lists are
//! read requiring only what every service version gives.

use lance_namespace::models;

/// One index of a table version, as the service lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListedIndex {
    pub name: String,
    /// The service's type name (`BTREE`, `BITMAP`, `IVF_PQ`, ...).
    pub index_type: Option<String>,
    /// Lance's type URL of the index details, when the service gives it.
    pub type_url: Option<String>,
    pub columns: Vec<String>,
}

/// One page of an index list: the indices and the next page's token.
pub(super) fn index_page(answer: &[u8]) -> Option<(Vec<ListedIndex>, Option<String>)> {
    let value: serde_json::Value = serde_json::from_slice(answer).ok()?;
    let text = |v: &serde_json::Value, key: &str| {
        v.get(key)
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let mut indices = Vec::new();
    for index in value.get("indexes")?.as_array()? {
        let columns = index
            .get("columns")?
            .as_array()?
            .iter()
            .map(|c| c.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()?;
        indices.push(ListedIndex {
            name: text(index, "index_name")?,
            index_type: text(index, "index_type"),
            type_url: text(index, "type_url"),
            columns,
        });
    }
    Some((indices, text(&value, "page_token")))
}

/// `request` as LanceDB's own clients send it, which LanceDB Cloud reads:
/// the namespace model's `vector` (`{"single_vector": …}`) as the bare
/// list, and its `columns` (`{"column_names": …}`) as the bare list of
/// names (or map of aliases).
pub(super) fn lancedb_query(request: &models::QueryTableRequest) -> serde_json::Result<Vec<u8>> {
    let mut value = serde_json::to_value(request)?;
    if let Some(object) = value.as_object_mut() {
        if let Some(vector) = object.remove("vector") {
            let bare = match vector {
                serde_json::Value::Object(mut v) => v
                    .remove("single_vector")
                    .or_else(|| v.remove("multi_vector"))
                    .unwrap_or_else(|| serde_json::Value::Array(vec![])),
                other => other,
            };
            object.insert("vector".to_string(), bare);
        }
        let columns = match object.remove("columns") {
            Some(serde_json::Value::Object(mut columns)) => columns
                .remove("column_names")
                .or_else(|| columns.remove("column_aliases")),
            other => other,
        };
        if let Some(columns) = columns {
            object.insert("columns".to_string(), columns);
        }
    }
    serde_json::to_vec(&value)
}

/// A `create_index` body as LanceDB's clients send it: the namespace
/// model's fields, with the metric also as `metric_type` (LanceDB's
/// spelling; Lance's namespace server reads `distance_type`).
pub(super) fn lancedb_index_request(
    request: &models::CreateTableIndexRequest,
) -> serde_json::Result<Vec<u8>> {
    let mut value = serde_json::to_value(request)?;
    if let Some(object) = value.as_object_mut()
        && let Some(metric) = object.get("distance_type").cloned()
    {
        object.insert("metric_type".to_string(), metric);
    }
    serde_json::to_vec(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_lists_need_only_names_and_columns() {
        let page = index_page(
            br#"{"indexes": [
                {"index_name": "a_idx", "columns": ["a"]},
                {"index_name": "b_idx", "columns": ["b"], "index_type": "BTREE",
                 "index_uuid": "u", "status": "SUCCEEDED"}
            ], "page_token": "next"}"#,
        )
        .unwrap();
        assert_eq!(page.0.len(), 2);
        assert_eq!(page.0[0].index_type, None);
        assert_eq!(page.0[1].index_type.as_deref(), Some("BTREE"));
        assert_eq!(page.1.as_deref(), Some("next"));
        assert!(index_page(br#"{"indexes": [{"columns": ["a"]}]}"#).is_none());
        assert!(index_page(b"not json").is_none());
    }

    #[test]
    fn queries_go_in_lancedbs_spelling() {
        let mut request =
            models::QueryTableRequest::new(10, models::QueryTableRequestVector::new());
        request.columns = Some(Box::new(models::QueryTableRequestColumns {
            column_names: Some(vec!["id".into()]),
            column_aliases: None,
        }));
        let sent: serde_json::Value =
            serde_json::from_slice(&lancedb_query(&request).unwrap()).unwrap();
        assert_eq!(sent["vector"], serde_json::json!([]));
        assert_eq!(sent["columns"], serde_json::json!(["id"]));
        request.vector.single_vector = Some(vec![0.5, 1.0]);
        let sent: serde_json::Value =
            serde_json::from_slice(&lancedb_query(&request).unwrap()).unwrap();
        assert_eq!(sent["vector"], serde_json::json!([0.5, 1.0]));
    }
}
