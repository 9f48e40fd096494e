//! A shopper's orders and their payment (docs/api.md "Storefront").

use super::*;
use serde::{Deserialize, Serialize};

/// The `202` answer of a buy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub token: Token,
    pub status: OrderStatus,
}

/// `GET /api/orders/{token}` and the items of `GET /api/orders`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderView {
    pub token: Token,
    pub status: OrderStatus,
    pub activity_id: SaleId,
    pub quantity: i32,
    pub order_id: Option<i64>,
    pub pay_by: Option<String>,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderList {
    pub orders: Vec<OrderView>,
}

/// The answer of `POST /api/orders/{token}/pay`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentResult {
    pub status: OrderStatus,
}
