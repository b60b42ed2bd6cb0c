//! Per-connection sessions and the server-side handles (statement tickets,
//! prepared statements) that live between two requests.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::error::Result as DFResult;
use datafusion::prelude::SessionContext;
use futures::future::BoxFuture;
use tonic::Status;
use tonic::metadata::MetadataMap;

use super::auth::Principal;

/// The cookie that names a client's session.
pub(crate) const SESSION_COOKIE: &str = "lance_session";

/// Makes the context of a new session: the server's settings, tables and
/// catalogs, fresh session state (see [`crate::server`]).
pub type SessionFactory =
    Arc<dyn Fn() -> BoxFuture<'static, DFResult<SessionContext>> + Send + Sync>;

/// A client's session: its context (settings, registered tables, prepared
/// statements) and when it was last used.
pub(crate) struct Session {
    pub(crate) ctx: SessionContext,
    principal: Principal,
    last_used: Mutex<Instant>,
}

/// The sessions of a server, by id.
pub(crate) struct Sessions {
    factory: SessionFactory,
    idle: Duration,
    max: usize,
    by_id: Mutex<HashMap<String, Arc<Session>>>,
}

impl fmt::Debug for Sessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sessions")
            .field("idle", &self.idle)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    pub(crate) fn new(factory: SessionFactory, idle: Duration, max: usize) -> Self {
        Self {
            factory,
            idle,
            max: max.max(1),
            by_id: Mutex::new(HashMap::new()),
        }
    }

    /// The session the request's cookie names when it is `principal`'s and
    /// still alive; otherwise a new one, with the id to set as its cookie.
    pub(crate) async fn of(
        &self,
        metadata: &MetadataMap,
        principal: &Principal,
    ) -> Result<(Arc<Session>, Option<String>), Status> {
        if let Some(id) = cookie(metadata, SESSION_COOKIE) {
            let found = self.lock().get(&id).cloned();
            let alive = |s: &Arc<Session>| {
                &s.principal == principal
                    && s.last_used
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .elapsed()
                        < self.idle
            };
            if let Some(session) = found.filter(alive) {
                *session.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                return Ok((session, None));
            }
        }
        let ctx = (self.factory)()
            .await
            .map_err(|e| Status::internal(format!("cannot start a session: {e}")))?;
        let session = Arc::new(Session {
            ctx,
            principal: principal.clone(),
            last_used: Mutex::new(Instant::now()),
        });
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut sessions = self.lock();
        let now = Instant::now();
        sessions.retain(|_, s| {
            now.duration_since(*s.last_used.lock().unwrap_or_else(|p| p.into_inner())) < self.idle
        });
        while sessions.len() >= self.max {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| *s.last_used.lock().unwrap_or_else(|p| p.into_inner()))
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => sessions.remove(&id),
                None => break,
            };
        }
        sessions.insert(id.clone(), Arc::clone(&session));
        Ok((session, Some(id)))
    }

    /// How many sessions are alive.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The value of cookie `name` in the request's `cookie` headers.
fn cookie(metadata: &MetadataMap, name: &str) -> Option<String> {
    metadata
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim().to_string())
}

/// Things a client made and comes back for by an opaque handle (a random
/// id): they belong to the principal that made them, expire after `ttl`
/// unused, and at most `max` are kept (the oldest go first).
pub(crate) struct Handles<T> {
    ttl: Duration,
    max: usize,
    by_id: Mutex<HashMap<String, Entry<T>>>,
}

/// A handle's owner, when it was last used, and what it names.
type Entry<T> = (Principal, Instant, Arc<T>);

impl<T> fmt::Debug for Handles<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handles")
            .field("ttl", &self.ttl)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl<T> Handles<T> {
    pub(crate) fn new(ttl: Duration, max: usize) -> Self {
        Self {
            ttl,
            max: max.max(1),
            by_id: Mutex::new(HashMap::new()),
        }
    }

    /// Keeps `item` and returns its handle.
    pub(crate) fn insert(&self, principal: &Principal, item: T) -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        by_id.retain(|_, (_, used, _)| now.duration_since(*used) < self.ttl);
        while by_id.len() >= self.max {
            let oldest = by_id
                .iter()
                .min_by_key(|(_, (_, used, _))| *used)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => by_id.remove(&id),
                None => break,
            };
        }
        by_id.insert(id.clone(), (principal.clone(), now, Arc::new(item)));
        id
    }

    /// The item of `handle` when it is `principal`'s.
    pub(crate) fn get(&self, principal: &Principal, handle: &[u8]) -> Result<Arc<T>, Status> {
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        let key = String::from_utf8_lossy(handle);
        match by_id.get_mut(key.as_ref()) {
            Some((owner, used, item)) if owner == principal && used.elapsed() < self.ttl => {
                *used = Instant::now();
                Ok(Arc::clone(item))
            }
            _ => Err(unknown_handle()),
        }
    }

    /// Takes the item of `handle` out (when it is `principal`'s).
    pub(crate) fn take(&self, principal: &Principal, handle: &[u8]) -> Result<Arc<T>, Status> {
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        let key = String::from_utf8_lossy(handle).into_owned();
        match by_id.get(&key) {
            Some((owner, _, _)) if owner == principal => Ok(by_id
                .remove(&key)
                .map(|(_, _, item)| item)
                .ok_or_else(unknown_handle)?),
            _ => Err(unknown_handle()),
        }
    }
}

fn unknown_handle() -> Status {
    Status::not_found("unknown or expired handle (statement tickets are read once)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_is_found_only_by_its_principal_and_only_until_it_expires() {
        let (ann, bob) = (Principal("ann".into()), Principal("bob".into()));
        let handles = Handles::new(Duration::from_secs(60), 2);
        let id = handles.insert(&ann, 7);
        assert!(handles.get(&bob, id.as_bytes()).is_err());
        assert!(handles.take(&bob, id.as_bytes()).is_err());
        assert_eq!(*handles.get(&ann, id.as_bytes()).unwrap(), 7);
        assert_eq!(*handles.take(&ann, id.as_bytes()).unwrap(), 7);
        assert!(handles.take(&ann, id.as_bytes()).is_err(), "read once");
        // At most `max` are kept: the oldest goes.
        let (a, b, c) = (
            handles.insert(&ann, 1),
            handles.insert(&ann, 2),
            handles.insert(&ann, 3),
        );
        assert!(handles.get(&ann, a.as_bytes()).is_err());
        assert!(handles.get(&ann, b.as_bytes()).is_ok() && handles.get(&ann, c.as_bytes()).is_ok());
        let expired = Handles::new(Duration::ZERO, 2);
        let id = expired.insert(&ann, 1);
        assert!(expired.get(&ann, id.as_bytes()).is_err());
    }
}
