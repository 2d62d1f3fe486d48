//! [`Claims`] and [`Validation`]: a JWT claims set (RFC 7519 §4) and the
//! checks made on it once its signature has verified.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::JoseError;

/// Default clock-skew allowance for `exp` and `nbf` (60 s, a common
/// default in JWT libraries).
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);

/// A JWT claims set: a JSON object with unique member names.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Claims(Map<String, Value>);

impl Claims {
    pub(crate) fn from_map(map: Map<String, Value>) -> Self {
        Claims(map)
    }

    /// A claims set from JSON text: one object with unique member names
    /// (RFC 7519 §7.2 step 10, the rule [`CompactJws::claims`] applies to a
    /// verified payload), for a server that checks claims it is asked to
    /// sign.
    ///
    /// # Errors
    /// [`JoseError::NotAnObject`] for text that is not one JSON object,
    /// [`JoseError::Duplicate`] for a member name that appears twice.
    ///
    /// [`CompactJws::claims`]: crate::CompactJws::claims
    pub fn from_json(json: &[u8]) -> Result<Self, JoseError> {
        crate::object::parse(json, crate::error::Part::Payload).map(Claims)
    }

    /// The claim named `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// The claims as a `serde_json` map.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }

    /// The claims as a `serde_json` map, by value.
    pub fn into_map(self) -> Map<String, Value> {
        self.0
    }

    /// The claims as the caller's type.
    ///
    /// # Errors
    /// [`JoseError::ClaimsType`] with the deserializer's message.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, JoseError> {
        T::deserialize(&Value::Object(self.0.clone())).map_err(|e| JoseError::ClaimsType {
            reason: e.to_string(),
        })
    }
}

/// What a verified token's claims must satisfy (RFC 7519 §4.1).
///
/// `exp`, `nbf` and `iat` are NumericDates: seconds since the epoch, an
/// integer or not. Defaults: `exp` required and checked, `nbf` and `iat`
/// (not after now plus the leeway) checked when present,
/// leeway [`DEFAULT_LEEWAY`], any issuer, any audience, no other required
/// claim.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Validation {
    /// Clock-skew allowance for `exp` and `nbf`.
    pub leeway: Duration,
    /// Whether a token without `exp` is refused ([`JoseError::MissingClaim`]).
    pub require_exp: bool,
    /// Accepted issuers; empty: `iss` is not checked.
    pub issuers: Vec<String>,
    /// Accepted audiences: a token's `aud` (a string or an array of
    /// strings) must name one of them. Empty: a token with an `aud` is
    /// refused, since this recipient identifies with none (RFC 7519
    /// §4.1.3), and one without is accepted.
    pub audiences: Vec<String>,
    /// Claims that must be present.
    pub required: Vec<String>,
    /// Longest lifetime accepted, `exp − iat` (as Envoy's
    /// `max_lifetime`); when set, both claims are required. `None`: any.
    pub max_lifetime: Option<Duration>,
    /// The `typ` a token's header must have, for instance `at+jwt` for the
    /// JWT access tokens of RFC 9068 (§4 asks resource servers to check
    /// it). Compared as media types are (RFC 7515 §4.1.9): ASCII case
    /// ignored, an `application/` prefix optional on either side. `None`:
    /// any `typ` or none. Checked by [`Validation::check_typ`], which
    /// [`Validation::validate`] cannot do (it sees the claims only).
    pub typ: Option<String>,
}

impl Default for Validation {
    fn default() -> Self {
        Validation {
            leeway: DEFAULT_LEEWAY,
            require_exp: true,
            issuers: Vec::new(),
            audiences: Vec::new(),
            required: Vec::new(),
            max_lifetime: None,
            typ: None,
        }
    }
}

