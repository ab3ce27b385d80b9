//! ZooKeeper credentials: a process that is given a digest identity
//! (`--zk-auth-file`) authenticates every session with it and creates every
//! znode (document, registry entries, pause records and acks) readable and
//! writable by that identity only. Without one, znodes are open to anyone
//! who can reach the ensemble.

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use zookeeper_client as zk;

/// A ZooKeeper `digest` identity.
#[derive(Clone, PartialEq, Eq)]
pub struct ZkAuth {
    user: String,
    password: String,
}

impl fmt::Debug for ZkAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ZkAuth {{ user: {:?}, password: <hidden> }}", self.user)
    }
}

/// Why a credentials file was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The file cannot be read.
    #[error("ZooKeeper credentials file {path}: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// The read error.
        reason: String,
    },
    /// The file does not hold one `user:password` line.
    #[error("ZooKeeper credentials file {path}: {reason}; write one line `user:password` (optionally `digest:user:password`)")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// Credentials were installed already, different ones.
    #[error("ZooKeeper credentials were set twice in one process")]
    Twice,
}

impl ZkAuth {
    /// Parses `user:password` (or `digest:user:password`); `path` names
    /// the text in errors.
    pub fn parse(text: &str, path: &str) -> Result<Self, AuthError> {
        let malformed = |reason: &str| AuthError::Malformed {
            path: path.to_owned(),
            reason: reason.to_owned(),
        };
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let line = lines.next().ok_or_else(|| malformed("it is empty"))?;
        if lines.next().is_some() {
            return Err(malformed("it has more than one line"));
        }
        let line = line.strip_prefix("digest:").unwrap_or(line);
        let (user, password) = line
            .split_once(':')
            .ok_or_else(|| malformed("no `:` between user and password"))?;
        if user.is_empty() || password.is_empty() {
            return Err(malformed("the user or the password is empty"));
        }
        Ok(Self {
            user: user.to_owned(),
            password: password.to_owned(),
        })
    }

    /// Reads and parses the credentials file at `path`.
    pub fn load(path: &Path) -> Result<Self, AuthError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| AuthError::Unreadable {
            path: name.clone(),
            reason: e.to_string(),
        })?;
        Self::parse(&text, &name)
    }

    /// The identity's user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    fn credentials(&self) -> Vec<u8> {
        format!("{}:{}", self.user, self.password).into_bytes()
    }
}

static INSTALLED: OnceLock<Option<ZkAuth>> = OnceLock::new();

/// Sets the credentials every ZooKeeper session of this process uses
/// (`None`: none, open ACLs). Once per process; the same value again is
/// accepted.
pub fn install(auth: Option<ZkAuth>) -> Result<(), AuthError> {
    let installed = INSTALLED.get_or_init(|| auth.clone());
    if *installed == auth {
        Ok(())
    } else {
        Err(AuthError::Twice)
    }
}

/// The credentials in use, if any.
pub fn installed() -> Option<&'static ZkAuth> {
    INSTALLED.get().and_then(Option::as_ref)
}

/// `connector` authenticated with the installed credentials, if any.
pub(super) fn authenticate(connector: zk::Connector) -> zk::Connector {
    match installed() {
        Some(auth) => connector.with_auth("digest", &auth.credentials()),
        None => connector,
    }
}

/// The ACL of every znode this process creates: its identity only when it
/// has one, else anyone.
pub(super) fn acls() -> zk::Acls<'static> {
    if installed().is_some() {
        zk::Acls::creator_all()
    } else {
        zk::Acls::anyone_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_files_are_one_user_password_line() {
        let auth = ZkAuth::parse("digest:ops:s3cr:et\n", "f").unwrap();
        assert_eq!(auth.user(), "ops");
        assert_eq!(auth.credentials(), b"ops:s3cr:et");
        assert!(
            !format!("{auth:?}").contains("s3cr"),
            "the password is never printed"
        );
        assert_eq!(ZkAuth::parse("  ops:pw  \n\n", "f").unwrap().user(), "ops");
        for bad in ["", "\n", "ops", ":pw", "ops:", "a:b\nc:d"] {
            assert!(
                matches!(ZkAuth::parse(bad, "f"), Err(AuthError::Malformed { .. })),
                "{bad:?}"
            );
        }
    }
}
