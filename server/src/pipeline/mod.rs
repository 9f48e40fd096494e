//! From a reservation in Redis to an order in PostgreSQL, and back when it fails or goes unpaid:
//! the journal relay (Redis stream → RabbitMQ), the persister (RabbitMQ → PostgreSQL, then the
//! token marked in Redis), payment deadlines, the give-back of units, and the reconciliation of
//! Redis with the database. Each worker is handed the parts it needs (pool, Redis, broker,
//! topology, metrics), never the whole application state.

pub mod deadline;
pub mod giveback;
pub mod journal;
pub mod persister;
pub mod reconcile;
