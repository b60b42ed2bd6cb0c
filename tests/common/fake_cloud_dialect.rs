//! The front of the fake LanceDB Cloud service: LanceDB's clients speak the
//! Cloud dialect of the REST data plane, which Lance's REST server
//! (`RestAdapter`) reads a little differently. This front takes every
//! request on its own loopback port, bridges the differences, and passes
//! it on to the `RestAdapter` behind it:
//!
//! * a request without a body (LanceDB's `open_table` describes so) gets an
//!   empty JSON object, and `describe` always asks for the schema and
//!   version (`load_detailed_metadata=true`);
//! * a query's `vector` as a bare list of numbers (or of lists) becomes the
//!   namespace model's `{"single_vector": …}` (`{"multi_vector": …}`), and
//!   an empty (or missing) one becomes `{}`; its `columns` as a bare list of names (a map of
//!   aliases) becomes `{"column_names": …}` (`{"column_aliases": …}`);
//! * an alteration's `data_type` object (`{"type": "int64"}`) becomes the
//!   bare type name;
//! * `describe` answers the schema in Lance's own JSON form (`double`,
//!   `string`, `date32:day`), as LanceDB Cloud does, rather than the
//!   namespace model's (`float64`, `utf8`, `date32`).
//!
//! A failure behind it reaches the client as it happened: a status with its
//! body, a connection closed without an answer, no answer at all.
//!
//! The front also stands for the service's routing by database prefix
//! (`x-lancedb-database-prefix`): once told to serve a prefix, it answers
//! HTTP 404 to any request without that prefix.

use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

/// The longest the front waits for the server behind it (stalled requests
/// end sooner: the fake wakes them when it stops).
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);

/// The database prefix the front serves (`None`: requests without one).
pub(super) type Prefix = std::sync::Arc<std::sync::Mutex<Option<String>>>;

#[derive(Clone)]
struct Upstream {
    base: String,
    client: reqwest::Client,
    prefix: Prefix,
}

/// Serves the front on 127.0.0.1 (an ephemeral port) for `upstream` until
/// `stop` is notified (once); returns its port.
pub(super) async fn start(
    upstream: String,
    prefix: Prefix,
    stop: std::sync::Arc<tokio::sync::Notify>,
) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = Upstream {
        base: upstream,
        client: reqwest::Client::builder()
            .timeout(UPSTREAM_TIMEOUT)
            .build()
            .unwrap(),
        prefix,
    };
    let app = axum::Router::new().fallback(forward).with_state(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.notified().await })
            .await;
    });
    port
}

