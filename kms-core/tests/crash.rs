//! Crash test of the durable keystore. A child process (this same binary,
//! told by an environment variable) writes to the store and prints an
//! acknowledgement after each call returns; the parent kills it with
//! SIGKILL at a random moment, reopens the store and checks it.
//!
//! * **Writes, 200 rounds:** the child rotates a shared key and creates
//!   and rotates keys of its own. After each kill: the store opens (never
//!   an authentication failure), every acknowledged key and version is
//!   there (never a lost acknowledged write), no head went back and no
//!   version's public key changed (never an older or torn state), and
//!   every key still signs and verifies.
//! * **Creating a store, and migrating a format-1 store** (the fixture in
//!   `testdata/keystore-v1/`), killed at random moments: afterwards the
//!   directory holds a whole store (a created one opens; the migrated one
//!   holds every key of the fixture) or, for a create, none, and a new
//!   create succeeds; never a directory that neither opens nor creates.
//! * **Master-key rewrap:** the child opens the store with the keyring
//!   (old, new) and rewraps it, killed at random moments; after each kill
//!   the store opens with the keyring and holds the same keys. When a
//!   child finishes, the store opens with the new key alone.
//!
//! * **Moving between roots:** the child moves a store from a file root to
//!   a wrapping root, to another, and back to a new key file
//!   (`Keystore::move_to_root`), killed at random moments; after each kill
//!   exactly one of the roots opens the store, holding the same keys.
//!
//! Run alone: `cargo test -p kms-core --test crash`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kms_core::root::{FileRoot, MasterKeyRoot, RootKind, RootRecord, ROOT_FILE};
use kms_core::seal::{Keyring, SealKey};
use kms_core::{KeyId, Keystore};
use zeroize::Zeroizing;

#[path = "core/support/test_root.rs"]
mod test_root;

use test_root::TestRoot;

const ROUNDS: u32 = 200;
const CHILD_DIR: &str = "KMS_CRASH_CHILD_DIR";
const CHILD_KEY: &str = "KMS_CRASH_CHILD_KEY";
const CHILD_MODE: &str = "KMS_CRASH_CHILD_MODE";

fn master() -> SealKey {
    SealKey::from_bytes("crash-master", 1, &[9u8; 32]).expect("master key")
}

fn next_master() -> SealKey {
    SealKey::from_bytes("crash-master", 2, &[10u8; 32]).expect("master key")
}

fn fixture_master() -> SealKey {
    SealKey::from_bytes("fixture-master", 1, &[0x42; 32]).expect("master key")
}

fn keyring() -> Keyring {
    Keyring::new([master(), next_master()]).expect("keyring")
}

fn main() {
    match (
        std::env::var(CHILD_DIR),
        std::env::var(CHILD_KEY),
        std::env::var(CHILD_MODE).as_deref(),
    ) {
        (Ok(dir), _, Ok("rewrap")) => rewrap_child(Path::new(&dir)),
        (Ok(dir), Ok(round), Ok("move")) => move_child(Path::new(&dir), &round),
        (Ok(dir), _, Ok("create")) => {
            ack(format_args!("ready"));
            Keystore::create(&dir, master()).expect("child: create");
            ack(format_args!("done"));
        }
        (Ok(dir), _, Ok("migrate")) => {
            ack(format_args!("ready"));
            Keystore::open(&dir, fixture_master()).expect("child: migrate");
            ack(format_args!("done"));
        }
        (Ok(dir), Ok(key), _) => write_child(Path::new(&dir), &key),
        _ => parent(),
    }
}

fn ack(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    out.write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .expect("child: ack");
}

