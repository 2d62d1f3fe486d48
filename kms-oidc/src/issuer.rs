//! [`Issuer`]: one issuer's keys kept current: fetched at start and in the
//! background before they expire, refetched on an unknown `kid` (one fetch
//! in flight, at most one per cooldown), kept through an outage up to the
//! maximum stale age.
//!
//! Invariants:
//! * at most one fetch of an issuer's documents is in flight (`fetching`,
//!   set and cleared under the state's lock); whoever asks meanwhile waits
//!   for that one;
//! * a fetch asked for by an unknown `kid` starts only if the cooldown has
//!   passed since the issuer's last fetch began, whatever asked for that
//!   one;
//! * a fetched set replaces the issuer's keys whole, and only when it
//!   differs from the one installed (so a refresh leaves the verified-token
//!   cache alone); a failed fetch changes no key; while fetches fail, the
//!   last good set is dropped (the issuer then has no keys) once its last
//!   successful fetch is older than the maximum stale age; a healthy set is
//!   refreshed before either its lifetime or that age runs out.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kms_actor::IssuerKeys;
use kms_jose::TrustedJwkSet;
use metrics::{Counter, Gauge};
use reqwest::Url;
use tokio::sync::watch;

use crate::config::{FetchSettings, IssuerConfig};
use crate::error::FetchError;
use crate::fetch::{check_url, lifetime, Fetcher};
use crate::metrics as names;

/// Longest wait between two failed fetches (the backoff doubles from 1 s).
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How often the background task looks at the clock (gauges, staleness).
const TICK: Duration = Duration::from_secs(5);

/// What one issuer's keys are now ([`crate::Issuers::status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IssuerStatus {
    /// The issuer.
    pub issuer: String,
    /// The JWK Set's URL, configured or discovered (`None` before a
    /// discovery succeeded).
    pub jwks_uri: Option<String>,
    /// The `kid`s of the keys in use, sorted.
    pub kids: Vec<String>,
    /// Time since the last successful fetch; `None` if none yet.
    pub age: Option<Duration>,
    /// The set's lifetime (`Cache-Control: max-age` bounded, or the
    /// default).
    pub lifetime: Duration,
    /// Whether the set in use is older than its lifetime (fetches have
    /// failed since), or there is none.
    pub stale: bool,
    /// Fetches that failed since the last success.
    pub failures: u32,
    /// Why the last fetch failed, if it did.
    pub last_error: Option<FetchError>,
}

/// Why a fetch is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// The background schedule (start, refresh before expiry, retry).
    Schedule,
    /// A token named a `kid` the set lacks: subject to the cooldown.
    UnknownKid,
    /// An operator asked for every issuer's keys again
    /// ([`crate::Issuers::refresh`]): subject to the cooldown.
    Refresh,
}

struct State {
    fetching: bool,
    /// When the last fetch began.
    last_fetch: Option<Instant>,
    last_success: Option<Instant>,
    lifetime: Duration,
    jwks_uri: Option<Url>,
    /// The fetched set in use: `None` before the first success and after
    /// the stale set is dropped.
    installed: Option<TrustedJwkSet>,
    failures: u32,
    last_error: Option<FetchError>,
}

struct Metrics {
    ok: Counter,
    keys: Gauge,
    age: Gauge,
    stale: Gauge,
    refused: Counter,
}

/// One issuer's keys (module docs).
pub(crate) struct Issuer {
    config: IssuerConfig,
    settings: Arc<FetchSettings>,
    fetcher: Fetcher,
    keys: IssuerKeys,
    state: Mutex<State>,
    /// The count of finished fetches: waiters watch it change.
    finished: watch::Sender<u64>,
    metrics: Metrics,
}

impl Issuer {
    pub(crate) fn new(
        config: IssuerConfig,
        settings: Arc<FetchSettings>,
        fetcher: Fetcher,
        keys: IssuerKeys,
    ) -> Result<Self, FetchError> {
        let jwks_uri = config.jwks_uri.as_deref().map(check_url).transpose()?;
        let fetcher = fetcher.for_issuer(&check_url(&config.discovery_url())?);
        let label = config.issuer.clone();
        let metrics = Metrics {
            ok: metrics::counter!(names::FETCHES_TOTAL, "issuer" => label.clone(), "outcome" => "ok"),
            keys: metrics::gauge!(names::KEYS, "issuer" => label.clone()),
            age: metrics::gauge!(names::AGE_SECONDS, "issuer" => label.clone()),
            stale: metrics::gauge!(names::STALE, "issuer" => label.clone()),
            refused: metrics::counter!(names::REFETCH_REFUSED_TOTAL, "issuer" => label),
        };
        metrics.stale.set(1.0);
        Ok(Issuer {
            state: Mutex::new(State {
                fetching: false,
                last_fetch: None,
                last_success: None,
                lifetime: settings.default_max_age,
                jwks_uri,
                installed: None,
                failures: 0,
                last_error: None,
            }),
            config,
            settings,
            fetcher,
            keys,
            finished: watch::Sender::new(0),
            metrics,
        })
    }

