//! [`EtcdConfig`]: where a fleet's store is, how to reach it (TLS with a
//! client certificate, a user and password) and how long to wait for it.

use std::fmt;
use std::time::Duration;

use kms_core::KmsError;
use zeroize::Zeroizing;

/// The longest [`EtcdConfig::request_timeout`]: a change answers within
/// it, retryable, when etcd does not (5 s).
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The default [`EtcdConfig::prefix`].
pub const DEFAULT_PREFIX: &str = "/kms";

/// Where a fleet keeps its keystore in etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EtcdConfig {
    /// The cluster's client URLs (`http://127.0.0.1:2379`), one or more;
    /// the client moves to another when one fails.
    pub endpoints: Vec<String>,
    /// The etcd key prefix the records live under (default `/kms`): record
    /// `index` is `<prefix>/index`. Starts with `/`, no trailing `/`. The
    /// prefixes of two fleets on one cluster must not nest (`/kms` and
    /// `/kms/eu`): one would read the other's records as its own. A node's
    /// first load refuses a prefix that nests with a store already there
    /// (`KmsError::InvalidConfig`), before writing anything.
    pub prefix: String,
    /// Deadline of each request to etcd, connecting included (default
    /// 2 s, at most [`MAX_REQUEST_TIMEOUT`]).
    pub request_timeout: Duration,
    /// TLS to the cluster (every endpoint then `https://`); default none.
    pub tls: Option<EtcdTls>,
    /// etcd authentication (RBAC) as this user; default none.
    pub user: Option<EtcdUser>,
    /// Whether [`crate::open`] may start a store under a prefix that holds
    /// none (nodes starting at once still agree on one store). Default
    /// `false`: an empty prefix is refused ([`KmsError::StoreNotFound`]),
    /// so a node pointed at the wrong prefix, or at a cluster whose
    /// records were deleted, does not start an empty store with a new key.
    pub create: bool,
    /// Whether a commit that removes records (a trim or a destroy)
    /// compacts etcd's history up to its revision, so that
    /// the removed records' older revisions, sealed seeds among them, are
    /// gone from the cluster's history. Compaction is cluster-wide: every
    /// key's history before that revision goes, not only this prefix's.
    /// The members' database files keep the freed pages until defragmented
    /// (`etcdctl defrag`, the operator's). Default `false`.
    pub compact: bool,
}

/// TLS to etcd: the CA that signed the members' certificates, and this
/// client's certificate and key (mutual TLS), as PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdTls {
    /// The CA certificate(s) the members' certificates chain to (PEM).
    pub ca_pem: Vec<u8>,
    /// This client's certificate chain and its private key (PEM), for a
    /// cluster that requires client certificates; the key is wiped on
    /// drop.
    pub client: Option<(Vec<u8>, Zeroizing<Vec<u8>>)>,
}

impl fmt::Debug for EtcdTls {
    /// The client key is not shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca_pem", &format_args!("{} bytes", self.ca_pem.len()))
            .field(
                "client",
                &self.client.as_ref().map(|_| "<certificate and key>"),
            )
            .finish()
    }
}

/// An etcd user and password (etcd's RBAC authentication).
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdUser {
    /// The user name.
    pub name: String,
    /// The password; wiped on drop.
    pub password: Zeroizing<String>,
}

impl fmt::Debug for EtcdUser {
    /// The password is not shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdUser")
            .field("name", &self.name)
            .field("password", &"<secret>")
            .finish()
    }
}