impl Validation {
    /// Checks `claims` at time `now` (`aud`: see [`Validation::audiences`]).
    ///
    /// # Errors
    /// [`JoseError::MissingClaim`] for an absent required claim (`exp`
    /// under `require_exp`); [`JoseError::InvalidClaim`] for an `exp`,
    /// `nbf` or `iat` that is not a number, an `iss` that is not a string, an `aud`
    /// that is not a string or an array of strings; [`JoseError::Expired`]
    /// when `exp ≤ now − leeway`; [`JoseError::NotYetValid`] when `nbf >
    /// now + leeway`; [`JoseError::IssuedInTheFuture`] when `iat > now +
    /// leeway`; [`JoseError::WrongIssuer`]; [`JoseError::WrongAudience`].
    pub fn validate(&self, claims: &Claims, now: SystemTime) -> Result<(), JoseError> {
        let now = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs_f64();
        let leeway = self.leeway.as_secs_f64();
        if self.require_exp && claims.get("exp").is_none() {
            return Err(missing("exp"));
        }
        for name in &self.required {
            if claims.get(name).is_none() {
                return Err(missing(name));
            }
        }
        if let Some(exp) = numeric_date(claims, "exp")? {
            if exp <= now - leeway {
                return Err(JoseError::Expired { exp, now });
            }
        }
        if let Some(nbf) = numeric_date(claims, "nbf")? {
            if nbf > now + leeway {
                return Err(JoseError::NotYetValid { nbf, now });
            }
        }
        if let Some(iat) = numeric_date(claims, "iat")? {
            if iat > now + leeway {
                return Err(JoseError::IssuedInTheFuture { iat, now });
            }
        }
        if let Some(max) = self.max_lifetime {
            let exp = numeric_date(claims, "exp")?.ok_or_else(|| missing("exp"))?;
            let iat = numeric_date(claims, "iat")?.ok_or_else(|| missing("iat"))?;
            if exp - iat > max.as_secs_f64() {
                return Err(JoseError::LifetimeTooLong {
                    lifetime: exp - iat,
                    max: max.as_secs(),
                });
            }
        }
        if !self.issuers.is_empty() {
            match claims.get("iss") {
                None => return Err(missing("iss")),
                Some(Value::String(iss)) if self.issuers.contains(iss) => {}
                Some(Value::String(_)) => return Err(JoseError::WrongIssuer),
                Some(_) => return Err(invalid("iss", "not a string")),
            }
        }
        if self.audiences.is_empty() {
            if claims.get("aud").is_some() {
                return Err(JoseError::WrongAudience);
            }
        } else {
            let accepted = |aud: &Value| match aud {
                Value::String(aud) => Ok(self.audiences.contains(aud)),
                _ => Err(invalid("aud", "not a string or an array of strings")),
            };
            let any = match claims.get("aud") {
                None => return Err(missing("aud")),
                Some(Value::Array(values)) => {
                    let mut any = false;
                    for value in values {
                        any |= accepted(value)?;
                    }
                    any
                }
                Some(value) => accepted(value)?,
            };
            if !any {
                return Err(JoseError::WrongAudience);
            }
        }
        Ok(())
    }
}

impl Validation {
    /// Checks a token header's `typ` against [`Validation::typ`].
    ///
    /// # Errors
    /// [`JoseError::WrongType`] when a `typ` is required and the header has
    /// none, or another.
    pub fn check_typ(&self, typ: Option<&str>) -> Result<(), JoseError> {
        let Some(required) = &self.typ else {
            return Ok(());
        };
        fn bare(typ: &str) -> &str {
            match typ.get(..12) {
                Some(prefix) if prefix.eq_ignore_ascii_case("application/") => &typ[12..],
                _ => typ,
            }
        }
        match typ {
            Some(typ) if bare(typ).eq_ignore_ascii_case(bare(required)) => Ok(()),
            got => Err(JoseError::WrongType {
                typ: got
                    .unwrap_or("")
                    .chars()
                    .take(32)
                    .collect::<String>()
                    .escape_debug()
                    .to_string(),
            }),
        }
    }
}

fn missing(name: &str) -> JoseError {
    JoseError::MissingClaim {
        name: name.to_owned(),
    }
}

fn invalid(name: &'static str, reason: &'static str) -> JoseError {
    JoseError::InvalidClaim { name, reason }
}

