//! `make bench`'s session check, before and after sessions could end: what checking a session
//! cookie costs in-process, the signature alone and with the ended-session lookups of a
//! deployment that knows 100,000 ended sessions and 100,000 users signed out everywhere.
//! `cargo run --release -p server --example session_cost`

use app::api::Role;
use server::http::session::SessionKeys;
use signing::Claims;

/// Checking a session cookie: the signature alone (before sessions could end) and with the
/// ended-session lookups.
fn main() -> anyhow::Result<()> {
    let keys = SessionKeys::new(
        b"the measurement's own secret, 32+",
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
        sid: signing::new_session_id(),
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
