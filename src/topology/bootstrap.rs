//! What belongs to one proxy process rather than to the shared config
//! document: where it listens and its id in the registry. Given by `serve`
//! flags or a small bootstrap file (`serve --bootstrap FILE`); a flag beats
//! the file, and both beat the document's addresses. A reload never
//! changes them.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::config::{Config, MetricsConfig};
use super::prescan::PrescanError;
use super::validate::check_address;

/// Why a bootstrap file or a listen address of this process was refused.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The file cannot be read.
    #[error("cannot read the bootstrap file {file}: {source}")]
    Read {
        /// The file, as given.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not UTF-8.
    #[error("bootstrap file {file} is not UTF-8 text: {source}")]
    NotUtf8 {
        /// The file, as given.
        file: String,
        /// Where the text stops being UTF-8.
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// The file is beyond the pre-scan's bounds (size, nesting, aliases).
    #[error("bootstrap file {file}: {source}")]
    Bounds {
        /// The file, as given.
        file: String,
        /// The bound it crosses.
        #[source]
        source: PrescanError,
    },
    /// The file is not YAML of the bootstrap keys.
    #[error(
        "bootstrap file {file}: {source}; it may hold only config, listen, admin_listen, \
         metrics_listen, proxy_id, zookeeper_auth_file and zookeeper_allow_open_acl"
    )]
    Yaml {
        /// The file, as given.
        file: String,
        /// The parser's error.
        #[source]
        source: serde_yaml::Error,
    },
    /// A listen address that is not `host:port`.
    #[error("{key}: {message}")]
    Address {
        /// `listen`, `admin_listen` or `metrics_listen`.
        key: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

/// The bootstrap file, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bootstrap {
    /// The config source (a file path or `zookeeper://...`).
    #[serde(default)]
    pub config: Option<String>,
    /// Client listen address.
    #[serde(default)]
    pub listen: Option<String>,
    /// Admin listen address.
    #[serde(default)]
    pub admin_listen: Option<String>,
    /// Metrics listen address.
    #[serde(default)]
    pub metrics_listen: Option<String>,
    /// The proxy's id in the registry.
    #[serde(default)]
    pub proxy_id: Option<String>,
    /// A file with the `user:password` of the ZooKeeper digest identity
    /// the proxy authenticates as.
    #[serde(default)]
    pub zookeeper_auth_file: Option<PathBuf>,
    /// Run on a config znode anyone can write (refused otherwise).
    #[serde(default)]
    pub zookeeper_allow_open_acl: bool,
}

impl Bootstrap {
    /// Parses a bootstrap file's text (`source` names it in errors).
    pub fn parse(text: &str, source: &str) -> Result<Self, BootstrapError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let file = || source.to_owned();
        super::prescan::check(text).map_err(|source| BootstrapError::Bounds {
            file: file(),
            source,
        })?;
        serde_yaml::from_str(text).map_err(|source| BootstrapError::Yaml {
            file: file(),
            source,
        })
    }

    /// Reads and parses the bootstrap file at `path`.
    pub fn load(path: &Path) -> Result<Self, BootstrapError> {
        let file = path.display().to_string();
        let bytes = super::prescan::read_bounded(path).map_err(|source| BootstrapError::Read {
            file: file.clone(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|source| BootstrapError::NotUtf8 {
            file: file.clone(),
            source,
        })?;
        Self::parse(&text, &file)
    }

    /// These settings with `flags` laid over them (a flag given wins).
    pub fn overlaid(self, flags: Bootstrap) -> Bootstrap {
        Bootstrap {
            config: flags.config.or(self.config),
            listen: flags.listen.or(self.listen),
            admin_listen: flags.admin_listen.or(self.admin_listen),
            metrics_listen: flags.metrics_listen.or(self.metrics_listen),
            proxy_id: flags.proxy_id.or(self.proxy_id),
            zookeeper_auth_file: flags.zookeeper_auth_file.or(self.zookeeper_auth_file),
            zookeeper_allow_open_acl: flags.zookeeper_allow_open_acl
                || self.zookeeper_allow_open_acl,
        }
    }

    /// The listen addresses to lay over the document's, checked.
    pub fn overrides(&self) -> Result<ListenOverrides, BootstrapError> {
        let check = |key: &'static str, addr: &Option<String>| match addr {
            Some(addr) => check_address(addr, true)
                .map(|()| Some(addr.clone()))
                .map_err(|message| BootstrapError::Address { key, message }),
            None => Ok(None),
        };
        Ok(ListenOverrides {
            listen: check("listen", &self.listen)?,
            admin_listen: check("admin_listen", &self.admin_listen)?,
            metrics_listen: check("metrics_listen", &self.metrics_listen)?,
        })
    }
}

