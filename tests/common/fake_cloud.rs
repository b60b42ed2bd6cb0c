//! A fake of LanceDB Cloud's REST data plane, on 127.0.0.1 (an ephemeral
//! port) until dropped: Lance's own REST server (`RestAdapter`) over a
//! directory namespace, behind a wrapper that
//!
//! * refuses requests without the right `x-api-key` (HTTP 401),
//! * hides every table's location, so a client can only use the API,
//! * logs each request by kind, and
//! * fails scripted requests (`fail_next`) the way a service and its
//!   network do: an error status, a connection reset, no answer at all,
//!   before or after carrying the request out.
//!
//! Shared by the integration tests and the sqllogictest runner.

#![allow(dead_code)]

#[path = "fake_cloud_dialect.rs"]
mod dialect;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use lance_core::Result;
use lance_namespace::LanceNamespace;
use lance_namespace::error::NamespaceError;
use lance_namespace::models::*;
use lance_namespace_impls::{
    DirectoryNamespaceBuilder, RestAdapter, RestAdapterConfig, RestAdapterHandle,
};

/// The API key the fake accepts.
pub(crate) const API_KEY: &str = "sk-fake-0123456789";

/// What a scripted failure answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// No failure: the request is answered as usual.
    Pass,
    /// HTTP 503 before anything is done.
    Unavailable,
    /// HTTP 429 before anything is done.
    Throttled,
    /// The request is carried out, then answered with HTTP 503: the client
    /// cannot tell it from an outage.
    AppliedThenUnavailable,
    /// The connection is closed (reset) once the request has arrived,
    /// before anything is done.
    Reset,
    /// The request is carried out, then the connection is closed with no
    /// answer.
    AppliedThenReset,
    /// No answer until the client gives up (its `request_timeout_ms`);
    /// nothing is done.
    Stall,
    /// The request is carried out (to the end, even when the client has
    /// gone: see [`FakeCloud::settle`]), then no answer until the client
    /// gives up.
    AppliedThenStall,
}

impl Fault {
    /// Every fault, in the order the retry matrix runs them.
    pub(crate) const ALL: [Fault; 7] = [
        Fault::Throttled,
        Fault::Unavailable,
        Fault::Stall,
        Fault::Reset,
        Fault::AppliedThenUnavailable,
        Fault::AppliedThenStall,
        Fault::AppliedThenReset,
    ];

    /// Whether the service carries the request out before failing it.
    pub(crate) fn applies(self) -> bool {
        matches!(
            self,
            Fault::Pass
                | Fault::AppliedThenUnavailable
                | Fault::AppliedThenReset
                | Fault::AppliedThenStall
        )
    }
}

/// The longest a stalled request waits for its client to give up.
const STALL: std::time::Duration = std::time::Duration::from_secs(20);

#[derive(Debug, Default)]
struct Script {
    /// Requests received, by kind, in order.
    log: Vec<&'static str>,
    /// Failures to answer, by request kind.
    faults: BTreeMap<&'static str, VecDeque<Fault>>,
    /// Requests being carried out on their own task (their client may be
    /// gone): `settle` waits for them.
    applying: Vec<tokio::task::JoinHandle<()>>,
}

#[derive(Debug)]
struct Service {
    inner: Arc<dyn LanceNamespace>,
    script: Arc<Mutex<Script>>,
    /// Turns true when the fake stops: stalled requests (and those that
    /// would stall from then on) answer at once.
    stop: tokio::sync::watch::Receiver<bool>,
}

impl Service {
    /// Admits a request and says how it fails, if it does.
    fn admit(&self, kind: &'static str, identity: &Option<Box<Identity>>) -> Result<Fault> {
        let key = identity.as_ref().and_then(|i| i.api_key.as_deref());
        if key != Some(API_KEY) {
            return Err(NamespaceError::Unauthenticated {
                message: "invalid API key".to_string(),
            }
            .into());
        }
        let fault = {
            let mut script = self.script.lock().unwrap();
            script.log.push(kind);
            script
                .faults
                .get_mut(kind)
                .and_then(|f| f.pop_front())
                .unwrap_or(Fault::Pass)
        };
        match fault {
            Fault::Unavailable => Err(NamespaceError::ServiceUnavailable {
                message: "scripted outage".to_string(),
            }
            .into()),
            Fault::Throttled => Err(NamespaceError::Throttling {
                message: "scripted throttling".to_string(),
            }
            .into()),
            Fault::Reset => reset(),
            fault => Ok(fault),
        }
    }

