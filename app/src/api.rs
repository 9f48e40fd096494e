//! The JSON API's request and response bodies, shared by the server and the browser.
//! Plain serde types: fixed-width integers, money in integer cents, no secrets in responses.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Shopper,
    Merchant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Shopper => "shopper",
            Role::Merchant => "merchant",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "shopper" => Some(Role::Shopper),
            "merchant" => Some(Role::Merchant),
            _ => None,
        }
    }
}

/// Body of `POST /api/auth/register` and `POST /api/auth/login`.
#[derive(Clone, Serialize, Deserialize)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// `GET /api/me`, and the answer of register and login.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: i64,
    pub username: String,
    pub role: Role,
}

/// Every JSON error body of the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
}
