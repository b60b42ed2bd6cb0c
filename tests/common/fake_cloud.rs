//! A fake of LanceDB Cloud's REST data plane, on 127.0.0.1 (an ephemeral
//! port) until dropped: Lance's own REST server (`RestAdapter`) over a
//! directory namespace, behind a wrapper that
//!
//! * refuses requests without the right `x-api-key` (HTTP 401),
//! * hides every table's location, so a client can only use the API,
//! * logs each request by kind, and
//! * fails scripted requests (`fail_next`) the way a service does.
//!
//! Shared by the integration tests and the sqllogictest runner.

#![allow(dead_code)]

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
}

#[derive(Debug, Default)]
struct Script {
    /// Requests received, by kind, in order.
    log: Vec<&'static str>,
    /// Failures to answer, by request kind.
    faults: BTreeMap<&'static str, VecDeque<Fault>>,
}

#[derive(Debug)]
struct Service {
    inner: Arc<dyn LanceNamespace>,
    script: Arc<Mutex<Script>>,
}

impl Service {
    /// Admits a request: `Ok(true)` when it must be carried out and then
    /// answered with an outage.
    fn admit(&self, kind: &'static str, identity: &Option<Box<Identity>>) -> Result<bool> {
        let key = identity.as_ref().and_then(|i| i.api_key.as_deref());
        if key != Some(API_KEY) {
            return Err(NamespaceError::Unauthenticated {
                message: "invalid API key".to_string(),
            }
            .into());
        }
        let mut script = self.script.lock().unwrap();
        script.log.push(kind);
        match script.faults.get_mut(kind).and_then(|f| f.pop_front()) {
            Some(Fault::Unavailable) => Err(NamespaceError::ServiceUnavailable {
                message: "scripted outage".to_string(),
            }
            .into()),
            Some(Fault::Throttled) => Err(NamespaceError::Throttling {
                message: "scripted throttling".to_string(),
            }
            .into()),
            Some(Fault::AppliedThenUnavailable) => Ok(true),
            Some(Fault::Pass) | None => Ok(false),
        }
    }
}

fn outage<T>() -> Result<T> {
    Err(NamespaceError::ServiceUnavailable {
        message: "scripted outage after the request was carried out".to_string(),
    }
    .into())
}

macro_rules! forward {
    ($($method:ident($request:ty $(, $data:ident)?) -> $response:ty;)*) => {
        #[async_trait]
        impl LanceNamespace for Service {
            $(
                async fn $method(&self, request: $request $(, $data: Bytes)?) -> Result<$response> {
                    let lose_answer = self.admit(stringify!($method), &request.identity)?;
                    let answer = self.inner.$method(request $(, $data)?).await?;
                    if lose_answer {
                        return outage();
                    }
                    Ok(answer)
                }
            )*

            async fn describe_table(
                &self,
                request: DescribeTableRequest,
            ) -> Result<DescribeTableResponse> {
                let lose_answer = self.admit("describe_table", &request.identity)?;
                let mut answer = self.inner.describe_table(request).await?;
                if lose_answer {
                    return outage();
                }
                // The service never tells where the data is.
                answer.location = None;
                answer.table_uri = None;
                answer.storage_options = None;
                Ok(answer)
            }

            fn namespace_id(&self) -> String {
                "fake LanceDB Cloud".to_string()
            }
        }
    };
}

forward! {
    list_tables(ListTablesRequest) -> ListTablesResponse;
    drop_table(DropTableRequest) -> DropTableResponse;
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
}

/// The fake service and the directory its tables live in.
pub(crate) struct FakeCloud {
    dir: tempfile::TempDir,
    handle: RestAdapterHandle,
    script: Arc<Mutex<Script>>,
}

impl FakeCloud {
    /// Starts the fake over an empty directory.
    pub(crate) async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let inner = DirectoryNamespaceBuilder::new(dir.path().to_str().unwrap())
            .build()
            .await
            .unwrap();
        let script = Arc::new(Mutex::new(Script::default()));
        let service = Service {
            inner: Arc::new(inner),
            script: Arc::clone(&script),
        };
        let config = RestAdapterConfig {
            host: "127.0.0.1".to_string(),
            port: 0,
        };
        let handle = RestAdapter::new(Arc::new(service), config)
            .start()
            .await
            .unwrap();
        Self {
            dir,
            handle,
            script,
        }
    }

    /// The service's URL (`host_override`).
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.handle.port())
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

impl Drop for FakeCloud {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}
