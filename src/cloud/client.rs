//! The REST data plane of one `db://` table: the requests this crate sends,
//! their retries and their errors.
//!
//! Requests go through Lance's generated REST client (`lance_namespace::apis`),
//! which reports the HTTP status and
//! tells a refused connection from a lost one, so each request kind can be
//! retried by its class (see [`RetryClass`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::Schema;
use lance_namespace::apis::configuration::{ApiKey, Configuration};
use lance_namespace::apis::{self, table_api};
use lance_namespace::models;

use super::address::CloudAddress;
pub(crate) use super::dialect::ListedIndex;
use super::dialect::lancedb_query;
use super::ipc;
use super::options::CloudTable;
pub(crate) use super::retry::RetryClass;
use super::retry::{Failure, backoff};
use crate::error::{Error, Result};

/// What a `merge_insert` request does with matched and unmatched rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MergeRequest {
    pub keys: Vec<String>,
    /// Replace matched target rows (where `update_filter` holds, if given).
    pub update_all: bool,
    /// A condition over `source.` and `target.` columns (Lance SQL).
    pub update_filter: Option<String>,
    /// Insert unmatched source rows.
    pub insert_all: bool,
    /// Delete target rows the source does not match (where `delete_filter`
    /// holds, if given).
    pub delete_by_source: bool,
    /// A condition over the target's columns (Lance SQL).
    pub delete_filter: Option<String>,
}

/// What one `merge_insert` request did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Merged {
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
    pub version: Option<u64>,
}

/// A client for one table of a LanceDB Cloud or Enterprise database.
pub(crate) struct CloudClient {
    config: Configuration,
    /// The table as messages name it.
    table: String,
    /// The id the service's paths use.
    id: String,
    max_retries: u32,
    backoff_ms: u64,
}

impl std::fmt::Debug for CloudClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The configuration holds the API key: never shown.
        f.debug_struct("CloudClient")
            .field("table", &self.table)
            .field(
                "endpoint",
                &crate::location::redact_uri(&self.config.base_path),
            )
            .finish()
    }
}

/// One page of rows: a version, a row range of the filtered table, columns.
#[derive(Debug, Clone)]
pub(crate) struct Page<'a> {
    pub version: u64,
    pub offset: u64,
    pub rows: u32,
    pub columns: &'a [String],
    pub filter: Option<&'a str>,
}

impl CloudClient {
    /// A client for `table`; its API key is the table's or `LANCEDB_API_KEY`.
    pub(crate) fn connect(table: &CloudTable) -> Result<Self> {
        let address = table.address()?;
        let key = table.api_key()?;
        let mut config = Configuration::new();
        config.base_path = table.endpoint.clone();
        config.client = http_client(table, &address)?;
        config.user_agent = Some(format!("datafusion-lance/{}", env!("CARGO_PKG_VERSION")));
        config.api_key = Some(ApiKey { prefix: None, key });
        Ok(Self {
            config,
            table: table.location.display_uri.clone(),
            id: address.table_id(),
            max_retries: table.requests.max_retries,
            backoff_ms: table.requests.backoff_ms,
        })
    }

