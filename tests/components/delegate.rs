// Included with `include!` inside each test component's wasm module, where the generated WIT
// `Prompt` and `Failure` types are in scope: the real serializer, converted to and from them.

fn real_serialize(request: &str) -> Result<Prompt, Failure> {
    devin_bridge_serializer::serialize(request)
        .map(|p| Prompt {
            text: p.text,
            tools: p.tools,
            input_tokens: p.input_tokens,
            id_seed: p.id_seed,
            model: p.model,
            stream: p.stream,
        })
        .map_err(|f| Failure { code: f.code, message: f.message, status: f.status, repairable: f.repairable })
}

#[allow(dead_code)]
fn real_repair(prompt: &str, rejection: Failure) -> String {
    let rejection = devin_bridge_types::Failure {
        code: rejection.code,
        message: rejection.message,
        status: rejection.status,
        repairable: rejection.repairable,
    };
    devin_bridge_serializer::repair(prompt, &rejection)
}
