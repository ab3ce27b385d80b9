//! Where a proxy's config document comes from: a file path, or a znode
//! named as `zookeeper://host:port[,host:port...]/path`. Pure: the string
//! is parsed here, the connection is the control plane's.
//!
//! Layout under the document's znode (its children; the document itself is
//! the znode's data): `proxies/<proxy id>` is the ephemeral registry entry
//! of each proxy running the document.

use std::fmt;
use std::path::PathBuf;

/// The URL scheme of a ZooKeeper source.
pub const ZOOKEEPER_SCHEME: &str = "zookeeper://";

/// Where the config document comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// A YAML file.
    File(PathBuf),
    /// A znode holding the YAML document.
    ZooKeeper(ZkLocation),
}

/// A znode on a ZooKeeper ensemble.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkLocation {
    /// `host:port` of each server, as written.
    pub hosts: Vec<String>,
    /// Absolute path of the znode holding the document (no trailing `/`).
    pub path: String,
}

impl ZkLocation {
    /// The connect string of the ensemble (`h1:p1,h2:p2`, no chroot).
    pub fn connect_string(&self) -> String {
        self.hosts.join(",")
    }

    /// The directory of the proxies' registry entries.
    pub fn registry_path(&self) -> String {
        format!("{}/proxies", self.path)
    }

    /// The registry entry of proxy `id`.
    pub fn registry_entry(&self, id: &str) -> String {
        format!("{}/{id}", self.registry_path())
    }

    /// The parent znode of the document, if it is not the root.
    pub fn parent(&self) -> Option<&str> {
        self.path
            .rsplit_once('/')
            .map(|(parent, _)| parent)
            .filter(|p| !p.is_empty())
    }
}

impl fmt::Display for ZkLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{ZOOKEEPER_SCHEME}{}{}",
            self.connect_string(),
            self.path
        )
    }
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::File(path) => write!(f, "{}", path.display()),
            ConfigSource::ZooKeeper(location) => location.fmt(f),
        }
    }
}

/// Why a config source string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config source `{text}`: {reason}")]
pub struct SourceError {
    /// The string as given.
    pub text: String,
    /// What is wrong and how to write it.
    pub reason: String,
}

const FORM: &str = "write zookeeper://host:port[,host:port...]/path/of/the/znode";

/// Parses `--config`: `zookeeper://...` names a znode, anything else
/// (without a `scheme://`) is a file path.
pub fn parse_source(text: &str) -> Result<ConfigSource, SourceError> {
    let error = |reason: String| SourceError {
        text: text.to_owned(),
        reason,
    };
    if text.trim().is_empty() {
        return Err(error(format!("empty; give a file path, or {FORM}")));
    }
    let scheme_len = ZOOKEEPER_SCHEME.len();
    let is_zookeeper = text.len() >= scheme_len
        && text.is_char_boundary(scheme_len)
        && text[..scheme_len].eq_ignore_ascii_case(ZOOKEEPER_SCHEME);
    if !is_zookeeper {
        if let Some((scheme, _)) = text.split_once("://") {
            if !scheme.is_empty()
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'+')
            {
                return Err(error(format!(
                    "unknown scheme `{scheme}://`; give a file path, or {FORM}"
                )));
            }
        }
        return Ok(ConfigSource::File(PathBuf::from(text)));
    }
    let rest = &text[scheme_len..];
    let (hosts, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    if hosts.is_empty() {
        return Err(error(format!("no ZooKeeper server; {FORM}")));
    }
    let hosts = hosts
        .split(',')
        .map(|host| check_host(host).map_err(|reason| error(format!("{reason}; {FORM}"))))
        .collect::<Result<Vec<_>, _>>()?;
    check_path(path).map_err(|reason| error(format!("{reason}; {FORM}")))?;
    Ok(ConfigSource::ZooKeeper(ZkLocation {
        hosts,
        path: path.to_owned(),
    }))
}

fn check_host(host: &str) -> Result<String, String> {
    let Some((name, port)) = host.rsplit_once(':') else {
        return Err(format!(
            "server `{host}` has no port (ZooKeeper's is usually 2181)"
        ));
    };
    if name.is_empty() || name == "[]" {
        return Err(format!("server `{host}` has no host name"));
    }
    if name
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b == b'@' || b == b'?')
    {
        return Err(format!("server `{host}`: `{name}` is not a host name"));
    }
    if name.contains(':') && !(name.starts_with('[') && name.ends_with(']')) {
        return Err(format!(
            "server `{host}`: write an IPv6 address in brackets, e.g. [::1]:2181"
        ));
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("server `{host}`: `{port}` is not a port (1-65535)")),
        Ok(_) => Ok(host.to_owned()),
    }
}

fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() || path == "/" {
        return Err("no znode path after the servers".to_owned());
    }
    if path.ends_with('/') {
        return Err(format!("znode path `{path}` ends with `/`"));
    }
    for segment in path[1..].split('/') {
        if segment.is_empty() {
            return Err(format!("znode path `{path}` has an empty segment (`//`)"));
        }
        if segment == "." || segment == ".." {
            return Err(format!(
                "znode path `{path}`: `{segment}` is not allowed in a znode path"
            ));
        }
        if segment.chars().any(char::is_control) {
            return Err(format!("znode path `{path}` has a control character"));
        }
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Err("`/zookeeper` is ZooKeeper's own subtree".to_owned());
    }
    Ok(())
}

/// A proxy id that cannot name a registry entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyIdError {
    /// Empty, `.` or `..`.
    #[error("proxy id `{0}` is not usable; give e.g. --proxy-id web-1")]
    Unusable(String),
    /// Too long, or with `/`, spaces or control characters.
    #[error(
        "proxy id `{0}`: use at most 200 characters without `/`, spaces or control characters"
    )]
    Malformed(String),
}

/// Whether `id` can name a registry entry (one znode name, printable).
pub fn check_proxy_id(id: &str) -> Result<(), ProxyIdError> {
    if id.is_empty() || id == "." || id == ".." {
        return Err(ProxyIdError::Unusable(id.to_owned()));
    }
    if id.len() > 200
        || id
            .chars()
            .any(|c| c == '/' || c.is_control() || c.is_whitespace())
    {
        return Err(ProxyIdError::Malformed(id.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zk(text: &str) -> ZkLocation {
        match parse_source(text) {
            Ok(ConfigSource::ZooKeeper(location)) => location,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn refused(text: &str) -> String {
        parse_source(text).expect_err(text).to_string()
    }

    #[test]
    fn file_paths_stay_files() {
        for text in ["config/shardgate.yaml", "/etc/shardgate.yaml", "./a:b.yaml"] {
            assert_eq!(parse_source(text), Ok(ConfigSource::File(text.into())));
        }
    }

    #[test]
    fn zookeeper_sources() {
        let one = zk("zookeeper://127.0.0.1:2281/shardgate/prod/config");
        assert_eq!(one.hosts, ["127.0.0.1:2281"]);
        assert_eq!(one.path, "/shardgate/prod/config");
        assert_eq!(one.connect_string(), "127.0.0.1:2281");
        assert_eq!(one.registry_path(), "/shardgate/prod/config/proxies");
        assert_eq!(
            one.registry_entry("web-1"),
            "/shardgate/prod/config/proxies/web-1"
        );
        assert_eq!(one.parent(), Some("/shardgate/prod"));
        assert_eq!(
            one.to_string(),
            "zookeeper://127.0.0.1:2281/shardgate/prod/config"
        );
        let three = zk("ZooKeeper://zk1:2181,zk2:2181,[::1]:2182/c");
        assert_eq!(three.hosts, ["zk1:2181", "zk2:2181", "[::1]:2182"]);
        assert_eq!(three.connect_string(), "zk1:2181,zk2:2181,[::1]:2182");
        assert_eq!(three.parent(), None);
    }

    #[test]
    fn bad_forms_say_what_is_wrong_and_how_to_write_it() {
        let cases = [
            ("", "empty"),
            ("  ", "empty"),
            ("zk://h:1/a", "unknown scheme `zk://`"),
            ("http://h/a", "unknown scheme"),
            ("zookeeper://", "no ZooKeeper server"),
            ("zookeeper:///a", "no ZooKeeper server"),
            ("zookeeper://h/a", "has no port"),
            ("zookeeper://h:0/a", "is not a port"),
            ("zookeeper://h:x/a", "is not a port"),
            ("zookeeper://h:70000/a", "is not a port"),
            ("zookeeper://h:1,/a", "has no port"),
            ("zookeeper://:1/a", "has no host name"),
            ("zookeeper://::1:2181/a", "brackets"),
            ("zookeeper://h:1", "no znode path"),
            ("zookeeper://h:1/", "no znode path"),
            ("zookeeper://h:1/a/", "ends with `/`"),
            ("zookeeper://h:1/a//b", "empty segment"),
            ("zookeeper://h:1/a/../b", "not allowed"),
            ("zookeeper://h:1/zookeeper/x", "ZooKeeper's own"),
        ];
        for (text, expected) in cases {
            let message = refused(text);
            assert!(message.contains(expected), "{text}: {message}");
            if text.to_ascii_lowercase().starts_with("zookeeper") {
                assert!(message.contains("zookeeper://host:port"), "{message}");
            }
        }
    }

    #[test]
    fn proxy_ids() {
        assert!(check_proxy_id("web-1:4242").is_ok());
        for bad in ["", "..", "a/b", "a b", "x\n"] {
            assert!(check_proxy_id(bad).is_err(), "{bad:?}");
        }
    }
}