async fn forward(State(upstream): State<Upstream>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let served = upstream.prefix.lock().unwrap().clone();
    let sent_prefix = parts
        .headers
        .get("x-lancedb-database-prefix")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if sent_prefix != served {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(format!(
                "{{\"error\": \"no database prefix {sent_prefix:?} here\"}}"
            )))
            .unwrap();
    }
    let mut body = to_bytes(body, usize::MAX).await.unwrap_or_default();
    let path = parts.uri.path().trim_end_matches('/').to_string();
    let mut query = parts.uri.query().map(str::to_string);
    let mut json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if parts.method == Method::POST && body.is_empty() && !path.ends_with("/insert") {
        body = "{}".into();
        json = true;
    }
    if path.ends_with("/describe") {
        let asked = "load_detailed_metadata=true";
        query = Some(match query {
            Some(q) if q.contains("load_detailed_metadata") => q,
            Some(q) if !q.is_empty() => format!("{q}&{asked}"),
            _ => asked.to_string(),
        });
    }
    if path.ends_with("/alter_columns")
        && json
        && let Ok(mut value) = serde_json::from_slice::<Value>(&body)
    {
        bridge_alterations(&mut value);
        body = serde_json::to_vec(&value).unwrap().into();
    }
    if path.ends_with("/query")
        && json
        && let Ok(mut value) = serde_json::from_slice::<Value>(&body)
    {
        bridge_query(&mut value);
        body = serde_json::to_vec(&value).unwrap().into();
    }
    let url = match &query {
        Some(q) => format!("{}{path}?{q}", upstream.base),
        None => format!("{}{path}", upstream.base),
    };
    let mut sent = upstream.client.request(parts.method.clone(), url);
    for (name, value) in &parts.headers {
        let hop = [
            header::HOST,
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::CONNECTION,
        ];
        if !hop.contains(name) && (!json || name != header::CONTENT_TYPE) {
            sent = sent.header(name, value);
        }
    }
    if json {
        sent = sent.header(header::CONTENT_TYPE, "application/json");
    }
    let answer = match sent.body(body).send().await {
        Ok(answer) => answer,
        // The server behind closed the connection without an answer: so
        // does the front.
        Err(e) if e.is_request() => std::panic::resume_unwind(Box::new("connection reset")),
        Err(e) => {
            return Response::builder()
                .status(StatusCode::BAD_GATEWAY)
                .body(Body::from(e.to_string()))
                .unwrap();
        }
    };
    let status = answer.status();
    let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
    let mut bytes = match answer.bytes().await {
        Ok(bytes) => bytes,
        Err(_) => std::panic::resume_unwind(Box::new("connection reset")),
    };
    if path.ends_with("/describe")
        && status.is_success()
        && let Ok(mut value) = serde_json::from_slice::<Value>(&bytes)
    {
        cloud_schema(&mut value);
        bytes = serde_json::to_vec(&value).unwrap().into();
    }
    let mut response = Response::builder().status(status.as_u16());
    if let Some(t) = content_type {
        response = response.header(header::CONTENT_TYPE, t);
    } else {
        response = response.header(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    }
    response.body(Body::from(bytes)).unwrap()
}

/// A query as LanceDB sends it, as the namespace model reads it.
fn bridge_query(query: &mut Value) {
    let Some(object) = query.as_object_mut() else {
        return;
    };
    match object.get("vector") {
        Some(Value::Array(items)) if items.is_empty() => {
            object.insert("vector".to_string(), serde_json::json!({}));
        }
        None => {
            object.insert("vector".to_string(), serde_json::json!({}));
        }
        Some(Value::Array(items)) => {
            let key = if items.iter().all(Value::is_number) {
                "single_vector"
            } else {
                "multi_vector"
            };
            let vector = object.remove("vector").unwrap();
            object.insert("vector".to_string(), serde_json::json!({ key: vector }));
        }
        _ => {}
    }
    match object.remove("columns") {
        Some(names @ Value::Array(_)) => {
            object.insert(
                "columns".to_string(),
                serde_json::json!({ "column_names": names }),
            );
        }
        Some(Value::Object(aliases)) if !aliases.contains_key("column_names") => {
            object.insert(
                "columns".to_string(),
                serde_json::json!({ "column_aliases": aliases }),
            );
        }
        Some(other) => {
            object.insert("columns".to_string(), other);
        }
        None => {}
    }
}

/// A describe answer's schema in Lance's JSON form, as LanceDB Cloud writes
/// it.
/// An alteration's `data_type` as LanceDB's clients send it (`{"type":
/// "int64"}`) becomes the bare name Lance's server reads.
fn bridge_alterations(request: &mut Value) {
    let Some(alterations) = request.get_mut("alterations").and_then(Value::as_array_mut) else {
        return;
    };
    for alteration in alterations {
        if let Some(kind) = alteration
            .get("data_type")
            .and_then(|t| t.get("type"))
            .cloned()
        {
            alteration["data_type"] = kind;
        }
    }
}

fn cloud_schema(answer: &mut Value) {
    let Some(schema) = answer.get_mut("schema") else {
        return;
    };
    let model: lance_namespace::models::JsonArrowSchema =
        serde_json::from_value(schema.clone()).unwrap();
    let arrow = lance_namespace::schema::convert_json_arrow_schema(&model).unwrap();
    let cloud = lance::arrow::json::JsonSchema::try_from(&arrow).unwrap();
    *schema = serde_json::to_value(cloud).unwrap();
}
