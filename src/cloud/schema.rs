//! Table schemas as the service describes them, in JSON. LanceDB Cloud
//! writes Lance's own JSON form of an Arrow schema (`double`, `string`,
//! `date32:day`, `timestamp:us:UTC`, as LanceDB's clients read it); Lance's
//! REST namespace servers write the namespace model's (`float64`, `utf8`,
//! `date32`, `timestamp`). Both are read.

use arrow_schema::Schema;
use lance_namespace::models::JsonArrowSchema;

/// The Arrow schema `json` describes, in either form.
pub(crate) fn parse(json: &JsonArrowSchema) -> Result<Schema, String> {
    let cloud = serde_json::to_string(json)
        .map_err(|e| e.to_string())
        .and_then(|text| {
            serde_json::from_str::<lance::arrow::json::JsonSchema>(&text).map_err(|e| e.to_string())
        })
        .and_then(|schema| Schema::try_from(&schema).map_err(|e| e.to_string()));
    match cloud {
        Ok(schema) => Ok(schema),
        Err(cloud) => lance_namespace::schema::convert_json_arrow_schema(json)
            .map_err(|namespace| format!("{cloud} (and as the namespace model: {namespace})")),
    }
}

#[cfg(test)]
mod tests {
    use arrow_schema::{DataType, TimeUnit};

    use super::*;

    fn schema(types: &[&str]) -> JsonArrowSchema {
        let fields: Vec<_> = types
            .iter()
            .enumerate()
            .map(|(i, t)| serde_json::json!({"name": format!("c{i}"), "type": {"type": t}, "nullable": true}))
            .collect();
        serde_json::from_value(serde_json::json!({ "fields": fields })).unwrap()
    }

    #[test]
    fn both_forms_are_read() {
        let cloud = parse(&schema(&[
            "double",
            "string",
            "date32:day",
            "timestamp:us:UTC",
        ]))
        .unwrap();
        let namespace = parse(&schema(&["float64", "utf8", "date32", "timestamp"])).unwrap();
        let types = |s: &Schema| {
            s.fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(types(&cloud)[..3], types(&namespace)[..3]);
        assert_eq!(
            types(&cloud)[3],
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
        let e = parse(&schema(&["quaternion"])).unwrap_err();
        assert!(e.contains("quaternion"), "{e}");
    }
}
