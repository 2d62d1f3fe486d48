//! Which curve25519-dalek arithmetic backend runs in this process.
//!
//! curve25519-dalek 5 decides in two steps (its `build.rs` and
//! `src/backend.rs::get_selected_backend`):
//! 1. at build time, `cfg(curve25519_dalek_backend)` says which backends are
//!    compiled in: `"serial"` or `"fiat"` (only that one), `"simd"` (AVX2,
//!    the x86_64 default) or `"avx512"` (AVX-512 IFMA *and* AVX2; also the
//!    default when the target enables `avx512ifma` and `avx512vl`);
//! 2. at run time, the first compiled-in vector backend whose CPU features
//!    are present is used (IFMA needs `avx512ifma` + `avx512vl`, AVX2 needs
//!    `avx2`), else the serial one.
//!
//! curve25519-dalek does not expose its choice, so [`curve_backend`] repeats
//! the same two steps. It sees the same `cfg` because `.cargo/config.toml`
//! sets it for every crate of the build.

use core::fmt;

/// The field-arithmetic backend curve25519-dalek uses for multiscalar and
/// double-scalar multiplication in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CurveBackend {
    /// Portable 64- or 32-bit code (`u128` / `u64` limbs).
    Serial,
    /// fiat-crypto's formally verified field arithmetic.
    Fiat,
    /// The AVX2 vector backend (4-way parallel field elements).
    Avx2,
    /// The AVX-512 IFMA vector backend (52-bit multiply-accumulate).
    Avx512Ifma,
}

impl CurveBackend {
    /// Short lowercase name: `serial`, `fiat`, `avx2` or `avx512ifma`.
    pub fn name(self) -> &'static str {
        match self {
            CurveBackend::Serial => "serial",
            CurveBackend::Fiat => "fiat",
            CurveBackend::Avx2 => "avx2",
            CurveBackend::Avx512Ifma => "avx512ifma",
        }
    }
}

impl fmt::Display for CurveBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The backend curve25519-dalek selects in this process: the build's
/// `cfg(curve25519_dalek_backend)` narrowed by the CPU's features, exactly as
/// curve25519-dalek 5 decides (see the module docs). Cheap after the first
/// call (the standard library caches CPU feature detection).
pub fn curve_backend() -> CurveBackend {
    if cfg!(curve25519_dalek_backend = "fiat") {
        return CurveBackend::Fiat;
    }
    if cfg!(curve25519_dalek_backend = "serial") {
        return CurveBackend::Serial;
    }
    detect_vector().unwrap_or(CurveBackend::Serial)
}

/// The faster backend this CPU could run but this build did not compile
/// in: `Some(CurveBackend::Avx512Ifma)` when the CPU has AVX-512 IFMA and
/// VL, the build lacks `--cfg curve25519_dalek_backend="avx512"` (set in
/// the embedding project's `.cargo/config.toml`, README "Embedding"), and
/// did not choose `serial` or `fiat` on purpose; else `None`. Verification
/// with the AVX2 backend takes about 1.3–1.7 × as long on such a CPU
/// (docs/PERFORMANCE.md, "Curve backends").
pub fn missed_curve_backend() -> Option<CurveBackend> {
    if cfg!(curve25519_dalek_backend = "fiat") || cfg!(curve25519_dalek_backend = "serial") {
        return None;
    }
    match (curve_backend(), cpu_has_ifma()) {
        (CurveBackend::Avx2, true) => Some(CurveBackend::Avx512Ifma),
        _ => None,
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_has_ifma() -> bool {
    std::arch::is_x86_feature_detected!("avx512ifma")
        && std::arch::is_x86_feature_detected!("avx512vl")
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_has_ifma() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn detect_vector() -> Option<CurveBackend> {
    // Mirrors build.rs: "avx512" is compiled in when asked for, or by
    // default when the target itself enables both IFMA features.
    let avx512_compiled = cfg!(curve25519_dalek_backend = "avx512")
        || cfg!(all(
            target_feature = "avx512ifma",
            target_feature = "avx512vl"
        ));
    if avx512_compiled
        && std::arch::is_x86_feature_detected!("avx512ifma")
        && std::arch::is_x86_feature_detected!("avx512vl")
    {
        return Some(CurveBackend::Avx512Ifma);
    }
    // AVX2 ("simd") is compiled in on every 64-bit x86_64 build that did not
    // choose serial or fiat.
    if cfg!(target_pointer_width = "64") && std::arch::is_x86_feature_detected!("avx2") {
        return Some(CurveBackend::Avx2);
    }
    None
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_vector() -> Option<CurveBackend> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_match_display() {
        let all = [
            CurveBackend::Serial,
            CurveBackend::Fiat,
            CurveBackend::Avx2,
            CurveBackend::Avx512Ifma,
        ];
        for (i, a) in all.iter().enumerate() {
            assert_eq!(a.to_string(), a.name());
            for b in &all[i + 1..] {
                assert_ne!(a.name(), b.name());
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_vector_backend_is_reported_only_when_the_cpu_has_it() {
        match curve_backend() {
            CurveBackend::Avx512Ifma => {
                assert!(std::arch::is_x86_feature_detected!("avx512ifma"));
                assert!(std::arch::is_x86_feature_detected!("avx512vl"));
            }
            CurveBackend::Avx2 => assert!(std::arch::is_x86_feature_detected!("avx2")),
            CurveBackend::Serial | CurveBackend::Fiat => {}
        }
    }

    #[test]
    fn a_missed_backend_is_reported_only_when_it_would_run_and_is_not_in_use() {
        if let Some(missed) = missed_curve_backend() {
            assert_eq!(missed, CurveBackend::Avx512Ifma);
            assert!(cpu_has_ifma());
            assert_eq!(curve_backend(), CurveBackend::Avx2);
        }
        if curve_backend() == CurveBackend::Avx512Ifma {
            assert_eq!(missed_curve_backend(), None);
        }
    }
}