    /// The version (the latest when `version` is `None`) and its schema.
    pub(crate) async fn describe(&self, version: Option<u64>) -> Result<(u64, Schema)> {
        let request = models::DescribeTableRequest {
            version: version.map(|v| v as i64),
            ..Default::default()
        };
        let response = self
            .send("describe", RetryClass::Read, || {
                table_api::describe_table(
                    &self.config,
                    &self.id,
                    request.clone(),
                    None,
                    None,
                    Some(true),
                    None,
                )
            })
            .await?;
        let described = response
            .version
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| self.unreadable("describe", "no version in the answer"))?;
        if let Some(asked) = version
            && asked != described
        {
            return Err(self.unreadable(
                "describe",
                &format!("asked for version {asked}, the service answered {described}"),
            ));
        }
        let schema = response
            .schema
            .ok_or_else(|| self.unreadable("describe", "no schema in the answer"))?;
        let schema = super::schema::parse(&schema).map_err(|e| self.unreadable("describe", &e))?;
        Ok((described, schema))
    }

    /// Rows of `version` that pass `predicate` (Lance SQL).
    pub(crate) async fn count_rows(&self, version: u64, predicate: Option<&str>) -> Result<u64> {
        let request = models::CountTableRowsRequest {
            version: Some(version as i64),
            predicate: predicate.map(str::to_string),
            ..Default::default()
        };
        let count = self
            .send("count_rows", RetryClass::Read, || {
                table_api::count_table_rows(&self.config, &self.id, request.clone(), None)
            })
            .await?;
        u64::try_from(count).map_err(|_| self.unreadable("count_rows", "a negative count"))
    }

    /// One page of rows.
    pub(crate) async fn query(&self, page: &Page<'_>) -> Result<Vec<RecordBatch>> {
        let offset = i32::try_from(page.offset).map_err(|_| {
            Error::not_supported(format!(
                "LanceDB table '{}': row offset {} is beyond what the service's query \
                 addresses (2^31 - 1)",
                self.table, page.offset
            ))
        })?;
        let mut request = models::QueryTableRequest::new(
            page.rows as i32,
            models::QueryTableRequestVector::new(),
        );
        request.version = Some(page.version as i64);
        request.offset = Some(offset);
        request.filter = page.filter.map(str::to_string);
        request.columns = Some(Box::new(models::QueryTableRequestColumns {
            column_names: Some(page.columns.to_vec()),
            column_aliases: None,
        }));
        self.search(request).await
    }

    /// The rows `request` (a page or a search) answers.
    pub(crate) async fn search(
        &self,
        request: models::QueryTableRequest,
    ) -> Result<Vec<RecordBatch>> {
        let body = lancedb_query(&request)
            .map_err(|e| self.unreadable("query", &format!("cannot encode the query: {e}")))?;
        let body = self.post("query", "query", body).await?;
        ipc::decode(&body).map_err(|e| self.unreadable("query", &e))
    }

    /// POSTs the JSON `body` to the table's path `what`/ (a read: retried
    /// as one) and returns the answer's bytes. For the requests whose
    /// bodies or answers LanceDB's service spells otherwise than the
    /// namespace model.
    pub(super) async fn post(
        &self,
        request: &str,
        what: &str,
        body: Vec<u8>,
    ) -> Result<bytes::Bytes> {
        self.post_as(RetryClass::Read, request, what, body).await
    }

    /// [`Self::post`], retried as `class`.
    pub(super) async fn post_as(
        &self,
        class: RetryClass,
        request: &str,
        what: &str,
        body: Vec<u8>,
    ) -> Result<bytes::Bytes> {
        let url = format!(
            "{}/v1/table/{}/{what}/",
            self.config.base_path,
            apis::urlencode(&self.id)
        );
        self.send(request, class, || async {
            let mut sent = self
                .config
                .client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            if let Some(agent) = &self.config.user_agent {
                sent = sent.header(reqwest::header::USER_AGENT, agent);
            }
            if let Some(key) = &self.config.api_key {
                sent = sent.header("x-api-key", &key.key);
            }
            let response = sent.send().await.map_err(apis::Error::<()>::Reqwest)?;
            let status = response.status();
            if !status.is_success() {
                let content = response.text().await.unwrap_or_default();
                return Err(apis::Error::ResponseError(apis::ResponseContent {
                    status,
                    content,
                    entity: None,
                }));
            }
            response.bytes().await.map_err(apis::Error::<()>::Reqwest)
        })
        .await
    }

    /// Appends `rows` rows (`batches`, in `schema`) in one request, or
    /// replaces the table with them (`overwrite`), or creates the table
    /// with them (`create`); the version made, if the service says.
    pub(crate) async fn insert(
        &self,
        schema: &Schema,
        batches: &[RecordBatch],
        rows: usize,
        (overwrite, create): (bool, bool),
    ) -> Result<Option<u64>> {
        // A new table with no rows is sent as one empty batch: a stream
        // with a schema and no batch is refused by some services.
        let empty = [RecordBatch::new_empty(Arc::new(schema.clone()))];
        let batches = if create && batches.is_empty() {
            &empty[..]
        } else {
            batches
        };
        let body = ipc::encode(schema, batches).map_err(|e| Error::Cloud {
            message: format!("LanceDB table '{}': encoding {rows} rows: {e}", self.table),
            status: None,
        })?;
        if create {
            let answer = self
                .send("create_table", RetryClass::Append, || {
                    table_api::create_table(
                        &self.config,
                        &self.id,
                        body.clone(),
                        None,
                        Some("create"),
                        None,
                        None,
                    )
                })
                .await?;
            return Ok(answer.version.and_then(|v| u64::try_from(v).ok()));
        }
        let mode = if overwrite { "overwrite" } else { "append" };
        let answer = self
            .send("insert", RetryClass::Append, || {
                table_api::insert_into_table(
                    &self.config,
                    &self.id,
                    body.clone(),
                    None,
                    None,
                    Some(mode),
                )
            })
            .await?;
        Ok(answer.version.and_then(|v| u64::try_from(v).ok()))
    }

    /// Deletes the rows passing `predicate` (Lance SQL) from the latest
    /// version, in one request; the version it made.
    pub(crate) async fn delete(&self, predicate: &str) -> Result<u64> {
        let request = models::DeleteFromTableRequest {
            predicate: predicate.to_string(),
            ..Default::default()
        };
        let answer = self
            .send("delete", RetryClass::Append, || {
                table_api::delete_from_table(&self.config, &self.id, request.clone(), None)
            })
            .await?;
        answer
            .version
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| self.unreadable("delete", "no version in the answer"))
    }

    /// Sets `updates` (column, Lance SQL) on the rows passing `predicate`,
    /// in one request; the rows updated and the version made.
    pub(crate) async fn update(
        &self,
        predicate: Option<&str>,
        updates: &[(String, String)],
    ) -> Result<(u64, u64)> {
        let request = models::UpdateTableRequest {
            predicate: predicate.map(str::to_string),
            updates: updates
                .iter()
                .map(|(c, e)| vec![c.clone(), e.clone()])
                .collect(),
            ..Default::default()
        };
        let answer = self
            .send("update", RetryClass::Append, || {
                table_api::update_table(&self.config, &self.id, request.clone(), None)
            })
            .await?;
        match (
            u64::try_from(answer.updated_rows),
            u64::try_from(answer.version),
        ) {
            (Ok(rows), Ok(version)) => Ok((rows, version)),
            _ => Err(self.unreadable("update", "a negative row count or version")),
        }
    }

    /// Merges `rows` rows (`batches`, in `schema`) into the table in one
    /// request.
    pub(crate) async fn merge_insert(
        &self,
        schema: &Schema,
        batches: &[RecordBatch],
        rows: usize,
        merge: &MergeRequest,
    ) -> Result<Merged> {
        let body = ipc::encode(schema, batches).map_err(|e| Error::Cloud {
            message: format!("LanceDB table '{}': encoding {rows} rows: {e}", self.table),
            status: None,
        })?;
        let answer = self
            .send("merge_insert", RetryClass::Upsert, || {
                table_api::merge_insert_into_table(
                    &self.config,
                    &self.id,
                    merge.keys.clone(),
                    body.clone(),
                    None,
                    None,
                    Some(merge.update_all),
                    merge.update_filter.as_deref(),
                    Some(merge.insert_all),
                    Some(merge.delete_by_source),
                    merge.delete_filter.as_deref(),
                    None,
                    None,
                )
            })
            .await?;
        let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
        Ok(Merged {
            inserted: count(answer.num_inserted_rows),
            updated: count(answer.num_updated_rows),
            deleted: count(answer.num_deleted_rows),
            version: answer.version.and_then(|v| u64::try_from(v).ok()),
        })
    }

    /// Drops the table (`Ok(false)` when there is none).
    pub(crate) async fn drop_table(&self) -> Result<bool> {
        let dropped = self
            .send("drop_table", RetryClass::Append, || {
                table_api::drop_table(&self.config, &self.id, None)
            })
            .await;
        match dropped {
            Ok(_) => Ok(true),
            Err(Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The client's configuration (its HTTP client, base path and key).
    pub(super) fn config(&self) -> &Configuration {
        &self.config
    }

    /// The id the service's paths use.
    pub(super) fn id(&self) -> &str {
        &self.id
    }

    /// The table as messages name it.
    pub(super) fn table(&self) -> &str {
        &self.table
    }

    /// Sends a request until it succeeds or its class forbids another try.
    pub(super) async fn send<T, E, F, Fut>(
        &self,
        request: &str,
        class: RetryClass,
        mut call: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, apis::Error<E>>>,
    {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let failure = match call().await {
                Ok(answer) => return Ok(answer),
                Err(e) => Failure::of(e),
            };
            if failure.retryable(class) && attempts <= self.max_retries {
                tokio::time::sleep(backoff(self.backoff_ms, attempts)).await;
                continue;
            }
            return Err(self.give_up(request, class, attempts, failure));
        }
    }

    fn give_up(&self, request: &str, class: RetryClass, attempts: u32, failure: Failure) -> Error {
        let tries = if attempts == 1 {
            "1 attempt".to_string()
        } else {
            format!("{attempts} attempts")
        };
        let mut message = format!(
            "LanceDB table '{}': {request} failed after {tries}: {}",
            self.table, failure.message
        );
        if class == RetryClass::Upsert && failure.ambiguous() {
            message.push_str(
                "; the service may have applied it (running the statement again is safe: an \
                 upsert of unique keys gives the same table twice)",
            );
        }
        if class == RetryClass::Append && failure.ambiguous() {
            let what = match request {
                "insert" | "create_table" => "the rows",
                _ => "it",
            };
            message.push_str(&format!(
                "; the service may have applied it: check the table before sending {what} again"
            ));
        }
        match failure.status {
            Some(404) => Error::not_found(message),
            status => Error::Cloud { message, status },
        }
    }

    pub(super) fn unreadable(&self, request: &str, why: &str) -> Error {
        Error::Cloud {
            message: format!(
                "LanceDB table '{}': unreadable answer to {request}: {why}",
                self.table
            ),
            status: None,
        }
    }
}

/// One HTTP client (a connection pool) per service, database, prefix and
/// timeout, for the life of the process. It holds no key: each request
/// sends it.
fn http_client(table: &CloudTable, address: &CloudAddress) -> Result<reqwest::Client> {
    type Key = (String, String, Option<String>, u64);
    type Pool = Mutex<HashMap<Key, reqwest::Client>>;
    static CLIENTS: OnceLock<Pool> = OnceLock::new();
    let timeout_ms = table.requests.timeout_ms;
    let key = (
        table.endpoint.clone(),
        address.database.clone(),
        table.prefix.clone(),
        timeout_ms,
    );
    let mut clients = CLIENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(client) = clients.get(&key) {
        return Ok(client.clone());
    }
    let mut headers = reqwest::header::HeaderMap::new();
    let database = reqwest::header::HeaderValue::from_str(&address.database).map_err(|_| {
        Error::invalid_input(format!(
            "LanceDB database '{}': not a valid header value",
            address.database
        ))
    })?;
    headers.insert("x-lancedb-database", database);
    if let Some(prefix) = &table.prefix {
        let value = reqwest::header::HeaderValue::from_str(prefix).map_err(|_| {
            Error::invalid_input(format!(
                "LanceDB database prefix '{prefix}': not a valid header value"
            ))
        })?;
        headers.insert("x-lancedb-database-prefix", value);
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .timeout(Duration::from_millis(timeout_ms))
        .connect_timeout(Duration::from_millis(timeout_ms.min(10_000)))
        .build()
        .map_err(|e| Error::invalid_input(format!("LanceDB client: {}", e.without_url())))?;
    clients.insert(key, client.clone());
    Ok(client)
}
