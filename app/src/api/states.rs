//! The states and codes the API sends as strings (docs/api.md), as types: each serialises to
//! exactly its documented string and parses from it, so the server, the workers and the app
//! match on variants, never on string literals.

use serde::{Deserialize, Serialize};

/// A string that names no variant of a state or code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownState {
    pub kind: &'static str,
    pub text: String,
}

impl std::fmt::Display for UnknownState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} is not a {}", self.text, self.kind)
    }
}

impl std::error::Error for UnknownState {}

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every variant, in the order docs/api.md lists them.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The string docs/api.md gives it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownState;

            fn from_str(text: &str) -> Result<$name, UnknownState> {
                match text {
                    $($text => Ok($name::$variant),)*
                    _ => Err(UnknownState { kind: stringify!($name), text: text.to_string() }),
                }
            }
        }
    };
}

wire_enum! {
    /// An order's status (`GET /api/orders/{token}`, the buy's `202`, the admin's orders).
    OrderStatus {
        /// Taken at the gate; its order is not in the database yet.
        Queued = "queued",
        /// In the database, waiting to be paid before `pay_by`.
        Confirmed = "confirmed",
        Paid = "paid",
        /// Unpaid at its deadline: its units went back on sale.
        Cancelled = "cancelled",
        /// Could not be written: its units went back on sale.
        Failed = "failed",
    }
}

impl OrderStatus {
    /// The statuses an order in the database has (a `queued` one is not there yet): what the
    /// merchant's orders can be filtered by.
    pub const STORED: [OrderStatus; 4] = [
        OrderStatus::Confirmed,
        OrderStatus::Paid,
        OrderStatus::Cancelled,
        OrderStatus::Failed,
    ];

    /// Whether the status can still change (the storefront polls until it cannot).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            OrderStatus::Paid | OrderStatus::Cancelled | OrderStatus::Failed
        )
    }
}

wire_enum! {
    /// Where a shopper stands in a waiting room (`GET`/`POST /api/activities/{id}/queue`).
    QueueState {
        NotJoined = "not_joined",
        /// Joined before the start: places are drawn at the start.
        Drawing = "drawing",
        Waiting = "waiting",
        /// Waiting while admission is held back; the place is kept.
        Paused = "paused",
        Admitted = "admitted",
        /// The admission was used or lapsed.
        Passed = "passed",
        SoldOut = "sold_out",
        Ended = "ended",
        /// The sale has no waiting room.
        Open = "open",
    }
}

wire_enum! {
    /// A waiting room as everyone sees it (`GET /api/activities/{id}/line`).
    LineState {
        /// Before the start.
        Drawing = "drawing",
        Admitting = "admitting",
        Paused = "paused",
        SoldOut = "sold_out",
        Ended = "ended",
        /// The sale has no waiting room.
        Open = "open",
    }
}

wire_enum! {
    /// What a pull of the emergency cord did (docs/api.md "The cord").
    CordAction {
        /// Every sale of a shop, or of the platform, stopped (places kept).
        Stop = "stop",
        /// A stop lifted.
        Release = "release",
        /// A sale's bot check and waiting room let everyone through to the gate.
        FailOpen = "fail_open",
        /// A sale's bot check and waiting room in force again.
        FailClosed = "fail_closed",
    }
}

wire_enum! {
    /// What a drawing does with the entries of one network beyond a sale's threshold (docs/api.md
    /// "Farms at the draw").
    CrowdPolicy {
        /// Entries are not grouped.
        Off = "off",
        /// Entries are grouped and counted: the report says who would have been demoted, and
        /// nobody moves.
        Observe = "observe",
        /// Every entry of a group over the threshold is drawn after everyone else.
        Demote = "demote",
    }
}

wire_enum! {
    /// The `error` of every error answer (docs/api.md).
    ErrorCode {
        InvalidInput = "invalid_input",
        Unauthenticated = "unauthenticated",
        InvalidCredentials = "invalid_credentials",
        Forbidden = "forbidden",
        AccountBlocked = "account_blocked",
        AccountTooNew = "account_too_new",
        ReauthenticationRequired = "reauthentication_required",
        NotFound = "not_found",
        UsernameTaken = "username_taken",
        ShopTaken = "shop_taken",
        RateLimited = "rate_limited",
        NotStarted = "not_started",
        Ended = "ended",
        AlreadyStarted = "already_started",
        Paused = "paused",
        LimitReached = "limit_reached",
        Blocked = "blocked",
        SoldOut = "sold_out",
        NotAdmitted = "not_admitted",
        CaptchaInvalid = "captcha_invalid",
        BadPath = "bad_path",
        NotConfirmed = "not_confirmed",
        PaymentWindowClosed = "payment_window_closed",
        Overloaded = "overloaded",
        Unavailable = "unavailable",
        Internal = "internal",
        UnsupportedMediaType = "unsupported_media_type",
        PayloadTooLarge = "payload_too_large",
        CrossOrigin = "cross_origin",
    }
}

/// A buy attempt's outcome when it was not refused (the metrics and the sale's report count
/// attempts by it, else by the [`ErrorCode`] answered).
pub const ACCEPTED: &str = "accepted";

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T>(all: &[T])
    where
        T: Copy + std::fmt::Debug + PartialEq + Serialize + for<'de> Deserialize<'de>,
        T: std::str::FromStr<Err = UnknownState> + std::fmt::Display,
    {
        for v in all {
            let json = serde_json::to_string(v).unwrap();
            assert_eq!(
                json,
                format!("\"{v}\""),
                "serialised as its documented string"
            );
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), *v);
            assert_eq!(v.to_string().parse::<T>().unwrap(), *v);
        }
    }

    #[test]
    fn every_state_and_code_is_its_documented_string_both_ways() {
        round_trips(OrderStatus::ALL);
        round_trips(QueueState::ALL);
        round_trips(LineState::ALL);
        round_trips(ErrorCode::ALL);
        assert_eq!(
            OrderStatus::ALL
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>(),
            ["queued", "confirmed", "paid", "cancelled", "failed"]
        );
        assert_eq!(
            "pending".parse::<OrderStatus>(),
            Err(UnknownState {
                kind: "OrderStatus",
                text: "pending".into()
            })
        );
        assert!(serde_json::from_str::<QueueState>("\"Waiting\"").is_err());
    }
}
