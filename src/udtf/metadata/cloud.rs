//! `lance_versions` and `lance_tags` of a `db://` table, from its service
//! (`list_versions`, `list_tags`). The service does not say which operation
//! made a version, nor its fragments and rows (NULL), nor when a tag was
//! created or moved (NULL). Fragments and indices are the service's own
//! business: `lance_fragments` / `lance_indices` refuse `db://` tables.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array,
};
use datafusion::error::Result as DFResult;

use super::MetadataKind;
use crate::cloud::CloudClient;
use crate::error::Error;
use crate::table::cloud::CloudTableProvider;

pub(super) async fn batch(kind: MetadataKind, table: &CloudTableProvider) -> DFResult<RecordBatch> {
    let client = CloudClient::connect(&table.parts().table)?;
    let columns: Vec<ArrayRef> = match kind {
        MetadataKind::Versions => {
            let versions = client.versions().await?;
            let mut times = Vec::with_capacity(versions.len());
            for (version, millis) in &versions {
                let Some(millis) = millis else {
                    return Err(Error::Cloud {
                        message: format!(
                            "LanceDB table '{}': the service did not say when version \
                             {version} was committed",
                            table.display_uri()
                        ),
                        status: None,
                    }
                    .into());
                };
                times.push(millis.saturating_mul(1000));
            }
            let n = versions.len();
            vec![
                Arc::new(UInt64Array::from_iter_values(
                    versions.iter().map(|(v, _)| *v),
                )),
                Arc::new(TimestampMicrosecondArray::from(times).with_timezone("UTC")),
                Arc::new(StringArray::new_null(n)),
                Arc::new(UInt64Array::new_null(n)),
                Arc::new(UInt64Array::new_null(n)),
            ]
        }
        MetadataKind::Tags => {
            let tags = client.tags().await?;
            let n = tags.len();
            vec![
                Arc::new(StringArray::from_iter_values(
                    tags.iter().map(|(t, _)| t.as_str()),
                )),
                Arc::new(UInt64Array::from_iter_values(tags.iter().map(|(_, v)| *v))),
                Arc::new(TimestampMicrosecondArray::new_null(n).with_timezone("UTC")),
                Arc::new(TimestampMicrosecondArray::new_null(n).with_timezone("UTC")),
            ]
        }
        MetadataKind::Fragments | MetadataKind::Indices => {
            return Err(Error::not_supported(format!(
                "{}('{}'): table '{}' is a LanceDB Cloud table, whose fragments and indices \
                 its service keeps to itself",
                kind.function_name(),
                table.name(),
                table.display_uri()
            ))
            .into());
        }
    };
    Ok(RecordBatch::try_new(kind.schema(), columns)?)
}
