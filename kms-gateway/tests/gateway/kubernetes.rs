//! The Kubernetes manifests of `deploy/kubernetes`, read as the cluster
//! would: every YAML document parses; every flag a container's arguments
//! or a ConfigMap's `serve.toml` names is one `serve --help` lists; the
//! base's `serve.toml` starts the gateway, whose probes' paths are then
//! served; the grace period covers the shutdown delay and the drain; the
//! mounted secrets' modes pass the gateway's secret-file rules; and the
//! pod runs as the security context asks.

use crate::support::serving;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use serving::{gateway, http, Serving};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

/// Every file under `dir` whose name ends with `suffix`, sorted.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(files(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// Every YAML document of every manifest, with its file.
fn documents() -> Vec<(PathBuf, Value)> {
    let mut all = Vec::new();
    for path in files(&root(), ".yaml") {
        let text = std::fs::read_to_string(&path).expect("read");
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value =
                Value::deserialize(document).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if !value.is_null() {
                all.push((path.clone(), value));
            }
        }
    }
    all
}

/// Every container of a workload document (a Deployment or a patch of one).
fn containers(document: &Value) -> Vec<&Value> {
    document["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|list| list.iter().collect())
        .unwrap_or_default()
}

/// The long flags `serve --help` lists.
fn serve_flags() -> BTreeSet<String> {
    let output = std::process::Command::new(gateway())
        .args(["serve", "--help"])
        .output()
        .expect("serve --help");
    assert!(output.status.success());
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .filter_map(|word| word.strip_prefix("--"))
        .map(|flag| {
            flag.trim_end_matches([',', '.', ')'])
                .split(['=', '['])
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .filter(|flag| !flag.is_empty())
        .collect()
}

/// A `serve.toml` file's table.
fn serve_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).expect("read");
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_flag_the_manifests_name_is_a_flag_of_serve() {
    let known = serve_flags();
    assert!(known.contains("shutdown-delay"), "{known:?}");
    let mut named = Vec::new();
    for (path, document) in documents() {
        for container in containers(&document) {
            for arg in container["args"].as_array().into_iter().flatten() {
                let arg = arg.as_str().expect("an argument is a string");
                if let Some(flag) = arg.strip_prefix("--") {
                    named.push((
                        path.clone(),
                        flag.split('=').next().unwrap_or("").to_owned(),
                    ));
                }
            }
        }
    }
    let configs = files(&root(), "serve.toml");
    assert_eq!(
        configs.len(),
        2,
        "the base's and the fleet overlay's: {configs:?}"
    );
    for path in &configs {
        for key in serve_toml(path).keys() {
            named.push((path.clone(), key.clone()));
        }
    }
    assert!(named.len() > 15, "{named:?}");
    for (path, flag) in named {
        assert!(
            known.contains(&flag),
            "{}: --{flag} is not a serve flag",
            path.display()
        );
    }
}

#[test]
fn the_base_config_starts_and_its_probes_paths_are_served() {
    let deployment = documents()
        .into_iter()
        .find(|(path, document)| {
            document["kind"] == "Deployment" && path.ends_with("base/deployment.yaml")
        })
        .map(|(_, document)| document)
        .expect("the base's Deployment");
    let container = containers(&deployment)[0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string"))
        .collect();
    assert_eq!(args, ["serve", "--config", "/etc/kms-gateway/serve.toml"]);
    let config = root().join("base/serve.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("admin-secret");
    std::fs::write(&secret, "k".repeat(40)).expect("write");
    use std::os::unix::fs::PermissionsExt;
    // As the kubelet mounts it: the Secret volume's defaultMode.
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o440)).expect("chmod");
    // The command line wins over the file: loopback ports of the test's,
    // the secret where the test wrote it; everything else as deployed.
    let s = Serving::start(&[
        "--config",
        config.to_str().expect("utf-8"),
        "--metrics-listen",
        "127.0.0.1:0",
        "--admin-token-file",
        secret.to_str().expect("utf-8"),
        "--jwks-fetch-timeout",
        "1",
        // The deployed delay would hold the test's stop for 10 s.
        "--shutdown-delay",
        "0",
    ]);
    for probe in ["readinessProbe", "livenessProbe"] {
        let path = container[probe]["httpGet"]["path"].as_str().expect("path");
        assert_eq!(container[probe]["httpGet"]["port"], "public");
        let (status, body) = http(s.public, "GET", path, &[], "");
        // /readyz is 503 (`issuer_keys`) while the example issuer cannot
        // be fetched; served either way, never 404.
        assert!(
            status == 200 || status == 503,
            "{probe} {path}: {status} {body}"
        );
        if status == 503 {
            assert!(body.contains("issuer_keys"), "{body}");
        }
    }
    assert_eq!(s.stop(), 0);
}

#[test]
fn the_pod_drains_in_its_grace_period_and_mounts_its_secrets_as_the_gateway_requires() {
    let documents = documents();
    let deployment = &documents
        .iter()
        .find(|(path, d)| d["kind"] == "Deployment" && path.ends_with("base/deployment.yaml"))
        .expect("the base's Deployment")
        .1;
    let pod = &deployment["spec"]["template"]["spec"];
    for path in files(&root(), "serve.toml") {
        let config = serve_toml(&path);
        let seconds = |key: &str| config[key].as_integer().expect(key);
        let grace = pod["terminationGracePeriodSeconds"]
            .as_i64()
            .expect("grace");
        assert!(
            grace >= seconds("shutdown-delay") + seconds("drain-timeout") + 5,
            "{}: grace {grace}",
            path.display()
        );
        // The admin face stays inside the pod.
        let admin = config["admin-listen"].as_str().expect("admin-listen");
        assert!(admin.starts_with("127.0.0.1:"), "{admin}");
        assert_eq!(config["allow-group-readable-secrets"].as_bool(), Some(true));
    }
    // Every Secret volume, in the base and the overlay: root-owned files
    // with this mode must pass the secret-file rules (nothing for others,
    // no group write; group read with --allow-group-readable-secrets).
    let mut secrets = 0;
    for (path, document) in &documents {
        let volumes = document["spec"]["template"]["spec"]["volumes"].as_array();
        for volume in volumes.into_iter().flatten() {
            let Some(secret) = volume.get("secret") else {
                continue;
            };
            secrets += 1;
            let mode = secret["defaultMode"].as_u64().expect("defaultMode");
            assert_eq!(mode & 0o027, 0, "{}: mode {mode:o}", path.display());
            let mounted = containers(document).iter().any(|c| {
                c["volumeMounts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|m| m["name"] == volume["name"] && m["readOnly"] == true)
            });
            assert!(
                mounted,
                "{}: {} is not mounted read-only",
                path.display(),
                volume["name"]
            );
        }
    }
    assert_eq!(
        secrets, 3,
        "the admin secret, the master key and etcd's files"
    );
    let security = &pod["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
    let container = &pod["containers"][0]["securityContext"];
    assert_eq!(container["readOnlyRootFilesystem"], true);
    assert_eq!(container["allowPrivilegeEscalation"], false);
    assert_eq!(
        container["capabilities"]["drop"],
        serde_json::json!(["ALL"])
    );
    let kinds: BTreeSet<&str> = documents
        .iter()
        .filter_map(|(_, d)| d["kind"].as_str())
        .collect();
    for kind in [
        "Deployment",
        "Service",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Kustomization",
    ] {
        assert!(kinds.contains(kind), "no {kind}: {kinds:?}");
    }
}