    pub(crate) fn issuer(&self) -> &str {
        &self.config.issuer
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a fetch, or joins the one in flight; `None` when an unknown
    /// `kid` or a refresh asks within the cooldown. Await the receiver's `changed()`
    /// for the fetch's end.
    pub(crate) fn fetch_or_join(self: &Arc<Self>, ask: Ask) -> Option<watch::Receiver<u64>> {
        let mut state = self.state();
        // Subscribed under the lock: the fetch that ends after this cannot
        // end before the receiver exists.
        let mut finished = self.finished.subscribe();
        finished.borrow_and_update();
        if state.fetching {
            return Some(finished);
        }
        let now = Instant::now();
        if ask != Ask::Schedule
            && state
                .last_fetch
                .is_some_and(|last| now.duration_since(last) < self.settings.refetch_cooldown)
        {
            self.metrics.refused.increment(1);
            return None;
        }
        state.fetching = true;
        state.last_fetch = Some(now);
        drop(state);
        let issuer = Arc::clone(self);
        tokio::spawn(async move { issuer.fetch().await });
        Some(finished)
    }

    /// One fetch, start to end: documents, the keys replaced (only when
    /// they changed: an unchanged set leaves the key-set generation, and so
    /// the verified-token cache, alone), the state and metrics updated,
    /// waiters woken. The keys are replaced and the state updated under
    /// the state's lock, so `tick` never sees one without the other.
    async fn fetch(&self) {
        let fetched = self.fetch_set().await;
        let mut state = self.state();
        let outcome = fetched.and_then(|(set, lifetime)| {
            let changed = state.installed.as_ref() != Some(&set);
            if changed {
                self.keys
                    .replace(&self.config.issuer, &set)
                    .map_err(|e| FetchError::Invalid {
                        url: self.config.issuer.clone(),
                        reason: e.to_string(),
                    })?;
            }
            Ok((set, lifetime, changed))
        });
        match outcome {
            Ok((set, lifetime, changed)) => {
                let current = kids(Some(&set));
                if changed {
                    let before = kids(state.installed.as_ref());
                    let added: Vec<&str> = current
                        .iter()
                        .filter(|k| !before.contains(k))
                        .map(String::as_str)
                        .collect();
                    let removed: Vec<&str> = before
                        .iter()
                        .filter(|k| !current.contains(k))
                        .map(String::as_str)
                        .collect();
                    tracing::info!(
                        target: "kms_oidc",
                        issuer = self.config.issuer.as_str(),
                        ?added,
                        ?removed,
                        skipped = set.skipped.len(),
                        "the issuer's JWK Set changed"
                    );
                    // Once per change, not per fetch.
                    for skipped in &set.skipped {
                        tracing::warn!(
                            target: "kms_oidc",
                            issuer = self.config.issuer.as_str(),
                            kid = crate::error::short(skipped.kid.as_deref().unwrap_or("")).as_str(),
                            reason = skipped.reason.as_str(),
                            "a key of the issuer's JWK Set was skipped"
                        );
                    }
                }
                self.metrics.ok.increment(1);
                self.metrics.keys.set(current.len() as f64);
                self.metrics.age.set(0.0);
                self.metrics.stale.set(0.0);
                state.installed = Some(set);
                state.last_success = Some(Instant::now());
                state.lifetime = lifetime;
                state.failures = 0;
                state.last_error = None;
            }
            Err(e) => {
                tracing::warn!(
                    target: "kms_oidc",
                    issuer = self.config.issuer.as_str(),
                    error = %e,
                    keys_in_use = state.installed.as_ref().map_or(0, |set| set.keys.len()),
                    "fetching the issuer's keys failed; the last good set stays"
                );
                metrics::counter!(names::FETCHES_TOTAL, "issuer" => self.config.issuer.clone(), "outcome" => e.outcome())
                    .increment(1);
                // A discovered jwks_uri may have moved: discover again.
                if self.config.jwks_uri.is_none() {
                    state.jwks_uri = None;
                }
                state.failures = state.failures.saturating_add(1);
                state.last_error = Some(e);
            }
        }
        state.fetching = false;
        // Under the lock: a caller that finds `fetching` false after this
        // subscribes after this count, so it never wakes for this fetch.
        self.finished.send_modify(|n| *n = n.wrapping_add(1));
        drop(state);
    }

    /// The documents fetched and checked: the set and its lifetime.
    async fn fetch_set(&self) -> Result<(TrustedJwkSet, Duration), FetchError> {
        let known = self.state().jwks_uri.clone();
        let jwks_uri = match known {
            Some(uri) => uri,
            None => {
                let url = check_url(&self.config.discovery_url())?;
                let document = self.fetcher.get(&url).await?;
                let uri = crate::discovery::jwks_uri_from_discovery(
                    &document.body,
                    &self.config.issuer,
                    &url,
                )?;
                self.state().jwks_uri = Some(uri.clone());
                uri
            }
        };
        let fetched = self.fetcher.get(&jwks_uri).await?;
        let invalid = |reason: String| FetchError::Invalid {
            url: crate::error::short(jwks_uri.as_str()),
            reason,
        };
        let set =
            TrustedJwkSet::from_fetched_json(&fetched.body).map_err(|e| invalid(e.to_string()))?;
        let count = set.keys.len() + set.skipped.len();
        if count > self.settings.max_keys {
            return Err(invalid(format!(
                "{count} keys, over the limit of {}",
                self.settings.max_keys
            )));
        }
        Ok((
            set,
            lifetime(fetched.max_age, self.settings.default_max_age),
        ))
    }

    /// When the schedule fetches next: a refresh at four fifths of the
    /// set's lifetime (or of the maximum stale age, when shorter) after a
    /// success; after a failure, a backoff from 1 s doubling to
    /// [`MAX_BACKOFF`]; at once before any fetch.
    fn next_fetch(&self, now: Instant) -> Instant {
        let state = self.state();
        match (state.last_fetch, state.last_success, state.failures) {
            (None, _, _) => now,
            (Some(_), Some(success), 0) => {
                success + state.lifetime.min(self.settings.max_stale) * 4 / 5
            }
            (Some(last), _, failures) => {
                let backoff = Duration::from_secs(1 << failures.saturating_sub(1).min(6));
                last + backoff.min(MAX_BACKOFF)
            }
        }
    }

    /// Gauges from the clock; drops the set once it is older than the
    /// maximum stale age while fetches fail.
    fn tick(&self, now: Instant) {
        let mut state = self.state();
        let Some(success) = state.last_success else {
            return;
        };
        let age = now.duration_since(success);
        self.metrics.age.set(age.as_secs_f64());
        let stale = state.installed.is_none() || age > state.lifetime;
        self.metrics.stale.set(if stale { 1.0 } else { 0.0 });
        if state.installed.is_some() && state.failures > 0 && age > self.settings.max_stale {
            if let Err(e) = self
                .keys
                .replace(&self.config.issuer, &TrustedJwkSet::default())
            {
                tracing::error!(target: "kms_oidc", issuer = self.config.issuer.as_str(), error = %e, "cannot drop the stale set");
                return;
            }
            tracing::warn!(
                target: "kms_oidc",
                issuer = self.config.issuer.as_str(),
                age_s = age.as_secs(),
                "the issuer's last good JWK Set is older than the maximum stale age: dropped, its tokens are refused until a fetch succeeds"
            );
            state.installed = None;
            self.metrics.keys.set(0.0);
        }
    }

    /// The background schedule: the first fetch, refreshes, retries, and
    /// the clock's gauges. Runs until aborted.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            let now = Instant::now();
            self.tick(now);
            let next = self.next_fetch(now);
            if next <= now {
                if let Some(mut finished) = self.fetch_or_join(Ask::Schedule) {
                    let _ = finished.changed().await;
                }
                continue;
            }
            tokio::time::sleep((next - now).min(TICK)).await;
        }
    }

    /// For an unknown `kid`: a fetch (or the one in flight), waited for up
    /// to the fetch timeout; nothing within the cooldown.
    pub(crate) async fn refetch(self: &Arc<Self>, kid: &str) {
        let Some(mut finished) = self.fetch_or_join(Ask::UnknownKid) else {
            tracing::debug!(
                target: "kms_oidc",
                issuer = self.config.issuer.as_str(),
                kid = crate::error::short(kid).as_str(),
                "unknown kid: no refetch within the cooldown"
            );
            return;
        };
        let _ = tokio::time::timeout(self.settings.fetch_timeout, finished.changed()).await;
    }

    /// Whether a fetch has succeeded since the issuer was made.
    pub(crate) fn fetched(&self) -> bool {
        self.state().last_success.is_some()
    }

    pub(crate) fn status(&self) -> IssuerStatus {
        let state = self.state();
        let age = state.last_success.map(|s| s.elapsed());
        IssuerStatus {
            issuer: self.config.issuer.clone(),
            jwks_uri: state.jwks_uri.as_ref().map(|u| u.to_string()),
            kids: kids(state.installed.as_ref()),
            age,
            lifetime: state.lifetime,
            stale: state.installed.is_none() || age.is_none_or(|age| age > state.lifetime),
            failures: state.failures,
            last_error: state.last_error.clone(),
        }
    }
}

/// The `kid`s of `set`, sorted (none without a set).
fn kids(set: Option<&TrustedJwkSet>) -> Vec<String> {
    let mut kids: Vec<String> = set
        .map(|set| set.keys.iter().map(|k| k.kid.clone()).collect())
        .unwrap_or_default();
    kids.sort_unstable();
    kids
}
