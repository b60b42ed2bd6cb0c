//! Postgres startup: no password when the server is open, otherwise a
//! cleartext password (send it over TLS or loopback only): a `--users`
//! user's password, or the server's token under any user name.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::cleartext::CleartextPasswordAuthStartupHandler;
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::{ClientInfo, ConnectionManager};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use crate::server::Credentials;

/// The password of a login, from the server's [`Credentials`].
#[derive(Debug)]
pub(super) struct Passwords(Credentials);

#[async_trait]
impl AuthSource for Passwords {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let password = match &self.0 {
            Credentials::Token(token) => Some(token.clone()),
            Credentials::Users(users) => login.user().and_then(|u| users.get(u)).cloned(),
            Credentials::Open => None,
        };
        password
            .map(|p| Password::new(None, p.into_bytes()))
            .ok_or_else(|| {
                PgWireError::UserError(Box::new(ErrorInfo::new(
                    "FATAL".into(),
                    "28P01".into(),
                    "invalid credentials".into(),
                )))
            })
    }
}

/// No authentication (an open server on loopback).
pub(super) struct Open(Arc<ConnectionManager>);

impl NoopStartupHandler for Open {
    fn connection_manager(&self) -> Option<Arc<ConnectionManager>> {
        Some(Arc::clone(&self.0))
    }
}

/// How a connection authenticates.
enum Login {
    Open(Open),
    Password(Box<CleartextPasswordAuthStartupHandler<Passwords, DefaultServerParameterProvider>>),
}

/// The startup handler of a connection.
pub(super) struct Startup {
    login: Login,
    /// Refuse a connection that did not start TLS.
    tls_only: bool,
}

impl Startup {
    /// The startup of a connection; it is registered with `cancels`, the
    /// server's registry for cancel requests, once it is logged in.
    pub(super) fn new(
        credentials: &Credentials,
        tls_only: bool,
        cancels: &Arc<ConnectionManager>,
    ) -> Arc<Self> {
        let login = match credentials {
            Credentials::Open => Login::Open(Open(Arc::clone(cancels))),
            other => Login::Password(Box::new(
                CleartextPasswordAuthStartupHandler::new(
                    Passwords(other.clone()),
                    DefaultServerParameterProvider::default(),
                )
                .with_connection_manager(Arc::clone(cancels)),
            )),
        };
        Arc::new(Self { login, tls_only })
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if self.tls_only && !client.is_secure() {
            // Before any password is asked for: none crosses in the clear.
            return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".into(),
                "28000".into(),
                "this server accepts TLS connections only (connect with sslmode=require)".into(),
            ))));
        }
        match &self.login {
            Login::Open(open) => open.on_startup(client, message).await,
            Login::Password(password) => password.on_startup(client, message).await,
        }
    }
}
