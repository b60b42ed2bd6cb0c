//! Who may use a server, checked on every request.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::Path;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::error::{Error, Result, fail};

/// How many tokens issued by handshakes are remembered (the oldest is
/// forgotten first; its client then authenticates again).
const MAX_ISSUED_TOKENS: usize = 4096;

/// What clients must present. Secrets never appear in `Debug` output, logs
/// or errors.
#[derive(Clone, Default)]
pub enum Credentials {
    /// No check: only for servers bound to loopback (or `--insecure`).
    #[default]
    Open,
    /// Every request carries `authorization: Bearer <token>`.
    Token(String),
    /// Users and passwords: a request carries `authorization: Basic …`, or
    /// the bearer token a Flight SQL handshake with those issued.
    Users(BTreeMap<String, String>),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open => f.write_str("Open"),
            Self::Token(_) => f.write_str("Token(<redacted>)"),
            Self::Users(users) => f
                .debug_tuple("Users")
                .field(&users.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

impl Credentials {
    /// The users of a `--users` file: one `name:password` per line; blank
    /// lines and lines starting with `#` are skipped. The error names the
    /// file and line, never a password.
    pub fn from_users_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::invalid_input(format!("cannot read users file {}: {e}", path.display()))
        })?;
        let mut users = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match line.split_once(':') {
                Some((user, password)) if !user.is_empty() && !password.is_empty() => {
                    users.insert(user.to_string(), password.to_string());
                }
                _ => {
                    return fail!(
                        invalid_input,
                        "users file {} line {}: expected NAME:PASSWORD",
                        path.display(),
                        n + 1
                    );
                }
            }
        }
        if users.is_empty() {
            return fail!(invalid_input, "users file {} names no user", path.display());
        }
        Ok(Self::Users(users))
    }

    /// Whether requests are let in without credentials.
    pub fn is_open(&self) -> bool {
        matches!(self, Self::Open)
    }
}

/// Who made a request: sessions, tickets and prepared statements belong to
/// the principal that made them and are not found by another.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Principal(pub(crate) String);

/// Checks requests against [`Credentials`] and remembers the tokens its
/// handshakes issued (never shown by `Debug`).
pub(crate) struct Gate {
    credentials: Credentials,
    issued: Mutex<(BTreeMap<String, String>, VecDeque<String>)>,
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let issued = self
            .issued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .len();
        f.debug_struct("Gate")
            .field("credentials", &self.credentials)
            .field("issued_tokens", &issued)
            .finish()
    }
}

impl Gate {
    pub(crate) fn new(credentials: Credentials) -> Self {
        Self {
            credentials,
            issued: Mutex::new(Default::default()),
        }
    }

    pub(crate) fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The principal of a request, or `unauthenticated`.
    pub(crate) fn check(&self, metadata: &MetadataMap) -> Result<Principal, Status> {
        let header = authorization(metadata)?;
        match &self.credentials {
            Credentials::Open => Ok(Principal("anonymous".to_string())),
            Credentials::Token(token) => match header.as_deref().and_then(bearer) {
                Some(given) if same(given, token) => Ok(Principal("token".to_string())),
                Some(_) => Err(denied()),
                None => Err(missing()),
            },
            Credentials::Users(users) => {
                let Some(header) = header else {
                    return Err(missing());
                };
                if let Some(token) = bearer(&header) {
                    let issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
                    return match issued.0.get(token) {
                        Some(user) => Ok(Principal(format!("user:{user}"))),
                        None => Err(denied()),
                    };
                }
                let (user, password) = basic(&header)?;
                match users.get(&user) {
                    Some(expected) if same(&password, expected) => {
                        Ok(Principal(format!("user:{user}")))
                    }
                    _ => Err(denied()),
                }
            }
        }
    }

