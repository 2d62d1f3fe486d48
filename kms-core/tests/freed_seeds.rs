//! No copy of a seed is left in freed heap memory: on create, rotate,
//! open, export, import, trim and destroy of a durable store, every heap
//! buffer that held a seed is wiped before it is freed.
//!
//! How: this binary's global allocator holds back every block freed while
//! `HOLDING` is set (it is not returned to the system, so its bytes stay as
//! they were at `dealloc`), and its `realloc` always moves, so every buffer
//! a `Vec` outgrows is freed and held. At the end the test learns every
//! seed (by exporting each version and opening the envelope), then scans
//! the held blocks for any of them.
//!
//! Own test binary: `#[global_allocator]` is per binary. One `#[test]`
//! function, so nothing else runs while blocks are held. The allocator
//! never allocates: held blocks go in a fixed array behind a `Mutex`
//! (whose lock does not allocate).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use kms_core::seal::SealKey;
use kms_core::{KeyId, Keystore, EXPORT_AAD};

/// Most freed blocks held at once (count).
const MAX_HELD: usize = 1 << 16;

/// A freed block: its address (exposed provenance), size and alignment.
#[derive(Clone, Copy)]
struct Block {
    addr: usize,
    size: usize,
    align: usize,
}

struct Held {
    blocks: [Block; MAX_HELD],
    len: usize,
    /// Blocks freed while holding that did not fit (freed unscanned).
    overflowed: usize,
}

/// Whether `dealloc` holds blocks back instead of freeing them.
static HOLDING: AtomicBool = AtomicBool::new(false);

static HELD: Mutex<Held> = Mutex::new(Held {
    blocks: [Block {
        addr: 0,
        size: 0,
        align: 0,
    }; MAX_HELD],
    len: 0,
    overflowed: 0,
});

/// The system allocator, zeroing every allocation (so every byte of a held
/// block is initialised and may be read) and holding freed blocks back
/// while `HOLDING` is set.
struct Quarantine;

// SAFETY: every block comes from `System` with the layout asked for, and
// goes back to `System` with the same layout, exactly once (at `dealloc`,
// or when `release` scans it).
unsafe impl GlobalAlloc for Quarantine {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's `layout` has a non-zero size (GlobalAlloc
        // contract), which is all `System.alloc_zeroed` requires.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if HOLDING.load(Ordering::Acquire) {
            let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
            let len = held.len;
            if len < MAX_HELD {
                held.blocks[len] = Block {
                    addr: ptr.expose_provenance(),
                    size: layout.size(),
                    align: layout.align(),
                };
                held.len = len + 1;
                return;
            }
            held.overflowed += 1;
        }
        // SAFETY: `ptr` was allocated by `System` with `layout` (see
        // `alloc`) and the caller no longer uses it.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Always move: the old block is freed through `dealloc`, so it is
        // held and scanned like any other.
        // SAFETY: the caller guarantees `new_size`, rounded up to
        // `layout.align()`, does not overflow `isize` (GlobalAlloc
        // contract), and the alignment is `layout`'s, a valid one.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new_size` is non-zero (GlobalAlloc contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live, distinct allocations of at
            // least the length copied; then the old block is freed with
            // the layout it was allocated with.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Quarantine = Quarantine;

/// What the scan of the held blocks found.
#[derive(Debug, PartialEq, Eq)]
struct Scan {
    blocks: usize,
    overflowed: usize,
    /// Held blocks holding one of the seeds.
    with_a_seed: usize,
    /// Size of the largest such block (bytes), to help find the leak.
    largest: usize,
}

/// Releases what was held ([`release`]) and asserts that every freed
/// block was scanned, more than `min_blocks` were, and none holds one of
/// `seeds`; `phase` names what freed them.
fn released_clean(phase: &str, seeds: &[[u8; 32]], min_blocks: usize) {
    let scan = release(seeds);
    assert_eq!(scan.overflowed, 0, "{phase}: every freed block was scanned");
    assert!(
        scan.blocks > min_blocks,
        "{phase}: blocks were held and scanned: {scan:?}"
    );
    assert_eq!(
        scan.with_a_seed, 0,
        "{phase}: a seed is left in freed heap memory: {scan:?}"
    );
}

