//! Test inputs shared by the batch property and differential tests:
//! honest, tampered and torsion-crafted Ed25519 items; a wrapping root of
//! trust for the root tests (`test_root`); records in memory for the
//! tests' own storages (`memory`).
//!
//! Torsion-crafted items are built with curve25519-dalek scalar and point
//! arithmetic: a mixed-order key `A' = [a]B + T` or commitment
//! `R' = [r]B + T` (T a non-trivial point of small order), signed so that the
//! cofactored equation holds while the cofactorless one does not.

use curve25519_dalek::constants::{ED25519_BASEPOINT_POINT, EIGHT_TORSION};
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use ed25519_dalek::{Signer, SigningKey};
use kms_core::ed25519::BatchItem;
use proptest::prelude::*;
use sha2::{Digest, Sha512};

pub mod memory;
pub mod test_root;

#[derive(Debug, Clone)]
pub struct Owned {
    pub public_key: [u8; 32],
    pub message: Vec<u8>,
    pub signature: [u8; 64],
}

impl Owned {
    /// Borrowed as a batch item.
    pub fn item(&self) -> BatchItem<'_> {
        BatchItem::new(&self.public_key, &self.message, &self.signature)
    }
}

#[derive(Debug, Clone)]
pub enum Kind {
    Honest,
    FlipMessageBit(usize),
    FlipSignatureBit(usize),
    /// s + ℓ: non-canonical s with the same value mod ℓ.
    SPlusOrder,
    /// Mixed-order A: A + T, signed to satisfy the cofactored equation.
    TorsionA(usize),
    /// Mixed-order R: R + T, signed to satisfy the cofactored equation.
    TorsionR(usize),
    /// Pure small-order R (s = 0).
    SmallOrderR(usize),
    /// Pure small-order A.
    SmallOrderA(usize),
}

pub fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::Honest),
        1 => any::<usize>().prop_map(Kind::FlipMessageBit),
        1 => (0usize..512).prop_map(Kind::FlipSignatureBit),
        1 => Just(Kind::SPlusOrder),
        2 => (1usize..8).prop_map(Kind::TorsionA),
        2 => (1usize..8).prop_map(Kind::TorsionR),
        1 => (0usize..8).prop_map(Kind::SmallOrderR),
        1 => (0usize..8).prop_map(Kind::SmallOrderA),
    ]
}

fn scalar(seed: &[u8], label: &[u8]) -> Scalar {
    let wide: [u8; 64] = Sha512::new()
        .chain_update(label)
        .chain_update(seed)
        .finalize()
        .into();
    Scalar::from_bytes_mod_order_wide(&wide)
}

fn challenge(r: &[u8; 32], a: &[u8; 32], m: &[u8]) -> Scalar {
    let wide: [u8; 64] = Sha512::new()
        .chain_update(r)
        .chain_update(a)
        .chain_update(m)
        .finalize()
        .into();
    Scalar::from_bytes_mod_order_wide(&wide)
}

/// Signs with explicit nonce and key so torsion can be added to A or R.
fn craft(seed: &[u8; 32], message: &[u8], t_a: EdwardsPoint, t_r: EdwardsPoint) -> Owned {
    let a = scalar(seed, b"a");
    let r = scalar(seed, b"r");
    let big_a = (ED25519_BASEPOINT_POINT * a + t_a).compress().to_bytes();
    let big_r = (ED25519_BASEPOINT_POINT * r + t_r).compress().to_bytes();
    let k = challenge(&big_r, &big_a, message);
    let s = r + k * a;
    let mut signature = [0u8; 64];
    signature[..32].copy_from_slice(&big_r);
    signature[32..].copy_from_slice(s.as_bytes());
    Owned {
        public_key: big_a,
        message: message.to_vec(),
        signature,
    }
}

pub fn build(seed: [u8; 32], message: Vec<u8>, kind: &Kind) -> Owned {
    let key = SigningKey::from_bytes(&seed);
    let honest = Owned {
        public_key: key.verifying_key().to_bytes(),
        signature: key.sign(&message).to_bytes(),
        message: message.clone(),
    };
    let identity = EIGHT_TORSION[0];
    match *kind {
        Kind::Honest => honest,
        Kind::FlipMessageBit(bit) => {
            let mut o = honest;
            if o.message.is_empty() {
                o.message.push(1);
            } else {
                let i = bit % (o.message.len() * 8);
                o.message[i / 8] ^= 1 << (i % 8);
            }
            o
        }
        Kind::FlipSignatureBit(bit) => {
            let mut o = honest;
            o.signature[bit / 8] ^= 1 << (bit % 8);
            o
        }
        Kind::SPlusOrder => {
            let mut o = honest;
            // ℓ little-endian; s + ℓ < 2^256 since s < ℓ < 2^253.
            const L: [u8; 32] = [
                0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9,
                0xde, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
            ];
            let mut carry = 0u16;
            for (byte, l) in o.signature[32..].iter_mut().zip(L) {
                let sum = u16::from(*byte) + u16::from(l) + carry;
                *byte = sum as u8;
                carry = sum >> 8;
            }
            o
        }
        Kind::TorsionA(t) => craft(&seed, &message, EIGHT_TORSION[t], identity),
        Kind::TorsionR(t) => craft(&seed, &message, identity, EIGHT_TORSION[t]),
        Kind::SmallOrderR(t) => {
            let mut o = honest;
            o.signature[..32].copy_from_slice(&EIGHT_TORSION[t].compress().to_bytes());
            o.signature[32..].fill(0);
            o
        }
        Kind::SmallOrderA(t) => {
            let mut o = honest;
            o.public_key = EIGHT_TORSION[t].compress().to_bytes();
            o
        }
    }
}

pub fn item_strategy() -> impl Strategy<Value = (Owned, Kind)> {
    items_of(kind())
}

/// Items of every kind, but honest and torsion-crafted valid ones about 60
/// times in 64: batches with none, one or a few invalid items, where a
/// failed combination is searched (weighted search, bisection) rather
/// than checked item by item.
pub fn mostly_valid_item_strategy() -> impl Strategy<Value = (Owned, Kind)> {
    items_of(prop_oneof![
        56 => Just(Kind::Honest),
        2 => (1usize..8).prop_map(Kind::TorsionA),
        2 => (1usize..8).prop_map(Kind::TorsionR),
        4 => kind(),
    ])
}

fn items_of(kinds: impl Strategy<Value = Kind>) -> impl Strategy<Value = (Owned, Kind)> {
    (
        any::<[u8; 32]>(),
        proptest::collection::vec(any::<u8>(), 0..80),
        kinds,
    )
        .prop_map(|(seed, message, kind)| (build(seed, message, &kind), kind))
}
