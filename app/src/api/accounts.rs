//! Sessions, accounts, shops and the audit log (docs/api.md "Sessions", "Operator").

use super::UserId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Shopper,
    Merchant,
    /// The platform's operator: creates shops and merchants, resets passwords, blocks users.
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Shopper => "shopper",
            Role::Merchant => "merchant",
            Role::Operator => "operator",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "shopper" => Some(Role::Shopper),
            "merchant" => Some(Role::Merchant),
            "operator" => Some(Role::Operator),
            _ => None,
        }
    }
}

/// Body of `POST /api/auth/register` and `POST /api/auth/login`. A field this API does not
/// know (`"role"`, say) is refused, not silently ignored. `pow`: at sign-up, the solved proof of
/// work of `GET /api/auth/challenge` (base64 of ALTCHA's payload JSON) when the server asks one.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    pub username: String,
    pub password: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pow: Option<String>,
}

impl std::fmt::Debug for PasswordChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordChange { <redacted> }")
    }
}

impl std::fmt::Debug for PasswordReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordReset { <redacted> }")
    }
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
    pub id: UserId,
    pub username: String,
    pub role: Role,
    /// A merchant's shop (an addition to docs/api.md); absent for shoppers and operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shop: Option<ShopRef>,
}

/// The shop a merchant belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShopRef {
    pub id: i64,
    pub name: String,
}

/// Body of `POST /api/auth/password`: the current password, and the new one.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    pub current_password: String,
    pub new_password: String,
}

/// Body of `POST /api/auth/confirm`: the signed-in user's password, checked again before an action
/// that asks for a recent check (`403 reauthentication_required`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confirmation {
    pub password: String,
}

/// Body of `POST /api/operator/users/{id}/password`: the operator sets a new password.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordReset {
    pub new_password: String,
}

/// Body of `POST /api/operator/shops`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewShop {
    pub name: String,
}

/// One shop in the operator's console, with its merchants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shop {
    pub id: i64,
    pub name: String,
    pub created_at: String,
    pub merchants: Vec<AccountSummary>,
    pub activities: i64,
}

/// `GET /api/operator/shops`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShopList {
    pub shops: Vec<Shop>,
}

/// An account as the operator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountSummary {
    pub id: UserId,
    pub username: String,
    pub role: Role,
    pub shop_id: Option<i64>,
    pub blocked: bool,
}

/// `GET /api/operator/users?q=`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountList {
    pub users: Vec<AccountSummary>,
}

/// One line of the audit log: who did what, when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub shop_id: Option<i64>,
    pub action: String,
    pub target: String,
    pub detail: String,
}

/// `GET /api/admin/audit` (the merchant's shop) and `GET /api/operator/audit` (everything).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditLog {
    pub entries: Vec<AuditEntry>,
}
