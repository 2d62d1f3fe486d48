//! The keys other issuers sign with: the static JWK Sets of
//! `--trust-jwks` and `--trust-jwks-issuer` (loaded at start, reloaded on
//! SIGHUP all or nothing) and the OpenID providers of `--issuer` (kept
//! current in the background by kms-oidc).

use crate::logging::{info_line, warn_line};
use std::path::PathBuf;

use kms::actor::KmsHandle;
use kms::jose::TrustedJwkSet;
use kms::oidc::{FetchSettings, IssuerConfig, Issuers};

use crate::config::TokenSettings;

/// Every static JWK Set file, loaded (those with an issuer bound to it).
///
/// # Errors
/// The first file that cannot be read or is not a usable JWK Set, named.
pub(crate) fn load(files: &[(Option<String>, PathBuf)]) -> Result<Vec<TrustedJwkSet>, String> {
    files
        .iter()
        .map(|(issuer, path)| {
            let flag = match issuer {
                Some(issuer) => format!("--trust-jwks-issuer {issuer}="),
                None => "--trust-jwks ".to_owned(),
            };
            let text = crate::files::read_trusted(path, flag.trim_end())?;
            let set = TrustedJwkSet::from_json(&text)
                .map_err(|e| format!("{flag}{}: {e}", path.display()))?;
            Ok(match issuer {
                Some(issuer) => set.bound_to(issuer.as_str()),
                None => set,
            })
        })
        .collect()
}

/// SIGHUP: reloads every static JWK Set file, all or nothing. If any file
/// fails to load, or the sets together are refused (a `kid` twice), every
/// old set stays and the log says why.
pub(crate) fn reload(handle: &KmsHandle, files: &[(Option<String>, PathBuf)]) {
    match load(files).and_then(|sets| {
        handle
            .reload_trusted_jwks(&sets)
            .map_err(|e| format!("--trust-jwks: {e}"))
    }) {
        Ok(keys) => info_line!(
            "gateway serve: reloaded the trusted JWK Sets: {keys} keys from {} files",
            files.len()
        ),
        Err(e) => warn_line!("gateway serve: reload refused, the old trusted keys stay: {e}"),
    }
}

/// SIGHUP: asks every `--issuer` for its keys again (one fetch per
/// issuer in flight, none within its refetch cooldown), so that a key a
/// provider removed stops verifying now; the outcome is one stderr line.
pub(crate) fn refresh(issuers: &Issuers) {
    let asked = issuers.refresh();
    let all = issuers.issuers().len();
    info_line!(
        "gateway serve: refetching the keys of {} of {all} issuers (the others fetched within --jwks-refetch-cooldown)",
        asked.len()
    );
}

/// The `--issuer`s, kept current for `handle`'s actor.
///
/// # Errors
/// A CA file that cannot be read, or what `Issuers::start` refuses.
pub(crate) fn issuers(
    settings: &TokenSettings,
    handle: &KmsHandle,
) -> Result<Option<Issuers>, String> {
    if settings.issuers.is_empty() {
        return Ok(None);
    }
    let mut fetch = FetchSettings::default()
        .with_fetch_timeout(settings.fetch_timeout)
        .with_refetch_cooldown(settings.refetch_cooldown)
        .with_max_stale(settings.max_stale);
    for path in &settings.issuer_ca {
        let pem = crate::files::read_trusted(path, "--issuer-ca")?;
        fetch = fetch.with_ca_pem(pem);
    }
    let configs = settings
        .issuers
        .iter()
        .map(IssuerConfig::discovered)
        .collect();
    let issuers = Issuers::start(&handle.issuer_keys(), configs, fetch)
        .map_err(|e| format!("--issuer: {e}"))?;
    for issuer in issuers.issuers() {
        info_line!("gateway serve: keys of issuer {issuer} from its discovery document");
    }
    Ok(Some(issuers))
}
