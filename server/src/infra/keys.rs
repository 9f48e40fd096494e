//! Where things live in Redis. Every key starts with the instance's configured prefix.
//!
//! Everything one gate call touches for one stock shard of one sale shares the hash tag
//! `{a:<id>.<shard>}` (plus a short salt that steers the shards of one sale to distinct parts
//! of the slot space), so the script is single-slot on a Redis Cluster and different shards of
//! a hot sale land on different masters:
//!
//! | key | what |
//! |---|---|
//! | `{a:ID.S}:stock` | units for sale in shard S |
//! | `{a:ID.S}:meta` | switches the gate reads (`paused`) |
//! | `{a:ID.S}:users` | units each user whose home is S holds |
//! | `{a:ID.S}:granted` | reservations shard S granted, for the relay: one stream entry per gate call |
//! | `{a:ID.S}:journal` | the same of releases before, one entry per reservation: still drained |
//! | `{a:ID.S}:owners` | hash: the user and quantity of each unsettled token shard S granted (a poll's `queued` is the token in `unsettled` with its entry here) |
//! | `{a:ID.S}:tok:UUID` | a reservation's record of its own: a borrowing's, a give-back's final state, the releases before's of every grant (the persister deletes it); the token names its sale and home shard |
//! | `{a:ID.S}:ret:UUID` | set once a failed or cancelled token's units went back |
//! | `{a:ID.S}:lent:UUID` | shard S's one answer to another shard's buyer: `1` lent, `0` refused |
//! | `{a:ID.S}:idem` | hash: the first answer of each Idempotency-Key (field `USER:KEY`) of a buy shard S granted or is borrowing for; expires a day after its last write |
//! | `{a:ID.S}:idem:USER:KEY` | the same, one key each, as the releases before wrote it: read and written only during a rollout (`SECKILL_GATE_IDEMPOTENCY_STRINGS`) |
//! | `{a:ID.S}:pow:NONCE` | a proof-of-work challenge already used (until it expires) |
//! | `{a:ID.S}:rates:GEN` | hash: the token bucket and strikes of each user and address (`u:42`, `ip:…`) the shard saw in one generation of time |
//!
//! A sale's waiting room is one slot of its own, `{q:ID}` (every instance serves the same line):
//!
//! | key | what |
//! |---|---|
//! | `{q:ID}:line` | sorted set: each user who joined, scored by place (random before the start, arrival after) |
//! | `{q:ID}:in` | sorted set: admitted users whose ticket has not lapsed, scored by its expiry (ms) |
//! | `{q:ID}:meta` | hash: the admission cursor (last admitted place), counters, the rate's carry-over |
//!
//! Keys outside a script have tags of their own: captcha answers (`{cap:ID}`), the blocked
//! clients (`blocks`, one sorted set), attempt counters, login throttles.

use std::sync::Arc;

/// The field of one Idempotency-Key in a shard's first answers (`ShardKeys::idempotency_answers`):
/// a key is `[A-Za-z0-9_-]`, so `USER:KEY` names one pair.
pub fn idempotency_field(user: i64, key: &str) -> String {
    format!("{user}:{key}")
}

/// How long a reservation token's record lives: longer than the longest payment window (24 h),
/// so a token's record outlives its order's deadline.
pub const TOKEN_TTL_SECS: u64 = 3 * 24 * 3600;

/// A token record's `status` while its units are being borrowed from another stock shard
/// (`gate.lua` writes it, `settle.lua` ends it): the shopper sees it as `queued`.
pub const BORROWING: &str = "pending";

/// How a client address is counted by every per-address limit: an IPv4 address as it is, an IPv6
/// address by its /64 (one subscriber's whole allocation, which it may rotate through freely).
pub fn address_bucket(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

/// The most stock shards a sale may have, and the shard a user's holdings live in: the load tool
/// computes it alike, to shape a crowd by its homes.
pub use app::api::{home_shard, MAX_SHARDS};

const SLOTS: u32 = 16_384;

/// The Redis Cluster slot of a key (CRC16 of its hash tag, or of the key without one).
pub fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = key
        .find('{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.find('}')
                .filter(|&close| close > 0)
                .map(|close| &bytes[open + 1..open + 1 + close])
        })
        .unwrap_or(bytes);
    (crc16::State::<crc16::XMODEM>::calculate(tagged) as u32 % SLOTS) as u16
}

