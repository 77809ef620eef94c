// Throwaway probe (not committed): per-call costs in one turn store.
use std::sync::Arc;
use std::time::Instant;

use devin_bridge_engine::{
    CompileCache, ComponentLocation, ComponentPlace, EngineConfig, Runtime, RuntimeLimits,
    TransformCalls as _, TransformKind, Transforms, Turn,
};

fn per(n: u32, start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e9 / f64::from(n)
}

fn main() {
    let dir = std::path::PathBuf::from("target/components");
    let runtime = Runtime::new(RuntimeLimits::default().into()).unwrap();
    let transforms = Transforms::load_with(
        runtime,
        CompileCache::disabled(),
        &EngineConfig {
            limits: RuntimeLimits::default(),
            cache_dir: None,
            components: TransformKind::ALL.map(|kind| ComponentLocation {
                place: ComponentPlace::File(dir.join(kind.file_name())),
                pin: None,
            }),
        },
    )
    .unwrap();
    let n = 20_000u32;
    for round in 0..3 {
        let turn = Arc::new(Turn::open(&transforms));
        let mut stream = turn.reply_stream("[]", "seed", 8).unwrap();
        stream.push("a".into()).unwrap().unwrap();
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(stream.push("x".into()).unwrap().unwrap());
        }
        let push = per(n, t);
        let _ = turn.narrates_unexecuted_action("x".into()).unwrap();
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(turn.narrates_unexecuted_action("x".into()).unwrap());
        }
        let narr = per(n, t);
        let _ = turn.stream_ping().unwrap();
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(turn.stream_ping().unwrap());
        }
        let ping = per(n, t);
        let _ = turn.stream_text(false, "x".into()).unwrap();
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(turn.stream_text(false, "x".into()).unwrap());
        }
        let text = per(n, t);
        println!("round {round}: push 1 byte {push:.0} ns, narrates(\"x\") {narr:.0} ns, stream_ping {ping:.0} ns, stream_text {text:.0} ns");
    }
}
