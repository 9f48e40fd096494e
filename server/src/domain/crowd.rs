//! Farms demoted at the draw (docs/storefront.md "The drawing"). A drawing is fair between
//! entries, not between networks: a farm on one /24 entering thousands of times would take
//! thousands of places. A sale whose line draws its places may group its entries by network —
//! the /24 (IPv4) or /48 (IPv6) each joined from, and the one its account signed up from — and,
//! under policy `demote`, draw every entry of a group of more than `threshold` entries after all
//! the others; `observe` counts them and moves nobody.
//!
//! The rule is public and recomputable (`scripts/verify-drawing`): the drawing lists each place's
//! groups as keyed hashes (equal hashes, one network; the hash does not say which), so anyone
//! counts the groups, finds those over the threshold and checks the order. The same function
//! orders the published drawing and the line itself ([`draw`]).

use super::{
    activity::{self, ActivityRow},
    audit,
    drawing::{score, DRAW_RANGE},
    forecast, report, ApiError, ApiResult,
};
use crate::infra::redis::Redis;
use app::api::{
    CrowdChange, CrowdOutcome, CrowdPolicy, CrowdSettings, DrawnPlace, CROWD_THRESHOLD_MAX,
};
use sqlx::PgPool;
use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
};

/// The line's score of the first demoted place: above every drawn score (and the few a tie
/// pushes up), below the first place after the start (2^50).
pub const DEMOTED_FROM: i64 = DRAW_RANGE as i64 + 1024;
/// The most entries one drawing demotes: the room below the first place after the start.
/// Entries of groups over the threshold beyond this many (the highest scores) keep their places.
pub const DEMOTED_MAX: usize = (1 << 20) - 1024 - 1;

/// The network of an address: its /24 (IPv4, an IPv4-mapped IPv6 address included) or /48.
pub fn network(ip: IpAddr) -> String {
    let v4 = match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    };
    match (v4, ip) {
        (Some(v4), _) => {
            let [a, b, c, _] = v4.octets();
            format!("{a}.{b}.{c}.0/24")
        }
        (None, IpAddr::V6(v6)) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}::/48", s[0], s[1], s[2])
        }
        (None, IpAddr::V4(_)) => unreachable!("an IPv4 address has its IPv4 form"),
    }
}

/// One drawn entry: its receipt and its groups' hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub receipt: String,
    pub groups: Vec<String>,
}

/// The groups stored for an entry in the line (`join.lua`'s `groups` hash): comma-separated.
pub fn parse_groups(stored: &str) -> Vec<String> {
    let mut groups: Vec<String> = Vec::new();
    for g in stored.split(',').filter(|g| !g.is_empty()) {
        if !groups.iter().any(|had| had == g) {
            groups.push(g.to_string());
        }
    }
    groups
}

/// The drawing of `entries` under `seed` and the sale's crowd policy: every place in order, and
/// what the policy found (`None` under `off`). Places follow the drawn score (ties: the lower
/// receipt); under `demote`, entries of a group of more than `threshold` entries come after every
/// other entry, in the same order among themselves.
pub fn draw(
    seed: &[u8],
    entries: Vec<Entry>,
    policy: CrowdPolicy,
    threshold: i32,
) -> (Vec<DrawnPlace>, Option<CrowdOutcome>) {
    let mut counts: HashMap<&str, i64> = HashMap::new();
    if policy != CrowdPolicy::Off {
        for e in &entries {
            let mine: HashSet<&str> = e.groups.iter().map(String::as_str).collect();
            for g in mine {
                *counts.entry(g).or_default() += 1;
            }
        }
    }
    let over: HashSet<&str> = counts
        .iter()
        .filter(|(_, &n)| n > i64::from(threshold))
        .map(|(g, _)| *g)
        .collect();
    let mut scored: Vec<(u64, &Entry)> = entries
        .iter()
        .map(|e| (score(seed, &e.receipt), e))
        .collect();
    scored.sort_unstable_by(|a, b| (a.0, &a.1.receipt).cmp(&(b.0, &b.1.receipt)));
    let is_over = |e: &Entry| e.groups.iter().any(|g| over.contains(g.as_str()));
    let entries_over = scored.iter().filter(|(_, e)| is_over(e)).count();
    let mut demoted_left = match policy {
        CrowdPolicy::Demote => DEMOTED_MAX,
        _ => 0,
    };
    let (mut kept, mut demoted): (Vec<&Entry>, Vec<&Entry>) = (vec![], vec![]);
    for (_, e) in scored {
        if demoted_left > 0 && is_over(e) {
            demoted_left -= 1;
            demoted.push(e);
        } else {
            kept.push(e);
        }
    }
    let outcome = (policy != CrowdPolicy::Off).then_some(CrowdOutcome {
        policy,
        threshold,
        entries: entries.len() as i64,
        groups_over: over.len() as i64,
        entries_over: entries_over as i64,
        demoted: demoted.len() as i64,
    });
    let places = kept
        .into_iter()
        .map(|e| (e, false))
        .chain(demoted.into_iter().map(|e| (e, true)))
        .enumerate()
        .map(|(i, (e, demoted))| DrawnPlace {
            place: i as i64 + 1,
            receipt: e.receipt.clone(),
            groups: match policy {
                CrowdPolicy::Off => Vec::new(),
                _ => e.groups.clone(),
            },
            demoted,
        })
        .collect();
    (places, outcome)
}