/// Rotates `key` and creates and rotates keys of its own, acknowledging
/// each write: `rotated <key> <version>`, `created <key>`.
fn write_child(dir: &Path, key: &str) {
    let shared: KeyId = key.parse().expect("key id");
    let ks = Keystore::open(dir, master()).expect("child: open");
    ack(format_args!("ready"));
    for i in 0u32.. {
        let head = ks.rotate(&shared).expect("child: rotate");
        ack(format_args!("rotated {head}"));
        if i % 4 == 0 {
            let own = ks
                .create_ed25519("acme", &format!("crash{i}"))
                .expect("child: create");
            ack(format_args!("created {own}"));
            let head = ks.rotate(&own).expect("child: rotate");
            ack(format_args!("rotated {head}"));
        }
    }
}

/// Rewraps the store under the keyring's newest key, then says `done`.
fn rewrap_child(dir: &Path) {
    let ks = Keystore::open_with_keyring(dir, keyring()).expect("child: open");
    ack(format_args!("ready"));
    ks.rewrap().expect("child: rewrap");
    ack(format_args!("done"));
}

/// The master key of the moved store, as a file root.
fn file_root() -> FileRoot {
    FileRoot::new(Zeroizing::new([9; 32]), "crash key file")
}

/// The root the store in `dir` is under, by its record.
fn current_root(dir: &Path) -> Box<dyn MasterKeyRoot> {
    let record = match std::fs::read(dir.join(ROOT_FILE)) {
        Ok(text) => RootRecord::from_text(&text, "crash").expect("a record"),
        Err(_) => return Box::new(file_root()),
    };
    match (record.kind, record.root.as_str()) {
        (RootKind::File, _) => Box::new(file_root()),
        (_, "test root 1") => Box::new(TestRoot::new(1)),
        _ => Box::new(TestRoot::new(2)),
    }
}

/// Moves the store to the next root of the cycle: a file, test root 1,
/// test root 2, a new key file named after `round`; then says `done`.
fn move_child(dir: &Path, round: &str) {
    let from = current_root(dir);
    let to: Box<dyn MasterKeyRoot> = match (from.kind(), from.describe().as_str()) {
        (RootKind::File, _) => Box::new(TestRoot::new(1)),
        (_, "test root 1") => Box::new(TestRoot::new(2)),
        _ => Box::new(FileRoot::new_file(
            dir.with_file_name(format!("key-{round}.hex")),
        )),
    };
    ack(format_args!("ready"));
    Keystore::move_to_root(dir, from.as_ref(), to.as_ref(), "crash-master").expect("child: move");
    ack(format_args!("done"));
}

/// Kills moves between roots (module docs).
fn kill_moves() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let key = Keystore::create_under(&store, &file_root(), "crash-master")
        .expect("create")
        .create_ed25519("acme", "moved")
        .expect("key");
    let public = |ks: &Keystore| {
        ks.attest(&key).expect("attest").versions[0]
            .public_key
            .clone()
    };
    let expected =
        public(&Keystore::open_under(&store, &file_root(), "crash-master").expect("open"));
    let (mut done, mut killed, mut moved, mut under) = (0, 0, 0, 0);
    for round in 0..60 {
        let before = under;
        let acks = run_and_kill_with(&store, "move", &round.to_string(), 15_000);
        let roots: [Box<dyn MasterKeyRoot>; 3] = [
            Box::new(file_root()),
            Box::new(TestRoot::new(1)),
            Box::new(TestRoot::new(2)),
        ];
        // Each tried alone: a keystore left open would hold the store.
        let mut opened = Vec::new();
        for (i, root) in roots.iter().enumerate() {
            match Keystore::open_under(&store, root.as_ref(), "crash-master") {
                Ok(ks) => opened.push((i, public(&ks))),
                Err(kms_core::KmsError::WrongRoot { .. } | kms_core::KmsError::Root { .. }) => {}
                Err(e) => panic!("move round {round} (acks {acks:?}): {e}"),
            }
        }
        assert_eq!(
            opened.len(),
            1,
            "move round {round} (acks {acks:?}): one root opens it"
        );
        assert_eq!(opened[0].1, expected, "move round {round}: the same key");
        if opened[0].0 != under {
            moved += 1;
            under = opened[0].0;
        }
        if acks.iter().any(|a| a == "done") {
            assert_ne!(
                under, before,
                "move round {round}: done, so under the new root"
            );
            done += 1;
        } else {
            killed += 1;
        }
    }
    assert!(
        moved > 0 && done > 0,
        "{moved} moved, {done} done: the moves ran"
    );
    println!(
        "crash test: 60 moves between roots, {killed} killed before they said done ({moved} \
         moved in all), {done} finished; one root opened the store after each, with the same \
         key ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
}