/// Listen addresses of this process that replace the document's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenOverrides {
    /// Client listen address.
    pub listen: Option<String>,
    /// Admin listen address.
    pub admin_listen: Option<String>,
    /// Metrics listen address (adds a `metrics` section if the document
    /// has none).
    pub metrics_listen: Option<String>,
}

impl ListenOverrides {
    /// Writes the overrides into `config`. An admin address needs the
    /// document's `admin` section (it holds the admin accounts).
    pub fn apply(&self, config: &mut Config) -> Result<(), String> {
        if let Some(listen) = &self.listen {
            config.listen.clone_from(listen);
        }
        if let Some(listen) = &self.admin_listen {
            let Some(admin) = config.admin.as_mut() else {
                return Err(format!(
                    "admin listen address {listen} given, but the config has no `admin` section \
                     (with its users); add one to the config"
                ));
            };
            admin.listen.clone_from(listen);
        }
        if let Some(listen) = &self.metrics_listen {
            match config.metrics.as_mut() {
                Some(metrics) => metrics.listen.clone_from(listen),
                None => {
                    config.metrics = Some(MetricsConfig {
                        listen: listen.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// The default proxy id: `host name:process id`.
pub fn default_proxy_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bootstrap_file_and_flags_over_it() {
        let file = Bootstrap::parse(
            "config: zookeeper://127.0.0.1:2281/sg/config\nlisten: 127.0.0.1:7033\n\
             admin_listen: 127.0.0.1:7032\nproxy_id: web-1\n",
            "b.yaml",
        )
        .unwrap();
        assert_eq!(
            file.config.as_deref(),
            Some("zookeeper://127.0.0.1:2281/sg/config")
        );
        assert_eq!(file.metrics_listen, None);
        let flags = Bootstrap {
            listen: Some("127.0.0.1:8033".into()),
            metrics_listen: Some("127.0.0.1:8104".into()),
            ..Bootstrap::default()
        };
        let merged = file.overlaid(flags);
        assert_eq!(
            merged.listen.as_deref(),
            Some("127.0.0.1:8033"),
            "the flag wins"
        );
        assert_eq!(
            merged.admin_listen.as_deref(),
            Some("127.0.0.1:7032"),
            "the file fills in"
        );
        assert_eq!(merged.proxy_id.as_deref(), Some("web-1"));
        assert_eq!(merged.metrics_listen.as_deref(), Some("127.0.0.1:8104"));
        assert_eq!(
            Bootstrap::parse("", "e.yaml").unwrap(),
            Bootstrap::default()
        );
    }

    #[test]
    fn unknown_keys_and_bad_addresses_are_refused() {
        let error = Bootstrap::parse("listen: 1.2.3.4:5\nlisten_admin: x\n", "b.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("b.yaml") && error.contains("listen_admin"),
            "{error}"
        );
        assert!(error.contains("admin_listen"), "lists the keys: {error}");
        let bad = Bootstrap {
            admin_listen: Some("6032".into()),
            ..Bootstrap::default()
        };
        let error = bad.overrides().unwrap_err().to_string();
        assert!(
            error.starts_with("admin_listen: ") && error.contains("no port"),
            "{error}"
        );
    }

    #[test]
    fn overrides_replace_the_documents_addresses() {
        let mut config = Config {
            listen: "127.0.0.1:6033".into(),
            ..Config::default()
        };
        let overrides = ListenOverrides {
            listen: Some("127.0.0.1:7033".into()),
            admin_listen: None,
            metrics_listen: Some("127.0.0.1:7104".into()),
        };
        overrides.apply(&mut config).unwrap();
        assert_eq!(config.listen, "127.0.0.1:7033");
        assert_eq!(
            config.metrics.as_ref().map(|m| m.listen.as_str()),
            Some("127.0.0.1:7104")
        );
        let admin = ListenOverrides {
            admin_listen: Some("127.0.0.1:7032".into()),
            ..ListenOverrides::default()
        };
        let error = admin.apply(&mut config).unwrap_err();
        assert!(error.contains("no `admin` section"), "{error}");
    }

    #[test]
    fn the_default_id_names_host_and_process() {
        let id = default_proxy_id();
        assert!(id.ends_with(&format!(":{}", std::process::id())), "{id}");
        assert!(super::super::source::check_proxy_id(&id).is_ok(), "{id}");
    }
}