impl EtcdConfig {
    /// The cluster at `endpoints`, with the default prefix and timeout.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>) -> EtcdConfig {
        EtcdConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            prefix: DEFAULT_PREFIX.to_owned(),
            request_timeout: Duration::from_secs(2),
            tls: None,
            user: None,
            create: false,
            compact: false,
        }
    }

    /// The same, over TLS ([`EtcdTls`]).
    pub fn with_tls(mut self, tls: EtcdTls) -> EtcdConfig {
        self.tls = Some(tls);
        self
    }

    /// The same, authenticating as `user`.
    pub fn with_user(mut self, user: EtcdUser) -> EtcdConfig {
        self.user = Some(user);
        self
    }

    /// The same, allowed (`true`) to start a store under an empty prefix.
    pub fn with_create(mut self, create: bool) -> EtcdConfig {
        self.create = create;
        self
    }

    /// The same, compacting etcd's history after a trim or destroy
    /// ([`EtcdConfig::compact`]).
    pub fn with_compact(mut self, compact: bool) -> EtcdConfig {
        self.compact = compact;
        self
    }

    /// The same, with the records under `prefix`.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> EtcdConfig {
        self.prefix = prefix.into();
        self
    }

    /// The same, with requests bounded by `timeout`.
    pub fn with_request_timeout(mut self, timeout: Duration) -> EtcdConfig {
        self.request_timeout = timeout;
        self
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] without endpoints or with an empty one,
    /// for a prefix that does not start with `/`, ends with `/` or holds
    /// characters outside `[A-Za-z0-9._/-]`, a request timeout of zero
    /// or above [`MAX_REQUEST_TIMEOUT`], an `https://` endpoint without
    /// [`EtcdConfig::tls`] or another scheme with it, a user with an
    /// empty name, or a user without TLS.
    pub fn validate(&self) -> Result<(), KmsError> {
        let invalid = |reason: String| Err(KmsError::InvalidConfig { reason });
        if self.endpoints.is_empty() || self.endpoints.iter().any(|e| e.trim().is_empty()) {
            return invalid("etcd: at least one endpoint, none empty".to_owned());
        }
        let p = &self.prefix;
        let allowed = |c: char| c.is_ascii_alphanumeric() || "._/-".contains(c);
        if !p.starts_with('/') || p.ends_with('/') || !p.chars().all(allowed) {
            return invalid(format!(
                "etcd: prefix {p:?} must start with '/', not end with one, and hold only [A-Za-z0-9._/-]"
            ));
        }
        let tls = self.tls.is_some();
        if let Some(e) = self
            .endpoints
            .iter()
            .find(|e| e.trim().starts_with("https://") != tls)
        {
            return invalid(if tls {
                format!("etcd: endpoint {e} is not https:// although TLS is configured")
            } else {
                format!("etcd: endpoint {e} is https:// but no TLS (CA certificate) is configured")
            });
        }
        if self.user.as_ref().is_some_and(|u| u.name.is_empty()) {
            return invalid("etcd: the user name is empty".to_owned());
        }
        if self.user.is_some() && !tls {
            return invalid(
                "etcd: a user's password (and its auth token) would cross the network in the \
                 clear: configure TLS too"
                    .to_owned(),
            );
        }
        if self.request_timeout.is_zero() || self.request_timeout > MAX_REQUEST_TIMEOUT {
            return invalid(format!(
                "etcd: request timeout {:?} must be above zero and at most {MAX_REQUEST_TIMEOUT:?}",
                self.request_timeout
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates() {
        let ok = EtcdConfig::new(["http://127.0.0.1:2379"]);
        assert!(ok.validate().is_ok());
        let tls = EtcdConfig::new(["https://127.0.0.1:2379"]).with_tls(EtcdTls {
            ca_pem: b"ca".to_vec(),
            client: Some((b"cert".to_vec(), Zeroizing::new(b"SECRETKEY".to_vec()))),
        });
        assert!(tls.validate().is_ok());
        // Secrets never show in Debug, as text or as bytes.
        let user = EtcdUser {
            name: "kms".to_owned(),
            password: Zeroizing::new("hunter2".to_owned()),
        };
        let shown = format!("{:?}", tls.with_user(user.clone()));
        let key_bytes = format!("{:?}", b"SECRETKEY".to_vec());
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            !shown.contains("SECRETKEY") && !shown.contains(&key_bytes[1..key_bytes.len() - 1]),
            "{shown}"
        );
        assert!(shown.contains("<certificate and key>") && shown.contains("<secret>"));
        assert!(matches!(
            ok.clone().with_user(user).validate(),
            Err(KmsError::InvalidConfig { .. })
        ));
        for bad in [
            EtcdConfig::new(Vec::<String>::new()),
            ok.clone().with_prefix("kms"),
            ok.clone().with_prefix("/kms/"),
            ok.clone().with_prefix("/k ms"),
            ok.clone().with_request_timeout(Duration::ZERO),
            ok.clone().with_request_timeout(Duration::from_secs(6)),
            EtcdConfig::new(["https://127.0.0.1:2379"]),
            ok.clone().with_tls(EtcdTls {
                ca_pem: b"ca".to_vec(),
                client: None,
            }),
            ok.clone().with_user(EtcdUser {
                name: String::new(),
                password: Zeroizing::new("p".to_owned()),
            }),
        ] {
            assert!(
                matches!(bad.validate(), Err(KmsError::InvalidConfig { .. })),
                "{bad:?}"
            );
        }
    }
}
