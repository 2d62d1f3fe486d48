//! The operations other than verify, served on the actor's task as they
//! arrive on the priority lane ([`serve`]): reads and Ed25519 signatures at
//! once, ML-DSA tokens signed on the verify pool (hundreds of µs each; the
//! ones their callers did not sign while the pool was idle,
//! `CallerSide::sign_if_idle`),
//! the keystore writes handed to the [`Writer`] (a durable keystore
//! fsyncs, which must not stall the actor's task and with it every lane).
//! Each operation that changes or uses a secret is audited (`audit.rs`):
//! here for those served at once, by the writer's job for the writes.
//! A request whose caller has gone is skipped.

use kms_core::Keystore;

use crate::audit;
use crate::dispatch::pool::VerifyPool;
use crate::dispatch::request::{Op, Request, VerifyRequest};
use crate::token::sign;
use crate::writer::Writer;

/// Serves `request` with `ks`, handing writes to `writer`; a verify
/// request is not served here but handed back, for the actor to batch
/// (`dispatch/pending.rs`).
pub(crate) fn serve(
    request: Request,
    ks: &Keystore,
    writer: &Writer,
    pool: &VerifyPool,
) -> Option<VerifyRequest> {
    // `None` for every verify request (and a client without one).
    let principal = request.principal;
    let who = principal.as_deref();
    match request.op {
        Op::Verify(v) => return Some(v),
        Op::Sign {
            key,
            message,
            reply,
        } => {
            if !reply.is_abandoned() {
                let result = ks.sign(&key, &message);
                audit::key_op("sign", &key, who, &result, |(id, _)| Some(id), "");
                reply.send(result);
            }
        }
        Op::SignJwt {
            key,
            alg,
            claims,
            reply,
        } => {
            if !reply.is_abandoned() {
                let on_pool = key.alg().is_ml_dsa();
                let sign = {
                    let ks = ks.clone();
                    move || {
                        // Its caller may have gone while it waited.
                        if reply.is_abandoned() {
                            return;
                        }
                        let who = principal.as_deref();
                        reply.send(sign::sign(&ks, &key, alg, &claims, who));
                    }
                };
                // ML-DSA costs hundreds of µs: on the pool, so the actor's
                // task keeps serving; Ed25519 (about 20 µs) here. The job
                // counts as a batch in flight: signatures and verify
                // batches share the pool and its queue limit, and while
                // signatures fill it the verify lane waits as it does
                // behind batches. A job that panics drops its reply (the
                // caller gets `Dropped`).
                if on_pool {
                    pool.spawn(sign);
                } else {
                    sign();
                }
            }
        }
        Op::Attest { key, reply } => {
            if !reply.is_abandoned() {
                reply.send(ks.attest(&key));
            }
        }
        Op::Policy { key, reply } => {
            if !reply.is_abandoned() {
                reply.send(ks.policy(&key));
            }
        }
        Op::Export { key, to, reply } => {
            if !reply.is_abandoned() {
                let result = ks.export_sealed(&key, &to);
                audit::key_op("export", &key, who, &result, |_| None, "");
                reply.send(result);
            }
        }
        // The writes: a durable keystore fsyncs, which must not stall
        // the actor's task (and with it every lane), so they go to the
        // writer, which audits each when it is done.
        Op::CreateKey {
            tenant,
            purpose,
            alg,
            reply,
        } => writer.submit(reply, move |ks| {
            let result = ks.create_key(&tenant, &purpose, alg);
            audit::new_key(
                "create_key",
                &tenant,
                &purpose,
                principal.as_deref(),
                &result,
            );
            result
        }),
        Op::Import {
            tenant,
            purpose,
            from,
            envelope,
            reply,
        } => writer.submit(reply, move |ks| {
            let result = ks.import_sealed(&tenant, &purpose, &from, &envelope);
            audit::new_key("import", &tenant, &purpose, principal.as_deref(), &result);
            result
        }),
        Op::Rotate { key, reply } => writer.submit(reply, move |ks| {
            let result = ks.rotate(&key);
            audit::key_op(
                "rotate",
                &key,
                principal.as_deref(),
                &result,
                |id| Some(id),
                "",
            );
            result
        }),
        Op::SetPolicy { key, policy, reply } => writer.submit(reply, move |ks| {
            let detail = audit::policy_detail(&policy);
            let result = ks.set_policy(&key, policy);
            audit::key_op(
                "set_policy",
                &key,
                principal.as_deref(),
                &result,
                |_| None,
                &detail,
            );
            result
        }),
        Op::Trim { key, below, reply } => writer.submit(reply, move |ks| {
            let result = ks.trim(&key, below);
            let detail = format!("below={below}");
            audit::key_op(
                "trim",
                &key,
                principal.as_deref(),
                &result,
                |_| None,
                &detail,
            );
            result
        }),
        Op::Destroy { key, reply } => writer.submit(reply, move |ks| {
            let result = ks.destroy(&key);
            audit::key_op(
                "destroy",
                &key,
                principal.as_deref(),
                &result,
                |()| None,
                "",
            );
            result
        }),
    }
    None
}
