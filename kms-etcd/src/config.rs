//! [`EtcdConfig`]: where a fleet's store is and how long to wait for it.

use std::time::Duration;

use kms_core::KmsError;

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
}

impl EtcdConfig {
    /// The cluster at `endpoints`, with the default prefix and timeout.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>) -> EtcdConfig {
        EtcdConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            prefix: DEFAULT_PREFIX.to_owned(),
            request_timeout: Duration::from_secs(2),
        }
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
    /// characters outside `[A-Za-z0-9._/-]`, or a request timeout of zero
    /// or above [`MAX_REQUEST_TIMEOUT`].
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
        for bad in [
            EtcdConfig::new(Vec::<String>::new()),
            ok.clone().with_prefix("kms"),
            ok.clone().with_prefix("/kms/"),
            ok.clone().with_prefix("/k ms"),
            ok.clone().with_request_timeout(Duration::ZERO),
            ok.clone().with_request_timeout(Duration::from_secs(6)),
        ] {
            assert!(
                matches!(bad.validate(), Err(KmsError::InvalidConfig { .. })),
                "{bad:?}"
            );
        }
    }
}
