//! [`TokenCache`]: tokens that verified, so that a client presenting the
//! same bearer token again (as clients do on every call until it expires)
//! is answered without parsing it or verifying its signature again.
//! `KmsConfig::token_cache` sizes it; [`crate::KmsClient::verify_jwt`]
//! uses it (`verify.rs`).
//!
//! Invariants:
//! * Only a token that verified (signature, then claims) is stored: never
//!   a refusal, so a refused token is checked in full every time.
//! * An entry is keyed by the SHA-256 (FIPS 180-4) of the whole token, so
//!   a hit is for the very bytes that verified.
//! * An entry carries the key-set generation (`kms_core::KeySetGeneration`)
//!   read *before* its verification began, and is used only while the
//!   generation still has that value. Everything that could change a
//!   verdict advances it (a key created, rotated, its policy changed,
//!   trimmed or destroyed, a fleet update, a reload of the trusted JWK
//!   Sets), so a verdict computed before such a change is never used after
//!   it, even one stored after it.
//! * A hit makes the same two steps a fresh verification makes around
//!   the signature, through the same functions (`verify.rs`): `admit`
//!   (this call's `TokenKeys` and the token purposes accept the recorded
//!   signer), then `accept` (the recorded `typ`, then the claims against
//!   the clock under the call's `Validation`, or the bound issuer's own
//!   policy in force now). So a hit and a fresh verification give the same
//!   verdict, and a cached token that has since expired is refused as
//!   expired.
//! * Bounded by count and by bytes at once: each entry weighs its
//!   estimated size in memory ([`entry_bytes`], from its decoded claims)
//!   but at least `bytes / entries`, and
//!   the cache holds at most `bytes` of weight (quick_cache's S3-FIFO
//!   eviction, which keeps hot tokens through a flood of one-off ones).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kms_jose::Claims;
use metrics::{Counter, Gauge};
use quick_cache::sync::Cache;
use quick_cache::{DefaultHashBuilder, Lifecycle, Weighter};
use sha2::{Digest, Sha256};

use crate::metrics::{
    TOKEN_CACHE_ENTRIES, TOKEN_CACHE_EVICTIONS_TOTAL, TOKEN_CACHE_HITS_TOTAL,
    TOKEN_CACHE_MISSES_TOTAL,
};
use crate::stats::Counters;
use crate::token::verified::{JwtSigner, Verified};

/// Bytes an entry holds besides its claims: the key, the generation, the
/// signer and the bookkeeping of the cache (an estimate).
const ENTRY_OVERHEAD: usize = 256;

/// Bytes of one `serde_json::Value` (its enum), and of one map entry's
/// bookkeeping besides its key's text and its value.
const VALUE_BYTES: usize = 32;
const MAP_ENTRY_BYTES: usize = 48;

/// The estimated bytes of a decoded JSON value: each value, string and map
/// entry counted, so a token of many small values (an array of numbers)
/// weighs what it holds in memory, not its length.
fn value_bytes(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    VALUE_BYTES
        + match value {
            Value::String(text) => text.len(),
            Value::Array(items) => items.iter().map(value_bytes).sum(),
            Value::Object(map) => map
                .iter()
                .map(|(name, v)| MAP_ENTRY_BYTES + name.len() + value_bytes(v))
                .sum(),
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        }
}

/// The estimated bytes an entry holds: its claims as decoded
/// ([`value_bytes`] of each), its signer's text and [`ENTRY_OVERHEAD`].
pub(crate) fn entry_bytes(claims: &Claims, signer: &JwtSigner) -> usize {
    let signer = match signer {
        JwtSigner::Key(_) => 0,
        JwtSigner::Trusted { issuer, kid } => issuer.as_ref().map_or(0, String::len) + kid.len(),
    };
    let claims: usize = claims
        .as_map()
        .iter()
        .map(|(name, v)| MAP_ENTRY_BYTES + name.len() + value_bytes(v))
        .sum();
    ENTRY_OVERHEAD + signer + claims
}

/// What a verification produced.
pub(crate) struct Entry {
    /// The key-set generation read before the verification began.
    pub(crate) generation: u64,
    pub(crate) claims: Claims,
    pub(crate) signer: JwtSigner,
    /// The header's `typ` (for `Validation::typ`).
    pub(crate) typ: Option<Box<str>>,
    /// [`entry_bytes`] of the claims and signer.
    bytes: u64,
}

/// An entry's weight: its bytes, but at least `floor` (module docs).
#[derive(Clone)]
struct Weight {
    floor: u64,
}

impl Weighter<[u8; 32], Arc<Entry>> for Weight {
    fn weight(&self, _key: &[u8; 32], entry: &Arc<Entry>) -> u64 {
        entry.bytes.max(self.floor)
    }
}

/// Counts evictions.
#[derive(Clone)]
struct Evictions(Counter);

impl Lifecycle<[u8; 32], Arc<Entry>> for Evictions {
    type RequestState = ();

    fn on_evict(&self, _state: &mut (), _key: [u8; 32], _entry: Arc<Entry>) {
        self.0.increment(1);
    }
}

/// See the module docs.
pub(crate) struct TokenCache {
    cache: Cache<[u8; 32], Arc<Entry>, Weight, DefaultHashBuilder, Evictions>,
    hits: Counter,
    misses: Counter,
    entries: Gauge,
    /// Inserts so far, for [`ENTRIES_STRIDE`].
    inserts: AtomicU64,
}

