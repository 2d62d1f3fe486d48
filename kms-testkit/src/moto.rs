//! moto's AWS server (`moto_server`, PyPI's `moto[server]`) on a loopback
//! port it is given, for tests of the AWS KMS root: `$MOTO_SERVER`, or
//! `moto_server` on the PATH; killed when dropped.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `moto_server`.
#[derive(Debug)]
pub struct Moto {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http://` and the address: the endpoint to give the SDK.
    pub url: String,
}

impl Moto {
    /// Starts it on a free loopback port and waits (at most 60 s) until it
    /// listens.
    ///
    /// # Errors
    /// The program missing (saying what to install), or not listening in
    /// time (`TimedOut`).
    pub fn start() -> io::Result<Moto> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let program = std::env::var("MOTO_SERVER").unwrap_or_else(|_| "moto_server".to_owned());
        let child = Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{program}: {e} (pip install 'moto[server]', or set MOTO_SERVER)"),
                )
            })?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut moto = Moto {
            child,
            addr,
            url: format!("http://{addr}"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if Instant::now() >= deadline || moto.child.try_wait()?.is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{program} did not listen on {addr}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(moto)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
