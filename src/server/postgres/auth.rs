//! Postgres startup: no password when the server is open, otherwise a
//! cleartext password (send it over TLS or loopback only): a `--users`
//! user's password, or the server's token under any user name.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::ClientInfo;
use pgwire::api::auth::cleartext::CleartextPasswordAuthStartupHandler;
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
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
pub(super) struct Open;

impl NoopStartupHandler for Open {}

/// The startup handler of a connection.
pub(super) enum Startup {
    Open(Open),
    Password(Box<CleartextPasswordAuthStartupHandler<Passwords, DefaultServerParameterProvider>>),
}

impl Startup {
    pub(super) fn new(credentials: &Credentials) -> Arc<Self> {
        Arc::new(match credentials {
            Credentials::Open => Self::Open(Open),
            other => Self::Password(Box::new(CleartextPasswordAuthStartupHandler::new(
                Passwords(other.clone()),
                DefaultServerParameterProvider::default(),
            ))),
        })
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
        match self {
            Self::Open(open) => open.on_startup(client, message).await,
            Self::Password(password) => password.on_startup(client, message).await,
        }
    }
}
