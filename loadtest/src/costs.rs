//! What the buy path's in-process checks cost, one at a time, for `make bench`: an admission
//! ticket, a session cookie (with and without the ended sessions' lookups), a proof of work.

use anyhow::Context;
use app::api::Role;
use server::Config;

/// Checking one waiting-room admission ticket (a JWT signed with Ed25519).
pub fn ticket(config: &Config) -> anyhow::Result<()> {
    let tickets = server::buy::queue::Tickets::new(&config.secret.0);
    let now = chrono::Utc::now().timestamp_millis();
    let ticket = tickets.issue(42, 7, now + 60_000);
    let rounds = 50_000u32;
    let started = std::time::Instant::now();
    let admitted = (0..rounds)
        .filter(|i| {
            tickets.admits(
                std::hint::black_box(&ticket),
                42,
                7,
                now + i64::from(*i % 1000),
            )
        })
        .count();
    let ns = started.elapsed().as_nanos() as f64 / f64::from(rounds);
    anyhow::ensure!(admitted == rounds as usize, "a valid ticket was refused");
    println!("admission ticket: {ns:.0} ns per check ({rounds} checks, Ed25519 JWT)");
    Ok(())
}

/// Issuing a proof-of-work challenge and verifying a solution, at the default difficulty.
pub fn proof_of_work(config: &Config) -> anyhow::Result<()> {
    use server::buy::pow::{solve, ProofOfWork};
    let pow = ProofOfWork::new(&config.secret.0);
    let difficulty = app::api::DEFAULT_POW_DIFFICULTY;
    let now = chrono::Utc::now().timestamp();
    let rounds = 20_000u32;
    let started = std::time::Instant::now();
    let challenges: Vec<_> = (0..rounds)
        .map(|i| pow.challenge(42, i64::from(i % 7), difficulty, now))
        .collect();
    let issue_ns = started.elapsed().as_nanos() as f64 / f64::from(rounds);
    // Solving is the browser's work; a few solutions are enough to verify many times.
    let solving = std::time::Instant::now();
    let payloads: Vec<_> = challenges
        .into_iter()
        .take(20)
        .map(|challenge| {
            let sale = challenge
                .parameters
                .data
                .as_ref()
                .and_then(|d| d["sale"].as_i64());
            anyhow::Ok((solve(challenge).context("unsolved")?, sale.unwrap_or(0)))
        })
        .collect::<anyhow::Result<_>>()?;
    let solve_ms = solving.elapsed().as_secs_f64() * 1000.0 / payloads.len() as f64;
    let verifying = std::time::Instant::now();
    let mut ok = 0;
    for i in 0..rounds as usize {
        let (payload, sale) = &payloads[i % payloads.len()];
        ok += usize::from(
            pow.verify(std::hint::black_box(payload), 42, *sale)
                .is_some(),
        );
    }
    let verify_ns = verifying.elapsed().as_nanos() as f64 / f64::from(rounds);
    anyhow::ensure!(ok == rounds as usize, "a valid solution was refused");
    println!("proof of work at difficulty {difficulty}: {issue_ns:.0} ns to issue a challenge, {verify_ns:.0} ns to verify a solution ({rounds} each), {solve_ms:.1} ms to solve one natively on this machine");
    Ok(())
}

/// Checking a session cookie: the signature alone (before sessions could end) and with the
/// ended-session lookups.
pub fn session(config: &Config) -> anyhow::Result<()> {
    use server::http::session::{Claims, SessionKeys};
    let keys = SessionKeys::new(
        &config.secret.0,
        std::time::Duration::from_secs(3600),
        false,
    );
    // A deployment with 100,000 sessions signed out and 100,000 users signed out everywhere.
    let later = chrono::Utc::now().timestamp() + 3600;
    for i in 0..100_000u128 {
        keys.revocations
            .on_message(&format!("session {:032x} {later}", i * 7_919 + 1));
        keys.revocations
            .on_message(&format!("epoch {} 1", i + 1_000));
    }
    let claims = Claims {
        sid: server::domain::sessions::new_session_id(),
        user_id: 42,
        role: Role::Shopper,
        shop_id: 0,
        epoch: 0,
        expires_at: later,
        joined: 0,
        auth_at: 0,
    };
    let cookie = keys.sign(&claims);
    let now = chrono::Utc::now().timestamp();
    let rounds = 1_000_000u32;
    let time = |f: &dyn Fn() -> bool| {
        let started = std::time::Instant::now();
        let ok = (0..rounds).filter(|_| f()).count();
        (started.elapsed().as_nanos() as f64 / f64::from(rounds), ok)
    };
    let (signed_ns, a) = time(&|| keys.verify(std::hint::black_box(&cookie), now).is_some());
    let (checked_ns, b) = time(&|| keys.check(std::hint::black_box(&cookie), now).is_some());
    anyhow::ensure!(
        a == rounds as usize && b == rounds as usize,
        "a valid session was refused"
    );
    println!("session check: {signed_ns:.0} ns signature only (before), {checked_ns:.0} ns with ended-session lookups ({rounds} checks, 100,000 ended sessions and 100,000 epochs known)");
    Ok(())
}