/// The hash tag of shard `shard` of `shards` of a sale. One shard: `a:ID.0`. Several: the tag
/// gets the first salt that puts it in the middle half of its own share of the slot space, so
/// that on a cluster whose masters own equal ranges (as `redis-cli --cluster create` makes them)
/// the shards of one sale sit on as many masters as possible.
pub fn shard_tag(activity: i64, shard: i16, shards: i16) -> String {
    let plain = format!("a:{activity}.{shard}");
    if shards <= 1 {
        return plain;
    }
    let k = shards as u32;
    let part = (shard as u32 + activity.rem_euclid(k as i64) as u32) % k;
    let width = SLOTS / k;
    let (low, high) = (part * width + width / 4, part * width + width - width / 4);
    (0..4096)
        .map(|salt| format!("{plain}~{salt}"))
        .find(|tag| (low..=high).contains(&u32::from(slot(&format!("{{{tag}}}")))))
        .unwrap_or(plain)
}

/// A reservation token: a UUID (version 8) that carries its sale (32 bits), its home shard and
/// the sale's shard count, so that whoever holds the token finds its record without asking
/// anyone. 76 random bits remain.
pub fn new_token(activity: i64, shard: i16, shards: i16) -> uuid::Uuid {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0..4].copy_from_slice(&(activity as u32).to_be_bytes());
    bytes[7] = shard as u8;
    // The builder keeps the low six bits of byte 8 (the top two are the variant).
    bytes[8] = (shards.clamp(1, MAX_SHARDS) - 1) as u8;
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The sale, home shard and shard count a token names; `None` for tokens not made by
/// [`new_token`].
pub fn token_home(token: &uuid::Uuid) -> Option<(i64, i16, i16)> {
    if token.get_version_num() != 8 {
        return None;
    }
    let b = token.as_bytes();
    let activity = i64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    Some((activity, i16::from(b[7]), i16::from(b[8] & 0x3f) + 1))
}

#[derive(Clone)]
pub struct Keys {
    prefix: Arc<str>,
}

/// The keys of one stock shard of one sale: all in one hash slot.
#[derive(Clone, Debug)]
pub struct ShardKeys {
    base: String,
}