fn hold() {
    HOLDING.store(true, Ordering::Release);
}

/// Stops holding, scans every held block for any of `seeds`, frees them.
fn release(seeds: &[[u8; 32]]) -> Scan {
    HOLDING.store(false, Ordering::Release);
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    let mut scan = Scan {
        blocks: held.len,
        overflowed: held.overflowed,
        with_a_seed: 0,
        largest: 0,
    };
    let len = held.len;
    for block in &held.blocks[..len] {
        let ptr = std::ptr::with_exposed_provenance_mut::<u8>(block.addr);
        // SAFETY: the block is a live `System` allocation of `block.size`
        // bytes (held back, not freed), zeroed when allocated so every byte
        // is initialised, and nothing else refers to it: its owner freed
        // it.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, block.size) };
        if seeds
            .iter()
            .any(|seed| bytes.windows(seed.len()).any(|w| w == seed))
        {
            scan.with_a_seed += 1;
            scan.largest = scan.largest.max(block.size);
        }
        // SAFETY: allocated by `System` with this size and alignment (a
        // valid layout: it was one), and freed here exactly once.
        unsafe {
            System.dealloc(
                ptr,
                Layout::from_size_align_unchecked(block.size, block.align),
            );
        }
    }
    held.len = 0;
    held.overflowed = 0;
    scan
}

fn master() -> SealKey {
    SealKey::from_bytes("master", 1, &[42u8; 32]).expect("master key")
}

fn transport() -> SealKey {
    SealKey::from_bytes("transport", 1, &[7u8; 32]).expect("transport key")
}

/// The seed inside an export of `key`, learnt by opening the envelope (the
/// opened buffer wipes itself).
fn seed_of(ks: &Keystore, key: &KeyId) -> [u8; 32] {
    let envelope = ks.export_sealed(key, &transport()).expect("export");
    let plaintext = transport().open(EXPORT_AAD, &envelope).expect("open");
    plaintext[..32].try_into().expect("a seed")
}

/// An export envelope of `seed`, built on the stack so the test itself
/// leaves no heap copy.
fn export_of(seed: &[u8; 32]) -> kms_core::seal::Envelope {
    const SOURCE: &[u8] = b"external-key";
    let mut plaintext = [0u8; 32 + 32 + 1 + SOURCE.len()];
    plaintext[..32].copy_from_slice(seed);
    plaintext[32..64].copy_from_slice(
        &ed25519_dalek::SigningKey::from_bytes(seed)
            .verifying_key()
            .to_bytes(),
    );
    plaintext[64] = SOURCE.len() as u8;
    plaintext[65..].copy_from_slice(SOURCE);
    transport().seal(EXPORT_AAD, &plaintext).expect("seal")
}

/// Versions per key: 6, so opening grows past a 4-element buffer.
const VERSIONS: u32 = 6;

