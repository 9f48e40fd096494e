//! Every Lua script the server runs in Redis: one `.lua` file each, in this folder, registered
//! here once (hashed once per process) and called by name. Each file says its keys and arguments;
//! every key one script touches carries one hash tag (`keys.rs`), so on a Redis Cluster it runs on
//! one master.
//!
//! Scripts, not Redis Functions: `EVALSHA` falls back to `EVAL` when a node does not know a
//! script (redis-rs does it on `NOSCRIPT`: one extra round trip per script per node after a
//! failover or restart), and a deploy that changes a script needs no `FUNCTION LOAD` step on every
//! master before the new instances start.

use redis::Script;
use std::sync::LazyLock;

macro_rules! registry {
    ($($(#[$doc:meta])* $name:ident => $file:literal,)*) => {
        $(
            $(#[$doc])*
            pub fn $name() -> &'static Script {
                static SCRIPT: LazyLock<Script> =
                    LazyLock::new(|| Script::new(include_str!($file)));
                &SCRIPT
            }
        )*

        /// Every registered file, for the test that none is left out.
        #[cfg(test)]
        const FILES: &[&str] = &[$($file),*];
    };
}

registry! {
    /// The buy decision on the buyer's home shard (`buy/gate.rs`).
    gate => "gate.lua",
    /// Another shard lends units to a buy whose home shard ran out.
    lend => "lend.lua",
    /// A borrowing settled on the home shard (granted or refused).
    settle => "settle.lua",
    /// Joins a sale's waiting room, or keeps the place held.
    join => "join.lua",
    /// Where a shopper stands in a sale's waiting room.
    status => "status.lua",
    /// Lets the next shoppers in line in.
    admit => "admit.lua",
    /// The turn to order a drawn line by its crowd policy, once, after the start.
    draw_crowd => "draw_crowd.lua",
    /// The relay's acknowledgement and trimming of journal entries.
    ack => "ack.lua",
    /// Units of a cancelled or failed reservation back on sale, once.
    give_back => "give_back.lua",
    /// Adds one stock addition to a shard once, or warms it from the database's figures.
    add_stock => "add_stock.lua",
    /// The reconciler's compare-and-set repair.
    compare_and_set => "compare_and_set.lua",
    /// A fixed-window budget (sign-up, sign-in per address).
    fixed_window => "fixed_window.lua",
    /// Sign-in takes its attempt before the password is verified.
    sign_in_reserve => "sign_in_reserve.lua",
    /// Sign-in's attempt settled.
    sign_in_finish => "sign_in_finish.lua",
}

/// `witness.lua`'s text: which writes a node holds, and the mark its replication wait follows
/// (`infra/replication.rs`). Sent whole (`EVAL`): it runs in a pipeline that must go to one node
/// as it is, where a node lacking a script by its hash would answer `NOSCRIPT`.
pub const WITNESS: &str = include_str!("witness.lua");

#[cfg(test)]
mod tests {
    #[test]
    fn every_lua_file_is_registered_and_none_twice() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/infra/scripts");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("the scripts folder reads")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".lua"))
            .collect();
        on_disk.sort();
        let mut registered: Vec<String> = super::FILES.iter().map(|f| f.to_string()).collect();
        registered.push("witness.lua".into());
        registered.sort();
        assert_eq!(registered, on_disk);
    }

    #[test]
    fn no_lua_is_written_inline_elsewhere() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut stack = vec![src];
        let mut inline = Vec::new();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).expect("a source folder reads") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && !path.ends_with("infra/scripts/mod.rs")
                {
                    let text = std::fs::read_to_string(&path).expect("a source file reads");
                    if text.contains("redis.call(") || text.contains("Script::new(") {
                        inline.push(path.display().to_string());
                    }
                }
            }
        }
        assert!(inline.is_empty(), "Lua outside infra/scripts: {inline:?}");
    }
}
