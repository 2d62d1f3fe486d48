//! `serve`'s signals: SIGINT and SIGTERM stop it, SIGHUP reloads its
//! `--trust-jwks` files. The handlers are installed by [`Signals::install`],
//! before anything is served, so a signal sent right after the readiness
//! line finds them.

/// What a signal asks of `serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT or SIGTERM: stop gracefully.
    Stop,
    /// SIGHUP: reload the trusted JWK Sets.
    Reload,
}

/// The installed handlers.
pub(crate) struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers now.
    ///
    /// # Errors
    /// tokio's, as text, if a handler cannot be installed.
    pub(crate) fn install() -> Result<Signals, String> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let install = |kind| signal(kind).map_err(|e| e.to_string());
            Ok(Signals {
                term: install(SignalKind::terminate())?,
                int: install(SignalKind::interrupt())?,
                hup: install(SignalKind::hangup())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The next signal (a closed handler counts as a stop).
    pub(crate) async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => Signal::Stop,
                _ = self.term.recv() => Signal::Stop,
                hup = self.hup.recv() => match hup {
                    Some(()) => Signal::Reload,
                    None => Signal::Stop,
                },
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Stop
        }
    }
}