/// The rule's words for a sale that groups its entries, after the drawing's own.
pub fn rule(policy: CrowdPolicy, threshold: i32) -> Option<String> {
    match policy {
        CrowdPolicy::Off => None,
        CrowdPolicy::Observe => Some(format!(
            "entries are grouped by network (observe: groups of more than {threshold} entries are counted, nobody moves)"
        )),
        CrowdPolicy::Demote => Some(format!(
            "then every entry one of whose groups has more than {threshold} entries is placed after all other entries, in the same order among themselves (at most {DEMOTED_MAX} entries)"
        )),
    }
}

/// A sale's crowd policy, the threshold the forecast proposes, and what the draw did.
pub async fn settings(db: &PgPool, redis: &Redis, row: &ActivityRow) -> ApiResult<CrowdSettings> {
    let expected = forecast::of_sale(db, redis, row).await?.expected_crowd;
    let (proposed_threshold, proposed_reason) = forecast::crowd_threshold(expected);
    Ok(CrowdSettings {
        policy: row.crowd(),
        threshold: row.crowd_threshold,
        proposed_threshold,
        proposed_reason,
        outcome: report::crowd_outcome(db, row.id).await?,
    })
}

/// Sets the crowd policy of `row` (a sale of the merchant's shop), audited; before its start only
/// (`409 already_started`), and only for a line that draws its places.
pub async fn change(
    db: &PgPool,
    user_id: i64,
    row: &ActivityRow,
    change: CrowdChange,
) -> ApiResult<ActivityRow> {
    if !(2..=CROWD_THRESHOLD_MAX).contains(&change.threshold) {
        return Err(ApiError::invalid(
            "threshold",
            "a group is over it with more entries: from 2 to 1000000",
        ));
    }
    if change.policy != CrowdPolicy::Off && !row.draws() {
        return Err(ApiError::invalid(
            "policy",
            "only a waiting room that draws its places (draw_then_order) groups its entries",
        ));
    }
    let mut tx = crate::infra::db::begin(db).await?;
    let changed = activity::set_crowd(
        &mut *tx,
        row.id,
        row.shop_id,
        change.policy,
        change.threshold,
    )
    .await?
    .ok_or(ApiError::AlreadyStarted)?;
    audit::record(
        &mut *tx,
        Some(user_id),
        Some(row.shop_id),
        "activity.crowd",
        &format!("#{} {}", row.id, row.title),
        &format!("policy {} threshold {}", change.policy, change.threshold),
    )
    .await?;
    tx.commit().await?;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(receipt: &str, groups: &[&str]) -> Entry {
        Entry {
            receipt: receipt.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn networks_are_the_24_or_the_48() {
        assert_eq!(network("203.0.113.77".parse().unwrap()), "203.0.113.0/24");
        assert_eq!(
            network("::ffff:203.0.113.9".parse().unwrap()),
            "203.0.113.0/24"
        );
        assert_eq!(
            network("2001:db8:1:2:3::4".parse().unwrap()),
            "2001:db8:1::/48"
        );
    }

    #[test]
    fn a_group_over_the_threshold_is_drawn_after_everyone_and_observe_moves_nobody() {
        let seed = [7u8; 32];
        let mut entries: Vec<Entry> = (0..12)
            .map(|i| entry(&format!("farm{i}"), &["f"]))
            .collect();
        entries.extend((0..10).map(|i| entry(&format!("person{i}"), &[&format!("n{i}")])));
        let (places, outcome) = draw(&seed, entries.clone(), CrowdPolicy::Demote, 5);
        let outcome = outcome.unwrap();
        assert_eq!(
            (outcome.groups_over, outcome.entries_over, outcome.demoted),
            (1, 12, 12)
        );
        assert!(places[..10]
            .iter()
            .all(|p| p.receipt.starts_with("person") && !p.demoted));
        assert!(places[10..]
            .iter()
            .all(|p| p.receipt.starts_with("farm") && p.demoted));
        assert_eq!(
            places.iter().map(|p| p.place).collect::<Vec<_>>(),
            (1..=22).collect::<Vec<_>>()
        );
        // Among themselves, in the drawn order.
        let farm: Vec<u64> = places[10..]
            .iter()
            .map(|p| score(&seed, &p.receipt))
            .collect();
        assert!(farm.windows(2).all(|w| w[0] <= w[1]));

        let (observed, outcome) = draw(&seed, entries.clone(), CrowdPolicy::Observe, 5);
        let plain = draw(&seed, entries.clone(), CrowdPolicy::Off, 5).0;
        assert_eq!(outcome.unwrap().entries_over, 12);
        assert!(observed.iter().all(|p| !p.demoted));
        let order = |ps: &[DrawnPlace]| ps.iter().map(|p| p.receipt.clone()).collect::<Vec<_>>();
        assert_eq!(order(&observed), order(&plain));
        // At the threshold exactly, nobody is over it.
        assert_eq!(
            draw(&seed, entries, CrowdPolicy::Demote, 12)
                .1
                .unwrap()
                .demoted,
            0
        );
    }

    #[test]
    fn the_sign_up_network_counts_as_a_group_and_one_network_twice_counts_once() {
        let seed = [1u8; 32];
        // Three accounts made on one network, joining from three others.
        let entries = vec![
            entry("a", &["j1", "s"]),
            entry("b", &["j2", "s"]),
            entry("c", &["j3", "s"]),
            entry("d", &["j4", "j4"]),
        ];
        let (places, outcome) = draw(&seed, entries, CrowdPolicy::Demote, 2);
        assert_eq!(outcome.unwrap().demoted, 3);
        assert_eq!(places[0].receipt, "d");
        assert_eq!(parse_groups("x,,x,y"), vec!["x", "y"]);
    }
}
