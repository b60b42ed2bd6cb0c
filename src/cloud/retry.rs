//! Which failed requests are sent again, and how long to wait first.

use std::time::Duration;

use lance_namespace::apis;

/// When a failed request may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryClass {
    /// Reads: on 409, 429, 5xx, timeouts and connection errors.
    Read,
    /// Appends: only when the failure proves nothing was applied (the
    /// connection was refused, or the service answered 429).
    Append,
    /// Upserts of unique keys, which give the same table when applied twice:
    /// as reads.
    Upsert,
}

/// What went wrong with one attempt.
pub(super) struct Failure {
    pub(super) status: Option<u16>,
    /// The request never reached the service (connection refused).
    not_sent: bool,
    /// The connection failed or timed out after the request may have been sent.
    lost: bool,
    pub(super) message: String,
}

impl Failure {
    pub(super) fn of<E>(error: apis::Error<E>) -> Self {
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
                message: if e.is_timeout() && !e.is_connect() {
                    "no answer within the request timeout (request_timeout_ms)".to_string()
                } else {
                    with_causes(&e.without_url())
                },
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
    pub(super) fn ambiguous(&self) -> bool {
        !self.not_sent && !matches!(self.status, Some(400..=499))
    }

    pub(super) fn retryable(&self, class: RetryClass) -> bool {
        match class {
            RetryClass::Append => self.not_sent || self.status == Some(429),
            RetryClass::Read | RetryClass::Upsert => {
                self.not_sent
                    || self.lost
                    || matches!(self.status, Some(409 | 429 | 500 | 502 | 503 | 504))
            }
        }
    }
}

/// `error` and what caused it, outermost first (`error sending request:
/// client error (SendRequest): connection closed before message completed`).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !message.ends_with(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = next.source();
    }
    message
}

/// `first_ms` · 2^(n-1) (at most 64 × `first_ms`), plus up to `first_ms` of
/// jitter.
pub(super) fn backoff(first_ms: u64, attempt: u32) -> Duration {
    let base = first_ms.saturating_mul(1 << (attempt - 1).min(6));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_millis(base.saturating_add(u64::from(nanos) % first_ms.max(1)))
}