/// A NumericDate claim (RFC 7519 §2), if present.
fn numeric_date(claims: &Claims, name: &'static str) -> Result<Option<f64>, JoseError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|t| t.is_finite())
            .map(Some)
            .ok_or_else(|| invalid(name, "not a finite number")),
        Some(_) => Err(invalid(name, "not a number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> Claims {
        match value {
            Value::Object(map) => Claims::from_map(map),
            _ => Claims::default(),
        }
    }

    fn at(secs: f64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs_f64(secs)
    }

    #[test]
    fn exp_and_nbf_allow_the_leeway_and_accept_fractions() {
        let v = Validation::default();
        let c = claims(json!({"exp": 1000, "nbf": 500.5}));
        assert_eq!(v.validate(&c, at(1000.0 + 59.0)), Ok(()));
        assert!(matches!(
            v.validate(&c, at(1060.0)),
            Err(JoseError::Expired { .. })
        ));
        assert_eq!(v.validate(&c, at(500.5 - 60.0)), Ok(()));
        assert!(matches!(
            v.validate(&c, at(440.0)),
            Err(JoseError::NotYetValid { .. })
        ));
        assert!(matches!(
            v.validate(&claims(json!({"sub": "a"})), at(0.0)),
            Err(JoseError::MissingClaim { .. })
        ));
        assert!(matches!(
            v.validate(&claims(json!({"exp": "soon"})), at(0.0)),
            Err(JoseError::InvalidClaim { name: "exp", .. })
        ));
        let lax = Validation {
            require_exp: false,
            ..Validation::default()
        };
        assert_eq!(lax.validate(&claims(json!({})), at(0.0)), Ok(()));
    }

    #[test]
    fn issuer_audience_and_required_claims() {
        let v = Validation {
            issuers: vec!["https://issuer".to_owned()],
            audiences: vec!["api".to_owned()],
            required: vec!["sub".to_owned()],
            ..Validation::default()
        };
        let now = at(0.0);
        let ok = json!({"exp": 100, "iss": "https://issuer", "aud": ["web", "api"], "sub": "a"});
        assert_eq!(v.validate(&claims(ok), now), Ok(()));
        let single = json!({"exp": 100, "iss": "https://issuer", "aud": "api", "sub": "a"});
        assert_eq!(v.validate(&claims(single), now), Ok(()));
        for (bad, code) in [
            (
                json!({"exp": 100, "iss": "other", "aud": "api", "sub": "a"}),
                "jose.wrong_issuer",
            ),
            (
                json!({"exp": 100, "iss": "https://issuer", "aud": "web", "sub": "a"}),
                "jose.wrong_audience",
            ),
            (
                json!({"exp": 100, "iss": "https://issuer", "aud": [1], "sub": "a"}),
                "jose.invalid_claim",
            ),
            (
                json!({"exp": 100, "iss": "https://issuer", "aud": "api"}),
                "jose.missing_claim",
            ),
            (
                json!({"exp": 100, "aud": "api", "sub": "a"}),
                "jose.missing_claim",
            ),
        ] {
            assert_eq!(
                v.validate(&claims(bad.clone()), now).map_err(|e| e.code()),
                Err(code),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_audience_the_recipient_does_not_know_is_refused() {
        let v = Validation::default();
        assert_eq!(
            v.validate(
                &claims(json!({"exp": 100, "aud": "other-service"})),
                at(0.0)
            ),
            Err(JoseError::WrongAudience)
        );
        assert_eq!(v.validate(&claims(json!({"exp": 100})), at(0.0)), Ok(()));
    }

    #[test]
    fn a_lifetime_over_the_limit_or_unknown_is_refused() {
        let v = Validation {
            max_lifetime: Some(Duration::from_secs(3600)),
            ..Validation::default()
        };
        let now = at(1000.0);
        assert_eq!(
            v.validate(&claims(json!({"iat": 900, "exp": 4500})), now),
            Ok(())
        );
        for (bad, code) in [
            (json!({"iat": 900, "exp": 4500.5}), "jose.lifetime_too_long"),
            (json!({"exp": 2000}), "jose.missing_claim"),
            (json!({"iat": "900", "exp": 2000}), "jose.invalid_claim"),
        ] {
            assert_eq!(
                v.validate(&claims(bad.clone()), now).map_err(|e| e.code()),
                Err(code),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_required_typ_is_compared_as_a_media_type() {
        let any = Validation::default();
        assert_eq!(any.check_typ(None), Ok(()));
        assert_eq!(any.check_typ(Some("JWT")), Ok(()));
        let at_jwt = Validation {
            typ: Some("at+jwt".to_owned()),
            ..Validation::default()
        };
        for ok in [
            "at+jwt",
            "AT+JWT",
            "application/at+jwt",
            "Application/At+JWT",
        ] {
            assert_eq!(at_jwt.check_typ(Some(ok)), Ok(()), "{ok}");
        }
        for bad in [
            None,
            Some("JWT"),
            Some("at+jwt "),
            Some("application/"),
            Some(""),
        ] {
            assert!(
                matches!(at_jwt.check_typ(bad), Err(JoseError::WrongType { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn claims_deserialize_into_the_callers_type() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Mine {
            sub: String,
        }
        let c = claims(json!({"sub": "alice", "exp": 1}));
        assert_eq!(
            c.deserialize::<Mine>(),
            Ok(Mine {
                sub: "alice".to_owned()
            })
        );
        assert!(matches!(
            c.deserialize::<Vec<u8>>(),
            Err(JoseError::ClaimsType { .. })
        ));
    }

    #[test]
    fn iat_must_be_a_numeric_date_not_in_the_future() {
        let v = Validation::default();
        let at_1000 = |iat: Value| claims(json!({"exp": 5000, "iat": iat}));
        assert_eq!(v.validate(&at_1000(json!(1000)), at(1000.0)), Ok(()));
        assert_eq!(v.validate(&at_1000(json!(1059.5)), at(1000.0)), Ok(()));
        assert!(matches!(
            v.validate(&at_1000(json!(1061)), at(1000.0)),
            Err(JoseError::IssuedInTheFuture { .. })
        ));
        assert!(matches!(
            v.validate(&at_1000(json!("yesterday")), at(1000.0)),
            Err(JoseError::InvalidClaim { name: "iat", .. })
        ));
    }
}
