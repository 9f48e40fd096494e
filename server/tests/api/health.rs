use crate::helpers::*;

#[tokio::test]
async fn healthz_answers_while_the_process_serves() {
    let app = spawn_app().await;
    let resp = app.get("/healthz").await;
    assert_eq!(resp.status().as_u16(), 200);
}

#[tokio::test]
async fn readyz_is_ready_when_postgres_redis_and_rabbitmq_answer() {
    let app = spawn_app().await;
    let (status, body) = json(app.get("/readyz").await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ready");
    for engine in ["postgres", "redis", "rabbitmq"] {
        assert_eq!(body[engine], "ok", "{body}");
    }
}

#[tokio::test]
async fn an_unknown_api_path_answers_json_404() {
    let app = spawn_app().await;
    assert_error(app.get("/api/no-such-thing").await, 404, "not_found").await;
}

/// A rolling upgrade: the release after this one has migrated the database further; an instance
/// of this release that starts (or restarts) then must still serve (docs/deploy.md "Upgrades").
#[tokio::test]
async fn an_instance_starts_on_a_database_a_later_release_migrated_further() {
    let app = spawn_app().await;
    let db = &app.db;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (99990101, 'a later release''s expansion', true, '\\x00'::bytea, 1)",
    )
    .execute(db)
    .await
    .unwrap();
    sqlx::query("ALTER TABLE orders ADD COLUMN later_release_note text")
        .execute(db)
        .await
        .unwrap();
    let again = spawn_instance(&app.config).await;
    let (status, body) = json(again.get("/readyz").await).await;
    assert_eq!(status, 200, "{body}");
    server::infra::db::migrate(db)
        .await
        .expect("migrating again, past a later release's migration, is a no-op");
}
