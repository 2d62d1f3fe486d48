//! An etcd cluster of `etcd` processes on loopback ports in a temporary
//! directory, for the fleet example and the etcd tests: started, killed,
//! restarted and stopped by its owner (every member is killed on drop).
//! With [`EtcdCluster::start_tls`] its clients speak TLS and must present a
//! certificate from the test's CA; [`EtcdCluster::etcdctl`] runs
//! `etcdctl` against it with the right flags.
//!
//! The binary is `etcd` on `PATH` (Debian: `apt-get install etcd-server`).

use std::io;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One member: its name, ports and process (while running).
#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// A running cluster.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Member>,
    dir: tempfile::TempDir,
    initial_cluster: String,
    /// Client TLS, for a cluster started with [`EtcdCluster::start_tls`].
    tls: Option<TlsFiles>,
}

/// PEM files for client TLS: the CA that signed the members' and the
/// clients' certificates, a member certificate for 127.0.0.1 and its key,
/// and a client certificate and key `etcdctl` presents.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA certificate both sides trust.
    pub ca: PathBuf,
    /// The members' certificate, for 127.0.0.1.
    pub server_cert: PathBuf,
    /// Its private key.
    pub server_key: PathBuf,
    /// The client certificate `etcdctl` presents.
    pub client_cert: PathBuf,
    /// Its private key.
    pub client_key: PathBuf,
}

/// A port the OS has free on 127.0.0.1 now.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl EtcdCluster {
    /// Starts `size` members and waits (at most 20 s each) until each
    /// accepts connections and one leads.
    ///
    /// # Errors
    /// `NotFound` with a message saying how to install it if there is no
    /// `etcd` binary; any other error starting a member; `TimedOut` if a
    /// member does not come up.
    pub fn start(size: usize) -> io::Result<EtcdCluster> {
        EtcdCluster::start_with(size, None)
    }

    /// [`EtcdCluster::start`], its clients on TLS with client certificates
    /// required (`--client-cert-auth`).
    ///
    /// # Errors
    /// As [`EtcdCluster::start`].
    pub fn start_tls(size: usize, tls: TlsFiles) -> io::Result<EtcdCluster> {
        EtcdCluster::start_with(size, Some(tls))
    }

    fn start_with(size: usize, tls: Option<TlsFiles>) -> io::Result<EtcdCluster> {
        if Command::new("etcd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no `etcd` binary on PATH: install the distribution's etcd-server package \
                 (Debian: apt-get install etcd-server)",
            ));
        }
        let dir = tempfile::tempdir()?;
        let mut members = Vec::with_capacity(size);
        for i in 0..size {
            members.push(Member {
                name: format!("m{i}"),
                client_port: free_port()?,
                peer_port: free_port()?,
                child: None,
            });
        }
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = EtcdCluster {
            members,
            dir,
            initial_cluster,
            tls,
        };
        for i in 0..size {
            cluster.spawn(i)?;
        }
        for i in 0..size {
            cluster.wait_up(i)?;
        }
        cluster.wait_leader()?;
        Ok(cluster)
    }

    /// Waits (at most 20 s) until a member says it leads.
    ///
    /// # Errors
    /// `TimedOut` if none does.
    pub fn wait_leader(&self) -> io::Result<usize> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(leader) = self.leader() {
                return Ok(leader);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no etcd leader"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(&self.members[i].name)
    }

    fn spawn(&mut self, i: usize) -> io::Result<()> {
        let data_dir = self.data_dir(i);
        let m = &self.members[i];
        let client = self.endpoint(i);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let log = std::fs::File::create(self.dir.path().join(format!("{}.log", m.name)))?;
        let mut command = Command::new("etcd");
        if let Some(tls) = &self.tls {
            command
                .arg("--cert-file")
                .arg(&tls.server_cert)
                .arg("--key-file")
                .arg(&tls.server_key)
                .arg("--trusted-ca-file")
                .arg(&tls.ca)
                .arg("--client-cert-auth")
                // Auth tokens that expire after 2 s unused (default 300):
                // a client must authenticate again on its own.
                .args(["--auth-token-ttl", "2"]);
        }
        let child = command
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "kms-test"])
            // Short elections, so a lost leader is replaced within a second.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        self.members[i].child = Some(child);
        Ok(())
    }

    fn wait_up(&self, i: usize) -> io::Result<()> {
        let addr = format!("127.0.0.1:{}", self.members[i].client_port);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if TcpStream::connect(&addr).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "etcd member {} did not come up on {addr}",
                self.members[i].name
            ),
        ))
    }

    /// The client URLs of every member.
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.endpoint(i)).collect()
    }

    /// The client URL of member `i` (`https://` on TLS).
    pub fn endpoint(&self, i: usize) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.members[i].client_port)
    }

    /// `etcdctl` (API v3) against member `i`, with the cluster's TLS
    /// files when it has them, and `args`.
    pub fn etcdctl(&self, i: usize, args: &[&str]) -> io::Result<std::process::Output> {
        let mut command = Command::new("etcdctl");
        command
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint(i)]);
        if let Some(tls) = &self.tls {
            command
                .arg("--cacert")
                .arg(&tls.ca)
                .arg("--cert")
                .arg(&tls.client_cert)
                .arg("--key")
                .arg(&tls.client_key);
        }
        command.args(args).stdin(Stdio::null()).output()
    }

    /// Members (counts).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the cluster has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kills member `i` (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data directory and ports, and waits
    /// until it accepts connections.
    ///
    /// # Errors
    /// As [`EtcdCluster::start`].
    pub fn restart(&mut self, i: usize) -> io::Result<()> {
        self.kill(i);
        self.spawn(i)?;
        self.wait_up(i)
    }

    /// Kills every member.
    pub fn kill_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }

    /// Starts every member that is not running.
    ///
    /// # Errors
    /// As [`EtcdCluster::start`].
    pub fn restart_stopped(&mut self) -> io::Result<()> {
        for i in 0..self.members.len() {
            if self.members[i].child.is_none() {
                self.spawn(i)?;
            }
        }
        for i in 0..self.members.len() {
            self.wait_up(i)?;
        }
        Ok(())
    }

    /// The index of the member that is the leader, asked of each running
    /// member with `etcdctl endpoint status` (the status names itself and
    /// its leader); `None` if none answers that it leads.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len()).find(|&i| {
            self.members[i].child.is_some()
                && self
                    .etcdctl(i, &["endpoint", "status", "-w", "json"])
                    .ok()
                    .and_then(|out| String::from_utf8(out.stdout).ok())
                    .and_then(|json| serde_json::from_str::<serde_json::Value>(&json).ok())
                    .and_then(|v| {
                        let status = v.get(0)?.get("Status")?;
                        let me = status.get("header")?.get("member_id")?.as_u64()?;
                        let leader = status.get("leader")?.as_u64()?;
                        Some(me == leader)
                    })
                    .unwrap_or(false)
        })
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}
