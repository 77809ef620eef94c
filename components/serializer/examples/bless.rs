//! Fills in the `expect` of golden fixtures that have none (never touches existing ones) and
//! rewrites every fixture in canonical form: `cargo run -p devin-bridge-serializer --example bless`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a developer tool: a failure stops it

#[path = "../tests/support/mod.rs"]
mod support;

fn main() {
    for (path, _, mut case) in support::fixtures() {
        if case.get("expect").is_none() {
            case["expect"] = support::run(&case);
            eprintln!("blessed {}", path.display());
        }
        let canonical = serde_json::to_string_pretty(&case).expect("serializable") + "\n";
        std::fs::write(&path, canonical).expect("writable fixture");
    }
}
