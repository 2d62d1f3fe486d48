//! [`Issuers`]: the issuers whose keys an actor verifies with, each kept
//! current by its own background task, and the actor's
//! [`JwksRefetch`](kms_actor::JwksRefetch) for their unknown `kid`s.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use kms_actor::{IssuerKeys, JwksRefetch};
use kms_jose::TrustedJwkSet;
use tokio::task::JoinHandle;

use crate::config::{FetchSettings, IssuerConfig};
use crate::fetch::Fetcher;
use crate::issuer::{Ask, Issuer, IssuerStatus};

/// Why [`Issuers::start`] refused its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct StartError {
    /// What is wrong, naming the issuer or setting.
    pub reason: String,
}

fn refused(reason: String) -> StartError {
    StartError { reason }
}

/// The issuers kept current for one actor. Dropping it stops the
/// background fetches; the keys last fetched stay in the actor, and
/// unknown `kid`s of these issuers still ask for a refetch.
pub struct Issuers {
    by_issuer: Arc<HashMap<String, Arc<Issuer>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Issuers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuers")
            .field("issuers", &self.by_issuer.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The actor's hook: an unknown `kid` of a kept issuer refetches.
struct Refetch(Arc<HashMap<String, Arc<Issuer>>>);

impl JwksRefetch for Refetch {
    fn refetch<'a>(
        &'a self,
        issuer: &'a str,
        kid: &'a str,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if let Some(kept) = self.0.get(issuer) {
                kept.refetch(kid).await;
            }
        })
    }
}

impl Issuers {
    /// Keeps `configs`' keys in the actor `keys` belongs to: each issuer
    /// is registered at once with no keys (its tokens are refused, never
    /// verified by an unbound key, until its first fetch succeeds), its
    /// first fetch starts in the background (a provider that is down does
    /// not hold the start: it is retried with a backoff), and the actor
    /// asks for a refetch on an unknown `kid`; an issuer's own claims
    /// policy (`IssuerConfig::validation`) is installed. Call within a
    /// tokio runtime.
    ///
    /// # Errors
    /// [`StartError`] for an issuer twice, an issuer or `jwks_uri` that is
    /// not `https` (or `http` to loopback), a CA that is not PEM, an HTTP
    /// client that cannot be built, an issuer the actor has configured
    /// sets for.
    pub fn start(
        keys: &IssuerKeys,
        configs: Vec<IssuerConfig>,
        settings: FetchSettings,
    ) -> Result<Self, StartError> {
        let fetcher = Fetcher::new(&settings).map_err(refused)?;
        let settings = Arc::new(settings);
        let mut by_issuer = HashMap::new();
        let mut policies = Vec::new();
        for config in configs {
            let name = config.issuer.clone();
            policies.push((name.clone(), config.validation.clone()));
            let issuer = Issuer::new(config, Arc::clone(&settings), fetcher.clone(), keys.clone())
                .map_err(|e| refused(format!("issuer {name:?}: {e}")))?;
            if by_issuer.insert(name.clone(), Arc::new(issuer)).is_some() {
                return Err(refused(format!("issuer {name:?} given twice")));
            }
        }
        for name in by_issuer.keys() {
            keys.replace(name, &TrustedJwkSet::default())
                .map_err(|e| refused(format!("issuer {name:?}: {e}")))?;
        }
        for (name, validation) in policies {
            keys.set_validation(&name, validation);
        }
        let by_issuer = Arc::new(by_issuer);
        keys.set_refetch(Arc::new(Refetch(Arc::clone(&by_issuer))));
        let tasks = by_issuer
            .values()
            .map(|issuer| tokio::spawn(Arc::clone(issuer).run()))
            .collect();
        Ok(Issuers { by_issuer, tasks })
    }

    /// Each issuer's keys now, sorted by issuer.
    pub fn status(&self) -> Vec<IssuerStatus> {
        let mut all: Vec<IssuerStatus> = self.by_issuer.values().map(|i| i.status()).collect();
        all.sort_by(|a, b| a.issuer.cmp(&b.issuer));
        all
    }

    /// Whether every issuer's keys have been fetched at least once since
    /// [`Issuers::start`] (a later outage does not undo it: the keys last
    /// fetched serve on, up to the maximum stale age).
    pub fn all_fetched(&self) -> bool {
        self.by_issuer.values().all(|issuer| issuer.fetched())
    }

    /// Asks every issuer for a fetch now (an operator's reload, after a
    /// provider removed a key): one fetch per issuer in flight at most,
    /// and none for an issuer whose last fetch began within the refetch
    /// cooldown (`FetchSettings::with_refetch_cooldown`). Returns at once;
    /// the fetches run in the background. Returns the issuers a fetch was
    /// started or joined for, sorted.
    pub fn refresh(&self) -> Vec<&str> {
        let mut asked: Vec<&str> = self
            .by_issuer
            .values()
            .filter(|issuer| issuer.fetch_or_join(Ask::Refresh).is_some())
            .map(|issuer| issuer.issuer())
            .collect();
        asked.sort_unstable();
        asked
    }

    /// The issuers, sorted.
    pub fn issuers(&self) -> Vec<&str> {
        let mut all: Vec<&str> = self.by_issuer.values().map(|i| i.issuer()).collect();
        all.sort_unstable();
        all
    }
}

impl Drop for Issuers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
