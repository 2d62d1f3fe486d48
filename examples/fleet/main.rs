//! `fleet`: three gateway nodes sharing one keystore through etcd, under
//! rotations from every node and with the etcd leader killed mid-run.
//!
//! ```text
//! cargo run --release --features etcd --example fleet [-- --etcd URL[,URL...]]
//!     [--duration SECS] [--rotate-every MS] [--lanes N] [--keep-leader]
//! ```
//!
//! With no `--etcd`, it starts a 3-member etcd cluster on loopback ports in
//! a temporary directory (the `etcd` binary of Debian's `etcd-server`; a
//! clear message if it is missing; the leader is found with `etcdctl`, of
//! Debian's `etcd-client`). It starts three nodes at once, each
//! what `gateway serve --etcd` embeds: a keystore on etcd (`kms_etcd`), its
//! follower, and the KMS actor that signs and verifies tokens. They find
//! one signing key through its signing pointer. Then, for `--duration`:
//! * every node rotates the key every `--rotate-every` ms (±50 %);
//! * every node issues tokens that each other node verifies, once the
//!   token's key version has reached it, with a forged copy that must be
//!   refused (`--lanes` concurrent issuers per node; 0 for none);
//! * a third of the way in, the etcd leader is killed; half way, it is
//!   started again (not with `--etcd`: that cluster is not ours; not with
//!   `--keep-leader`).
//!
//! Then a fourth node joins and reads the store as it ended; once every
//! node holds the same versions of the key, it reports: rotations made, lost
//! to other nodes (`Conflict`) and of unknown outcome (`Unavailable`);
//! propagation, from a `rotate` call's start to the new version being
//! visible on all three nodes (p50/p99/max); and the verdicts. Exit 1 on
//! any wrong verdict, a version that never reached a node, a version made
//! twice (a fork), a rotation answered `Ok` that the final history lacks,
//! or nodes that end with different keys; exit 2 on a usage error.
//!
//! Each run uses a fresh prefix (`/kms-fleet-<random>`) under a fresh
//! master key, so runs against an existing cluster do not meet.

mod node;
mod workload;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use kms::core::seal::{Keyring, SealKey};
use kms::core::Attestation;
use kms::etcd::EtcdConfig;
use kms_testkit::etcd::EtcdCluster;
use node::Node;
use workload::{Rotations, Verdicts};

/// The nodes of the fleet (counts).
const NODES: usize = 3;

#[derive(Parser)]
#[command(about = "Three gateway nodes sharing one keystore through etcd")]
struct Args {
    /// An existing etcd cluster's client URLs, comma-separated (default:
    /// start a 3-member cluster on loopback ports).
    #[arg(long, value_name = "URL[,URL...]")]
    etcd: Option<String>,
    /// Seconds of rotations and cross-verification.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Milliseconds between one node's rotations (±50 %).
    #[arg(long, default_value_t = 60)]
    rotate_every: u64,
    /// Concurrent token issuers per node (0: rotations alone, to measure
    /// propagation on a quiet machine).
    #[arg(long, default_value_t = 2)]
    lanes: usize,
    /// Leave the etcd leader alone (the run measures steady propagation).
    #[arg(long)]
    keep_leader: bool,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let args = Args::parse();
    match run(args).await {
        Ok(true) => {
            println!("fleet: every verdict right, no rotation lost");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("fleet: FAILED (see above)");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("fleet: {e}");
            ExitCode::from(1)
        }
    }
}

