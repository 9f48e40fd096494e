//! The ids the API names in paths and bodies, as types: a sale's id, an account's id, an
//! order's reservation token. Each serialises exactly as before (a number, a number, a UUID
//! string: docs/api.md does not change), and each parses from a path segment by one rule, so
//! a function that takes a sale and a shopper cannot be handed them the other way round.

use serde::{Deserialize, Serialize};

/// A path segment that is not the id it should be, with the field and the reason the API's
/// `400 invalid_input` gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadId {
    pub field: &'static str,
    pub why: &'static str,
}

impl std::fmt::Display for BadId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.field, self.why)
    }
}

impl std::error::Error for BadId {}

macro_rules! positive_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        /// A positive integer written plainly; anything else is bad input, not a missing page.
        impl std::str::FromStr for $name {
            type Err = BadId;

            fn from_str(raw: &str) -> Result<$name, BadId> {
                raw.parse::<i64>()
                    .ok()
                    .filter(|id| *id > 0)
                    .map($name)
                    .ok_or(BadId { field: "id", why: "must be a positive integer" })
            }
        }
    };
}

positive_id!(
    /// A sale activity's id (`/api/activities/{id}`).
    SaleId
);
positive_id!(
    /// An account's id: a shopper's, a merchant's or an operator's.
    UserId
);

/// An order's reservation token (`/api/orders/{token}`): a UUID, written as the server wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Token(pub uuid::Uuid);

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for Token {
    type Err = BadId;

    fn from_str(raw: &str) -> Result<Token, BadId> {
        uuid::Uuid::parse_str(raw).map(Token).map_err(|_| BadId {
            field: "token",
            why: "must be a reservation token",
        })
    }
}

/// The most stock shards a sale may have (docs/api.md).
pub const MAX_SHARDS: i16 = 64;

/// The stock shard a user buys from in a sale of `shards`, where their holdings and idempotency
/// records live: always the same one for a sale. Defined here, beside the ids, so that the load
/// tool shapes a crowd by its homes with the server's own rule.
pub fn home_shard(user: i64, shards: i16) -> i16 {
    let shards = shards.clamp(1, MAX_SHARDS) as u64;
    // A multiplicative hash, so consecutive user ids spread over the shards.
    ((user as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32).rem_euclid(shards) as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sale_id_is_a_plainly_written_positive_integer() {
        assert_eq!("42".parse(), Ok(SaleId(42)));
        for bad in ["0", "-3", "4x", "", " 4", "99999999999999999999"] {
            assert_eq!(
                bad.parse::<SaleId>(),
                Err(BadId {
                    field: "id",
                    why: "must be a positive integer"
                }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn ids_and_tokens_are_written_on_the_wire_as_before() {
        assert_eq!(serde_json::to_string(&UserId(7)).unwrap(), "7");
        assert_eq!(serde_json::from_str::<SaleId>("12").unwrap(), SaleId(12));
        let text = "00000001-6b17-8e00-800c-4a858413df6f";
        let token: Token = text.parse().unwrap();
        assert_eq!(token.to_string(), text);
        assert_eq!(
            serde_json::to_string(&token).unwrap(),
            format!("\"{text}\"")
        );
        assert_eq!(
            "not-a-token".parse::<Token>(),
            Err(BadId {
                field: "token",
                why: "must be a reservation token"
            })
        );
    }
}