    /// A handshake: checks the request and returns the bearer token the
    /// client presents from now on (a new one for a user, the server's own
    /// for a token; none when the server is open).
    pub(crate) fn handshake(&self, metadata: &MetadataMap) -> Result<Option<String>, Status> {
        let principal = self.check(metadata)?;
        Ok(match &self.credentials {
            Credentials::Open => None,
            Credentials::Token(token) => Some(token.clone()),
            Credentials::Users(_) => {
                let user = principal.0.trim_start_matches("user:").to_string();
                let token = uuid::Uuid::new_v4().simple().to_string();
                let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
                issued.0.insert(token.clone(), user);
                issued.1.push_back(token.clone());
                while issued.1.len() > MAX_ISSUED_TOKENS {
                    if let Some(old) = issued.1.pop_front() {
                        issued.0.remove(&old);
                    }
                }
                Some(token)
            }
        })
    }
}

fn authorization(metadata: &MetadataMap) -> Result<Option<String>, Status> {
    match metadata.get("authorization") {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .map(|v| Some(v.trim().to_string()))
            .map_err(|_| Status::unauthenticated("the authorization header is not text")),
    }
}

fn bearer(header: &str) -> Option<&str> {
    let (scheme, rest) = header.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

fn basic(header: &str) -> Result<(String, String), Status> {
    let malformed = || Status::unauthenticated("malformed Basic authorization header");
    let (scheme, rest) = header.split_once(' ').ok_or_else(malformed)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(Status::unauthenticated(
            "unsupported authorization scheme (use Basic or Bearer)",
        ));
    }
    // Padded (RFC 7617) or not (Arrow's Go client, which ADBC uses).
    let encoded = rest.trim();
    let bytes = STANDARD
        .decode(encoded)
        .or_else(|_| STANDARD_NO_PAD.decode(encoded))
        .map_err(|_| malformed())?;
    let text = String::from_utf8(bytes).map_err(|_| malformed())?;
    let (user, password) = text.split_once(':').ok_or_else(malformed)?;
    Ok((user.to_string(), password.to_string()))
}

/// Compares secrets in time independent of where they differ.
fn same(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, byte) in b.iter().enumerate() {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ byte);
    }
    diff == 0
}

fn missing() -> Status {
    Status::unauthenticated("this server needs credentials (an authorization header)")
}

fn denied() -> Status {
    Status::unauthenticated("invalid credentials")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(header: &str) -> MetadataMap {
        let mut m = MetadataMap::new();
        m.insert("authorization", header.parse().unwrap());
        m
    }

    #[test]
    fn tokens_and_users_are_checked_and_never_shown() {
        let gate = Gate::new(Credentials::Token("s3cret".into()));
        assert!(gate.check(&with("Bearer s3cret")).is_ok());
        let wrong = gate.check(&with("Bearer s3cre")).unwrap_err();
        assert_eq!(wrong.message(), "invalid credentials");
        assert!(gate.check(&MetadataMap::new()).is_err());
        assert!(!format!("{:?}", Credentials::Token("s3cret".into())).contains("s3cret"));

        let users = Credentials::Users([("ann".to_string(), "pw1".to_string())].into());
        assert!(!format!("{users:?}").contains("pw1"));
        let gate = Gate::new(users);
        let basic = format!("Basic {}", STANDARD.encode("ann:pw1"));
        assert_eq!(gate.check(&with(&basic)).unwrap().0, "user:ann");
        let unpadded = format!("Basic {}", STANDARD_NO_PAD.encode("ann:pw1"));
        assert_eq!(gate.check(&with(&unpadded)).unwrap().0, "user:ann");
        let bad = format!("Basic {}", STANDARD.encode("ann:pw2"));
        assert!(gate.check(&with(&bad)).is_err());
        let token = gate.handshake(&with(&basic)).unwrap().unwrap();
        assert_eq!(
            gate.check(&with(&format!("Bearer {token}"))).unwrap().0,
            "user:ann"
        );
        assert!(gate.check(&with("Bearer forged")).is_err());
        let shown = format!("{gate:?}");
        assert!(!shown.contains(&token) && !shown.contains("pw1"), "{shown}");
    }
}