/// Runs the fleet; `Ok(false)` when a check failed, `Err` when it could
/// not run.
async fn run(args: Args) -> Result<bool, String> {
    let duration = Duration::from_secs(args.duration.max(1));
    let (cluster, endpoints) = match &args.etcd {
        Some(urls) => (None, urls.split(',').map(str::to_owned).collect()),
        None => {
            let cluster = tokio::task::spawn_blocking(|| EtcdCluster::start(3))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("starting etcd: {e}"))?;
            let endpoints = cluster.endpoints();
            (Some(cluster), endpoints)
        }
    };
    let prefix = format!("/kms-fleet-{:016x}", rand::random::<u64>());
    // Every node holds the same master key; wiped when the run ends.
    let master = zeroize::Zeroizing::new(rand::random::<[u8; 32]>());
    // A new prefix each run: its nodes start the store.
    let config = EtcdConfig::new(endpoints.clone())
        .with_prefix(prefix.clone())
        .with_create(true);
    println!(
        "fleet: {NODES} nodes on etcd {} (prefix {prefix}), {} s",
        endpoints.join(","),
        duration.as_secs()
    );

    // Started at once: one store, one signing key.
    let opening: Vec<_> = (0..NODES)
        .map(|_| {
            let config = config.clone();
            let keyring = SealKey::from_bytes("fleet-master", 1, &master).map(Keyring::from);
            tokio::task::spawn_blocking(move || Node::open(config, keyring?))
        })
        .collect();
    let mut nodes = Vec::with_capacity(NODES);
    for (i, opened) in opening.into_iter().enumerate() {
        let opened = opened
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("node {i}: {e}"))?;
        nodes.push(opened.serve().map_err(|e| format!("node {i}: {e}"))?);
    }
    let key = nodes[0].key.clone();
    if nodes.iter().any(|n| n.key != key) {
        let keys: Vec<String> = nodes.iter().map(|n| n.key.to_string()).collect();
        println!("fleet: the nodes sign with different keys: {keys:?}");
        return Ok(false);
    }
    println!("fleet: signing key {key} (one for all nodes)");
    let nodes = Arc::new(nodes);

    let start = Instant::now();
    let deadline = start + duration;
    let rotators: Vec<_> = (0..NODES)
        .map(|i| {
            let nodes = nodes.clone();
            let every = Duration::from_millis(args.rotate_every.max(1));
            tokio::task::spawn_blocking(move || workload::rotate(&nodes[i], every, deadline))
        })
        .collect();
    let verdicts = Arc::new(Verdicts::default());
    let mut verifiers = Vec::new();
    for from in 0..NODES {
        for lane in 0..args.lanes {
            verifiers.push(tokio::spawn(workload::cross_verify(
                nodes.clone(),
                from,
                lane,
                deadline,
                verdicts.clone(),
            )));
        }
    }
    let keep_leader = args.keep_leader;
    let chaos = cluster.map(|cluster| {
        tokio::task::spawn_blocking(move || {
            if keep_leader {
                std::thread::sleep(duration);
                return Ok(cluster);
            }
            kill_and_restart_leader(cluster, start, duration)
        })
    });

    let mut rotations = Vec::with_capacity(NODES);
    for rotator in rotators {
        rotations.push(rotator.await.map_err(|e| e.to_string())?);
    }
    for verifier in verifiers {
        verifier.await.map_err(|e| e.to_string())?;
    }
    let _cluster = match chaos {
        Some(chaos) => Some(chaos.await.map_err(|e| e.to_string())??),
        None => None,
    };
    // The store as it ended, read by a node that joins now: what every
    // node must come to.
    let joined = {
        let keyring = SealKey::from_bytes("fleet-master", 1, &master).map(Keyring::from);
        let config = config.clone();
        tokio::task::spawn_blocking(move || kms::etcd::open(config, keyring?))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("reading the store at the end: {e}"))?
    };
    let stored = joined
        .0
        .attest(&key)
        .map_err(|e| format!("the key in the store at the end: {e}"))?;
    let ok = check(&nodes, &stored, &rotations, &verdicts, args.lanes).await;
    let nodes = Arc::try_unwrap(nodes).map_err(|_| "a node is still in use".to_owned())?;
    for node in nodes {
        if let Ok(node) = Arc::try_unwrap(node) {
            node.shutdown().await;
        }
    }
    Ok(ok)
}