    /// Carries a request out on a task of its own, which finishes even when
    /// the client gives up first (the connection's task then drops this
    /// future, not the work).
    async fn apply<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let _ = tx.send(work.await);
        });
        {
            let mut script = self.script.lock().unwrap();
            script.applying.retain(|t| !t.is_finished());
            script.applying.push(task);
        }
        rx.await
            .expect("the request's task ended without an answer")
    }

    /// Answers as `fault` says once the request was carried out.
    async fn answer<T>(&self, fault: Fault, answer: T) -> Result<T> {
        match fault {
            Fault::AppliedThenUnavailable => outage(),
            Fault::AppliedThenReset => reset(),
            Fault::Stall | Fault::AppliedThenStall => {
                let mut stop = self.stop.clone();
                tokio::select! {
                    _ = tokio::time::sleep(STALL) => {}
                    _ = stop.wait_for(|stopped| *stopped) => {}
                }
                outage()
            }
            _ => Ok(answer),
        }
    }
}

fn outage<T>() -> Result<T> {
    Err(NamespaceError::ServiceUnavailable {
        message: "scripted outage after the request was carried out".to_string(),
    }
    .into())
}

/// Ends the connection's task without an answer: the client sees the
/// connection closed (as by a reset) once its request was sent. An unwind
/// that runs no panic hook, so nothing is printed.
fn reset<T>() -> T {
    std::panic::resume_unwind(Box::new("scripted connection reset"))
}

macro_rules! forward {
    ($($method:ident($request:ty $(, $data:ident)?) -> $response:ty;)*) => {
        #[async_trait]
        impl LanceNamespace for Service {
            $(
                async fn $method(&self, request: $request $(, $data: Bytes)?) -> Result<$response> {
                    let fault = self.admit(stringify!($method), &request.identity)?;
                    if fault == Fault::Stall {
                        return self.answer(fault, ()).await.and_then(|_| outage());
                    }
                    let inner = Arc::clone(&self.inner);
                    let answer = self
                        .apply(async move { inner.$method(request $(, $data)?).await })
                        .await?;
                    self.answer(fault, answer).await
                }
            )*

            async fn describe_table(
                &self,
                request: DescribeTableRequest,
            ) -> Result<DescribeTableResponse> {
                let fault = self.admit("describe_table", &request.identity)?;
                if fault == Fault::Stall {
                    return self.answer(fault, ()).await.and_then(|_| outage());
                }
                let inner = Arc::clone(&self.inner);
                let mut answer = self
                    .apply(async move { inner.describe_table(request).await })
                    .await?;
                // The service never tells where the data is.
                answer.location = None;
                answer.table_uri = None;
                answer.storage_options = None;
                self.answer(fault, answer).await
            }

            async fn drop_table(&self, request: DropTableRequest) -> Result<DropTableResponse> {
                let fault = self.admit("drop_table", &request.identity)?;
                if fault == Fault::Stall {
                    return self.answer(fault, ()).await.and_then(|_| outage());
                }
                // The service answers 404 for a table that is not there.
                let exists = TableExistsRequest {
                    id: request.id.clone(),
                    ..Default::default()
                };
                if self.inner.table_exists(exists).await.is_err() {
                    let name = request.id.clone().unwrap_or_default().join("$");
                    return Err(NamespaceError::TableNotFound { message: name }.into());
                }
                let inner = Arc::clone(&self.inner);
                let answer = self
                    .apply(async move { inner.drop_table(request).await })
                    .await?;
                self.answer(fault, answer).await
            }

            fn namespace_id(&self) -> String {
                "fake LanceDB Cloud".to_string()
            }
        }
    };
}

forward! {
    list_tables(ListTablesRequest) -> ListTablesResponse;
    count_table_rows(CountTableRowsRequest) -> i64;
    create_table(CreateTableRequest, data) -> CreateTableResponse;
    insert_into_table(InsertIntoTableRequest, data) -> InsertIntoTableResponse;
    merge_insert_into_table(MergeInsertIntoTableRequest, data) -> MergeInsertIntoTableResponse;
    update_table(UpdateTableRequest) -> UpdateTableResponse;
    delete_from_table(DeleteFromTableRequest) -> DeleteFromTableResponse;
    query_table(QueryTableRequest) -> Bytes;
    list_table_versions(ListTableVersionsRequest) -> ListTableVersionsResponse;
    list_table_tags(ListTableTagsRequest) -> ListTableTagsResponse;
    get_table_tag_version(GetTableTagVersionRequest) -> GetTableTagVersionResponse;
    list_table_indices(ListTableIndicesRequest) -> ListTableIndicesResponse;
    create_table_index(CreateTableIndexRequest) -> CreateTableIndexResponse;
    drop_table_index(DropTableIndexRequest) -> DropTableIndexResponse;
    alter_table_add_columns(AlterTableAddColumnsRequest) -> AlterTableAddColumnsResponse;
    alter_table_alter_columns(AlterTableAlterColumnsRequest) -> AlterTableAlterColumnsResponse;
    alter_table_drop_columns(AlterTableDropColumnsRequest) -> AlterTableDropColumnsResponse;
    create_table_tag(CreateTableTagRequest) -> CreateTableTagResponse;
    update_table_tag(UpdateTableTagRequest) -> UpdateTableTagResponse;
    delete_table_tag(DeleteTableTagRequest) -> DeleteTableTagResponse;
}

