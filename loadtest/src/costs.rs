//! What the buy path's in-process checks cost, one at a time, for `make bench`: an admission
//! ticket and a proof of work (a session cookie's check, with the server's ended sessions, is the
//! server's example `session_cost`).

use anyhow::Context;

/// The measurements' own secret: what a check costs does not depend on whose it is.
const SECRET: &[u8] = b"the measurement's own secret, 32+";

/// Checking one waiting-room admission ticket (a JWT signed with Ed25519).
pub fn ticket() -> anyhow::Result<()> {
    let tickets = signing::Tickets::new(SECRET);
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
pub fn proof_of_work() -> anyhow::Result<()> {
    use signing::pow::{solve, ProofOfWork};
    let pow = ProofOfWork::new(SECRET);
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