impl ShardKeys {
    fn key(&self, name: &str) -> String {
        format!("{}:{name}", self.base)
    }
    pub fn stock(&self) -> String {
        self.key("stock")
    }
    pub fn meta(&self) -> String {
        self.key("meta")
    }
    pub fn holders(&self) -> String {
        self.key("users")
    }
    /// The journal the gate and the lenders write: one entry per script call, whatever the
    /// reservations it granted (`pipeline/journal.rs` reads it).
    pub fn journal(&self) -> String {
        self.key("granted")
    }
    /// The journal releases before batch entries wrote, one entry per reservation: nothing of
    /// this release writes it, but during a rolling upgrade the release before's gates do, so the
    /// relay drains it and every reader of the journals counts it.
    pub fn per_buy_journal(&self) -> String {
        self.key("journal")
    }
    /// Both journals of this shard: every entry the relay has yet to carry is in one of them.
    pub fn journals(&self) -> [String; 2] {
        [self.journal(), self.per_buy_journal()]
    }
    /// The tokens this home shard's gate granted that are neither orders nor returned yet,
    /// scored by their reservation time (ms): what is in flight between the gate and the
    /// database, wherever it is (journal, queue, or a persister's hands).
    pub fn unsettled(&self) -> String {
        self.key("unsettled")
    }
    /// Whose each granted token of this home shard is, while it is unsettled: a hash, field the
    /// token, value `user quantity`. The gate writes it once per batch (one `HSET`); whoever takes
    /// a token out of the unsettled set (the persister, a give-back, the reconciler) takes its
    /// entry out with it. With the token's place in the unsettled set, it is what a poll reads
    /// of a reservation that is neither an order nor borrowing (`http/orders.rs`).
    pub fn owners(&self) -> String {
        self.key("owners")
    }
    /// A token's record of its own (`status`, `activity_id`, `user_id`, `quantity`, …): `status`
    /// is an order status's wire name, or [`BORROWING`] while its units are borrowed. The gate
    /// writes one for a borrowing only (and for every grant with `SECKILL_GATE_TOKEN_RECORDS`);
    /// a give-back writes its final state; the releases before wrote one for every grant.
    pub fn token(&self, token: &uuid::Uuid) -> String {
        self.key(&format!("tok:{token}"))
    }
    pub fn returned(&self, token: &uuid::Uuid) -> String {
        self.key(&format!("ret:{token}"))
    }
    /// Set once this shard took stock addition `addition` (its id in the database).
    pub fn added(&self, addition: i64) -> String {
        self.key(&format!("add:{addition}"))
    }
    pub fn lent(&self, token: &uuid::Uuid) -> String {
        self.key(&format!("lent:{token}"))
    }
    /// Set once a proof-of-work challenge (its nonce) bought here: it is good once.
    pub fn spent_challenge(&self, nonce: &str) -> String {
        self.key(&format!("pow:{nonce}"))
    }
    /// The release before's record of one Idempotency-Key's first answer.
    pub fn idempotency(&self, user: i64, key: &str) -> String {
        self.key(&format!("idem:{user}:{key}"))
    }
    /// The first answers of the Idempotency-Keys this shard granted (or is borrowing for): a
    /// hash, field [`idempotency_field`].
    pub fn idempotency_answers(&self) -> String {
        self.key("idem")
    }
    /// The token buckets and strikes of the clients (`u:42`, `ip:1.2.3.4`: the fields) this
    /// shard's gate saw in one generation of time (`GateLimits::bucket_generation`).
    pub fn rates(&self, generation: i64) -> String {
        self.key(&format!("rates:{generation}"))
    }
}

/// The keys of one sale's waiting room: all in one hash slot.
#[derive(Clone, Debug)]
pub struct QueueKeys {
    base: String,
}

impl QueueKeys {
    pub fn line(&self) -> String {
        format!("{}:line", self.base)
    }
    pub fn admitted(&self) -> String {
        format!("{}:in", self.base)
    }
    pub fn meta(&self) -> String {
        format!("{}:meta", self.base)
    }
    /// Admissions not claimed yet, with their claim deadline as score.
    pub fn unclaimed(&self) -> String {
        format!("{}:unclaimed", self.base)
    }
    /// The join receipts of the places drawn before the start, by user.
    pub fn receipts(&self) -> String {
        format!("{}:receipts", self.base)
    }
    /// The groups (network hashes, `domain/crowd.rs`) of the places drawn before the start, by
    /// user: a sale whose drawing groups its entries.
    pub fn groups(&self) -> String {
        format!("{}:groups", self.base)
    }
    /// Shoppers whose bot check failed on the sale, with how many times.
    pub fn suspects(&self) -> String {
        format!("{}:suspects", self.base)
    }
    /// When each shopper who joined after the start joined (ms), until their turn is claimed.
    pub fn joined(&self) -> String {
        format!("{}:joined", self.base)
    }
    /// The waits from joining to the turn: shoppers by bucket (see `status.lua`).
    pub fn waits(&self) -> String {
        format!("{}:waits", self.base)
    }
}

