//! A SoftHSM2 token store in a temporary directory, for tests of the
//! PKCS#11 root: tokens initialized with Debian's `softhsm2-util`, AES-256
//! keys made with OpenSC's `pkcs11-tool`, both run with `SOFTHSM2_CONF`
//! pointing at this directory's configuration.
//!
//! SoftHSM2 reads `SOFTHSM2_CONF` when a process initializes its module:
//! a process that loads it itself (not through a child) sees one
//! configuration for its whole life, so such a test makes one
//! [`SoftHsm`] and sets the variable before the module loads.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian's `softhsm2` package puts the module.
pub const MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";

/// The security officer's PIN of every token made here.
const SO_PIN: &str = "12345678";

/// A SoftHSM2 configuration and token directory, removed on drop.
#[derive(Debug)]
pub struct SoftHsm {
    dir: tempfile::TempDir,
}

impl SoftHsm {
    /// A new, empty token store.
    ///
    /// # Errors
    /// The module not installed (`NotFound`, saying what to install); the
    /// directory or the configuration that cannot be written.
    pub fn new() -> io::Result<SoftHsm> {
        if !Path::new(MODULE).exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{MODULE} is missing: apt-get install softhsm2 opensc"),
            ));
        }
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("tokens"))?;
        let conf = format!(
            "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n\
             slots.removable = false\n",
            dir.path().join("tokens").display()
        );
        std::fs::write(dir.path().join("softhsm2.conf"), conf)?;
        Ok(SoftHsm { dir })
    }

    /// The value `SOFTHSM2_CONF` takes for this store.
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("softhsm2.conf")
    }

    /// The module's path ([`MODULE`]).
    pub fn module(&self) -> PathBuf {
        PathBuf::from(MODULE)
    }

    /// Initializes a new token labelled `label` whose user PIN is `pin`.
    ///
    /// # Panics
    /// If `softhsm2-util` fails.
    pub fn token(&self, label: &str, pin: &str) {
        self.run(Command::new("softhsm2-util").args([
            "--init-token",
            "--free",
            "--label",
            label,
            "--so-pin",
            SO_PIN,
            "--pin",
            pin,
        ]));
    }

    /// Makes an AES secret key of `bytes` bytes labelled `label` in the
    /// token `token` (encrypt, decrypt, never extractable).
    ///
    /// # Panics
    /// If `pkcs11-tool` fails.
    pub fn aes_key(&self, token: &str, pin: &str, label: &str, bytes: u32) {
        let key_type = format!("AES:{bytes}");
        let module = self.module();
        self.run(Command::new("pkcs11-tool").args([
            "--module".as_ref(),
            module.as_os_str(),
            "--token-label".as_ref(),
            token.as_ref(),
            "--login".as_ref(),
            "--pin".as_ref(),
            pin.as_ref(),
            "--keygen".as_ref(),
            "--key-type".as_ref(),
            key_type.as_ref(),
            "--label".as_ref(),
            label.as_ref(),
        ]));
    }

    /// Removes every object labelled `label` from the token `token`.
    ///
    /// # Panics
    /// If `pkcs11-tool` fails.
    pub fn delete_key(&self, token: &str, pin: &str, label: &str) {
        let module = self.module();
        self.run(Command::new("pkcs11-tool").args([
            "--module".as_ref(),
            module.as_os_str(),
            "--token-label".as_ref(),
            token.as_ref(),
            "--login".as_ref(),
            "--pin".as_ref(),
            pin.as_ref(),
            "--delete-object".as_ref(),
            "--type".as_ref(),
            "secrkey".as_ref(),
            "--label".as_ref(),
            label.as_ref(),
        ]));
    }

    fn run(&self, command: &mut Command) {
        let output = command
            .env("SOFTHSM2_CONF", self.conf())
            .output()
            .unwrap_or_else(|e| panic!("{command:?}: {e} (apt-get install softhsm2 opensc)"));
        assert!(
            output.status.success(),
            "{command:?}: {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
