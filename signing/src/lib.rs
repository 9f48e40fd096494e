//! What the seckill server signs with its secret and checks in-process, with no store lookup:
//! the session cookie's claims, the opaque buy paths, the admission tickets (Ed25519 JWTs) and
//! the proof-of-work challenges. A crate of its own so that the load tool mints sessions, paths,
//! tickets and solutions by the very code the server checks them with, without depending on the
//! server (nor the server's tests on a tool that depends on the server).

pub mod paths;
pub mod pow;
pub mod session;
pub mod tickets;

pub use paths::BuyPaths;
pub use session::{new_session_id, Claims, SessionSigner};
pub use tickets::Tickets;