impl Keys {
    /// The waiting room of a sale.
    pub fn queue(&self, activity: i64) -> QueueKeys {
        QueueKeys {
            base: format!("{}{{q:{activity}}}", self.prefix),
        }
    }

    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.into(),
        }
    }

    /// The keys of shard `shard` of a sale split into `shards`.
    pub fn shard(&self, activity: i64, shard: i16, shards: i16) -> ShardKeys {
        ShardKeys {
            base: format!("{}{{{}}}", self.prefix, shard_tag(activity, shard, shards)),
        }
    }

    /// Every shard of a sale, in shard order.
    pub fn shards(&self, activity: i64, shards: i16) -> Vec<ShardKeys> {
        (0..shards.max(1))
            .map(|s| self.shard(activity, s, shards))
            .collect()
    }

    /// A token's record, found from the token alone (`None` for a token no gate made).
    pub fn token(&self, token: &uuid::Uuid) -> Option<String> {
        let (activity, shard, shards) = token_home(token)?;
        Some(self.shard(activity, shard, shards).token(token))
    }

    /// The shard a token's record, idempotency record and holdings live in.
    pub fn home_of(&self, token: &uuid::Uuid) -> Option<ShardKeys> {
        let (activity, shard, shards) = token_home(token)?;
        Some(self.shard(activity, shard, shards))
    }

    pub fn captcha(&self, id: &str) -> String {
        format!("{}{{cap:{id}}}", self.prefix)
    }
    /// The admission tickets' key generation in use (`generation`, `since_ms`).
    pub fn ticket_keys(&self) -> String {
        format!("{}ticket-keys", self.prefix)
    }
    /// Blocked clients (`u:42`, `ip:1.2.3.4`) with the time their block ends (ms) as score.
    pub fn blocks(&self) -> String {
        format!("{}blocks", self.prefix)
    }
    /// Pub/sub channel: an activity id whose sold-out flags every instance must clear.
    pub fn restock_channel(&self) -> String {
        format!("{}restock", self.prefix)
    }
    /// Pub/sub channel: an activity id whose switches the emergency cord changed (a stop, a
    /// fail-open): every instance reads its row again.
    pub fn sale_channel(&self) -> String {
        format!("{}sale", self.prefix)
    }
    /// Pub/sub channel: a client just blocked (`u:42 <until ms>`), for every instance's list.
    pub fn block_channel(&self) -> String {
        format!("{}blocked", self.prefix)
    }
    /// Pub/sub channel: a session ended (`session <sid> <expires>`) or a user's sessions did
    /// (`epoch <user> <epoch>`), for every instance's list of ended sessions.
    pub fn session_channel(&self) -> String {
        format!("{}sessions", self.prefix)
    }
    /// Views of every sale during one second, by sale, summed over instances (`buy/heat.rs`).
    pub fn heat(&self, second: i64) -> String {
        format!("{}heat:{second}", self.prefix)
    }
    /// Buy attempts on an activity during one second (summed over instances).
    /// Renders of a sale's page before its start (the forecast's page views).
    pub fn views(&self, activity: i64) -> String {
        format!("{}views:{{a:{activity}}}", self.prefix)
    }
    pub fn attempts(&self, activity: i64, second: i64) -> String {
        format!("{}tries:{{a:{activity}}}:{second}", self.prefix)
    }
    /// A login throttle counter (`user:NAME` or `ip:ADDR`).
    /// A client address's sign-in attempts, over every username.
    pub fn login_address(&self, address: &str) -> String {
        format!("{}login:{address}", self.prefix)
    }

    /// One username's sign-in keys, all under the username's hash tag so that one script
    /// reserves an attempt atomically: `what` is `ip:<address>` (that address's failures),
    /// `all` (failures from everywhere), `slow` (the one attempt a second past the global
    /// bound) or `busy` (the verification in flight).
    pub fn login_user(&self, username: &str, what: &str) -> String {
        format!("{}{{lu:{}}}:{what}", self.prefix, username.to_lowercase())
    }

    /// Sign-ups from one client address, and over the platform per minute.
    pub fn signups(&self, who: &str) -> String {
        format!("{}signup:{who}", self.prefix)
    }

    /// Unauthenticated requests of one kind (`captcha`, `challenge`…) from one client address.
    pub fn door(&self, door: &str, address: &str) -> String {
        format!("{}door:{door}:{address}", self.prefix)
    }
    /// The one journal of every sale before stock shards: still drained by the relay (cold), so
    /// that reservations granted just before an upgrade become orders too.
    pub fn legacy_journal(&self) -> String {
        format!("{}journal", self.prefix)
    }
    /// Never written: stands in for an optional key the script does not use this time.
    pub fn unused(&self, shard: &ShardKeys) -> String {
        shard.key("unused")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_client_is_counted_by_its_64() {
        let a = address_bucket("2001:db8:1:2:aaaa::1".parse().unwrap());
        let b = address_bucket("2001:db8:1:2:ffff:1:2:3".parse().unwrap());
        let c = address_bucket("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            address_bucket("203.0.113.9".parse().unwrap()),
            "203.0.113.9"
        );
        assert_eq!(
            address_bucket("::ffff:203.0.113.9".parse().unwrap()),
            "203.0.113.9"
        );
    }

    #[test]
    fn slots_follow_the_hash_tag_as_redis_computes_them() {
        // Figures from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot("123456789"), 12739);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{foo}.bar"), slot("foo"));
        assert_eq!(slot("x{}y"), slot("x{}y")); // an empty tag hashes the whole key
        assert_ne!(slot("x{}y"), slot(""));
    }

    #[test]
    fn every_key_of_a_shard_is_in_one_slot_and_shards_spread() {
        let keys = Keys::new("sk:");
        let token = new_token(42, 3, 4);
        let s = keys.shard(42, 3, 4);
        let slots: std::collections::HashSet<u16> = [
            s.stock(),
            s.meta(),
            s.holders(),
            s.journal(),
            s.per_buy_journal(),
            s.unsettled(),
            s.owners(),
            s.token(&token),
            s.returned(&token),
            s.lent(&token),
            s.idempotency(7, "k"),
            s.idempotency_answers(),
            s.rates(29_000_001),
            keys.unused(&s),
        ]
        .iter()
        .map(|k| slot(k))
        .collect();
        assert_eq!(slots.len(), 1);
        let q = keys.queue(42);
        assert_eq!(slot(&q.line()), slot(&q.admitted()));
        assert_eq!(slot(&q.line()), slot(&q.unclaimed()));
        assert_eq!(slot(&q.line()), slot(&q.suspects()));
        assert_eq!(slot(&q.line()), slot(&q.receipts()));
        assert_eq!(slot(&q.line()), slot(&q.meta()));
        // Three shards: one in each third of the slot space, i.e. on each of three masters.
        let thirds: std::collections::HashSet<u32> = keys
            .shards(42, 3)
            .iter()
            .map(|s| u32::from(slot(&s.stock())) * 3 / SLOTS)
            .collect();
        assert_eq!(thirds.len(), 3);
    }

    #[test]
    fn a_token_names_its_sale_and_home_shard() {
        let token = new_token(1_234_567, 63, 64);
        assert_eq!(token_home(&token), Some((1_234_567, 63, 64)));
        assert_eq!(token.get_version_num(), 8);
        assert_eq!(token_home(&new_token(5, 0, 1)), Some((5, 0, 1)));
        assert_ne!(new_token(1, 0, 1), new_token(1, 0, 1));
        assert_eq!(token_home(&uuid::Uuid::new_v4()), None);
        let keys = Keys::new("p:");
        assert_eq!(
            keys.token(&token),
            Some(keys.shard(1_234_567, 63, 64).token(&token))
        );
    }

    #[test]
    fn a_user_always_has_the_same_home_and_users_spread() {
        assert_eq!(home_shard(99, 8), home_shard(99, 8));
        assert_eq!(home_shard(99, 1), 0);
        let homes: std::collections::HashSet<i16> = (1..200).map(|u| home_shard(u, 8)).collect();
        assert_eq!(homes.len(), 8);
    }
}