#[test]
fn no_seed_is_left_in_freed_memory() {
    // The instrument first: a growing `Zeroizing<Vec<u8>>` that held a
    // seed is found.
    let marker = [0x5au8; 32];
    hold();
    {
        let mut grown = zeroize::Zeroizing::new(Vec::with_capacity(32));
        grown.extend_from_slice(&marker);
        grown.push(0);
    }
    let control = release(&[marker]);
    assert_eq!(control.overflowed, 0);
    assert_eq!(
        control.with_a_seed, 1,
        "the scan finds the buffer a Zeroizing<Vec> outgrew: {control:?}"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    // Long names make a long key id (the snapshot's size estimate must
    // still be exact).
    let (tenant, purpose) = ("t".repeat(64), "p".repeat(64));
    let imported_seed = [0x11u8; 32];
    let envelope = export_of(&imported_seed);

    let mut seeds = [[0u8; 32]; 2 * VERSIONS as usize + 1];
    hold();
    // Every version's id: generated v1..=v6, then imported v1..=v6.
    let ids: Vec<KeyId> = {
        let ks = Keystore::create(&store, master()).expect("create");
        let imported = ks
            .import_sealed(&tenant, &purpose, &transport(), &envelope)
            .expect("import");
        let generated = ks.create_ed25519(&tenant, &purpose).expect("create");
        for key in [&imported, &generated] {
            let mut policy = ks.policy(key).expect("policy");
            policy.exportable = true;
            ks.set_policy(key, policy).expect("exportable");
        }
        let (mut generated_ids, mut imported_ids) = (vec![generated], vec![imported]);
        for _ in 1..VERSIONS {
            generated_ids.push(ks.rotate(&generated_ids[0]).expect("rotate"));
            imported_ids.push(ks.rotate(&imported_ids[0]).expect("rotate"));
        }
        generated_ids.into_iter().chain(imported_ids).collect()
    };
    let ks = Keystore::open(&store, master()).expect("open");
    for (seed, id) in seeds.iter_mut().zip(&ids) {
        *seed = seed_of(&ks, id);
    }
    let again = ks.export_sealed(&ids[2], &transport()).expect("export");
    ks.import_sealed("acme", "again", &transport(), &again)
        .expect("import");
    drop(ks);
    seeds[2 * VERSIONS as usize] = imported_seed;
    assert_eq!(seeds[VERSIONS as usize], imported_seed, "export is exact");
    released_clean("created, rotated, signed, reopened, exported", &seeds, 100);

    // Trimming and destroying drop secrets (and rewrite the store): every
    // buffer they free is wiped too.
    hold();
    {
        let ks = Keystore::open(&store, master()).expect("open");
        let generated = &ids[0];
        let mut policy = ks.policy(generated).expect("policy");
        policy.min_verify_version = VERSIONS;
        ks.set_policy(generated, policy).expect("set policy");
        ks.trim(generated, VERSIONS).expect("trim");
        ks.destroy(&ids[VERSIONS as usize]).expect("destroy");
        assert!(ks.export_sealed(generated, &transport()).is_err());
    }
    released_clean("trimmed, destroyed", &seeds, 0);
    #[cfg(feature = "ml-dsa")]
    ml_dsa_seeds(dir.path());
}

/// An ML-DSA key's seeds, through the same steps: created, rotated,
/// signed with, reopened and exported; then reopened, signed with and
/// trimmed; each phase scanned. The scan sees the Rust side's buffers; aws-lc's own
/// allocations (the expanded key) go through its allocator, which wipes
/// what it frees.
#[cfg(feature = "ml-dsa")]
fn ml_dsa_seeds(dir: &std::path::Path) {
    use kms_core::Alg;
    const AAD: &[u8] = b"kms.export.ml-dsa-65.v1";
    let store = dir.join("ml-dsa");
    let seed_of = |ks: &Keystore, id: &KeyId| -> [u8; 32] {
        let envelope = ks.export_sealed(id, &transport()).expect("export");
        let plaintext = transport().open(AAD, &envelope).expect("open");
        plaintext[..32].try_into().expect("a seed")
    };
    hold();
    let ids: Vec<KeyId> = {
        let ks = Keystore::create(&store, master()).expect("create");
        let v1 = ks.create_key("acme", "pq", Alg::MlDsa65).expect("create");
        let mut policy = ks.policy(&v1).expect("policy");
        policy.exportable = true;
        ks.set_policy(&v1, policy).expect("exportable");
        let v2 = ks.rotate(&v1).expect("rotate");
        let v3 = ks.rotate(&v1).expect("rotate");
        ks.sign_message(&v1, b"m").expect("sign");
        vec![v1, v2, v3]
    };
    // The seeds, read by export (still held: its buffers are scanned too).
    let seeds: Vec<[u8; 32]> = {
        let ks = Keystore::open(&store, master()).expect("open");
        ids.iter().map(|id| seed_of(&ks, id)).collect()
    };
    released_clean(
        "ML-DSA: created, rotated, signed, reopened, exported",
        &seeds,
        20,
    );
    hold();
    {
        let ks = Keystore::open(&store, master()).expect("open");
        ks.sign_message(&ids[0], b"m").expect("sign");
        let mut policy = ks.policy(&ids[0]).expect("policy");
        policy.min_verify_version = 2;
        ks.set_policy(&ids[0], policy).expect("set policy");
        ks.trim(&ids[0], 2).expect("trim");
    }
    released_clean("ML-DSA: reopened, signed, trimmed", &seeds, 20);
}