/// How often (in inserts) the `kms_token_cache_entries` gauge is set:
/// counting the entries takes every shard's read lock (quick_cache's
/// `len`, four shards per core), too much for every miss, so the gauge is
/// at most this many inserts behind (the count moves only with inserts).
const ENTRIES_STRIDE: u64 = 64;

/// The cache key of `token`: its SHA-256.
pub(crate) fn key(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl TokenCache {
    /// A cache of at most `entries` tokens and `bytes` of estimated size,
    /// its metrics labelled with `topic`; `None` when `entries` is 0 (off).
    pub(crate) fn new(entries: usize, bytes: usize, topic: &str) -> Option<Self> {
        if entries == 0 {
            return None;
        }
        let floor = (bytes / entries).max(1) as u64;
        let cache = Cache::with(
            entries,
            bytes as u64,
            Weight { floor },
            DefaultHashBuilder::default(),
            Evictions(metrics::counter!(TOKEN_CACHE_EVICTIONS_TOTAL, "topic" => topic.to_owned())),
        );
        Some(TokenCache {
            cache,
            hits: metrics::counter!(TOKEN_CACHE_HITS_TOTAL, "topic" => topic.to_owned()),
            misses: metrics::counter!(TOKEN_CACHE_MISSES_TOTAL, "topic" => topic.to_owned()),
            entries: metrics::gauge!(TOKEN_CACHE_ENTRIES, "topic" => topic.to_owned()),
            inserts: AtomicU64::new(0),
        })
    }

    /// The entry under `key` if it was computed at `generation` (the
    /// current one); counts a hit or a miss in `counters` and the metrics.
    pub(crate) fn get(
        &self,
        key: &[u8; 32],
        generation: u64,
        counters: &Counters,
    ) -> Option<Arc<Entry>> {
        let entry = self
            .cache
            .get(key)
            .filter(|entry| entry.generation == generation);
        if entry.is_some() {
            self.hits.increment(1);
            Counters::add(&counters.token_cache_hits, 1);
        } else {
            self.misses.increment(1);
            Counters::add(&counters.token_cache_misses, 1);
        }
        entry
    }

    /// Stores what the verification of the token under `key` produced,
    /// tagged with the `generation` read before it began.
    pub(crate) fn insert(&self, key: [u8; 32], generation: u64, verified: Verified) {
        let Verified { jwt, typ } = verified;
        let entry = Entry {
            generation,
            bytes: (entry_bytes(&jwt.claims, &jwt.signer) + typ.as_ref().map_or(0, |t| t.len()))
                as u64,
            claims: jwt.claims,
            signer: jwt.signer,
            typ,
        };
        self.cache.insert(key, Arc::new(entry));
        // Relaxed: a tally, ordering nothing.
        if self
            .inserts
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(ENTRIES_STRIDE)
        {
            self.entries.set(self.cache.len() as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::verified::VerifiedJwt;

    fn claims() -> Claims {
        Claims::from_json(br#"{"sub":"a"}"#).expect("claims")
    }

    fn trusted() -> JwtSigner {
        JwtSigner::Trusted {
            issuer: None,
            kid: "k".to_owned(),
        }
    }

    fn verified(claims: Claims, signer: JwtSigner) -> Verified {
        Verified {
            jwt: VerifiedJwt {
                claims,
                signer,
                cached: false,
            },
            typ: None,
        }
    }

    #[test]
    fn an_entry_is_used_only_at_its_generation() {
        let cache = TokenCache::new(16, 1 << 20, "t").expect("on");
        let counters = Counters::default();
        let k = key("a.b.c");
        cache.insert(k, 7, verified(claims(), trusted()));
        assert!(cache.get(&k, 7, &counters).is_some());
        assert!(cache.get(&k, 8, &counters).is_none(), "the key set changed");
        assert!(cache.get(&key("a.b.d"), 7, &counters).is_none());
        let stats = counters.snapshot();
        assert_eq!((stats.token_cache_hits, stats.token_cache_misses), (1, 2));
    }

    #[test]
    fn it_holds_at_most_its_entries_and_its_bytes() {
        // 64 entries of at least 1 KiB each in 64 KiB.
        let cache = TokenCache::new(64, 64 << 10, "t").expect("on");
        for i in 0..1000 {
            let k = key(&format!("token {i}"));
            cache.insert(k, 0, verified(claims(), trusted()));
        }
        assert!(cache.cache.len() <= 64, "{}", cache.cache.len());
        // Entries of ~12 KiB each in 64 KiB: some fit, never six.
        let big = TokenCache::new(64, 64 << 10, "t").expect("on");
        let heavy = Claims::from_json(format!(r#"{{"a":[{}0]}}"#, "0,".repeat(380)).as_bytes())
            .expect("claims");
        let signer = trusted();
        let weight = entry_bytes(&heavy, &signer);
        assert!((11 << 10..13 << 10).contains(&weight), "{weight}");
        for i in 0..20 {
            let k = key(&format!("token {i}"));
            big.insert(k, 0, verified(heavy.clone(), signer.clone()));
        }
        let held = big.cache.len();
        assert!((1..=5).contains(&held), "{held}");
        assert!(big.cache.weight() <= 64 << 10);
    }

    #[test]
    fn zero_entries_is_off() {
        assert!(TokenCache::new(0, 1 << 20, "t").is_none());
    }
}
