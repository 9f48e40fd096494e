//! The background work every instance runs beside its requests, each task under the
//! instance's supervisor: broadcasts, counters, the waiting room's steps, sweeps.

use crate::{
    buy::{doors::Doors, gate::Gate},
    http::state::AppState,
    infra::{
        redis::{self as redis_conn},
        supervisor::Stage,
    },
};
use std::{future::Future, sync::Arc};

/// The workers of every instance, under its supervisor: the broadcasts it listens to, the
/// attempt counters, the report's lines, the waiting room's steps, the sessions' reload and the
/// sweeps (the pipeline's workers are `Pipeline::start`'s).
pub(super) fn spawn_instance_workers(state: &AppState) {
    let supervisor = &state.supervisor;
    supervisor.spawn("broadcasts", Stage::Rest, {
        let state = state.clone();
        move || listen(&state)
    });
    supervisor.spawn("attempts", Stage::Rest, {
        let (attempts, redis, db) = (
            state.attempts.clone(),
            state.redis.clone(),
            state.db.clone(),
        );
        move || attempts.clone().run(redis.clone(), db.clone())
    });
    supervisor.spawn("report-lines", Stage::Rest, {
        let (db, redis) = (state.db.clone(), state.redis.clone());
        move || crate::domain::report::keep_lines(db.clone(), redis.clone())
    });
    supervisor.spawn("heat", Stage::Rest, {
        let heat = state.heat.clone();
        move || heat.clone().run()
    });
    supervisor.spawn("waiting-room", Stage::Rest, {
        let waiting_room = state.waiting_room.clone();
        move || waiting_room.clone().run()
    });
    supervisor.spawn("session-reload", Stage::Rest, {
        let (revocations, db, every) = (
            state.sessions.revocations.clone(),
            state.db.clone(),
            state.config.session_reload,
        );
        move || revocations.clone().run(db.clone(), every)
    });
    supervisor.spawn("sweeps", Stage::Rest, {
        let (doors, gate, db) = (state.doors.clone(), state.gate.clone(), state.db.clone());
        move || sweeps(doors.clone(), gate.clone(), db.clone())
    });
}

/// The in-process buckets forget clients idle long enough to be full again; the admin writes'
/// first answers are kept a day.
async fn sweeps(doors: Doors, gate: Arc<Gate>, db: sqlx::PgPool) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
    loop {
        every.tick().await;
        doors.sweep();
        gate.sweep();
        if let Err(e) = crate::domain::admin_requests::forget_old(&db).await {
            tracing::warn!(error = %e, "old admin answers not forgotten; next minute");
        }
    }
}

/// Restock, block and session broadcasts, for this instance's sold-out flags, blocked clients
/// and ended sessions.
fn listen(state: &AppState) -> impl Future<Output = ()> + Send + 'static {
    let (sold_out, blocks, redis) = (
        state.sold_out.clone(),
        state.blocks.clone(),
        state.redis.clone(),
    );
    let (revocations, db) = (state.sessions.revocations.clone(), state.db.clone());
    let activities = state.activities.clone();
    let restock = redis.keys.restock_channel();
    let sale = redis.keys.sale_channel();
    let blocked = redis.keys.block_channel();
    let session = redis.keys.session_channel();
    redis_conn::listen(
        state.config.redis.subscribe_urls(),
        vec![
            restock.clone(),
            sale.clone(),
            blocked.clone(),
            session.clone(),
        ],
        {
            let (sold_out, blocks, revocations) =
                (sold_out.clone(), blocks.clone(), revocations.clone());
            move |channel, payload| {
                if channel == restock {
                    sold_out.on_message(payload);
                } else if channel == sale {
                    if let Ok(id) = payload.parse() {
                        activities.expire(id);
                    }
                } else if channel == blocked {
                    blocks.on_message(payload);
                } else if channel == session {
                    revocations.on_message(payload);
                }
            }
        },
        move || {
            let (sold_out, blocks, redis) = (sold_out.clone(), blocks.clone(), redis.clone());
            let (revocations, db) = (revocations.clone(), db.clone());
            async move {
                sold_out.reset();
                if let Err(e) = blocks.load(&redis).await {
                    tracing::warn!(error = %e, "blocked clients not reloaded; broadcasts still arrive");
                }
                // Whatever was broadcast while this instance was not listening.
                if let Err(e) = revocations.load(&db).await {
                    tracing::warn!(error = %e, "ended sessions not reloaded; broadcasts still arrive");
                }
            }
        },
    )
}