fn random_below(n: u32) -> u32 {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("random");
    u32::from_le_bytes(bytes) % n
}

/// Runs the child in `mode` on `dir`, kills it a random time of up to
/// `max_wait_us` after it says it has opened the store (`ready`), and
/// returns the lines it acknowledged after that.
fn run_and_kill(dir: &Path, mode: &str, key: &KeyId, max_wait_us: u32) -> Vec<String> {
    run_and_kill_with(dir, mode, &key.to_string(), max_wait_us)
}

/// [`run_and_kill`] with `key` any text the child reads.
fn run_and_kill_with(dir: &Path, mode: &str, key: &str, max_wait_us: u32) -> Vec<String> {
    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .env(CHILD_DIR, dir)
        .env(CHILD_KEY, key)
        .env(CHILD_MODE, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("child stdout");
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
        if lines.next().as_deref() == Some("ready") {
            let _ = ready_tx.send(());
        }
        lines.collect::<Vec<String>>()
    });
    // A child that fails to open the store says so on stderr and exits.
    let _ = ready.recv_timeout(Duration::from_secs(60));
    std::thread::sleep(Duration::from_micros(u64::from(random_below(max_wait_us))));
    // SIGKILL on Unix: no destructor, no flush, no chance to finish a
    // write. It fails only if the child has exited already.
    let _ = child.kill();
    let status = child.wait().expect("reap the child");
    // Killed (no exit code), or finished and exited 0: a child that
    // failed (its write or move refused) fails the test.
    assert!(
        status.code().is_none_or(|code| code == 0),
        "the {mode} child failed: {status}"
    );
    // The pipe closes when the child dies, so every ack it printed is in.
    reader.join().expect("reader")
}

/// What the parent knows of each key: the newest acknowledged head and the
/// public keys of the versions seen so far.
#[derive(Default)]
struct Known {
    acked: HashMap<KeyId, u32>,
    seen: HashMap<KeyId, Vec<Vec<u8>>>,
}

impl Known {
    fn acknowledge(&mut self, line: &str) {
        let (what, key) = line.split_once(' ').expect("an ack");
        let key: KeyId = key.parse().expect("key id");
        let version = match what {
            "created" => 1,
            "rotated" => key.version(),
            _ => panic!("unknown ack {line}"),
        };
        let newest = self.acked.entry(key.with_version_one()).or_default();
        *newest = (*newest).max(version);
    }

    /// Checks the reopened store against everything acknowledged and seen.
    fn check(&mut self, ks: &Keystore, after: &str) {
        for (key, &acked) in &self.acked {
            let attestation = ks
                .attest(key)
                .unwrap_or_else(|e| panic!("{after}: acknowledged key {key} is lost: {e}"));
            let head = attestation.head.version();
            assert!(
                head >= acked,
                "{after}: {key} is at v{head}, older than the acknowledged v{acked}"
            );
            assert_eq!(attestation.versions.len(), head as usize, "whole versions");
            let now: Vec<Vec<u8>> = attestation
                .versions
                .iter()
                .map(|v| v.public_key.clone())
                .collect();
            let seen = self.seen.entry(key.clone()).or_default();
            assert!(
                now.len() >= seen.len() && now[..seen.len()] == seen[..],
                "{after}: {key} went back or a version changed"
            );
            *seen = now;
            let (signer, signature) = ks.sign(key, b"after the crash").expect("sign");
            ks.verify(&signer, b"after the crash", &signature)
                .expect("verify");
        }
    }
}

trait VersionOne {
    fn with_version_one(&self) -> KeyId;
}

