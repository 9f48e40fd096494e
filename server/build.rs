//! What the crate reads at compile time that cargo cannot see: `sqlx::migrate!` embeds the
//! migrations (rebuild when one is added), and sqlx's query macros read SQLX_OFFLINE and
//! SQLX_OFFLINE_DIR (online against a database, or offline from `.sqlx/`). `make sqlx-check`
//! relies on the latter to describe every query afresh.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
    for var in ["SQLX_OFFLINE", "SQLX_OFFLINE_DIR"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
}
