//! What the service lists about one `db://` table: versions, tags and the
//! index list (each paged, with a bound on the pages read).

use lance_namespace::apis::table_api;
use lance_namespace::models;

use super::client::CloudClient;
use super::dialect::{ListedIndex, index_page};
use super::retry::RetryClass;
use crate::error::Result;

/// The most pages one listing reads.
const MAX_PAGES: usize = 10_000;

impl CloudClient {
    /// Every version of the table: its number and commit time (ms since
    /// the epoch, when the service says), oldest first.
    pub(crate) async fn versions(&self) -> Result<Vec<(u64, Option<i64>)>> {
        let mut versions = Vec::new();
        let mut token: Option<String> = None;
        // Pages are bounded: a service that keeps answering with a token
        // cannot keep the statement forever.
        for _ in 0..MAX_PAGES {
            let answer = self
                .send("list_versions", RetryClass::Read, || {
                    table_api::list_table_versions(
                        self.config(),
                        self.id(),
                        None,
                        None,
                        token.as_deref(),
                        None,
                        None,
                    )
                })
                .await?;
            for v in answer.versions {
                let number = u64::try_from(v.version)
                    .map_err(|_| self.unreadable("list_versions", "a negative version"))?;
                versions.push((number, v.timestamp_millis));
            }
            match answer.page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = Some(next),
                None => {
                    versions.sort_unstable();
                    return Ok(versions);
                }
            }
        }
        Err(self.unreadable("list_versions", &format!("more than {MAX_PAGES} pages")))
    }

    /// Every tag of the table and the version it names, by name.
    pub(crate) async fn tags(&self) -> Result<Vec<(String, u64)>> {
        let mut tags = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let answer = self
                .send("list_tags", RetryClass::Read, || {
                    table_api::list_table_tags(
                        self.config(),
                        self.id(),
                        None,
                        token.as_deref(),
                        None,
                    )
                })
                .await?;
            for (name, contents) in answer.tags {
                let version = u64::try_from(contents.version)
                    .map_err(|_| self.unreadable("list_tags", "a negative version"))?;
                tags.push((name, version));
            }
            match answer.page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = Some(next),
                None => {
                    tags.sort();
                    return Ok(tags);
                }
            }
        }
        Err(self.unreadable("list_tags", &format!("more than {MAX_PAGES} pages")))
    }

    /// The indices of `version`: name, type (as the service spells it: an
    /// `index_type` such as `BTREE`, and a type URL when it gives one) and
    /// columns; `None` when the answer is no index list this reads (only a
    /// name and columns are required of each index).
    pub(crate) async fn indices(&self, version: u64) -> Result<Option<Vec<ListedIndex>>> {
        let mut indices = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut request = serde_json::json!({ "version": version });
            if let Some(token) = &token {
                request["page_token"] = serde_json::Value::String(token.clone());
            }
            let body = serde_json::to_vec(&request).unwrap_or_default();
            let answer = self.post("list_indices", "index/list", body).await?;
            let Some(page) = index_page(&answer) else {
                return Ok(None);
            };
            indices.extend(page.0);
            match page.1 {
                Some(next) => token = Some(next),
                None => return Ok(Some(indices)),
            }
        }
        Err(self.unreadable("list_indices", &format!("more than {MAX_PAGES} pages")))
    }

    /// The version tag `tag` names.
    pub(crate) async fn tag_version(&self, tag: &str) -> Result<u64> {
        let request = models::GetTableTagVersionRequest {
            tag: tag.to_string(),
            ..Default::default()
        };
        let answer = self
            .send("tag_version", RetryClass::Read, || {
                table_api::get_table_tag_version(self.config(), self.id(), request.clone(), None)
            })
            .await?;
        u64::try_from(answer.version)
            .map_err(|_| self.unreadable("tag_version", "a negative version"))
    }
}
