//! Prints the prompt for a request file: `cargo run --example serialize -- request.json`.
//! Also times the call, for a quick look (benchmarks proper live in `cargo xtask bench`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a developer tool: a failure stops it

use std::time::Instant;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: serialize <request.json>");
        std::process::exit(2);
    };
    let request = match std::fs::read_to_string(&path) {
        Ok(request) => request,
        Err(error) => {
            eprintln!("{path}: {error}");
            std::process::exit(1);
        }
    };
    let started = Instant::now();
    let result = devin_bridge_serializer::serialize(&request);
    let elapsed = started.elapsed();
    let rounds = 200u32;
    let started = Instant::now();
    for _ in 0..rounds {
        let _ = std::hint::black_box(devin_bridge_serializer::serialize(std::hint::black_box(
            &request,
        )));
    }
    let average = started.elapsed() / rounds;
    match result {
        Ok(prompt) => {
            println!("{}", prompt.text);
            eprintln!(
                "first call {elapsed:?}, average {average:?} over {rounds}; {} bytes in, {} bytes out, {} tokens, id seed {}",
                request.len(),
                prompt.text.len(),
                prompt.input_tokens,
                prompt.id_seed
            );
        }
        Err(failure) => {
            eprintln!("{failure}");
            std::process::exit(1);
        }
    }
}
