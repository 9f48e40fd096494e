//! The settings read, checked and documented.

use super::{settings::FromEnvironment, *};
use clap::Parser;

fn parse(args: &[&str]) -> Result<Settings, clap::Error> {
    let mut all = vec!["server"];
    all.extend_from_slice(args);
    FromEnvironment::try_parse_from(all).map(|p| p.settings)
}

/// A lost session broadcast is honoured within the reload period, so the period has a bound
/// an operator cannot set past.
#[test]
fn a_session_reload_period_past_thirty_seconds_is_refused() {
    let period = |secs: &str| {
        parse(&["--session-reload-secs", secs])
            .ok()
            .map(|s| s.session_reload_secs)
    };
    assert_eq!(period("30"), Some(30));
    assert_eq!(period("31"), None);
    assert_eq!(period("0"), None);
}

/// `UPDATE_DOCS=1 cargo test -p server --lib the_configuration_doc` rewrites the table.
#[test]
fn the_configuration_doc_is_written_from_the_settings() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let (begin, end) = ("<!-- settings:begin -->\n", "<!-- settings:end -->");
    let start = doc
        .find(begin)
        .expect("the doc marks where the table begins")
        + begin.len();
    let stop = doc.find(end).expect("the doc marks where the table ends");
    let table = settings_table();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(path, format!("{}{table}{}", &doc[..start], &doc[stop..])).unwrap();
    } else {
        assert_eq!(
            doc[start..stop],
            table,
            "docs/configuration.md differs from the settings: UPDATE_DOCS=1 cargo test -p server --lib the_configuration_doc"
        );
    }
    assert!(table.contains("`SECKILL_ADDR` | `--addr` | `127.0.0.1:3000` |"));
}

#[test]
fn settings_are_checked_as_they_are_read() {
    let defaults = Settings::defaults();
    assert_eq!(defaults.addr.to_string(), "127.0.0.1:3000");
    assert_eq!(DoorLimits::default().signup_pow_difficulty, 30_000);
    assert_eq!(GateLimits::default().max_in_flight, 512);
    assert_eq!(
        parse(&["--trust-forwarded-for", "true"])
            .unwrap()
            .trust_forwarded_for,
        1
    );
    assert_eq!(
        parse(&["--trust-forwarded-for", "2"])
            .unwrap()
            .trust_forwarded_for,
        2
    );
    assert!(parse(&["--trust-forwarded-for", "maybe"]).is_err());
    assert!(parse(&["--signup-pow-difficulty", "5"]).is_err());
    assert_eq!(
        parse(&["--signup-pow-difficulty", "0"])
            .unwrap()
            .signup_pow_difficulty,
        0
    );
    assert!(parse(&["--session-reload-secs", "31"]).is_err());
    assert!(parse(&["--persisters", "0"]).is_err());
    assert!(parse(&["--gate-batch-max", "0"]).is_err());
    assert!(parse(&["--gate-batch-max", "257"]).is_err());
    assert!(parse(&["--gate-batch-in-flight", "0"]).is_err());
    assert!(
        parse(&["--admin-user", "ann"]).is_err(),
        "a merchant needs a password"
    );
    let cluster = parse(&["--redis-cluster-urls", "redis://a:1,redis://b:2"]).unwrap();
    assert_eq!(cluster.redis_cluster_urls, ["redis://a:1", "redis://b:2"]);
    let short = Settings {
        secret: Some("too short".into()),
        ..defaults.clone()
    };
    assert!(Config::from_settings(short).is_err());
    let braces = Settings {
        redis_prefix: "{sk}:".into(),
        secret: Some("x".repeat(32)),
        ..defaults
    };
    assert!(Config::from_settings(braces).is_err());
}

#[test]
fn a_deployed_process_names_the_first_setting_it_lacks() {
    use clap::{CommandFactory, FromArgMatches};
    // What a process started with these flags and no environment would find missing.
    let missing = |args: &[&str], needs| {
        let mut all = vec!["server"];
        all.extend_from_slice(args);
        let matches = FromEnvironment::command()
            .mut_args(|arg| arg.env(None::<&str>))
            .try_get_matches_from(all)
            .unwrap();
        let settings = FromEnvironment::from_arg_matches(&matches)
            .unwrap()
            .settings;
        settings
            .check_given(&matches, needs)
            .err()
            .map(|e| e.to_string())
    };
    let first = |args: &[&str], needs| missing(args, needs).unwrap_or_default();
    assert!(first(&["--deployed"], Needs::Database).starts_with("DATABASE_URL is not set"));
    assert_eq!(missing(&[], Needs::Everything), None, "a development box");
    // Given, even when it equals the default (a box whose PostgreSQL is where the default says).
    let database = ["--deployed", "--database-url", DEFAULT_DATABASE_URL];
    assert_eq!(missing(&database, Needs::Database), None);
    assert!(first(&database, Needs::Everything).starts_with("REDIS_URL or REDIS_CLUSTER_URLS"));
    let redis = [&database[..], &["--redis-cluster-urls", "redis://r1:6379"]].concat();
    assert!(first(&redis, Needs::Everything).starts_with("AMQP_URL is not set"));
    let broker = [&redis[..], &["--amqp-url", "amqp://mq:5672/%2f"]].concat();
    let message = first(&broker, Needs::Everything);
    assert!(
        message.starts_with("SECKILL_SECRET is not set"),
        "{message}"
    );
    assert!(!message.contains('\n'), "one line: {message}");
    // Given but weak: one line naming it and why.
    let weak = "s".repeat(32);
    let with_weak = [&broker[..], &["--secret", &weak]].concat();
    assert!(first(&with_weak, Needs::Everything).starts_with("SECKILL_SECRET looks guessable"));
    let public = [
        &broker[..],
        &["--secret", "0123456789abcdef0123456789abcdef"],
    ]
    .concat();
    assert!(first(&public, Needs::Everything).contains("published in the seckill repository"));
    let secret = super::generate_secret();
    let complete = [&broker[..], &["--secret", &secret]].concat();
    assert_eq!(missing(&complete, Needs::Everything), None);
    // The one before a rotation and the metrics token are held to the same rules.
    let previous = [&complete[..], &["--secret-previous", &weak]].concat();
    assert!(
        first(&previous, Needs::Everything).starts_with("SECKILL_SECRET_PREVIOUS looks guessable")
    );
    let token = [
        &complete[..],
        &["--metrics-token", "test-metrics-token-0123456789"],
    ]
    .concat();
    assert!(
        first(&token, Needs::Everything).starts_with("SECKILL_METRICS_TOKEN is a value published")
    );
    let before = super::generate_secret();
    let rotated = [&complete[..], &["--secret-previous", &before]].concat();
    assert_eq!(missing(&rotated, Needs::Everything), None);
}

#[test]
#[cfg(not(feature = "bench"))]
fn a_production_build_has_no_switch_to_leave_a_layer_out() {
    use clap::CommandFactory;
    assert!(parse(&["--bench-without-layers", "trace"]).is_err());
    assert!(FromEnvironment::command().get_arguments().all(|a| a
        .get_env()
        .is_none_or(|e| e != "SECKILL_BENCH_WITHOUT_LAYERS")));
}

#[test]
#[cfg(feature = "bench")]
fn a_bench_build_names_the_layers_it_leaves_out_and_refuses_unknown_ones() {
    let settings = parse(&["--bench-without-layers", "trace, timeout"]).unwrap();
    assert_eq!(settings.bench_without_layers, ["trace", "timeout"]);
    assert!(parse(&["--bench-without-layers", "tls"]).is_err());
}