/// The fake service and the directory its tables live in.
pub(crate) struct FakeCloud {
    dir: tempfile::TempDir,
    handle: RestAdapterHandle,
    script: Arc<Mutex<Script>>,
    stop: tokio::sync::watch::Sender<bool>,
    /// The port of the front that speaks LanceDB's dialect.
    front: u16,
    /// Stops the front.
    front_stop: Arc<tokio::sync::Notify>,
    /// The database prefix the front serves.
    prefix: dialect::Prefix,
}

impl FakeCloud {
    /// Starts the fake over an empty directory.
    pub(crate) async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Without a manifest: tables the tests write straight into the
        // directory (`table_path`) are the service's tables for every
        // request, schema and index changes included.
        let inner = DirectoryNamespaceBuilder::new(dir.path().to_str().unwrap())
            .manifest_enabled(false)
            .build()
            .await
            .unwrap();
        let script = Arc::new(Mutex::new(Script::default()));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let service = Service {
            inner: Arc::new(inner),
            script: Arc::clone(&script),
            stop: stopped,
        };
        let config = RestAdapterConfig {
            host: "127.0.0.1".to_string(),
            port: 0,
        };
        let handle = RestAdapter::new(Arc::new(service), config)
            .start()
            .await
            .unwrap();
        let front_stop = Arc::new(tokio::sync::Notify::new());
        let prefix = dialect::Prefix::default();
        let front = dialect::start(
            format!("http://127.0.0.1:{}", handle.port()),
            Arc::clone(&prefix),
            Arc::clone(&front_stop),
        )
        .await;
        Self {
            dir,
            handle,
            script,
            stop,
            front,
            front_stop,
            prefix,
        }
    }

    /// From now on, serves only requests naming database prefix `prefix`
    /// (`None`: only requests naming none); the others get HTTP 404.
    pub(crate) fn serve_prefix(&self, prefix: Option<&str>) {
        *self.prefix.lock().unwrap() = prefix.map(str::to_string);
    }

    /// The service's URL (`host_override`): the front that speaks the
    /// dialect of LanceDB's clients.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.front)
    }

    /// Where table `name` is stored (for tests to create it, and to read it
    /// locally for comparison).
    pub(crate) fn table_path(&self, name: &str) -> String {
        self.dir
            .path()
            .join(format!("{name}.lance"))
            .to_string_lossy()
            .to_string()
    }

    /// `OPTIONS (...)` of a `db://` table on this fake, plus `extra`.
    pub(crate) fn options(&self, extra: &str) -> String {
        let mut options = format!("'api_key' '{API_KEY}', 'host_override' '{}'", self.url());
        if !extra.is_empty() {
            options.push_str(", ");
            options.push_str(extra);
        }
        options
    }

    /// Requests received so far, by kind, in order.
    pub(crate) fn log(&self) -> Vec<&'static str> {
        self.script.lock().unwrap().log.clone()
    }

    /// Forgets the requests received so far.
    pub(crate) fn clear_log(&self) {
        self.script.lock().unwrap().log.clear();
    }

    /// The next `faults.len()` requests of `kind` (e.g. `"query_table"`)
    /// fail as scripted.
    pub(crate) fn fail_next(&self, kind: &'static str, faults: &[Fault]) {
        self.script
            .lock()
            .unwrap()
            .faults
            .entry(kind)
            .or_default()
            .extend(faults.iter().copied());
    }
}

impl FakeCloud {
    /// Waits until every request the fake has begun to carry out is done,
    /// answered or not (a client that timed out does not wait for that).
    pub(crate) async fn settle(&self) {
        loop {
            let tasks = std::mem::take(&mut self.script.lock().unwrap().applying);
            if tasks.is_empty() {
                return;
            }
            for task in tasks {
                task.await.unwrap();
            }
        }
    }
}

impl Drop for FakeCloud {
    fn drop(&mut self) {
        // Stalled requests answer now, so the server can stop; requests
        // still being carried out end here, not in a deleted directory.
        let _ = self.stop.send(true);
        for task in self.script.lock().unwrap().applying.drain(..) {
            task.abort();
        }
        self.front_stop.notify_one();
        self.handle.shutdown();
    }
}
