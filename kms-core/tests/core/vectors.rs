//! The test suite of record: every vector in `testdata/` gets exactly the
//! verdict `expected_verdicts.tsv` gives, through `verify`, through
//! `verify_batch` alone, and through `verify_batch` in randomly composed
//! batches with valid and invalid neighbours.

use kms_core::ed25519::{verify, verify_batch, BatchItem, SignatureError};
use kms_vectors::{load_all_testdata, Case, ExpectedVerdicts};

struct Loaded {
    /// Cases whose key and signature have the right lengths, with the verdict.
    fixed: Vec<(Case, bool)>,
    /// Cases with a wrong-length key or signature.
    wrong_length: Vec<(Case, bool)>,
}

fn load() -> Loaded {
    let expected = ExpectedVerdicts::load_default().expect("expected_verdicts.tsv parses");
    let cases = load_all_testdata().expect("testdata parses");
    assert_eq!(cases.len(), expected.len(), "one verdict per case");
    let mut loaded = Loaded {
        fixed: Vec::new(),
        wrong_length: Vec::new(),
    };
    for case in cases {
        let verdict = expected
            .get(case.suite, &case.id)
            .unwrap_or_else(|| panic!("no expected verdict for {} {}", case.suite, case.id));
        if case.fixed().is_some() {
            loaded.fixed.push((case, verdict));
        } else {
            loaded.wrong_length.push((case, verdict));
        }
    }
    loaded
}

fn item(case: &Case) -> BatchItem<'_> {
    let (public_key, signature) = case.fixed().expect("fixed-length case");
    BatchItem::new(public_key, &case.message, signature)
}

fn single(case: &Case) -> Result<(), SignatureError> {
    let it = item(case);
    verify(it.public_key(), it.message(), it.signature())
}

#[test]
fn every_vector_gets_its_expected_verdict_from_verify() {
    let loaded = load();
    assert_eq!(loaded.fixed.len() + loaded.wrong_length.len(), 2302);
    let mut wrong = Vec::new();
    for (case, expected) in &loaded.fixed {
        if single(case).is_ok() != *expected {
            wrong.push(format!("{} {}: {:?}", case.suite, case.id, single(case)));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong verdicts: {wrong:#?}",
        wrong.len()
    );
}

#[test]
fn wrong_length_cases_are_all_expected_invalid() {
    let loaded = load();
    assert!(!loaded.wrong_length.is_empty());
    for (case, expected) in &loaded.wrong_length {
        assert!(
            !expected,
            "{} {} has a wrong length yet is expected valid",
            case.suite, case.id
        );
    }
}

#[test]
fn every_vector_alone_in_a_batch_matches_verify() {
    let loaded = load();
    for (case, expected) in &loaded.fixed {
        let verdicts = verify_batch(&[item(case)]);
        assert_eq!(verdicts.len(), 1);
        assert_eq!(verdicts[0], single(case), "{} {}", case.suite, case.id);
        assert_eq!(verdicts[0].is_ok(), *expected, "{} {}", case.suite, case.id);
    }
}

#[test]
fn all_vectors_in_one_batch_match_verify() {
    let loaded = load();
    let items: Vec<BatchItem<'_>> = loaded.fixed.iter().map(|(c, _)| item(c)).collect();
    let verdicts = verify_batch(&items);
    assert_eq!(verdicts.len(), items.len());
    for ((case, expected), verdict) in loaded.fixed.iter().zip(&verdicts) {
        assert_eq!(*verdict, single(case), "{} {}", case.suite, case.id);
        assert_eq!(verdict.is_ok(), *expected, "{} {}", case.suite, case.id);
    }
}

/// xorshift64*: a deterministic shuffle for test composition only (not
/// cryptographic; the verifier's coefficients come from the OS CSPRNG).
struct Shuffler(u64);

impl Shuffler {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn randomly_composed_batches_match_expected_verdicts() {
    let loaded = load();
    let mut rng = Shuffler(0x9E37_79B9_7F4A_7C15);
    for round in 0..3 {
        let mut order: Vec<usize> = (0..loaded.fixed.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut start = 0;
        while start < order.len() {
            let len = (1 + rng.below(96)).min(order.len() - start);
            let members = &order[start..start + len];
            let items: Vec<BatchItem<'_>> =
                members.iter().map(|&i| item(&loaded.fixed[i].0)).collect();
            let verdicts = verify_batch(&items);
            for (&i, verdict) in members.iter().zip(&verdicts) {
                let (case, expected) = &loaded.fixed[i];
                assert_eq!(
                    verdict.is_ok(),
                    *expected,
                    "round {round}: {} {} in a batch of {len}",
                    case.suite,
                    case.id
                );
                assert_eq!(*verdict, single(case), "{} {}", case.suite, case.id);
            }
            start += len;
        }
    }
}

#[test]
fn one_invalid_among_many_valid_fails_alone() {
    let loaded = load();
    let valid: Vec<&Case> = loaded
        .fixed
        .iter()
        .filter(|(_, e)| *e)
        .map(|(c, _)| c)
        .take(200)
        .collect();
    let invalid: Vec<&Case> = loaded
        .fixed
        .iter()
        .filter(|(c, e)| !*e && single(c) == Err(SignatureError::Equation))
        .map(|(c, _)| c)
        .take(3)
        .collect();
    assert_eq!(
        invalid.len(),
        3,
        "need invalid cases that fail only the equation"
    );
    for (slot, bad) in [0usize, 97, 199].into_iter().zip(&invalid) {
        let mut members = valid.clone();
        members[slot] = bad;
        let items: Vec<BatchItem<'_>> = members.iter().map(|c| item(c)).collect();
        let verdicts = verify_batch(&items);
        for (i, verdict) in verdicts.iter().enumerate() {
            assert_eq!(verdict.is_ok(), i != slot, "position {i}, bad at {slot}");
        }
    }
}