impl VersionOne for KeyId {
    fn with_version_one(&self) -> KeyId {
        let text = self.to_string();
        let (stem, _) = text.rsplit_once(":v").expect("a version");
        format!("{stem}:v1").parse().expect("key id")
    }
}

/// Kills creates and migrations (module docs).
fn kill_creates_and_migrations(key: &KeyId) {
    let started = Instant::now();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/keystore-v1");
    let (mut whole, mut none) = (0, 0);
    for round in 0..40 {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("store");
        let acks = run_and_kill(&store, "create", key, 6_000);
        match Keystore::open(&store, master()) {
            Ok(_) => whole += 1,
            Err(kms_core::KmsError::StoreNotFound { .. }) if acks.is_empty() => {
                none += 1;
                Keystore::create(&store, master())
                    .unwrap_or_else(|e| panic!("create round {round}: a new create fails: {e}"));
            }
            Err(e) => panic!("create round {round} (acks {acks:?}): {e}"),
        }

        let migrated = dir.path().join("migrated");
        std::fs::create_dir(&migrated).expect("dir");
        std::fs::copy(fixture.join("keystore.kms"), migrated.join("keystore.kms")).expect("copy");
        run_and_kill(&migrated, "migrate", key, 6_000);
        let ks = Keystore::open(&migrated, fixture_master())
            .unwrap_or_else(|e| panic!("migration round {round}: does not open: {e}"));
        let expected = std::fs::read_to_string(fixture.join("expected.tsv")).expect("tsv");
        for line in expected.lines().filter(|l| !l.starts_with('#')) {
            let fields: Vec<&str> = line.split('\t').collect();
            let key: KeyId = fields[0].parse().expect("key id");
            let version: usize = fields[1].parse().expect("version");
            let attestation = ks.attest(&key).expect("a migrated key");
            let public_key: String = attestation.versions[version - 1]
                .public_key
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(public_key, fields[2], "migration round {round}");
        }
    }
    println!(
        "crash test: 40 SIGKILLs during a create ({whole} left a store, {none} none) and 40 during a migration, each left a store that opens or none ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
}

fn parent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Keystore::create(dir.path(), master()).expect("create the store");
    let shared = store
        .create_ed25519("acme", "crash")
        .expect("create the key");
    drop(store);
    kill_creates_and_migrations(&shared);
    kill_moves();
    let started = Instant::now();
    let mut known = Known::default();
    known.acknowledge(&format!("created {shared}"));
    let mut writes = 0;
    for round in 1..=ROUNDS {
        let acks = run_and_kill(dir.path(), "write", &shared, 5_000);
        writes += acks.len();
        for line in &acks {
            known.acknowledge(line);
        }
        let ks = Keystore::open(dir.path(), master())
            .unwrap_or_else(|e| panic!("after kill {round}: the store does not open: {e}"));
        known.check(&ks, &format!("after kill {round}"));
    }
    let keys = known.acked.len();
    println!(
        "crash test: {ROUNDS} SIGKILLs during writes, {writes} acknowledged writes to {keys} keys, all kept ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let (mut kills, mut midway) = (0, 0);
    loop {
        let acks = run_and_kill(dir.path(), "rewrap", &shared, 20_000);
        let ks = Keystore::open_with_keyring(dir.path(), keyring())
            .unwrap_or_else(|e| panic!("after rewrap kill {kills}: does not open: {e}"));
        known.check(&ks, &format!("after rewrap kill {kills}"));
        drop(ks);
        if acks.iter().any(|a| a == "done") {
            break;
        }
        kills += 1;
        if Keystore::open(dir.path(), next_master()).is_err() {
            midway += 1;
        }
        assert!(kills < 100, "the rewrap never finished");
    }
    let ks = Keystore::open(dir.path(), next_master()).expect("the new key alone opens it");
    known.check(&ks, "after the rewrap");
    println!(
        "crash test: {kills} SIGKILLs during a rewrap ({midway} left it half done), \
         the store opened with the keyring each time and with the new key alone after ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
}