/// A third of the way in, kills the etcd leader; half way, starts it
/// again. Returns the cluster, to be dropped (stopped) at the end.
fn kill_and_restart_leader(
    mut cluster: EtcdCluster,
    start: Instant,
    duration: Duration,
) -> Result<EtcdCluster, String> {
    std::thread::sleep((start + duration / 3).saturating_duration_since(Instant::now()));
    let leader = cluster
        .wait_leader()
        .map_err(|e| format!("etcd leader: {e}"))?;
    cluster.kill(leader);
    println!(
        "fleet: killed the etcd leader (member {leader}) at {:.1} s",
        start.elapsed().as_secs_f64()
    );
    std::thread::sleep((start + duration / 2).saturating_duration_since(Instant::now()));
    cluster
        .restart(leader)
        .map_err(|e| format!("restarting etcd member {leader}: {e}"))?;
    println!(
        "fleet: restarted member {leader} at {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok(cluster)
}

/// Waits until the nodes agree, checks the history and verdicts, prints
/// the report; whether every check passed.
async fn check(
    nodes: &[Arc<Node>],
    stored: &Attestation,
    rotations: &[Rotations],
    verdicts: &Verdicts,
    lanes: usize,
) -> bool {
    let mut ok = true;
    // Every node holds what the store holds (at most 20 s).
    let settle = Instant::now() + Duration::from_secs(20);
    while nodes
        .iter()
        .any(|n| n.keystore.attest(&n.key).as_ref() != Ok(stored))
    {
        if Instant::now() >= settle {
            let heads: Vec<u32> = nodes.iter().map(|n| n.head()).collect();
            println!(
                "fleet: the nodes did not come to the store's v{} within 20 s: heads {heads:?}",
                stored.head.version()
            );
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for node in nodes {
        node.scan();
    }
    let head = stored.head.version();

    let made: Vec<_> = rotations.iter().flat_map(|r| r.made.iter()).collect();
    let mut versions: Vec<u32> = made.iter().map(|r| r.version).collect();
    versions.sort_unstable();
    let distinct = versions.windows(2).all(|w| w[0] != w[1]);
    let conflicts: u64 = rotations.iter().map(|r| r.conflicts).sum();
    let unknown: u64 = rotations.iter().map(|r| r.unknown).sum();
    let errors: Vec<&String> = rotations.iter().flat_map(|r| &r.errors).collect();
    let count = made.len() as u64;
    let added = u64::from(head.saturating_sub(1));
    println!(
        "fleet: rotations: {count} made, {conflicts} lost to other nodes (Conflict), \
         {unknown} of unknown outcome (Unavailable), {} other errors; every node at v{head}",
        errors.len()
    );
    if !distinct {
        println!("fleet: a version was made twice (a fork)");
        ok = false;
    }
    // Each version answered Ok is in the history with the secret it was
    // made with (its public key), and the rest are at most the unknowns.
    let kept = made.iter().all(|r| {
        let index = r
            .version
            .checked_sub(1)
            .and_then(|i| usize::try_from(i).ok());
        index
            .and_then(|i| stored.versions.get(i))
            .map(|v| v.public_key.as_slice())
            == Some(r.public_key.as_slice())
    });
    if !kept || added < count || added > count + unknown {
        println!(
            "fleet: the history (v2..=v{head}) does not hold the {count} rotations answered Ok, \
             each with the secret it made, \
             plus at most the {unknown} of unknown outcome"
        );
        ok = false;
    }
    for e in &errors {
        println!("fleet: rotation error: {e}");
        ok = false;
    }

    // From a rotate call's start to the version being on every node.
    let mut propagation: Vec<Duration> = Vec::with_capacity(made.len());
    for rotation in &made {
        let seen: Option<Vec<Instant>> = nodes.iter().map(|n| n.seen(rotation.version)).collect();
        match seen.and_then(|s| s.into_iter().max()) {
            Some(last) => propagation.push(last.saturating_duration_since(rotation.started)),
            None => {
                println!("fleet: v{} is missing on a node", rotation.version);
                ok = false;
            }
        }
    }
    propagation.sort_unstable();
    if !propagation.is_empty() {
        let at = |q: f64| {
            let i = ((propagation.len() - 1) as f64 * q).round() as usize;
            propagation[i].as_secs_f64() * 1e3
        };
        println!(
            "fleet: propagation (rotate call → visible on all {NODES} nodes): \
             p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (n = {})",
            at(0.5),
            at(0.99),
            at(1.0),
            propagation.len()
        );
    }

    let accepted = Verdicts::get(&verdicts.accepted);
    let refused = Verdicts::get(&verdicts.refused);
    let wrong = Verdicts::get(&verdicts.wrong);
    let never = Verdicts::get(&verdicts.never_arrived);
    println!(
        "fleet: tokens: {accepted} valid accepted on another node, {refused} forged refused, \
         {wrong} wrong verdicts, {never} key versions that never arrived"
    );
    let restarts: Vec<u64> = nodes.iter().map(|n| n.follower.watch_restarts()).collect();
    println!("fleet: watch restarts per node: {restarts:?}");
    let verified = lanes == 0 || (accepted > 0 && refused > 0);
    ok && wrong == 0 && never == 0 && verified
}
