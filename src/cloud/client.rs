//! The REST data plane of one `db://` table: the requests this crate sends,
//! their retries and their errors.
//!
//! Requests go through Lance's generated REST client (`lance_namespace::apis`),
//! which reports the HTTP status and
//! tells a refused connection from a lost one, so each request kind can be
//! retried by its class (see [`RetryClass`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::Schema;
use lance_namespace::apis::configuration::{ApiKey, Configuration};
use lance_namespace::apis::{self, table_api};
use lance_namespace::models;

use super::address::CloudAddress;
use super::ipc;
use super::options::CloudTable;
use crate::error::{Error, Result};

/// When a failed request may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryClass {
    /// Reads: on 409, 429, 5xx, timeouts and connection errors.
    Read,
    /// Appends: only when the failure proves nothing was applied (the
    /// connection was refused, or the service answered 429).
    Append,
}

/// A client for one table of a LanceDB Cloud or Enterprise database.
pub(crate) struct CloudClient {
    config: Configuration,
    /// The table as messages name it.
    table: String,
    /// The id the service's paths use.
    id: String,
    max_retries: u32,
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
        config.client = http_client(&table.endpoint, &address, table.requests.timeout_ms)?;
        config.user_agent = Some(format!("datafusion-lance/{}", env!("CARGO_PKG_VERSION")));
        config.api_key = Some(ApiKey { prefix: None, key });
        Ok(Self {
            config,
            table: table.location.display_uri.clone(),
            id: address.table_id(),
            max_retries: table.requests.max_retries,
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
        let schema = lance_namespace::schema::convert_json_arrow_schema(&schema)
            .map_err(|e| self.unreadable("describe", &e.to_string()))?;
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
        let body = self
            .send("query", RetryClass::Read, || async {
                let response =
                    table_api::query_table(&self.config, &self.id, request.clone(), None).await?;
                response
                    .bytes()
                    .await
                    .map_err(apis::Error::<table_api::QueryTableError>::Reqwest)
            })
            .await?;
        ipc::decode(&body).map_err(|e| self.unreadable("query", &e))
    }

    /// Appends `rows` rows (`batches`, in `schema`) in one request, or
    /// replaces the table with them (`overwrite`); the version made, if the
    /// service says.
    pub(crate) async fn insert(
        &self,
        schema: &Schema,
        batches: &[RecordBatch],
        rows: usize,
        overwrite: bool,
    ) -> Result<Option<u64>> {
        let body = ipc::encode(schema, batches).map_err(|e| Error::Cloud {
            message: format!("LanceDB table '{}': encoding {rows} rows: {e}", self.table),
            status: None,
        })?;
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

    /// Sends a request until it succeeds or its class forbids another try.
    async fn send<T, E, F, Fut>(&self, request: &str, class: RetryClass, mut call: F) -> Result<T>
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
                tokio::time::sleep(backoff(attempts)).await;
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
        if class == RetryClass::Append && failure.ambiguous() {
            message.push_str(
                "; the service may have applied it: check the table before sending the rows \
                 again",
            );
        }
        match failure.status {
            Some(404) => Error::not_found(message),
            status => Error::Cloud { message, status },
        }
    }

    fn unreadable(&self, request: &str, why: &str) -> Error {
        Error::Cloud {
            message: format!(
                "LanceDB table '{}': unreadable answer to {request}: {why}",
                self.table
            ),
            status: None,
        }
    }
}

/// What went wrong with one attempt.
struct Failure {
    status: Option<u16>,
    /// The request never reached the service (connection refused).
    not_sent: bool,
    /// The connection failed or timed out after the request may have been sent.
    lost: bool,
    message: String,
}

impl Failure {
    fn of<E>(error: apis::Error<E>) -> Self {
        match error {
            apis::Error::ResponseError(answer) => {
                let status = answer.status;
                let said = serde_json::from_str::<serde_json::Value>(&answer.content)
                    .ok()
                    .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                    .unwrap_or_else(|| answer.content.chars().take(300).collect());
                Self {
                    status: Some(status.as_u16()),
                    not_sent: false,
                    lost: false,
                    message: format!("HTTP {status}: {said}"),
                }
            }
            apis::Error::Reqwest(e) => Self {
                status: e.status().map(|s| s.as_u16()),
                not_sent: e.is_connect(),
                lost: e.is_timeout() || e.is_request() || e.is_body() || e.is_decode(),
                message: e.without_url().to_string(),
            },
            apis::Error::Serde(e) => Self {
                status: None,
                not_sent: false,
                lost: false,
                message: format!("unreadable answer: {e}"),
            },
            apis::Error::Io(e) => Self {
                status: None,
                not_sent: false,
                lost: true,
                message: e.to_string(),
            },
        }
    }

    /// The request may have been carried out: it was sent, and the answer
    /// (if any) does not say it was refused.
    fn ambiguous(&self) -> bool {
        !self.not_sent && !matches!(self.status, Some(400..=499))
    }

    fn retryable(&self, class: RetryClass) -> bool {
        match class {
            RetryClass::Append => self.not_sent || self.status == Some(429),
            RetryClass::Read => {
                self.not_sent
                    || self.lost
                    || matches!(self.status, Some(409 | 429 | 500 | 502 | 503 | 504))
            }
        }
    }
}

/// 250 ms · 2^(n-1), plus up to 250 ms of jitter.
fn backoff(attempt: u32) -> Duration {
    let base = 250u64.saturating_mul(1 << (attempt - 1).min(6));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_millis(base + u64::from(nanos % 250))
}

/// One HTTP client (a connection pool) per service, database and timeout,
/// for the life of the process. It holds no key: each request sends it.
fn http_client(endpoint: &str, address: &CloudAddress, timeout_ms: u64) -> Result<reqwest::Client> {
    type Pool = Mutex<HashMap<(String, String, u64), reqwest::Client>>;
    static CLIENTS: OnceLock<Pool> = OnceLock::new();
    let key = (endpoint.to_string(), address.database.clone(), timeout_ms);
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
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .timeout(Duration::from_millis(timeout_ms))
        .connect_timeout(Duration::from_millis(timeout_ms.min(10_000)))
        .build()
        .map_err(|e| Error::invalid_input(format!("LanceDB client: {}", e.without_url())))?;
    clients.insert(key, client.clone());
    Ok(client)
}
